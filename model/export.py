"""python -m model.export: a traced translation as JSON.

The code lives in model/io/export.py."""
import sys

from model.io.export import main

if __name__ == "__main__":
    sys.exit(main())
