"""The URL schema is one table (views/urlstate.params: every parameter, its default and what it accepts), and
docs/url-parameters.md shows that table as the code has it.

    python tests/views/test_url_schema.py --write    # writes the table into the document after a schema change
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "url-parameters.md"
START, END = "<!-- schema: generated from views/plumbing/urlstate.py -->", "<!-- /schema -->"


def table() -> str:
    sys.path.insert(0, str(ROOT))
    from views.plumbing.state import PARAMS
    from views.plumbing.urlstate import schema_rows

    return "\n".join(["| parameter | default | accepts |", "|---|---|---|", *schema_rows(PARAMS)])


def test_the_document_shows_the_schema_as_the_code_has_it():
    text = DOC.read_text(encoding="utf-8")
    assert START in text and END in text, f"{DOC.name} lost its generated table's markers"
    shown = text.split(START, 1)[1].split(END, 1)[0].strip()
    assert shown == table(), "docs/url-parameters.md is out of date: python tests/views/test_url_schema.py --write"


def test_every_parameter_has_a_default_and_says_what_it_accepts():
    rows = table().splitlines()[2:]
    assert len(rows) >= 50
    for row in rows:
        key, default, accepts = row.strip("| ").split(" | ")  # an escaped pipe (" \\| ") does not split
        assert key.startswith("`") and default and accepts and "<" not in accepts, row  # no parser as an object


if __name__ == "__main__" and "--write" in sys.argv:
    text = DOC.read_text(encoding="utf-8")
    head, _, rest = text.partition(START)
    tail = rest.partition(END)[2] if rest else "\n"
    DOC.write_text(f"{head.rstrip()}\n\n{START}\n{table()}\n{END}\n{tail.lstrip()}" if rest else
                   f"{text.rstrip()}\n\n## Every parameter\n\nAs `views/plumbing/urlstate.py` defines them (a "
                   f"test checks this table against the code):\n\n{START}\n{table()}\n{END}\n", encoding="utf-8")
    print(f"wrote the schema's table into {DOC.relative_to(ROOT)}")
