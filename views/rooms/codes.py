"""Room codes, the presenter's key, voter ids and the join rate limit: pure Python, no store, no Streamlit.

A room code is 6 characters of Crockford's base32 (digits and capitals without I, L, O, U), so 32**6 = 2**30 codes:
short enough to read off a projector and type on a phone, and at JoinLimiter's 10 tries a minute one session
would need 2**30 / 10 minutes (about 200 years) to try them all. Crockford's rule reads O as 0 and I, L as 1,
the letters people mistype.
"""
from __future__ import annotations

import secrets
import string
import time
from collections import deque

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
CODE_LEN = 6
# token_urlsafe(n) writes n random bytes as ceil(4n/3) characters of the URL-safe base64 alphabet
OWNER_KEY_BYTES, VOTER_ID_BYTES = 18, 12
OWNER_KEY_LEN, VOTER_ID_LEN = 24, 16
_URLSAFE = frozenset(string.ascii_letters + string.digits + "-_")
_CODE_CHARS = frozenset(ALPHABET)
_READ_AS = str.maketrans({"O": "0", "I": "1", "L": "1"})


def new_code() -> str:
    """A random room code: CODE_LEN characters of ALPHABET (30 bits)."""
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LEN))


def normalize(text: object) -> str | None:
    """The room code someone typed, as stored ("ab-c 1o0" -> "ABC100"), or None when it cannot be one."""
    if not isinstance(text, str):
        return None
    code = "".join(text.split()).replace("-", "").upper().translate(_READ_AS)
    if len(code) != CODE_LEN or not set(code) <= _CODE_CHARS:
        return None
    return code


def new_owner_key() -> str:
    """The presenter's secret (the `poll=` of the presenter's URL): 144 random bits."""
    return secrets.token_urlsafe(OWNER_KEY_BYTES)


def new_voter_id() -> str:
    """One phone's anonymous id in a room (96 random bits): one answer per voter per question."""
    return secrets.token_urlsafe(VOTER_ID_BYTES)


def _urlsafe(text: object, length: int) -> bool:
    return isinstance(text, str) and len(text) == length and set(text) <= _URLSAFE


def valid_owner_key(text: object) -> bool:
    """Whether `text` has the shape of new_owner_key()'s output; anything else is refused, never looked up."""
    return _urlsafe(text, OWNER_KEY_LEN)


def valid_voter_id(text: object) -> bool:
    """Whether `text` has the shape of new_voter_id()'s output; anything else is refused, never stored."""
    return _urlsafe(text, VOTER_ID_LEN)


class JoinLimiter:
    """At most `limit` join attempts per `window_s` seconds (a sliding window), kept in one session's state.

    It makes guessing codes slow for one session; a refused attempt is not counted, so waiting always helps.
    """

    def __init__(self, limit: int = 10, window_s: float = 60.0):
        if limit < 1 or window_s <= 0:
            raise ValueError(f"JoinLimiter needs limit >= 1 and window_s > 0, got {limit} and {window_s}")
        self.limit, self.window_s = limit, float(window_s)
        self._times: deque[float] = deque()

    def allow(self, now: float | None = None) -> bool:
        """Whether one more attempt at `now` (default: time.time()) is allowed; an allowed one is counted."""
        now = time.time() if now is None else float(now)
        while self._times and self._times[0] <= now - self.window_s:
            self._times.popleft()
        if len(self._times) >= self.limit:
            return False
        self._times.append(now)
        return True

    def wait_s(self, now: float | None = None) -> float:
        """Seconds until the next attempt is allowed (0 when it is allowed now)."""
        now = time.time() if now is None else float(now)
        live = [t for t in self._times if t > now - self.window_s]
        return 0.0 if len(live) < self.limit else live[-self.limit] + self.window_s - now
