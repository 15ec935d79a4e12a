"""The live-poll rooms (views/rooms/): codes, the join limit, and one contract that both stores keep.

Every contract test runs on SQLite (a file in tmp_path) and on Redis (a redis-server this module starts on a free
port, with no persistence); without redis-server only the Redis runs are skipped.
"""
from __future__ import annotations

import contextlib
import shutil
import socket
import string
import subprocess
import time

import pytest

from views.rooms import codes
from views.rooms.codes import ALPHABET, CODE_LEN, JoinLimiter, new_voter_id, normalize
from views.rooms.store import MAX_OPTION_CHARS, MAX_OPTIONS, MAX_TEXT_CHARS, PRESENT_S, RoomGone

T0 = 1_000_000.0  # the tests' clock: every call gets an explicit `now`
TTL = 3600.0


# ---- codes and voter ids ----

def test_the_alphabet_is_crockford_base32():
    assert len(ALPHABET) == len(set(ALPHABET)) == 32
    assert set(ALPHABET) == set(string.digits + string.ascii_uppercase) - set("ILOU")


def test_six_characters_are_exactly_thirty_bits():
    assert 31 ** CODE_LEN < 2 ** 30 <= 32 ** CODE_LEN  # one letter fewer would not reach 30 bits
    assert len(ALPHABET) ** CODE_LEN == 2 ** 30


def test_new_codes_are_normal_and_varied():
    made = [codes.new_code() for _ in range(200)]
    assert all(len(c) == CODE_LEN and normalize(c) == c for c in made)
    assert len(set(made)) > 190  # 200 draws from 2**30 codes almost never repeat


@pytest.mark.parametrize("typed, stored", [
    ("abc-123", "ABC123"), (" ab c1 23 ", "ABC123"), ("o0i1l2", "001112"), ("ZZZZZZ", "ZZZZZZ"),
    ("abc12", None), ("abc1234", None), ("ABCU12", None), ("ABC12!", None), ("", None), (None, None), (123456, None),
])
def test_normalize_reads_a_typed_code(typed, stored):
    assert normalize(typed) == stored


def test_owner_keys_and_voter_ids_have_their_shapes():
    owner, voter = codes.new_owner_key(), new_voter_id()
    assert codes.valid_owner_key(owner) and codes.valid_voter_id(voter)
    assert len(owner) == codes.OWNER_KEY_LEN and len(voter) == codes.VOTER_ID_LEN
    assert not codes.valid_owner_key(voter) and not codes.valid_voter_id(owner)
    for bad in ("", "a" * 15, "a" * 17, "a" * 15 + "=", "a" * 15 + "/", "a" * 15 + "+", "a" * 15 + "é", None, 7):
        assert not codes.valid_voter_id(bad), bad


def test_join_limiter_is_a_sliding_window():
    limiter = JoinLimiter(limit=10, window_s=60)
    assert all(limiter.allow(T0 + i) for i in range(10))  # one a second
    assert not limiter.allow(T0 + 10) and limiter.wait_s(T0 + 10) == pytest.approx(50)
    assert not limiter.allow(T0 + 59.5)  # refused attempts are not counted...
    assert limiter.allow(T0 + 60)  # ...so the first one leaves the window on time
    assert not limiter.allow(T0 + 60.5)
    assert limiter.allow(T0 + 61) and limiter.wait_s(T0 + 61) > 0
    with pytest.raises(ValueError):
        JoinLimiter(limit=0)


