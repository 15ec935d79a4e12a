"""Rooms in Redis (ATLAS_ROOM_STORE=redis://host:port/db), for servers on several machines.

Keys live under `atlas:room:`: per room a hash (`atlas:room:CODE`), the current question's votes (`:votes`, voter ->
option) and counts (`:counts`, option -> votes), the members with the time each was seen (`:members`, a sorted
set), and `atlas:room:owner:KEY` -> CODE. Every check-then-write is one Lua script, so it is atomic; every key
expires GRACE_S after the room does. Only this module imports `redis`: the app starts without it.
"""
from __future__ import annotations

import json

import redis

from views.rooms import (
    GRACE_S,
    MAX_OPTIONS,
    PRESENT_S,
    TOUCH_S,
    RoomGone,
    RoomStore,
    RoomView,
    check_question,
    check_reveal,
    codes,
    now_or,
    question_of,
    reveal_of,
    valid_option,
)

PREFIX = "atlas:room:"
CREATE_TRIES = 20

# Shared by the scripts: the room's status at `now` from its hash fields, and a key's lifetime in seconds.
_LUA_HEAD = f"""
local function status(expires, closed, now)
  if not expires then return 'missing' end
  if now >= tonumber(expires) then return 'expired' end
  if closed == '1' then return 'closed' end
  return 'open'
end
local function ttl(expires, now)
  local t = math.ceil(tonumber(expires) + {GRACE_S!r} - now)
  if t < 1 then t = 1 end
  return t
end
"""
# KEYS room, owner key; ARGV owner, code, now, expires, ttl
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'created', ARGV[3], 'expires', ARGV[4], 'closed', '0', 'qid', '0',
           'question', '', 'qkey', '', 'reveal', '', 'nopts', '0')
redis.call('EXPIRE', KEYS[1], ARGV[5])
redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[5])
return 1
"""
# KEYS room, votes, counts; ARGV owner, now, action, then per action:
# close | status | ask qkey question nopts | reveal qid nopts json
_OWNER = _LUA_HEAD + """
local r = redis.call('HMGET', KEYS[1], 'owner', 'expires', 'closed', 'qid', 'qkey', 'nopts')
if r[1] ~= ARGV[1] then return {'owner'} end
if ARGV[3] == 'close' then redis.call('HSET', KEYS[1], 'closed', '1') return {'ok'} end
local s = status(r[2], r[3], tonumber(ARGV[2]))
if s ~= 'open' or ARGV[3] == 'status' then return {s} end
if ARGV[3] == 'ask' then
  if r[5] == ARGV[4] then return {'ok', r[4]} end
  local qid = tostring(tonumber(r[4]) + 1)
  redis.call('HSET', KEYS[1], 'qid', qid, 'question', ARGV[5], 'qkey', ARGV[4], 'reveal', '', 'nopts', ARGV[6])
  redis.call('DEL', KEYS[2], KEYS[3])
  return {'ok', qid}
