"""The sidebar's "Download a lesson file (HTML)": the sentence on screen, every figure, in one offline page."""
from __future__ import annotations

from model import service
from model.records import CheckpointError
from views.plumbing.state import ModelKey, load_model, trace_sentence
from viz.lesson import lesson_html as _page


def lesson_html(key: ModelKey, text: str, max_len: int, prefix: tuple[str, ...], decoding: str) -> str:
    """The lesson file of the decoding the figures show (the same trace as "Download this trace (JSON)").

    Runs when the button is clicked, in another thread than the page: it gets every value it needs as an argument
    and builds its figures in the app's default theme (viz.lesson sets it), not in the session's."""
    model, error = load_model(key)
    if model is None:
        raise CheckpointError(error)
    translation = trace_sentence(key, text, max_len, prefix)
    lesson = service.lesson_data(model, [(translation, decoding or None)], str(key))
    lesson["model"]["trained"] = not key.twin  # the untrained twin's pages say so; so does its lesson
    return _page(lesson, "with the app's download button")
