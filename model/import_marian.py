"""python -m model.import_marian: a Marian (opus-mt) model into the checkpoint format.

The code lives in model/io/import_marian.py."""
import sys

from model.io.import_marian import main

if __name__ == "__main__":
    sys.exit(main())
