"""Two Streamlit processes behind nginx (deploy/serve.py): sticky sessions, each keeping its own state.

Drives the app with the light websocket client of tests/classroom_client.py (Streamlit's own protocol,
no browser) through the proxy, on the tiny `demo` checkpoint. Needs Debian's nginx (`apt-get install nginx`):
without it these tests fail, they do not skip.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
for p in (ROOT / "deploy",):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from streamlit.proto.WidgetStates_pb2 import WidgetState  # noqa: E402

from classroom_client import BACKEND_COOKIE, Session, shows_sentence, squash  # noqa: E402
from serve import NGINX_MISSING, Deployment, nginx_binary  # noqa: E402

pytestmark = [pytest.mark.proxy, pytest.mark.slow]

# Sentences of the tiny model's training set and others (unknown words are shown in the DE line all the same).
S1 = "Ein Hund läuft im Schnee."
S2 = "Zwei Hunde spielen im hohen Gras mit einem orangen Spielzeug."
S3 = "Ein Mann schläft in einem grünen Raum auf einem Sofa."
S4 = "Ein brauner Hund rennt dem schwarzen Hund hinterher."
S5 = "Eine Frau liest ein Buch."
S6 = "Drei Männer stehen auf der Straße."



def run_async(coro):
    """asyncio.run in a thread of its own: in the full suite, Playwright's sync API keeps an event loop running
    in the main thread (the session's Chromium), and asyncio.run refuses to start a second one there."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()

@pytest.fixture(scope="module")
def proxy(atlas_checkpoints, tmp_path_factory):
    """Two `streamlit run app.py` processes and nginx on free ports; stopped after this module."""
    if nginx_binary() is None:
        pytest.fail(NGINX_MISSING, pytrace=False)
    d = Deployment(2, checkpoint_dir=atlas_checkpoints, model="demo", host="127.0.0.1", torch_threads=1,
                   workdir=tmp_path_factory.mktemp("atlas_proxy"), timeout=90)
    d.start()
    try:
        run_async(_warm_up(d))
        yield d
    finally:
        d.stop()


async def _warm_up(d: Deployment) -> None:
    """Both processes run the app once, at the same time (the first run imports torch and loads the model)."""
    sessions = [Session(d.url, cookies={BACKEND_COOKIE: b.name}, timeout=90) for b in d.backends]
    try:
        await asyncio.gather(*(s.open({"view": "Attention", "text": "Ein Hund."}) for s in sessions))
    finally:
        for s in sessions:
            await s.close()


def _query(text: str) -> dict:
    return {"view": "Attention", "text": text}


def test_sessions_keep_their_own_sentence_and_backend(proxy):
    async def scenario():
        a, b = Session(proxy.url, timeout=60), Session(proxy.url, timeout=60)
        try:
            ra = await a.open(_query(S1))
            rb = await b.open(_query(S2))
            # Fresh visitors are dealt out in turn: one session on each process.
            assert {a.backend, b.backend} == {"atlas_0", "atlas_1"}, (a.backend, b.backend)
            for s in (a, b):  # the page's first response set the cookie; every later request followed it
                assert s.cookies[BACKEND_COOKIE] == s.backend
                assert s.http_backends == [s.backend] * 3, s.http_backends
            assert shows_sentence(ra, S1), ra.de_line
            assert shows_sentence(rb, S2), rb.de_line
            assert not shows_sentence(ra, S2) and not shows_sentence(rb, S1)  # the check tells sentences apart
            assert not ra.exceptions and not rb.exceptions, ra.exceptions + rb.exceptions

            # Both type at once, twice: each run shows its own session's sentence.
            for new_a, new_b in ((S3, S4), (S5, S6)):
                ra, rb = await asyncio.gather(a.type_text(new_a), b.type_text(new_b))
                assert shows_sentence(ra, new_a), (new_a, ra.de_line)
                assert shows_sentence(rb, new_b), (new_b, rb.de_line)
                assert ra.en_line and rb.en_line
            backend_a, session_a = a.backend, a.session_id

            # A reload and reconnect with the cookie returns to the same process, which resumes the session:
            # same session id, and its state (the last sentence, S5) rather than the first link's S1 (a new
            # session would adopt the URL). No widget states are sent, so the server's state is all there is.
            r = await a.reconnect(reload_page=True, with_widgets=False, query_string="view=Attention&text=" + S1)
            assert a.backend == backend_a and a.cookies[BACKEND_COOKIE] == backend_a
            assert a.http_backends[-3:] == [backend_a] * 3
            assert a.session_id == session_a
            assert shows_sentence(r, S5), r.de_line

            # A browser sending the other cookie reaches the other process; one with a cookie naming no
            # backend is given a backend and a new cookie.
            c = Session(proxy.url, cookies={BACKEND_COOKIE: b.backend}, timeout=60)
            rc = await c.open(_query(S4))
            assert c.backend == b.backend and c.http_backends == [b.backend] * 3
            assert shows_sentence(rc, S4), rc.de_line
            await c.close()
            d = Session(proxy.url, cookies={BACKEND_COOKIE: "atlas_9"}, timeout=60)
            rd = await d.open(_query(S2))
            assert d.backend in ("atlas_0", "atlas_1") and d.cookies[BACKEND_COOKIE] == d.backend
            assert shows_sentence(rd, S2), rd.de_line
            await d.close()

            # And the first two sessions still show their own sentences.
            ra, rb = await asyncio.gather(a.type_text(S6), b.type_text(S1))
            assert shows_sentence(ra, S6) and shows_sentence(rb, S1), (ra.de_line, rb.de_line)
        finally:
            await a.close()
            await b.close()

    run_async(scenario())


def test_the_first_run_after_a_move_keeps_the_sentence_the_browser_sent(proxy):
    """A page moved to another process (its own stopped: the proxy rebalances, docs/load.md) starts a new session
    there whose first run carries the sentence just typed, while the link still holds the one before. That run
    shows the typed sentence and puts it in the link (views/urlstate.FROM_BROWSER)."""

    async def scenario():
        s = Session(proxy.url, cookies={BACKEND_COOKIE: "atlas_0"}, timeout=90)
        try:
            r = await s.open(_query(S4))
            assert s.backend == "atlas_0" and shows_sentence(r, S4), r.de_line
            wid = s.widget_id("text")
            s.widgets[wid] = WidgetState(id=wid, string_value=S5)  # typed in the browser, not yet sent
            s.cookies[BACKEND_COOKIE] = "atlas_1"  # the proxy sends the reconnecting page to the other process
            r = await s.reconnect(resume=False)  # a new session there: its first run
            assert s.backend == "atlas_1"
            assert shows_sentence(r, S5) and not shows_sentence(r, S4), r.de_line
        finally:
            await s.close()

    run_async(scenario())


def test_a_stopped_backend_moves_its_browsers_to_another(proxy):
    """Runs last: stops backend atlas_1. Its browsers' next request goes to atlas_0 and re-sets the cookie."""
    victim = next(b for b in proxy.backends if b.name == "atlas_1")
    victim.proc.terminate()
    victim.proc.wait(timeout=15)

    async def scenario():
        s = Session(proxy.url, cookies={BACKEND_COOKIE: "atlas_1"}, timeout=60)
        try:
            r = await s.open(_query(S3))
            assert s.backend == "atlas_0" and s.cookies[BACKEND_COOKIE] == "atlas_0"
            assert shows_sentence(r, S3), r.de_line
        finally:
            await s.close()

    run_async(scenario())


def test_the_own_sentence_check_reads_words_and_pieces():
    """The classroom's check compares a typed sentence with the DE line of a word model or a piece model."""
    typed = "Ein Mann läuft im Park."
    for line in ("Ein Mann läuft im Park \\.", "\u2581Ein \u2581Mann \u2581läuft \u2581im \u2581Park \\."):
        assert squash(line) == squash(typed)
    assert squash("\u2581Ein \u2581Hund \u2581läuft \u2581im \u2581Park \\.") != squash(typed)
