"""What is particular to each room store: the factory, SQLite's file and query plan, Redis's keys and their expiry,
and voters from two OS processes (two servers behind the proxy) counted in one room."""
from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_rooms import OPTIONS, T0, TTL, redis_running

import views.rooms.store
from views.rooms import codes
from views.rooms.sqlite_store import COUNTS_SQL, SqliteStore
from views.rooms.store import GRACE_S, open_store

PER_PROCESS = 30
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(monkeypatch, tmp_path):
    """A clean environment for open_store, with the SQLite folder in tmp_path and no cached stores."""
    for name in ("ATLAS_ROOM_STORE", "ATLAS_ROOM_TTL_H"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ATLAS_ROOM_DIR", str(tmp_path / "rooms"))
    monkeypatch.setattr(views.rooms.store, "_STORES", {})
    return monkeypatch


def test_open_store_defaults_to_sqlite_in_the_room_dir(env, tmp_path):
    store = open_store()
    assert isinstance(store, SqliteStore) and store.ttl_s == 6 * 3600
    assert (tmp_path / "rooms" / "rooms.sqlite3").is_file()
    assert open_store("") is store and open_store() is store  # one store per URL per process
    env.setenv("ATLAS_ROOM_TTL_H", "0.5")
    assert open_store().ttl_s == 1800


def test_open_store_refuses_what_it_cannot_open(env):
    for url in ("postgres://db/rooms", "sqlite:///tmp/x", "localhost:6379"):
        with pytest.raises(ValueError, match="ATLAS_ROOM_STORE") as err:
            open_store(url)
        assert "\n" not in str(err.value) and url in str(err.value)
    env.setenv("ATLAS_ROOM_STORE", "memcached://x")
    with pytest.raises(ValueError):
        open_store()
    env.delenv("ATLAS_ROOM_STORE")
    for hours in ("soon", "0", "-1", "nan"):
        env.setenv("ATLAS_ROOM_TTL_H", hours)
        with pytest.raises(ValueError, match="ATLAS_ROOM_TTL_H"):
            open_store()


def test_open_store_picks_redis_for_a_redis_url(env):
    pytest.importorskip("redis")
    from views.rooms.redis_store import RedisStore

    env.setenv("ATLAS_ROOM_STORE", "redis://127.0.0.1:1/3")  # nothing listens there: opening must not connect
    store = open_store()
    assert isinstance(store, RedisStore) and open_store("redis://127.0.0.1:1/3") is store


def test_the_rooms_import_neither_streamlit_nor_redis_until_asked(env):
    """Pages import views.rooms.store at start-up; Redis is imported only for a redis:// store."""
    code = ("import sys, views.rooms.store, views.rooms.codes; views.rooms.store.open_store(); "
            "print(sorted({'redis', 'streamlit', 'torch'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr
    env.setitem(sys.modules, "redis", None)  # as if it were not installed
    env.delitem(sys.modules, "views.rooms.redis_store", raising=False)
    with pytest.raises(ImportError, match="pip install redis"):
        open_store("redis://127.0.0.1:1/0")


def test_sqlite_is_in_wal_mode_and_counts_from_the_primary_key(tmp_path):
    store = SqliteStore(tmp_path / "rooms.sqlite3", TTL)
    code, owner = store.create(now=T0)
    conn = sqlite3.connect(tmp_path / "rooms.sqlite3")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    columns = {t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})")] for t in ("rooms", "answers", "members")}
    assert columns == {"rooms": ["code", "owner", "created", "expires", "closed", "qid", "question", "qkey", "reveal"],
                       "answers": ["code", "qid", "voter", "option"], "members": ["code", "voter", "seen"]}
    plan = " ".join(r[-1] for r in conn.execute("EXPLAIN QUERY PLAN " + COUNTS_SQL, ("v", code, 1)))
    assert "PRIMARY KEY (code=? AND qid=?)" in plan, plan  # a range of the index, not a scan of every vote
    conn.close()


def test_sqlite_deletes_expired_rooms_when_it_creates_one(tmp_path):
    store = SqliteStore(tmp_path / "rooms.sqlite3", TTL)
    code, owner = store.create(now=T0)
    qid = store.ask(owner, "next-word", "p", "c", OPTIONS, now=T0)
    assert store.vote(code, codes.new_voter_id(), qid, 0, now=T0) == "ok"
    store.create(now=T0 + TTL + GRACE_S - 1)
    assert store.view(code, now=T0 + TTL + GRACE_S - 1).status == "expired"  # kept a while, to say so
    store.create(now=T0 + TTL + GRACE_S)
    assert store.view(code, now=T0 + TTL + GRACE_S).status == "missing"
    conn = sqlite3.connect(tmp_path / "rooms.sqlite3")
    left = [conn.execute(f"SELECT COUNT(*) FROM {t} WHERE code = ?", (code,)).fetchone()[0]
            for t in ("rooms", "answers", "members")]
    conn.close()
    assert left == [0, 0, 0]


def test_sqlite_threads_vote_through_their_own_connections(tmp_path):
    store = SqliteStore(tmp_path / "rooms.sqlite3", TTL)
    code, owner = store.create(now=T0)
    qid = store.ask(owner, "next-word", "p", "c", OPTIONS, now=T0)
    results = []

    def phones():
        results.extend(store.vote(code, codes.new_voter_id(), qid, i % 3, now=T0) for i in range(25))

    threads = [threading.Thread(target=phones) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["ok"] * 100 and store.view(code, now=T0).answered == 100


def test_redis_keys_expire_with_their_room(tmp_path):
    from views.rooms.redis_store import PREFIX, RedisStore

    with redis_running(tmp_path) as url:
        store = RedisStore(url, TTL)
        code, owner = store.create()
        qid = store.ask(owner, "next-word", "p", "c", OPTIONS)
        voter = codes.new_voter_id()
        store.join(code, voter)
        store.vote(code, voter, qid, 1)
        keys = sorted(store.client.keys("*"))
        assert keys == sorted([PREFIX + code, *(PREFIX + code + s for s in (":votes", ":counts", ":members")),
                               PREFIX + "owner:" + owner])
        ttls = [store.client.ttl(k) for k in keys]
        assert all(TTL + GRACE_S - 5 <= t <= TTL + GRACE_S + 1 for t in ttls), ttls


def opened(backend: str, where: str):
    if backend == "sqlite":
        return SqliteStore(where, TTL)
    from views.rooms.redis_store import RedisStore
    return RedisStore(where, TTL)


def vote_from_process(backend: str, where: str, code: str, qid: int, first: int, ready: str) -> None:
    """One server process: PER_PROCESS phones join and vote, starting once both processes are ready (each writes
    its file into `ready` and waits for the other's)."""
    store = opened(backend, where)
    voters = [codes.new_voter_id() for _ in range(PER_PROCESS)]
    (Path(ready) / str(first)).touch()
    deadline = time.monotonic() + 120
    while len(list(Path(ready).iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    for i, voter in enumerate(voters):
        store.join(code, voter)
        if store.vote(code, voter, qid, (first + i) % len(OPTIONS)) != "ok":
            raise SystemExit(f"vote {i} refused")


@pytest.fixture(params=["sqlite", "redis"])
def shared_place(request, tmp_path):
    """(backend, where): the SQLite file or Redis URL that both processes open."""
    if request.param == "sqlite":
        yield "sqlite", str(tmp_path / "rooms.sqlite3")
        return
    pytest.importorskip("redis")
    with redis_running(tmp_path) as url:
        yield "redis", url


def test_two_processes_vote_into_one_room(shared_place, tmp_path):
    backend, where = shared_place
    store = opened(backend, where)
    code, owner = store.create()
    qid = store.ask(owner, "next-word", "p", "c", OPTIONS)
    # Fresh interpreters, as two servers would be (not multiprocessing: after an AppTest in the same pytest run,
    # a spawned child would re-run the app script as its __main__).
    ready = tmp_path / "ready"
    ready.mkdir()
    run = ("import sys; sys.path[:0] = ['.', 'tests/views']; from test_room_backends import vote_from_process as v;"
           " a = sys.argv; v(a[1], a[2], a[3], int(a[4]), int(a[5]), a[6])")
    procs = [subprocess.Popen([sys.executable, "-c", run, backend, where, code, str(qid), str(first), str(ready)],
                              cwd=ROOT) for first in (0, 1)]
    assert [p.wait(timeout=180) for p in procs] == [0, 0]
    view = store.view(code)
    assert view.answered == sum(view.counts) == 2 * PER_PROCESS
    assert view.counts == (20, 20, 20) and view.members == 2 * PER_PROCESS
