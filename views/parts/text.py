"""Showing user text safely: as text, never as HTML or Markdown markup."""
from __future__ import annotations

import html
import re

_MD = re.compile(r"([\\`*_{}\[\]()#+\-.!|>~<$])")


def md_escape(text: str) -> str:
    """Escape Markdown and HTML so st.markdown shows `text` literally."""
    return _MD.sub(r"\\\1", html.escape(text, quote=False))


def md_table(rows: list[dict], right: tuple[str, ...] = ()) -> str:
    """Markdown for a table of `rows` (dicts with the same keys: the header), every cell shown as text; the columns
    named in `right` (numbers) are right-aligned. Drawn as an HTML table with the page, without pandas (st.table
    converts through it)."""
    if not rows:
        return ""
    columns = list(rows[0])

    def cell(value) -> str:
        return md_escape(" ".join(str(value).split())) or " "

    lines = ["| " + " | ".join(cell(c) for c in columns) + " |",
             "|" + "|".join("---:" if c in right else "---" for c in columns) + "|"]
    lines += ["| " + " | ".join(cell(row[c]) for c in columns) + " |" for row in rows]
    return "\n".join(lines)
