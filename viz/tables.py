"""Matrices on screen as CSV text, with token labels on both axes (NumPy and token lists in).

Shape letters: see viz/__init__.py (h heads, i query/row positions, j key/column positions).
Tokens are written as they are (repeated tokens stay separate columns, in order); every number in one notation,
fixed-point with 6 decimals ("0.000012", never "1.2e-05" beside "0.5": pandas would write a float's shortest repr).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

FLOAT_FORMAT = "%.6f"


def _rounded(m: np.ndarray) -> np.ndarray:
    """``m`` rounded to 6 decimals, without negative zeros (a tiny negative value would read "-0.000000")."""
    return np.round(m, 6) + 0.0


def matrix_frame(m: np.ndarray, row_tokens: Sequence[str], col_tokens: Sequence[str],
                 row_name: str = "query") -> pd.DataFrame:
    """(i, j) -> a DataFrame with the row tokens as the first column and the column tokens as the header."""
    import pandas as pd  # where a table is made: importing viz/ needs no pandas
    m = np.asarray(m, dtype=np.float64)
    if m.shape != (len(row_tokens), len(col_tokens)):
        raise ValueError(f"matrix {m.shape} does not fit {len(row_tokens)} row and {len(col_tokens)} column tokens")
    df = pd.DataFrame(_rounded(m), columns=list(col_tokens))
    df.insert(0, row_name, list(row_tokens))
    return df


def matrix_csv(m: np.ndarray, row_tokens: Sequence[str], col_tokens: Sequence[str], row_name: str = "query") -> str:
    """One matrix (an attention map, embeddings: tokens × dimensions) as CSV text."""
    return matrix_frame(m, row_tokens, col_tokens, row_name).to_csv(index=False, float_format=FLOAT_FORMAT)


def heads_csv(probs: np.ndarray, query_tokens: Sequence[str], key_tokens: Sequence[str]) -> str:
    """(h, i, j) all heads of a layer as one CSV: a `head` column (1-based), then the query token, then the keys."""
    import pandas as pd  # where a table is made: importing viz/ needs no pandas
    frames = []
    for h, m in enumerate(np.asarray(probs)):
        df = matrix_frame(m, query_tokens, key_tokens)
        df.insert(0, "head", h + 1)
        frames.append(df)
    return pd.concat(frames, ignore_index=True).to_csv(index=False, float_format=FLOAT_FORMAT)


def candidates_csv(tokens: Sequence[str], probs: Sequence[float], chosen_index: int) -> str:
    """One decoding step's candidates: rank, token, probability, chosen."""
    import pandas as pd  # where a table is made: importing viz/ needs no pandas
    return pd.DataFrame({"rank": range(1, len(tokens) + 1), "token": list(tokens),
                         "probability": _rounded(np.asarray(probs, dtype=np.float64)),
                         "chosen": [i == chosen_index for i in range(len(tokens))]}).to_csv(index=False,
                                                                                          float_format=FLOAT_FORMAT)


def source_token_rows(tokens: Sequence[str], ids: Sequence[int], unknown: Sequence[bool],
                      fragments: Sequence[tuple[int, int, str]] = (), end_token: str | None = None) -> list[dict]:
    """The source-token table: position, token, id, and what the vocabulary knows of it.

    "unknown": not in the vocabulary, read as `<unk>`. `fragments`: (first position, number of pieces, word) of
    each word read in fragments (model/text/reading.py); each of its pieces reads "✓ piece, “Männr” in 5 pieces":
    the piece is in the vocabulary, the word as a whole is not. Every other token: "✓".
    With `end_token`, `ids` holds one id more, the end token's, which the model appends after the tokens: it gets
    the last row, so that the table has a row for every position of the attention axes.
    """
    if len(ids) != len(tokens) + (end_token is not None):
        raise ValueError(f"{len(ids)} ids for {len(tokens)} tokens"
                         + (f" and the end token {end_token}" if end_token is not None else ""))
    notes = {}
    for start, n, word in fragments:
        for k in range(start, start + n):
            notes[k] = f"✓ piece, “{word}” in {n} pieces"
    rows = [{"position": k, "token": t, "id": int(i), "known": "unknown" if u else notes.get(k, "✓")}
            for k, (t, i, u) in enumerate(zip(tokens, ids, unknown))]
    if end_token is not None:
        rows.append({"position": len(tokens), "token": end_token, "id": int(ids[-1]), "known": "✓"})
    return rows
