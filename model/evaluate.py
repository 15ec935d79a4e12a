"""python -m model.evaluate: BLEU of a checkpoint on a split.

The code lives in model/training/evaluate.py."""
import sys

from model.training.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
