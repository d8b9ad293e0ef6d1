"""The shared class store: Redis, for several app instances behind a proxy (`--store
redis://...`; the package's docstring says what is stored)."""
import json
import os
import threading
import time

from web.classroom.store import (
    GONE,
    REMEMBER_SECONDS,
    Closed,
    CodeTaken,
    Full,
    Gone,
    NotMember,
    Unavailable,
    guarded,
    poll_summary,
    too_many_members,
    too_many_sessions,
)

# Four keys per session, all with the session's time-to-live: S (a hash: teacher, state,
# version, npolls, nanswers, cur), S:m (the members' set), S:p (the polls: id -> JSON, "n:<id>"
# -> answers counted), S:a ("<poll>:<student>" -> answer). A sorted set of live sessions by
# last change caps how many run. Each change is one Lua script: checked and done atomically,
# then published on the updates channel as "<code> <version>".

_LUA_BUMP = """
local function bump(now, idle)
  local v = redis.call('HINCRBY', KEYS[1], 'version', 1)
  redis.call('HSET', KEYS[1], 'touched', now)
  if redis.call('SCARD', KEYS[2]) == 0 then             -- nobody joined: the shorter life
    idle = redis.call('HGET', KEYS[1], 'unjoined') or idle
  end
  for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], idle) end
  redis.call('SET', KEYS[6], 1, 'PX', idle + tonumber(redis.call('HGET', KEYS[1], 'remember')))
  redis.call('ZADD', KEYS[5], now, ARGV[1])
  redis.call('PUBLISH', ARGV[4], ARGV[1] .. ' ' .. v)
  return v
end
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
"""
# KEYS: S, S:m, S:p, S:a, active, K (the code is known: outlives S by `remember`);
# ARGV: code, now, idle_ms, channel, ...
_LUA = {
    "state": _LUA_BUMP + """
redis.call('HSET', KEYS[1], 'state', ARGV[5])
return bump(ARGV[2], ARGV[3])
""",
    "join": _LUA_BUMP + """
if redis.call('SISMEMBER', KEYS[2], ARGV[5]) == 1 then return 0 end
local per_client = 'c:' .. ARGV[7]
if tonumber(ARGV[8]) >= 0 and
   tonumber(redis.call('HGET', KEYS[1], per_client) or '0') >= tonumber(ARGV[8]) then
  return -3
end
if redis.call('SCARD', KEYS[2]) >= tonumber(ARGV[6]) then return -2 end
redis.call('SADD', KEYS[2], ARGV[5])
redis.call('HINCRBY', KEYS[1], per_client, 1)
bump(ARGV[2], ARGV[3])
return 1
""",
    "open": _LUA_BUMP + """
local npolls = tonumber(redis.call('HGET', KEYS[1], 'npolls'))
if npolls >= tonumber(ARGV[7]) then return -2 end
local cur = redis.call('HGET', KEYS[1], 'cur')
if cur ~= '0' then
  local p = cjson.decode(redis.call('HGET', KEYS[3], cur))
  if p.status == 'open' then
    p.status = 'closed'
    redis.call('HSET', KEYS[3], cur, cjson.encode(p))
  end
end
local id = redis.call('HINCRBY', KEYS[1], 'npolls', 1)
redis.call('HSET', KEYS[3], tostring(id), cjson.encode({kind = ARGV[5], spec = ARGV[6],
  status = 'open'}), 'n:' .. id, 0)
redis.call('HSET', KEYS[1], 'cur', id)
bump(ARGV[2], ARGV[3])
return id
""",
    "answer": _LUA_BUMP + """
if redis.call('SISMEMBER', KEYS[2], ARGV[6]) == 0 then return -3 end
local raw = redis.call('HGET', KEYS[3], ARGV[5])
if not raw then return -4 end
if cjson.decode(raw).status ~= 'open' then return -5 end
local field = ARGV[5] .. ':' .. ARGV[6]
local new = 0
if redis.call('HEXISTS', KEYS[4], field) == 0 then
  if tonumber(redis.call('HGET', KEYS[1], 'nanswers')) >= tonumber(ARGV[8]) then return -2 end
  redis.call('HINCRBY', KEYS[1], 'nanswers', 1)
  redis.call('HINCRBY', KEYS[3], 'n:' .. ARGV[5], 1)
  new = 1
end
redis.call('HSET', KEYS[4], field, ARGV[7])
bump(ARGV[2], ARGV[3])
return new
""",
    "lock": _LUA_BUMP + """
local raw = redis.call('HGET', KEYS[3], ARGV[5])
if not raw then return -4 end
local p = cjson.decode(raw)
if p.status ~= 'open' and p.status ~= 'revealing' then return -5 end
p.status = 'revealing'
redis.call('HSET', KEYS[3], ARGV[5], cjson.encode(p))
return bump(ARGV[2], ARGV[3])
""",
    "reveal": _LUA_BUMP + """
local raw = redis.call('HGET', KEYS[3], ARGV[5])
if not raw then return -4 end
local p = cjson.decode(raw)
if p.status ~= 'revealing' then return -5 end
p.status = 'revealed'
p.reveal = ARGV[6]
redis.call('HSET', KEYS[3], ARGV[5], cjson.encode(p))
return bump(ARGV[2], ARGV[3])
""",
}
VERSION_FRESH_SECONDS = 10.0     # a version heard on the channel is trusted this long
# ... and only while the listener has heard from Redis (a message or the answer to its ping)
# this recently: a frozen Redis or a dead connection stops the trust within CONTACT_SECONDS.
PING_SECONDS = 0.5
CONTACT_SECONDS = 1.5
DROP_SECONDS = 5.0               # no word for this long: the listener connects again
RECONNECT_SECONDS = (0.1, 1.0)   # the listener's wait before connecting again: first, longest
# Every Redis call gives up after STORE_TIMEOUT_SECONDS (connecting or reading), without
# retrying; after a failure, calls answer Unavailable at once for DOWN_SECONDS, then one call
# tries Redis again while the others still answer at once (a frozen Redis does not hold a
# waitress thread per follower's poll).
STORE_TIMEOUT_SECONDS = 1.0
DOWN_SECONDS = 1.0


