"""python -m model.import_hf: a Hugging Face translation model (Marian, M2M100/NLLB, mBART-50, T5) into our format.

The code lives in model/io/import_hf.py."""
import sys

from model.io.import_hf import main

if __name__ == "__main__":
    sys.exit(main())
