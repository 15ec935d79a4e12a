"""python -m model.attribution: attribution methods and their faithfulness.

The code lives in model/analysis/attribution.py."""
import sys

from model.analysis.attribution import main

if __name__ == "__main__":
    sys.exit(main())
