"""The quiz's live poll on two Streamlit processes behind nginx (deploy/serve.py): one room shared through the
SQLite store, and a process killed mid-poll loses no answer (its phones reconnect to the other one and are the same
students, with the answers they gave). Phones are light websocket clients (tests/classroom_client.py); the
presenter's side is the store itself (the projector's page is tested in test_browser_poll.py). Needs nginx."""
from __future__ import annotations

import asyncio
import html
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.browser.test_proxy import run_async

ROOT = Path(__file__).resolve().parents[2]
for p in (ROOT / "deploy",):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from classroom_client import Session  # noqa: E402
from serve import NGINX_MISSING, Deployment, nginx_binary  # noqa: E402
from views.rooms.sqlite_store import SqliteStore  # noqa: E402

pytestmark = [pytest.mark.proxy, pytest.mark.slow]
OPTIONS = ("dog", "<b>cat</b>", "bird")  # markup is an option's text, never markup
PHONES = 6


@pytest.fixture(scope="module")
def rooms(atlas_checkpoints, tmp_path_factory):
    """(the deployment, the store both processes share): two app processes and nginx, one ATLAS_ROOM_DIR."""
    if nginx_binary() is None:
        pytest.fail(NGINX_MISSING, pytrace=False)
    folder = tmp_path_factory.mktemp("atlas_rooms")
    before = os.environ.get("ATLAS_ROOM_DIR")
    os.environ["ATLAS_ROOM_DIR"] = str(folder)  # the backends inherit the environment
    d = Deployment(2, checkpoint_dir=atlas_checkpoints, model="demo", host="127.0.0.1", torch_threads=1,
                   workdir=tmp_path_factory.mktemp("atlas_poll_proxy"), timeout=90)
    try:
        d.start()
        yield d, SqliteStore(str(folder / "rooms.sqlite3"), 6 * 3600)
    finally:
        d.stop()
        if before is None:
            os.environ.pop("ATLAS_ROOM_DIR", None)
        else:
            os.environ["ATLAS_ROOM_DIR"] = before


def option_keys(s: Session, qid: int) -> list[str]:
    return [f"room_opt_{qid}_{i}" for i in range(len(OPTIONS)) if f"room_opt_{qid}_{i}" in s.buttons]


def test_a_room_spans_both_processes_and_a_killed_one_loses_no_answer(rooms):
    d, store = rooms
    code, owner = store.create()
    qid = store.ask(owner, "next", "Which English word comes next?", "The decoder has read: <bos> A", OPTIONS)

    async def scenario():
        phones = [Session(d.url, timeout=90) for _ in range(PHONES)]
        try:
            for s in phones:
                run = await s.open({"room": code})
                assert not run.exceptions, run.exceptions
                assert "me=" in s.query_string  # the phone's own id, kept in its link
            assert {s.backend for s in phones} == {"atlas_0", "atlas_1"}  # the room spans both processes
            for i, s in enumerate(phones):
                run = await s.click(option_keys(s, qid)[i % len(OPTIONS)])
                assert not run.exceptions, run.exceptions
            assert store.view(code).counts == (2, 2, 2)

            victim = next(b for b in d.backends if b.name == phones[0].backend)
            victim.proc.send_signal(signal.SIGKILL)
            await asyncio.to_thread(victim.proc.wait, 60)
            moved = [s for s in phones if s.backend == victim.name]
            for s in moved:  # the browser reconnects through nginx, which sends it to the other process
                run = await s.reconnect(reload_page=True, resume=False)
                assert s.backend != victim.name and not run.exceptions, (s.backend, run.exceptions)
                mine = phones.index(s) % len(OPTIONS)
                said = html.unescape(" ".join(run.markdown + run.alerts))
                assert f"Your answer: {OPTIONS[mine]}." in said, said  # the same student, the same answer
            assert store.view(code).counts == (2, 2, 2)  # nothing lost

            run = await moved[0].click(option_keys(moved[0], qid)[1])  # a change after the move still counts once
            assert not run.exceptions
            want = [2, 2, 2]
            want[0] -= 1
            want[1] += 1
            assert store.view(code).counts == tuple(want) and store.view(code).answered == PHONES
        finally:
            for s in phones:
                try:
                    await s.close()
                except Exception:  # a websocket the killed process left half-open
                    pass

    run_async(scenario())
