"""python -m model.patch: head knockout, activation patching and the logit lens.

The code lives in model/analysis/patch.py."""
import sys

from model.analysis.patch import main

if __name__ == "__main__":
    sys.exit(main())
