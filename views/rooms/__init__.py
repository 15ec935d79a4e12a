"""Live-poll rooms, kept outside the Streamlit process so every server behind the proxy sees the same room.

- here: what a room holds (Question, Reveal, RoomView), the limits, and RoomStore, the interface both backends keep;
- codes.py: room codes (6 characters of Crockford's base32), the presenter's key, voter ids, the join rate limit;
- sqlite_store.py, redis_store.py: the two backends (SQLite in WAL mode by default, Redis when configured);
- store.py: what pages import: `open_store`, which picks the backend, and every name defined here.

The interface lives in the package rather than in store.py because store.py imports the backends and the backends
import the interface: with both in store.py that would be an import cycle (tests/test_layers.py refuses those).

A room has one presenter (who holds the owner key), one current question at a time and the voters' answers to it.
Phones call `join` once and `view` about twice a second; `vote` answers the current question, and a second vote by
the same voter replaces the first until the presenter reveals the model's answer. Texts are stored exactly as given
and never interpreted: escaping them is the page's job. Nothing here imports streamlit.
"""
from __future__ import annotations

import abc
import hashlib
import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass

PRESENT_S = 30.0  # a voter seen within this many seconds counts as present
TOUCH_S = 10.0  # view() refreshes a present voter's time at most this often, so polling stays a read
DEFAULT_TTL_H = 6.0  # a room lives this long after `create` (env ATLAS_ROOM_TTL_H)
GRACE_S = 3600.0  # after expiry a room answers "expired" this long, then it is deleted and answers "missing"
MAX_OPTIONS, MAX_OPTION_CHARS, MAX_TEXT_CHARS, MAX_KIND_CHARS = 12, 200, 500, 40
STATUSES = ("open", "closed", "expired", "missing")
VOTE_RESULTS = ("ok", "missing", "expired", "closed", "stale", "revealed", "bad option", "bad voter")


@dataclass(frozen=True)
class Question:
    """The room's current question; `options` in the order the phones show them."""
    qid: int
    kind: str
    prompt: str
    context: str
    options: tuple[str, ...]


@dataclass(frozen=True)
class Reveal:
    """The model's answer (an index into the options) and its probability or weight per option, display order."""
    answer: int
    values: tuple[float, ...]


@dataclass(frozen=True)
class RoomView:
    """One read of a room. `counts` has one entry per option of the current question; `members` counts the voters
    seen in the last PRESENT_S seconds; `answered` the votes on the current question; `mine` this voter's option."""
    code: str
    status: str
    question: Question | None = None
    reveal: Reveal | None = None
    counts: tuple[int, ...] = ()
    members: int = 0
    answered: int = 0
    mine: int | None = None


class RoomGone(LookupError):
    """The presenter asked a closed or expired room for something only an open room does."""

    def __init__(self, code: str, status: str):
        super().__init__(f"room {code} is {status}")
        self.code, self.status = code, status


def ttl_from_env() -> float:
    """The rooms' lifetime in seconds: env ATLAS_ROOM_TTL_H (hours), default DEFAULT_TTL_H."""
    text = os.environ.get("ATLAS_ROOM_TTL_H", "").strip()
    try:
        hours = float(text) if text else DEFAULT_TTL_H
    except ValueError:
        raise ValueError(f"ATLAS_ROOM_TTL_H must be a number of hours, not {text!r}") from None
    if not (math.isfinite(hours) and hours > 0):
        raise ValueError(f"ATLAS_ROOM_TTL_H must be a positive number of hours, not {text!r}")
    return hours * 3600.0


def now_or(now: float | None) -> float:
    return time.time() if now is None else float(now)


def status_of(closed: bool, expires: float, now: float) -> str:
    """ "expired" wins over "closed": after its lifetime a room says only that."""
    return "expired" if now >= expires else "closed" if closed else "open"


def _text(name: str, value: object, limit: int) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a str, not {type(value).__name__}")
    if len(value) > limit:
        raise ValueError(f"{name} has {len(value)} characters; at most {limit} are stored")
    return value