# ---- the stores ----

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def redis_running(folder):
    """A redis-server on a free port with no persistence, in `folder`: yields its URL."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    import redis

    port = free_port()
    log = open(folder / "redis.log", "w")
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(folder)], stdout=log, stderr=subprocess.STDOUT)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url)
        for _ in range(100):
            if proc.poll() is not None:
                pytest.fail(f"redis-server exited: {(folder / 'redis.log').read_text()}")
            with contextlib.suppress(redis.ConnectionError):
                client.ping()
                break
            time.sleep(0.05)
        client.close()
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    with redis_running(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture(params=["sqlite", "redis"])
def store(request, tmp_path):
    if request.param == "sqlite":
        from views.rooms.sqlite_store import SqliteStore
        return SqliteStore(tmp_path / "rooms.sqlite3", TTL)
    from views.rooms.redis_store import RedisStore
    s = RedisStore(request.getfixturevalue("redis_url"), TTL)
    s.client.flushdb()
    return s


OPTIONS = ["cat", "dog", "bird"]


@pytest.fixture
def room(store):
    """(store, code, owner, qid) of a room asking a three-option question, made at T0."""
    code, owner = store.create(now=T0)
    return store, code, owner, store.ask(owner, "next-word", "A man rides a", "Ein Mann", OPTIONS, now=T0)


def test_join_vote_change_and_count(room):
    store, code, owner, qid = room
    assert qid == 1 and store.code_of(owner, now=T0) == code
    voters = [new_voter_id() for _ in range(3)]
    seen = store.join(code.lower(), voters[0], now=T0)  # phones type codes any way
    assert (seen.status, seen.question.options, seen.counts, seen.mine) == ("open", tuple(OPTIONS), (0, 0, 0), None)
    assert [store.vote(code, v, qid, o, now=T0 + 1) for v, o in zip(voters, [0, 1, 1])] == ["ok"] * 3
    assert store.vote(code, voters[1], qid, 2, now=T0 + 2) == "ok"  # changed: one answer per voter
    view = store.view(code, voters[1], now=T0 + 3)
    assert (view.counts, view.answered, view.mine, view.members) == ((1, 1, 1), 3, 2, 3)
    assert store.view(code, now=T0 + 3).mine is None


def test_asking_the_same_question_again_keeps_it(room):
    store, code, owner, qid = room
    voter = new_voter_id()
    store.vote(code, voter, qid, 1, now=T0)
    store.reveal(owner, qid, 1, [0.2, 0.7, 0.1], now=T0)
    assert store.ask(owner, "next-word", "A man rides a", "Ein Mann", tuple(OPTIONS), now=T0 + 1) == qid
    view = store.view(code, voter, now=T0 + 1)
    assert view.counts == (0, 1, 0) and view.mine == 1 and view.reveal.values == (0.2, 0.7, 0.1)


def test_the_next_question_starts_empty(room):
    store, code, owner, qid = room
    voter = new_voter_id()
    store.vote(code, voter, qid, 0, now=T0)
    store.reveal(owner, qid, 0, [0.5, 0.25, 0.25], now=T0)
    shuffled = ["dog", "cat", "bird"]  # the same words in another order are another question
    assert store.ask(owner, "next-word", "A man rides a", "Ein Mann", shuffled, now=T0 + 1) == qid + 1
    view = store.view(code, voter, now=T0 + 1)
    assert (view.question.qid, view.counts, view.answered, view.mine, view.reveal) == (qid + 1, (0, 0, 0), 0, None,
                                                                                      None)
    assert store.vote(code, voter, qid, 0, now=T0 + 2) == "stale"  # a phone still showing the last question
    assert store.vote(code, voter, qid + 1, 0, now=T0 + 2) == "ok"


def test_votes_for_another_question_are_stale(store):
    code, owner = store.create(now=T0)
    voter = new_voter_id()
    assert store.view(code, now=T0).question is None and store.view(code, now=T0).counts == ()
    assert store.vote(code, voter, 0, 0, now=T0) == "stale"  # nothing asked yet
    qid = store.ask(owner, "next-word", "p", "c", OPTIONS, now=T0)
    for wrong in (qid + 1, qid - 1, str(qid), float(qid) + 0.5, None):
        assert store.vote(code, voter, wrong, 0, now=T0) == "stale", wrong
    assert store.view(code, now=T0).answered == 0


def test_reveal_ends_the_voting(room):
    store, code, owner, qid = room
    voter = new_voter_id()
    store.vote(code, voter, qid, 2, now=T0)
    with pytest.raises(ValueError):
        store.reveal(owner, qid + 1, 0, [1, 0, 0], now=T0)  # not the current question
    for answer, values in ((3, [1, 0, 0]), (0, [1, 0]), (0, [1, 0, float("nan")]), (True, [1, 0, 0])):
        with pytest.raises(ValueError):
            store.reveal(owner, qid, answer, values, now=T0)
    assert store.view(code, now=T0).reveal is None
    store.reveal(owner, qid, 1, [0.25, 0.625, 0.125], now=T0)
    view = store.view(code, voter, now=T0)
    assert (view.reveal.answer, view.reveal.values, view.mine) == (1, (0.25, 0.625, 0.125), 2)
    assert store.vote(code, voter, qid, 1, now=T0) == "revealed"
    assert store.vote(code, new_voter_id(), qid, 1, now=T0) == "revealed"
    assert store.view(code, now=T0).counts == (0, 0, 1)


def test_bad_options_are_refused(room):
    store, code, _, qid = room
    voter = new_voter_id()
    for bad in (-1, 3, MAX_OPTIONS, True, "1", 1.0, None):
        assert store.vote(code, voter, qid, bad, now=T0) == "bad option", bad
    assert store.view(code, now=T0).answered == 0


def test_bad_voter_ids_are_refused_and_never_stored(room):
    store, code, owner, qid = room
    for bad in ("", "x", "a" * 15 + "!", owner, None):
        assert store.vote(code, bad, qid, 0, now=T0) == "bad voter"
        with pytest.raises(ValueError):
            store.join(code, bad, now=T0)
    view = store.view(code, "not an id", now=T0)
    assert (view.answered, view.members, view.mine) == (0, 0, None)


def test_only_the_owner_runs_the_room(room):
    store, code, owner, qid = room
    for stranger in (codes.new_owner_key(), "", "x" * 24, code):
        assert store.code_of(stranger, now=T0) is None
        with pytest.raises(PermissionError):
            store.ask(stranger, "next-word", "p", "c", ["x"], now=T0)
        with pytest.raises(PermissionError):
            store.reveal(stranger, qid, 0, [1, 0, 0], now=T0)
        with pytest.raises(PermissionError):
            store.close(stranger, now=T0)
    assert store.view(code, now=T0).status == "open" and store.view(code, now=T0).reveal is None


def test_a_closed_room_shows_its_last_counts(room):
    store, code, owner, qid = room
    voter = new_voter_id()
    store.vote(code, voter, qid, 1, now=T0)
    store.close(owner, now=T0 + 1)
    store.close(owner, now=T0 + 1)  # twice is fine
    assert store.vote(code, voter, qid, 0, now=T0 + 2) == "closed"
    view = store.join(code, new_voter_id(), now=T0 + 2)
    assert (view.status, view.counts, view.members) == ("closed", (0, 1, 0), 1)  # the late phone is not added
    assert store.code_of(owner, now=T0 + 2) is None
    with pytest.raises(RoomGone) as gone:
        store.ask(owner, "next-word", "p", "c", ["x"], now=T0 + 2)
    assert gone.value.status == "closed"


def test_a_room_expires_after_its_lifetime(room):
    store, code, owner, qid = room
    voter = new_voter_id()
    assert store.join(code, voter, now=T0 + TTL - 1).status == "open"
    assert store.vote(code, voter, qid, 0, now=T0 + TTL - 1) == "ok"
    later = T0 + TTL
    assert store.view(code, voter, now=later) == store.view(code, now=later)
    assert store.view(code, now=later).status == "expired" and store.view(code, now=later).counts == ()
    assert store.join(code, voter, now=later).status == "expired"
    assert store.vote(code, voter, qid, 1, now=later) == "expired"
    assert store.code_of(owner, now=later) is None
    with pytest.raises(RoomGone) as gone:
        store.reveal(owner, qid, 0, [1, 0, 0], now=later)
    assert gone.value.status == "expired"


def test_members_are_the_voters_seen_lately(room):
    store, code, _, _ = room
    early, late = new_voter_id(), new_voter_id()
    store.join(code, early, now=T0)
    store.join(code, late, now=T0 + 20)
    assert store.view(code, now=T0 + PRESENT_S - 1).members == 2
    assert store.view(code, now=T0 + PRESENT_S + 1).members == 1
    assert store.view(code, early, now=T0 + PRESENT_S + 1).members == 2  # polling keeps a phone present
    assert store.view(code, now=T0 + 2 * PRESENT_S).members == 1
    assert store.view(code, now=T0 + 2 * PRESENT_S + 2).members == 0
    assert store.view("ZZZZZZ", now=T0).status == "missing" and store.view("not a code", now=T0).status == "missing"


def test_texts_are_stored_verbatim(store):
    code, owner = store.create(now=T0)
    prompt, context = "<script>alert('x')</script> **bold** {{x}}", "Ein <b>Mann</b>\n& ' \" ß → 漢"
    options = ["<img src=x onerror=alert(1)>", "' OR 1=1 --", "$x$", "a\nb", " spaced ", "x" * MAX_OPTION_CHARS]
    qid = store.ask(owner, "next-word", prompt, context, options, now=T0)
    q = store.view(code, now=T0).question
    assert (q.qid, q.kind, q.prompt, q.context, q.options) == (qid, "next-word", prompt, context, tuple(options))


def test_texts_over_the_limits_are_refused(room):
    store, code, owner, qid = room
    too_many, too_long = ["w"] * (MAX_OPTIONS + 1), ["x" * (MAX_OPTION_CHARS + 1)]
    for kind, prompt, context, options in (("k", "p", "c", too_many), ("k", "p", "c", too_long),
                                           ("k", "p" * (MAX_TEXT_CHARS + 1), "c", ["x"]),
                                           ("k", "p", "c" * (MAX_TEXT_CHARS + 1), ["x"]), ("k", "p", "c", []),
                                           ("k", "p", "c", "xyz"), ("k", "p", "c", ["x", 2]), ("k", None, "c", ["x"])):
        with pytest.raises(ValueError):
            store.ask(owner, kind, prompt, context, options, now=T0)
    assert store.view(code, now=T0).question.qid == qid  # nothing changed
    assert store.ask(owner, "k", "p", "c", ["w"] * MAX_OPTIONS, now=T0) == qid + 1


def test_a_taken_code_is_drawn_again(store, monkeypatch):
    drawn = iter(["AAAAAA", "AAAAAA", "BBBBBB"])
    monkeypatch.setattr(codes, "new_code", lambda: next(drawn))
    first, second = store.create(now=T0), store.create(now=T0)
    assert (first[0], second[0]) == ("AAAAAA", "BBBBBB") and first[1] != second[1]
    assert store.code_of(second[1], now=T0) == "BBBBBB"
