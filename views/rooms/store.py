"""What pages import to run a live poll: `open_store`, which picks the backend, and the room's types and limits.

The types and the RoomStore interface are defined in the package (views/rooms/__init__.py) and named here again, so
a page needs one import: `from views.rooms.store import RoomView, open_store`.
"""
from __future__ import annotations

import os
import sqlite3
import sys
import threading
from pathlib import Path

from views.rooms import (
    DEFAULT_TTL_H,
    GRACE_S,
    MAX_KIND_CHARS,
    MAX_OPTION_CHARS,
    MAX_OPTIONS,
    MAX_TEXT_CHARS,
    PRESENT_S,
    STATUSES,
    TOUCH_S,
    VOTE_RESULTS,
    Question,
    Reveal,
    RoomGone,
    RoomStore,
    RoomView,
    ttl_from_env,
)

__all__ = ["DEFAULT_TTL_H", "GRACE_S", "MAX_KIND_CHARS", "MAX_OPTION_CHARS", "MAX_OPTIONS", "MAX_TEXT_CHARS",
           "PRESENT_S", "STATUSES", "TOUCH_S", "VOTE_RESULTS", "Question", "Reveal", "RoomGone", "RoomStore",
           "RoomView", "open_store", "store_errors", "ttl_from_env"]

_STORES: dict[tuple[str, float], RoomStore] = {}  # one per URL and lifetime: it holds connections, no request's data
_LOCK = threading.Lock()


def open_store(url: str | None = None) -> RoomStore:
    """The process's store for `url` (default: env ATLAS_ROOM_STORE). Empty: SQLite, the file rooms.sqlite3 in env
    ATLAS_ROOM_DIR (default $XDG_CACHE_HOME/attention-atlas, that is ~/.cache/attention-atlas; created); redis:// or
    rediss://: Redis. Rooms live env ATLAS_ROOM_TTL_H hours (default 6). ValueError for any other URL or a lifetime
    that is not a positive number."""
    url = (os.environ.get("ATLAS_ROOM_STORE", "") if url is None else url).strip()
    ttl_s = ttl_from_env()
    if not url:
        cache = os.environ.get("XDG_CACHE_HOME", "").strip() or "~/.cache"  # the app's other caches' folder
        folder = Path(os.environ.get("ATLAS_ROOM_DIR", "").strip() or f"{cache}/attention-atlas").expanduser()
        key = "sqlite:" + str(folder.resolve() / "rooms.sqlite3")
    elif url.startswith(("redis://", "rediss://")):
        key = url
    else:
        raise ValueError(f"ATLAS_ROOM_STORE must be empty (SQLite in ATLAS_ROOM_DIR) or a redis://host:port/db URL, "
                         f"not {url!r}")
    with _LOCK:
        store = _STORES.get((key, ttl_s))
        if store is None:
            if key.startswith("sqlite:"):
                from views.rooms.sqlite_store import SqliteStore
                folder.mkdir(parents=True, exist_ok=True)
                store = SqliteStore(folder / "rooms.sqlite3", ttl_s)
            else:
                try:
                    from views.rooms.redis_store import RedisStore
                except ImportError as e:
                    raise ImportError(f"ATLAS_ROOM_STORE is a Redis URL but the redis package is missing "
                                      f"(pip install redis): {e}") from e
                store = RedisStore(url, ttl_s)
            _STORES[(key, ttl_s)] = store
        return store


def store_errors() -> tuple[type[BaseException], ...]:
    """What a page catches around the store to say "the live poll is unavailable" instead of a stack trace: a
    setting it cannot read (ValueError), a folder it cannot write or a server it cannot reach (OSError,
    sqlite3.Error, Redis's errors where the redis package is in use), a room that closed meanwhile (RoomGone), a
    presenter key the store no longer knows (PermissionError, an OSError)."""
    redis = sys.modules.get("redis")
    return (ValueError, OSError, sqlite3.Error, RoomGone) + ((redis.RedisError,) if redis else ())
