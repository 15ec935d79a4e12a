"""python -m model.train: train a model on a parallel corpus.

The code lives in model/training/train.py."""
import sys

from model.training.train import main

if __name__ == "__main__":
    sys.exit(main())
