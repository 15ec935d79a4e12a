"""python -m model.analyze: the head report over a corpus.

The code lives in model/analysis/analyze.py."""
import sys

from model.analysis.analyze import main

if __name__ == "__main__":
    sys.exit(main())
