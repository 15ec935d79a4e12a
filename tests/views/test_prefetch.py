"""views/plumbing/prefetch.py: once a page is drawn, the next page's data and figures are ready before it is opened."""
from __future__ import annotations

import threading

import pytest

from tests.app_support import run_app

# Each test types a sentence no other test of this module types, so its figures are new to the figure cache.
# pe_positions of its own too: the positional figures do not depend on the sentence.


def _misses_opening(at, view: str) -> int:
    """How many figures the first visit of `view` had to build (0: all came ready from the background)."""
    from views.plumbing import prefetch
    from views.plumbing.figcache import FIGURES

    prefetch.wait_idle()
    misses, ahead, prepare = FIGURES.misses, [], prefetch._prepare

    def counted(*args):  # the page's own figures are built before it submits the next page's preparation
        before = FIGURES.misses
        prepare(*args)
        ahead.append(FIGURES.misses - before)

    prefetch._prepare = counted
    try:
        at.sidebar.radio(key="view").set_value(view).run()
        prefetch.wait_idle()
    finally:
        prefetch._prepare = prepare
    assert not at.exception and at.get("plotly_chart")
    return FIGURES.misses - misses - sum(ahead)  # the next page's preparation, running meanwhile, does not count


@pytest.mark.parametrize("before, view, text", [
    ("Overview", "Embeddings", "Ein Hund schläft auf dem Sofa."),
    ("Embeddings", "Positional encoding", "Ein Mann läuft im Gras."),
    ("Attention", "Inside one head", "Zwei Hunde rennen im Schnee."),
    ("Positional encoding", "Inside one head", "Ein Junge springt ins Wasser."),  # Attention prepares nothing
])
def test_opening_a_page_prepares_the_next_one(checkpoints, before, view, text):
    at = run_app(view="Training" if before != "Training" else "Heads", text=text, layer=2, head=3,
                 pe_positions=40 + len(text) % 50)
    at.sidebar.radio(key="view").set_value(before).run()
    assert not at.exception
    assert _misses_opening(at, view) == 0


def test_the_model_runs_ahead_only_for_a_student_going_down_the_list(checkpoints):
    # Inside one head opened straight from Overview was not prepared: Masks, whose preparation runs the model, is not
    # prepared after it
    at = run_app(view="Overview", text="Ein brauner Hund spielt im Gras.", pad_on=0)
    at.sidebar.radio(key="view").set_value("Inside one head").run()
    assert _misses_opening(at, "Masks") > 0
    # Positional encoding prepares Inside one head, which then prepares Masks
    at = run_app(view="Overview", text="Eine Frau sitzt auf einer Bank.", pad_on=0)
    at.sidebar.radio(key="view").set_value("Positional encoding").run()
    assert _misses_opening(at, "Inside one head") == 0
    assert _misses_opening(at, "Masks") == 0
    # and Masks, prepared, prepares Decoding: its step's candidates, where it looked, the attribution of its token
    assert _misses_opening(at, "Decoding") == 0


def test_a_new_sentence_prepares_nothing(checkpoints):
    from views.plumbing import prefetch, router

    at = run_app(view="Overview", text="Ein Mann liest ein Buch.")
    at.sidebar.radio(key="view").set_value("Attention").run()
    prefetch.wait_idle()
    calls = []
    original = router.PAGES["Inside one head"].prepare
    try:
        router.PAGES["Inside one head"].prepare = lambda ctx, state: calls.append(state)
        at.sidebar.text_area(key="text").set_value("Ein Mann liest eine Zeitung.").run()
        at.selectbox(key="layer").set_value(2).run()
        prefetch.wait_idle()
    finally:
        router.PAGES["Inside one head"].prepare = original
    assert not at.exception and calls == []


def test_presenter_mode_and_the_last_page_prepare_nothing(checkpoints):
    from views.plumbing import prefetch, router

    calls = []
    at = run_app(view="Overview", text="Ein Hund liest im Park.", present=1)
    assert not at.exception
    pages = router.PAGES
    assert prefetch.following("Decoding", pages) is None and prefetch.following("Masks", pages) == "Decoding"
    assert prefetch.following("Positional encoding", pages) == "Inside one head"
    assert prefetch.following("Attention", pages) == "Inside one head"  # Attention has nothing to prepare itself
    original = router.PAGES["Inside one head"].prepare
    try:
        router.PAGES["Inside one head"].prepare = lambda ctx, state: calls.append(state)
        at.sidebar.radio(key="view").set_value("Attention").run()
        prefetch.wait_idle()
    finally:
        router.PAGES["Inside one head"].prepare = original
    assert calls == []


def test_a_preparation_that_fails_is_dropped_and_the_page_still_draws(checkpoints):
    from views.plumbing import prefetch, router

    def broken(ctx, state):
        raise RuntimeError("no")

    original = router.PAGES["Inside one head"].prepare
    try:
        router.PAGES["Inside one head"].prepare = broken
        at = run_app(view="Overview", text="Ein Mann tanzt am Strand.")
        at.sidebar.radio(key="view").set_value("Attention").run()
        prefetch.wait_idle()
    finally:
        router.PAGES["Inside one head"].prepare = original
    at.sidebar.radio(key="view").set_value("Inside one head").run()
    assert not at.exception and len(at.get("plotly_chart")) == 4


def test_a_figure_being_built_is_waited_for_not_built_twice():
    import numpy as np

    from views.plumbing.figcache import FigureCache
    from viz.attention import attention_figure

    cache, started, release, built = FigureCache(), threading.Event(), threading.Event(), []

    def slow(*args):
        built.append(1)
        started.set()
        release.wait(10)
        return attention_figure(*args)

    p = np.full((2, 2), 0.5, np.float32)
    got = []
    first = threading.Thread(target=lambda: got.append(cache.get(slow, p, ["a", "b"], ["a", "b"], "enc_self")))
    first.start()
    started.wait(10)
    second = threading.Thread(target=lambda: got.append(cache.get(slow, p, ["a", "b"], ["a", "b"], "enc_self")))
    second.start()
    release.set()
    first.join(10)
    second.join(10)
    assert len(built) == 1 and len(got) == 2 and got[0] is got[1]