def check_question(kind: object, prompt: object, context: object, options: object) -> tuple[str, str, int]:
    """The question as stored (JSON), its key (same question, same key) and its number of options.

    Raises ValueError for more than MAX_OPTIONS options, an option over MAX_OPTION_CHARS characters, a prompt or
    context over MAX_TEXT_CHARS, or anything that is not text."""
    kind = _text("kind", kind, MAX_KIND_CHARS)
    prompt, context = _text("prompt", prompt, MAX_TEXT_CHARS), _text("context", context, MAX_TEXT_CHARS)
    if isinstance(options, str) or not isinstance(options, Sequence):
        raise ValueError(f"options must be a list or tuple of str, not {type(options).__name__}")
    if not 1 <= len(options) <= MAX_OPTIONS:
        raise ValueError(f"a question has 1 to {MAX_OPTIONS} options, not {len(options)}")
    opts = [_text(f"option {i}", o, MAX_OPTION_CHARS) for i, o in enumerate(options)]
    stored = json.dumps({"kind": kind, "prompt": prompt, "context": context, "options": opts}, ensure_ascii=False)
    return stored, hashlib.sha256(stored.encode("utf-8")).hexdigest(), len(opts)


def check_reveal(answer: object, values: object, n_options: int) -> str:
    """The reveal as stored (JSON); ValueError unless `answer` indexes an option and `values` has one finite number
    per option."""
    if isinstance(answer, bool) or not isinstance(answer, int) or not 0 <= answer < n_options:
        raise ValueError(f"answer must be an option's index, 0 to {n_options - 1}, not {answer!r}")
    try:
        vals = [float(v) for v in values]
    except (TypeError, ValueError):
        raise ValueError("values must be numbers, one per option") from None
    if len(vals) != n_options or not all(map(math.isfinite, vals)):
        raise ValueError(f"values must be {n_options} finite numbers (one per option), got {len(vals)}")
    return json.dumps({"answer": answer, "values": vals})


def question_of(qid: int, stored: str | None) -> Question | None:
    if not stored:
        return None
    q = json.loads(stored)
    return Question(qid, q["kind"], q["prompt"], q["context"], tuple(q["options"]))


def reveal_of(stored: str | None) -> Reveal | None:
    if not stored:
        return None
    r = json.loads(stored)
    return Reveal(int(r["answer"]), tuple(float(v) for v in r["values"]))


def valid_option(option: object) -> bool:
    """An int (not a bool) that could index an option; the range is checked against the question in the store."""
    return isinstance(option, int) and not isinstance(option, bool) and 0 <= option < MAX_OPTIONS


class RoomStore(abc.ABC):
    """Rooms shared by every server process. Every `now` defaults to time.time(); tests pass their own clock.

    Owner-only methods (code_of excepted) raise PermissionError for a key that owns no room, and RoomGone when the
    room is closed or expired. Codes given by phones go through codes.normalize, so "abc-123" finds ABC123.
    """

    ttl_s: float

    @abc.abstractmethod
    def create(self, now: float | None = None) -> tuple[str, str]:
        """A new open room: (code, owner key). A code that is taken is drawn again."""

    @abc.abstractmethod
    def code_of(self, owner: str, now: float | None = None) -> str | None:
        """The code of the open (neither closed nor expired) room this key owns, else None."""

    @abc.abstractmethod
    def ask(self, owner: str, kind: str, prompt: str, context: str, options: Sequence[str],
            now: float | None = None) -> int:
        """Make this the current question and return its qid. Asking the current question again returns its qid and
        keeps its votes and reveal (the presenter's page asks on every rerun); another question gets qid + 1, no
        votes and no reveal. ValueError for texts over the limits."""

    @abc.abstractmethod
    def reveal(self, owner: str, qid: int, answer: int, values: Sequence[float], now: float | None = None) -> None:
        """Show the model's answer and one value per option to every phone; only for the current qid (ValueError
        otherwise). Revealing again replaces the values. Votes are refused from then on."""

    @abc.abstractmethod
    def close(self, owner: str, now: float | None = None) -> None:
        """End the room: phones see "closed" with the last counts, votes are refused. Closing twice is fine."""

    @abc.abstractmethod
    def join(self, code: str, voter: str, now: float | None = None) -> RoomView:
        """Record the voter as present in an open room and return the room as `view` does; ValueError for a voter id
        that codes.valid_voter_id refuses."""

    @abc.abstractmethod
    def vote(self, code: str, voter: str, qid: int, option: int, now: float | None = None) -> str:
        """Answer question `qid` with option index `option`: "ok" or why not ("missing", "expired", "closed",
        "stale", "revealed", "bad option", "bad voter"). A second vote by the voter replaces the first."""

    @abc.abstractmethod
    def view(self, code: str, voter: str | None = None, now: float | None = None) -> RoomView:
        """The room now, cheap enough to poll; `mine` is `voter`'s option (None for no voter or an invalid id)."""