class RedisStore:
    """The shared store: Redis (the `redis` package). Changes are Lua scripts (atomic); each
    process keeps the versions it hears on the updates channel, so a follower's poll for an
    unchanged session is answered 304 without asking Redis."""

    kind = "redis"

    def __init__(self, url: str, idle: float, prefix: str = "llmx:class:", unjoined=None,
                 remember: float = REMEMBER_SECONDS):
        import redis
        self.url = url
        self.idle = idle
        self.remember = remember
        self.unjoined = idle if unjoined is None else min(unjoined, idle)
        self.prefix = prefix
        self.channel = prefix + "updates"
        self._failures = (redis.ConnectionError, redis.TimeoutError)
        self.r = self._client()
        try:
            self.r.ping()                           # fail at start, not at the first class
        except self._failures as e:
            raise Unavailable(e) from e
        self._sub = self._client()                  # the listener's own connection
        self._scripts = {name: self.r.register_script(src) for name, src in _LUA.items()}
        self._heard = {}                  # code -> (version, or None once ended; when heard)
        self._heard_lock = threading.Lock()
        self._generation = 0              # + 1 whenever the listener may have missed a message
        self._contact = 0.0               # when the listener last heard from Redis
        self._pid = None
        self._listening = threading.Event()
        self._lock = threading.Lock()
        self._closed = False
        self._down_until = 0.0            # > 0: a call failed; see DOWN_SECONDS
        self._probe = threading.RLock()

    def _client(self):
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry
        return redis.Redis.from_url(self.url, decode_responses=True,
                                    socket_timeout=STORE_TIMEOUT_SECONDS,
                                    socket_connect_timeout=STORE_TIMEOUT_SECONDS,
                                    retry=Retry(NoBackoff(), 0))

    def _answer(self, method, args, kwargs):
        """Every interface method runs here (see _guarded at the end of the module): Redis's
        connection errors and timeouts become Unavailable (503), and while Redis is failing
        only one call at a time waits for it."""
        probing = failed = False
        if self._down_until:
            if time.monotonic() < self._down_until or not self._probe.acquire(blocking=False):
                raise Unavailable()
            probing = True
        try:
            return method(self, *args, **kwargs)
        except self._failures as e:
            failed = True
            self._down_until = time.monotonic() + DOWN_SECONDS
            raise Unavailable(e) from e
        finally:
            if probing:
                if not failed:                       # Redis answered (Gone and Full too)
                    self._down_until = 0.0
                self._probe.release()

    def describe(self) -> str:
        return f"Redis {self.url}"

    def _keys(self, code):
        s = f"{self.prefix}s:{code}"
        return [s, s + ":m", s + ":p", s + ":a", self.prefix + "active", self.prefix + "k:" + code]

    def _run(self, name, code, now, *args):
        result = self._scripts[name](keys=self._keys(code), args=[
            code, repr(now), int(self.idle * 1000), self.channel, *args])
        if result == -1:
            raise Gone(GONE)
        return result

    # -- the listener: versions published by every process of every instance ------------------

    def _listen(self):
        """Started once per process (after the fork): keeps self._heard up to date."""
        with self._lock:
            if self._pid == os.getpid():
                return
            self._pid = os.getpid()
            self._heard = {}
            self._listening.clear()
        threading.Thread(target=self._listener, name="classroom-redis-updates",
                         daemon=True).start()

    def _listener(self):
        """Hears "<code> <version>" and "<code> ended" on the updates channel, and pings Redis
        when nothing comes, so that version() knows how recent its word is. A lost connection
        forgets what was heard (messages may have been missed) and connects again after
        RECONNECT_SECONDS (doubling from the first to the longest)."""
        wait, pruned = RECONNECT_SECONDS[0], time.monotonic()
        while not self._closed:
            pubsub = None
            try:
                pubsub = self._sub.pubsub()
                pubsub.subscribe(self.channel)
                last = pinged = time.monotonic()
                while not self._closed:
                    message = pubsub.get_message(timeout=PING_SECONDS)
                    t = time.monotonic()
                    if message is not None:              # any word: Redis answers
                        last = self._contact = t
                        if message["type"] == "subscribe":
                            with self._heard_lock:       # what was missed: ask Redis again
                                self._heard = {}
                                self._generation += 1
                            self._listening.set()
                            wait = RECONNECT_SECONDS[0]
                        elif message["type"] == "message":
                            self._hear(str(message["data"]), t)
                    if t - last > DROP_SECONDS:
                        raise TimeoutError("no word from Redis")
                    if t - pinged >= PING_SECONDS:
                        pubsub.ping("listening")
                        pinged = t
                    if t - pruned > 60:                  # stale entries are asked again anyway
                        pruned = t
                        with self._heard_lock:
                            self._heard = {c: h for c, h in self._heard.items()
                                           if t - h[1] < VERSION_FRESH_SECONDS}
            except Exception:                        # noqa: BLE001 - a lost connection
                pass
            finally:
                self._listening.clear()
                with self._heard_lock:
                    self._generation += 1
                if pubsub is not None:
                    try:
                        pubsub.close()
                    except Exception:                # noqa: BLE001 - already gone
                        pass
            if not self._closed:
                time.sleep(wait)
                wait = min(2 * wait, RECONNECT_SECONDS[1])

    def _hear(self, data, t):
        code, _, version = data.partition(" ")
        with self._heard_lock:
            if version == "ended":                   # version() answers None at once
                self._heard[code] = (None, t)
            elif version.isdigit():
                cur = self._heard.get(code)
                v = int(version)
                self._heard[code] = (max(v, cur[0]) if cur and cur[0] is not None else v, t)

    def version(self, code, now):
        """The session's version (None: ended, expired or unknown), from what the listener
        heard while it is in contact with Redis, else from Redis. What Redis answers is kept
        only if the listener missed nothing meanwhile (same generation) and heard nothing newer:
        a read that raced with a change or the end never hides it."""
        self._listen()
        t = time.monotonic()
        with self._heard_lock:
            heard = self._heard.get(code)
            generation = self._generation
        trusted = self._listening.is_set() and t - self._contact < CONTACT_SECONDS
        if heard and trusted and t - heard[1] < VERSION_FRESH_SECONDS:
            return heard[0]
        v = self.r.hget(self._keys(code)[0], "version")
        v = None if v is None else int(v)
        with self._heard_lock:
            cur = self._heard.get(code)
            fresh = cur is not None and time.monotonic() - cur[1] < VERSION_FRESH_SECONDS
            if fresh and cur[0] is None:
                return None                          # it ended after Redis was read
            if generation != self._generation:
                return v
            if v is None:
                if cur is not None and cur[0] is not None:
                    del self._heard[code]            # expired: nothing is published
            elif cur is None or not fresh or cur[0] is None or v >= cur[0]:
                self._heard[code] = (v, time.monotonic())
            else:
                return cur[0]                        # the listener heard a newer one
        return v

    # -- the interface ------------------------------------------------------------------------

    def create(self, code, teacher_hash, state, now, max_sessions, client="",
               max_per_client=None):
        s, _, _, _, active, _ = self._keys(code)
        pipe = self.r.pipeline()
        pipe.zremrangebyscore(active, "-inf", now - self.idle)
        pipe.execute()
        # Sessions that ended sooner (nobody joined them, or the teacher ended them) leave the
        # count of live ones and of their client's here, before the caps are checked.
        ok = self.r.eval("""
local function live(c) return redis.call('EXISTS', ARGV[7] .. 's:' .. c) == 1 end
for _, c in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  if not live(c) then redis.call('ZREM', KEYS[2], c) end
end
local mine = 0
for _, c in ipairs(redis.call('SMEMBERS', KEYS[3])) do
  if live(c) then mine = mine + 1 else redis.call('SREM', KEYS[3], c) end
end
if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
if tonumber(ARGV[9]) >= 0 and mine >= tonumber(ARGV[9]) then return -3 end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) then return -2 end
redis.call('HSET', KEYS[1], 'teacher', ARGV[2], 'state', ARGV[3], 'version', 1,
  'created', ARGV[4], 'touched', ARGV[4], 'npolls', 0, 'nanswers', 0, 'cur', 0,
  'unjoined', ARGV[8], 'client', ARGV[10], 'remember', ARGV[11])
redis.call('PEXPIRE', KEYS[1], ARGV[8])
redis.call('SET', KEYS[4], 1, 'PX', ARGV[8] + ARGV[11])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('PEXPIRE', KEYS[3], ARGV[6])
return 1""", 4, s, active, f"{self.prefix}cl:{client}", self._keys(code)[5], code,
            teacher_hash, state, repr(now), max_sessions, int(self.idle * 1000), self.prefix,
            int(self.unjoined * 1000), -1 if max_per_client is None else max_per_client, client,
            int(self.remember * 1000))
        if ok == -1:
            raise CodeTaken("code in use")
        if ok == -3:
            raise Full(too_many_sessions(max_per_client))
        if ok == -2:
            raise Full(f"This server already runs {max_sessions} class sessions, its limit; "
                       "try again when one has ended.")

    def session(self, code, now):
        s, m, p, _, _, _ = self._keys(code)
        pipe = self.r.pipeline(transaction=True)
        pipe.hgetall(s)
        pipe.scard(m)
        pipe.hgetall(p)
        head, members, polls = pipe.execute()
        if not head:
            return None
        poll = None
        cur = head.get("cur", "0")
        if cur != "0" and cur in polls:
            d = json.loads(polls[cur])
            poll = poll_summary(cur, d["kind"], d["spec"], d["status"], d.get("reveal"),
                                 polls.get(f"n:{cur}", 0))
        return dict(code=code, teacher=head["teacher"], state=head["state"],
                    version=int(head["version"]), members=members, poll=poll)

    def set_state(self, code, state, now) -> int:
        return self._run("state", code, now, state)

    def join(self, code, student, now, max_members, client="", max_per_client=None) -> bool:
        n = self._run("join", code, now, student, max_members, client,
                      -1 if max_per_client is None else max_per_client)
        if n == -3:
            raise Full(too_many_members(max_per_client))
        if n == -2:
            raise Full(f"This class is full: {max_members} people have joined, the limit of "
                       "one session.")
        return n == 1

    def is_member(self, code, student) -> bool:
        return bool(self.r.sismember(self._keys(code)[1], student))

    def open_poll(self, code, kind, spec, now, max_polls) -> int:
        n = self._run("open", code, now, kind, spec, max_polls)
        if n == -2:
            raise Full(f"This session has run {max_polls} polls, the limit of one session; "
                       "start a new session for more.")
        return n

    def answer(self, code, poll_id, student, value, now, max_answers) -> bool:
        n = self._run("answer", code, now, str(poll_id), student, value, max_answers)
        if n == -3:
            raise NotMember("Join the class first.")
        if n == -4:
            raise Closed("There is no such poll.")
        if n == -5:
            raise Closed("This poll is closed: its answer has been revealed or another poll "
                         "has started.")
        if n == -2:
            raise Full(f"This session holds {max_answers} answers, the limit of one session.")
        return n == 1

    def answers(self, code, poll_id) -> list:
        a = self._keys(code)[3]
        return [v for _, v in self.r.hscan_iter(a, match=f"{poll_id}:*", count=500)]

    def mine(self, code, poll_id, student):
        return self.r.hget(self._keys(code)[3], f"{poll_id}:{student}")

    def lock(self, code, poll_id, now):
        if self._run("lock", code, now, str(poll_id)) in (-4, -5):
            raise Closed("Only the open poll can be revealed.")

    def reveal(self, code, poll_id, reveal, now) -> int:
        n = self._run("reveal", code, now, str(poll_id), reveal)
        if n in (-4, -5):
            raise Closed("Only the open poll can be revealed.")
        return n

    def end(self, code):
        keys = self._keys(code)
        pipe = self.r.pipeline()
        pipe.delete(*keys[:4])
        pipe.zrem(keys[4], code)
        pipe.set(keys[5], 1, px=int(self.remember * 1000))
        pipe.publish(self.channel, f"{code} ended")
        pipe.execute()
        self._hear(f"{code} ended", time.monotonic())

    def known(self, code, now) -> bool:
        """Whether `code` names a session that exists or ended less than `remember` seconds ago
        (its K key outlives the session's by that long)."""
        s, *_, k = self._keys(code)
        return self.r.exists(s, k) > 0

    def expire(self, now) -> int:
        """The keys expire by themselves; this drops ended sessions from the count of live
        ones."""
        return self.r.zremrangebyscore(self.prefix + "active", "-inf", now - self.idle)

    def count_join_failure(self, client, now, window) -> int:
        key = f"{self.prefix}jf:{client}"
        pipe = self.r.pipeline()
        pipe.incr(key)
        pipe.expire(key, int(window), nx=True)
        return pipe.execute()[0]

    def join_failures(self, client, now, window) -> int:
        return int(self.r.get(f"{self.prefix}jf:{client}") or 0)

    def close(self):
        self._closed = True
        self.r.close()
        self._sub.close()



guarded(RedisStore, RedisStore._answer)
