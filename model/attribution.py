"""python -m model.attribution: attribution methods and their faithfulness.

The methods live in model/analysis/attribution.py, the faithfulness check and this command line in
model/analysis/faithfulness.py."""
import sys

from model.analysis.faithfulness import main

if __name__ == "__main__":
    sys.exit(main())
