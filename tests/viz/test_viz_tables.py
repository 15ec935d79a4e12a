"""CSV text of the matrices on screen (viz/tables.py)."""
from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from viz.tables import candidates_csv, heads_csv, matrix_csv


def test_matrix_csv_keeps_repeated_tokens_and_the_numbers():
    m = np.array([[0.25, 0.75, 0.0], [0.5, 0.25, 0.25]])
    text = matrix_csv(m, ["<bos>", "the"], ["the", "dog", "the"])
    assert text.splitlines()[0] == "query,the,dog,the"
    df = pd.read_csv(io.StringIO(text), header=None, skiprows=1)
    assert df[0].tolist() == ["<bos>", "the"]
    assert np.allclose(df.iloc[:, 1:].to_numpy(dtype=float), m)


def test_matrix_csv_refuses_labels_that_do_not_fit():
    with pytest.raises(ValueError, match="does not fit"):
        matrix_csv(np.zeros((2, 3)), ["a", "b"], ["x", "y"])


def test_heads_csv_stacks_heads_with_a_head_column():
    p = np.random.default_rng(0).dirichlet(np.ones(4), size=(3, 2))  # (h, i, j)
    df = pd.read_csv(io.StringIO(heads_csv(p, ["q1", "q2"], list("abcd"))))
    assert df["head"].tolist() == [1, 1, 2, 2, 3, 3]
    assert np.allclose(df[list("abcd")].sum(1), 1.0, atol=1e-5)


def test_candidates_csv_marks_the_chosen_token():
    df = pd.read_csv(io.StringIO(candidates_csv(["dog", "cat"], [0.9, 0.05], 0)))
    assert df["token"].tolist() == ["dog", "cat"] and df["chosen"].tolist() == [True, False]
