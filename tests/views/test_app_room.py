"""AppTest of a student's phone page in the quiz's live poll (`?room=CODE`): nothing of the app but the question,
the options as buttons (markup shown as text), one answer per phone that a click changes, never the answer before
the reveal, and a clear line for an unknown, closed or expired room; joins are rate-limited per session."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from views.rooms.store import open_store

APP = str(Path(__file__).resolve().parents[2] / "app.py")
OPTIONS = ("dog", "<b>cat</b>", "*bird*")


@pytest.fixture()
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("ATLAS_ROOM_DIR", str(tmp_path))
    monkeypatch.delenv("ATLAS_ROOM_STORE", raising=False)
    return open_store()


def phone(code: str, **params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["room"] = code
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, at.exception
    return at


def text(at) -> str:
    return " ".join([m.value for m in at.markdown] + [c.value for c in at.caption]
                    + [a.value for a in at.warning] + [a.value for a in at.info] + [a.value for a in at.success])


def option_buttons(at) -> list:
    return [b for b in at.button if (b.key or "").startswith("room_opt_")]


def test_a_phone_sees_the_question_votes_and_changes_its_answer(store):
    code, owner = store.create()
    qid = store.ask(owner, "next", "Which English word comes next?", "The decoder has read: <bos> A", OPTIONS)
    at = phone(code.lower())
    assert not at.sidebar.radio and not at.get("plotly_chart")  # nothing of the app but the poll
    labels = [b.label for b in option_buttons(at)]
    assert len(labels) == 3 and "<b>" not in " ".join(labels) and "&lt;b&gt;cat&lt;/b&gt;" in labels[1]
    assert "\\*bird\\*" in labels[2]  # Markdown is escaped too
    me = at.query_params["me"][0] if isinstance(at.query_params["me"], list) else at.query_params["me"]
    assert len(me) == 16
    shown = text(at)
    assert "Which English word comes next?" in shown and "model's answer" not in shown
    option_buttons(at)[1].click().run()
    assert store.view(code, me).mine == 1 and store.view(code).counts == (0, 1, 0)
    option_buttons(at)[0].click().run()
    assert store.view(code).counts == (1, 0, 0) and "Your answer: dog" in text(at)

    store.reveal(owner, qid, 2, (0.2, 0.1, 0.7))
    at.run()
    assert not option_buttons(at) and "The model's answer" in text(at) and "not this one" in text(at)
    assert len(at.get("plotly_chart")) == 1
    assert store.vote(code, me, qid, 2) == "revealed"  # no answer after the reveal


def test_unknown_closed_and_expired_rooms_say_so(store, monkeypatch):
    assert "No room has this code." in text(phone("ZZZZZZ"))
    assert "No room has this code." in text(phone("not a code!"))
    code, owner = store.create()
    store.ask(owner, "next", "q", "", OPTIONS)
    store.close(owner)
    at = phone(code)
    assert "closed this room" in text(at) and not option_buttons(at)


def test_joins_are_rate_limited_per_session(store):
    at = phone("ZZZZZ0")
    for i in range(12):
        at.query_params["room"] = f"ZZZZZ{'123456789ABCD'[i]}"
        at.run()
    assert "Too many tries" in " ".join(e.value for e in at.error)


def test_a_store_that_cannot_be_reached_is_said_on_the_projector_and_the_phone(checkpoints, tmp_path, monkeypatch):
    """A broken ATLAS_ROOM_STORE (or a folder that cannot be written): the projector says the poll is unavailable
    and the quiz goes on; a phone says it cannot reach the poll. No stack trace, no server path."""
    from tests.app_support import run_app

    monkeypatch.setenv("ATLAS_ROOM_STORE", "memcached://nowhere")
    at = run_app(view="Decoding", text="Ein Hund läuft im Schnee.", present=1, focus="quiz", quiz="next", dec_step=2)
    assert not at.exception
    at.button(key="poll_open").click().run()
    assert not at.exception
    said = " ".join(w.value for w in at.warning)
    assert "live poll is unavailable" in said and "memcached" not in said and str(tmp_path) not in said
    assert at.button(key="quiz_reveal") and "poll" not in at.query_params  # the quiz goes on, no room
    at = phone("ABCDEF")
    assert "cannot be reached" in " ".join(e.value for e in at.error)
