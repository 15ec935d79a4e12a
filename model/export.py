"""python -m model.export: a traced translation as JSON, or with --html the lesson file (one offline HTML page).

The code lives in model/io/export.py. This command line is glue, and the one file of model/ allowed to import
viz/ (tests/test_layers.py): the lesson file is drawn by viz/lesson.py, which the room model/io/ may not import.
"""
import sys

from model.io.export import main as _main


def render_html(lesson: dict, made_by: str) -> str:
    """The lesson file's page (viz.lesson.lesson_html), imported only when one is written: JSON needs no Plotly."""
    from viz.lesson import lesson_html

    return lesson_html(lesson, made_by)


def main(argv: list[str] | None = None) -> int:
    """`python -m model.export`; see model/io/export.py."""
    return _main(argv, render_html=render_html)


if __name__ == "__main__":
    sys.exit(main())
