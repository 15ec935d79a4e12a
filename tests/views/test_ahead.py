"""views/plumbing/ahead.py: after a switch to a page above Inside one head, Masks or Decoding (the first of them below
it in the list), that page's model work and figures are made in the background, through the caches the page reads,
so its first visit asks the model nothing and builds no figure."""
from __future__ import annotations

import functools

import pytest

from tests.app_support import run_app

# The service's answers a first visit of each page computes (each test types a sentence no other test types, so
# nothing comes from a cache another test filled).
ANSWERS = {"Inside one head": (), "Masks": ("padded_batch", "causal_reference", "causal_experiment"),
           "Decoding": ("contributions", "attribution")}


@pytest.fixture
def asked(monkeypatch):
    """{service function: calls} of the model's answers the pages compute (through views/plumbing/state.py)."""
    from model import service

    calls = {}
    for name in {n for names in ANSWERS.values() for n in names}:
        real = getattr(service, name)

        @functools.wraps(real)  # the kept functions take the answer's signature (views/plumbing/state.py)
        def counted(*args, _real=real, _name=name, **kwargs):
            calls[_name] = calls.get(_name, 0) + 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(service, name, counted)
    return calls


def _switch(at, view: str):
    from views.plumbing import ahead

    at.sidebar.radio(key="view").set_value(view).run()
    ahead.wait_idle()
    assert not at.exception
    return at


@pytest.mark.parametrize("before, view, text, choices", [
    ("Attention", "Inside one head", "Ein Hund schläft auf dem roten Sofa.", {"kind": "cross", "layer": 2}),
    # Attention is drawn with the sentence: coming from the page above it, a class goes on to Inside one head
    ("Positional encoding", "Inside one head", "Ein Hund schläft auf dem blauen Sofa.", {"kind": "cross"}),
    ("Inside one head", "Masks", "Ein Hund schläft auf dem grünen Sofa.", {"pad_on": 0, "causal_head": 2}),
    ("Masks", "Decoding", "Zwei Männer laufen durch den Park.", {"dec_step": 2, "dec_head": 0}),
])
def test_the_page_before_prepares_the_first_visit(checkpoints, asked, monkeypatch, before, view, text, choices):
    from views.plumbing import ahead
    from views.plumbing.figcache import FIGURES

    at = run_app(view="Overview", text=text, **choices)
    _switch(at, before)
    ready = dict(asked)
    assert set(ANSWERS[view]) <= set(ready), ready
    monkeypatch.setattr(ahead, "after", lambda calls: None)  # the page's own visit prepares nothing further
    misses = FIGURES.misses
    _switch(at, view)  # its first visit: every answer and figure was made in the background
    assert asked == ready, f"the first visit of {view} asked the model again"
    assert FIGURES.misses == misses, f"the first visit of {view} built {FIGURES.misses - misses} figure(s)"
    assert at.get("plotly_chart")


def test_nothing_is_prepared_off_without_a_switch_or_past_the_next_page_with_work(checkpoints, asked, monkeypatch):
    from views.plumbing import ahead

    at = run_app(view="Inside one head", text="Eine Frau liest eine Zeitung am Strand.")  # a first run: no switch
    ahead.wait_idle()
    assert "padded_batch" not in asked
    _switch(at, "Attention")  # Inside one head is prepared; Masks, below it, is not
    assert "padded_batch" not in asked
    monkeypatch.setenv("ATLAS_SPEED_OFF", "ahead")
    _switch(at, "Inside one head")
    assert "padded_batch" not in asked
    monkeypatch.delenv("ATLAS_SPEED_OFF")
    _switch(at, "Masks")  # computed by the page itself
    assert asked.get("padded_batch", 0) >= 1


def test_presenter_mode_and_side_by_side_prepare_nothing(checkpoints, asked):
    at = run_app(view="Overview", text="Ein Kind spielt mit einem blauen Ball.", present=1)
    _switch(at, "Inside one head")
    assert "padded_batch" not in asked  # presenter mode: Masks is not prepared
    # side by side: Masks draws one side and is prepared; Decoding draws two sides and is not
    at = run_app(view="Overview", text="Ein Kind spielt mit einem roten Ball.", compare="sentence")
    _switch(at, "Inside one head")
    assert "padded_batch" in asked
    _switch(at, "Masks")
    assert "contributions" not in asked and "attribution" not in asked


def test_a_page_whose_list_fails_disturbs_nothing(checkpoints, asked, monkeypatch):
    from views.pages import masks

    def broken(ctx):
        raise KeyError("pad_layer")

    monkeypatch.setattr(masks, "ahead", broken)
    at = run_app(view="Overview", text="Ein Mann repariert ein altes Fahrrad.")
    _switch(at, "Inside one head")  # the page on screen draws as ever
    assert at.get("plotly_chart") and "padded_batch" not in asked
    _switch(at, "Masks")  # and Masks computes on its visit
    assert asked.get("padded_batch", 0) >= 1


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="a thread's own nice value is Linux's")
def test_the_worker_takes_only_the_time_nothing_else_wants():
    import os
    import threading

    from views.plumbing import ahead

    nice = ahead._worker.submit(lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id())).result(60)
    assert nice == ahead.LOWEST_PRIORITY
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) < ahead.LOWEST_PRIORITY  # the caller's own


def test_the_worker_stops_once_a_run_comes_in():
    """A page waits for an answer the worker is computing, and a low-priority worker gets little time on a busy
    server: once any session's run is going, the worker makes no further call (the page makes it itself)."""
    import threading

    from views.plumbing import ahead
    from views.plumbing.streamlit_internals import SCRIPT_THREAD

    made, release = [], threading.Event()
    run = threading.Thread(target=release.wait, args=(30,), name=SCRIPT_THREAD)

    def first():
        made.append("first")
        run.start()  # a session's run starts

    try:
        assert ahead.after(lambda: [first, lambda: made.append("second")]) is not None
        ahead.wait_idle()
        assert made == ["first"]
    finally:
        release.set()
        run.join(30)
    ahead.after(lambda: [lambda: made.append("third")])
    ahead.wait_idle()
    assert made[-1] == "third"  # with no run going, the work is made
