"""views/parts/text.py: user text shown literally in Markdown."""
from __future__ import annotations


def test_md_table_shows_every_cell_as_text():
    """The Overview's and the Heads page's Markdown tables: a pipe, markup or an empty token stays one cell, shown
    literally; numbers are right-aligned."""
    from views.parts.text import md_table

    table = md_table([{"token": "a|b", "id": 3}, {"token": "<b>x</b>", "id": 10}, {"token": "", "id": 0}],
                     right=("id",))
    lines = table.splitlines()
    assert lines[:2] == ["| token | id |", "|---|---:|"]
    assert all(line.count(" | ") == 1 for line in lines[2:]), lines  # two cells a row: the pipe is escaped
    assert "a\\|b" in lines[2] and "&lt;b&gt;" in lines[3] and "<b>" not in table
    assert md_table([]) == ""