end
if r[4] ~= ARGV[4] or r[4] == '0' or r[6] ~= ARGV[5] then return {'stale'} end
redis.call('HSET', KEYS[1], 'reveal', ARGV[6])
return {'ok'}
"""
# KEYS room, votes, counts, members; ARGV voter, qid, option, now
_VOTE = _LUA_HEAD + """
local r = redis.call('HMGET', KEYS[1], 'expires', 'closed', 'qid', 'reveal', 'nopts')
local now = tonumber(ARGV[4])
local s = status(r[1], r[2], now)
if s ~= 'open' then return s end
if r[3] ~= ARGV[2] or r[3] == '0' then return 'stale' end
if r[4] ~= '' then return 'revealed' end
if tonumber(ARGV[3]) >= tonumber(r[5]) then return 'bad option' end
local old = redis.call('HGET', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
if old then redis.call('HINCRBY', KEYS[3], old, -1) end
redis.call('HINCRBY', KEYS[3], ARGV[3], 1)
redis.call('ZADD', KEYS[4], ARGV[4], ARGV[1])
local t = ttl(r[1], now)
for i = 2, 4 do redis.call('EXPIRE', KEYS[i], t) end
return 'ok'
"""
# KEYS room, votes, counts, members; ARGV now, voter ('' for none), present since, touch before, join ('1' or '0')
_VIEW = _LUA_HEAD + """
local r = redis.call('HMGET', KEYS[1], 'expires', 'closed', 'qid', 'question', 'reveal', 'nopts')
local now = tonumber(ARGV[1])
local s = status(r[1], r[2], now)
if s == 'missing' or s == 'expired' then return {s} end
local voter = ARGV[2]
if voter ~= '' and s == 'open' then
  if ARGV[5] == '1' then
    redis.call('ZADD', KEYS[4], ARGV[1], voter)
    redis.call('EXPIRE', KEYS[4], ttl(r[1], now))
  else
    local seen = redis.call('ZSCORE', KEYS[4], voter)
    if seen and tonumber(seen) <= tonumber(ARGV[4]) then redis.call('ZADD', KEYS[4], 'XX', ARGV[1], voter) end
  end
end
local mine = ''
if voter ~= '' then mine = redis.call('HGET', KEYS[2], voter) or '' end
local out = {s, r[3], r[4], r[5], redis.call('ZCOUNT', KEYS[4], '(' .. ARGV[3], '+inf'), mine}
for i = 0, tonumber(r[6]) - 1 do out[#out + 1] = redis.call('HGET', KEYS[3], tostring(i)) or '0' end
return out
"""


def _keys(code: str) -> list[str]:
    """room, votes, counts, members"""
    room = PREFIX + code
    return [room, room + ":votes", room + ":counts", room + ":members"]


class RedisStore(RoomStore):
    """RoomStore in the Redis database at `url` (redis:// or rediss://); rooms live `ttl_s` seconds."""

    def __init__(self, url: str, ttl_s: float):
        self.url, self.ttl_s = url, float(ttl_s)
        # connects on first use, so the app starts while Redis is still starting
        self.client = redis.Redis.from_url(url, decode_responses=True, socket_timeout=5, socket_connect_timeout=5,
                                           health_check_interval=30)
        self._create, self._owner = self.client.register_script(_CREATE), self.client.register_script(_OWNER)
        self._vote, self._view = self.client.register_script(_VOTE), self.client.register_script(_VIEW)

    def create(self, now=None):
        now = now_or(now)
        key_ttl = int(self.ttl_s + GRACE_S) + 1
        for _ in range(CREATE_TRIES):
            code, owner = codes.new_code(), codes.new_owner_key()
            args = [owner, code, repr(now), repr(now + self.ttl_s), key_ttl]
            if self._create(keys=[PREFIX + code, PREFIX + "owner:" + owner], args=args) == 1:
                return code, owner
        raise RuntimeError(f"no free room code after {CREATE_TRIES} tries")

    def _code(self, owner: str) -> str:
        code = self.client.get(PREFIX + "owner:" + owner) if codes.valid_owner_key(owner) else None
        if code is None:
            raise PermissionError("this key owns no room")
        return code

    def _as_owner(self, owner: str, now: float | None, *args: object) -> list:
        code = self._code(owner)
        out = self._owner(keys=_keys(code)[:3], args=[owner, repr(now_or(now)), *args])
        if out[0] == "owner":
            raise PermissionError("this key owns no room")
        if out[0] in ("closed", "expired"):
            raise RoomGone(code, out[0])
        return out

    def code_of(self, owner, now=None):
        if not codes.valid_owner_key(owner):
            return None
        code = self.client.get(PREFIX + "owner:" + owner)
        if code is None:
            return None
        held, expires, closed = self.client.hmget(PREFIX + code, "owner", "expires", "closed")
        live = held == owner and now_or(now) < float(expires) and closed == "0"
        return code if live else None

    def ask(self, owner, kind, prompt, context, options, now=None):
        stored, key, n = check_question(kind, prompt, context, options)
        return int(self._as_owner(owner, now, "ask", key, stored, n)[1])

    def reveal(self, owner, qid, answer, values, now=None):
        code = self._code(owner)
        question, current = self.client.hmget(PREFIX + code, "question", "qid")
        stale = not question or qid != int(current or 0)
        if not stale:
            n = len(json.loads(question)["options"])
            stale = self._as_owner(owner, now, "reveal", qid, n, check_reveal(answer, values, n))[0] == "stale"
        else:
            self._as_owner(owner, now, "status")  # a closed or expired room says so first, as in SqliteStore
        if stale:
            raise ValueError(f"question {qid} is not the current question of room {code}")

    def close(self, owner, now=None):
        self._as_owner(owner, now, "close")

    def join(self, code, voter, now=None):
        if not codes.valid_voter_id(voter):
            raise ValueError("not a voter id (codes.new_voter_id makes them)")
        return self._read(code, voter, now_or(now), join=True)

    def vote(self, code, voter, qid, option, now=None):
        if not codes.valid_voter_id(voter):
            return "bad voter"
        code = codes.normalize(code)
        if code is None:
            return "missing"
        if not isinstance(qid, int) or isinstance(qid, bool):
            qid = -1  # never the current question: the script says "stale" after checking the room
        option = option if valid_option(option) else MAX_OPTIONS  # no question has it: the script says "bad option"
        return self._vote(keys=_keys(code), args=[voter, qid, option, repr(now_or(now))])

    def view(self, code, voter=None, now=None):
        return self._read(code, voter if codes.valid_voter_id(voter) else "", now_or(now), join=False)

    def _read(self, code: str, voter: str, now: float, join: bool) -> RoomView:
        code = codes.normalize(code)
        if code is None:
            return RoomView("", "missing")
        args = [repr(now), voter, repr(now - PRESENT_S), repr(now - TOUCH_S), "1" if join else "0"]
        out = self._view(keys=_keys(code), args=args)
        if len(out) == 1:
            return RoomView(code, out[0])
        status, qid, question, revealed, members, mine, *counts = out
        counts = tuple(int(c) for c in counts)
        q = question_of(int(qid), question)
        return RoomView(code, status, q, reveal_of(revealed), counts, int(members), sum(counts),
                        int(mine) if mine != "" else None)
