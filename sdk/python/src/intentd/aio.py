"""The asyncio client: AsyncClient has Client's surface with coroutines.

It speaks HTTP/1.1 itself over asyncio streams (a keep-alive pool per node)
rather than running http.client in the default executor: a do() call may
long-poll for up to a minute (another owner in flight, an approval), and
the default executor has only min(32, cpus + 4) threads, so a few dozen
waiting calls would starve every other call of the process. Over streams a
waiting call costs a socket and a suspended coroutine, no thread.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import logging
import ssl
import time
from typing import Any, Awaitable, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, TypeVar, Union
from urllib.parse import urlsplit

from . import _api
from ._api import UNSET, Call
from ._core import (DEFAULT_BACKOFF_BASE, DEFAULT_BACKOFF_MAX, DEFAULT_DISCOVERY_REFRESH, DEFAULT_MAX_WAIT,
                    DEFAULT_RATE_LIMIT_WAIT, DEFAULT_REPORT_TIMEOUT, DEFAULT_RETRIES, DEFAULT_TIMEOUT,
                    DISCOVERY_PROBE_TIMEOUT, IDLE_CONN_MAX_AGE, MAX_IDLE_PER_NODE, MAX_LONG_POLL, USER_AGENT, Request,
                    Route, TLSArg, encode_json, left, new_owner, normalize_addr, route_from_status, seconds)
from ._decorate import CallSpec, KeySpec, reset_grant, set_grant
from ._sync import as_outcome_unknown, can_retry, is_rate_limited, transient, transport_error
from .client import (_Settings, attach, check_effect, gave_up, in_flight_wait, lease_of, pending_error, recorded,
                     setattr_quiet)
from .errors import (BadRequest, EffectUnknown, Fenced, InDoubt, InFlight, IntentdError, InvalidState, NoLeader,
                     NotFound, OutcomeUnknown, Problem, Unavailable, error_result, maybe_applied, parse_problem,
                     retryable)
from .types import (AuditTrail, ClaimResult, ClusterStatus, EffectResult, Grant, Health, Intent, IntentResult,
                    ListPage, Outcome, Policy, State, Status, TokenVerification)

__all__ = ["AsyncClient"]

log = logging.getLogger("intentd")

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


class _Conn:
    __slots__ = ("reader", "writer", "at")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.at = time.monotonic()

    def close(self) -> None:
        try:
            self.writer.close()
        except Exception:  # noqa: BLE001 - already gone
            pass


class _StaleConnection(ConnectionError):
    """The node closed a kept-alive connection before answering."""


class _AsyncPool:
    def __init__(self, base: str, ssl_ctx: Optional[ssl.SSLContext], max_idle: int) -> None:
        u = urlsplit(base)
        self.https = u.scheme == "https"
        self.host = u.hostname or ""
        self.port = u.port or (443 if self.https else 80)
        self.netloc = u.netloc
        self.prefix = u.path.rstrip("/")
        self.ssl_ctx = ssl_ctx
        self.max_idle = max_idle
        self.idle: List[_Conn] = []

    def get(self) -> Optional[_Conn]:
        now = time.monotonic()
        while self.idle:
            c = self.idle.pop()
            if now - c.at < IDLE_CONN_MAX_AGE and not c.reader.at_eof():
                return c
            c.close()
        return None

    async def open(self) -> _Conn:
        ctx = None
        if self.https:
            ctx = self.ssl_ctx or ssl.create_default_context()
        reader, writer = await asyncio.open_connection(self.host, self.port, ssl=ctx,
                                                       server_hostname=self.host if ctx else None, limit=1 << 20)
        return _Conn(reader, writer)

    def put(self, c: _Conn) -> None:
        if len(self.idle) < self.max_idle:
            c.at = time.monotonic()
            self.idle.append(c)
        else:
            c.close()

    def close(self) -> None:
        idle, self.idle = self.idle, []
        for c in idle:
            c.close()


async def _read_response(reader: asyncio.StreamReader) -> Tuple[int, Dict[str, str], bytes, bool]:
    line = await reader.readline()
    if not line:
        raise _StaleConnection("the connection was closed before an answer")
    parts = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/"):
        raise ConnectionError("bad status line %r" % line[:80])
    version, status = parts[0], int(parts[1])
    headers: Dict[str, str] = {}
    while True:
        h = await reader.readline()
        if not h:
            raise ConnectionError("the connection was closed in the headers")
        if h in (b"\r\n", b"\n"):
            break
        name, _, value = h.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    conn_hdr = headers.get("connection", "").lower()
    will_close = conn_hdr == "close" or (version == "HTTP/1.0" and conn_hdr != "keep-alive")
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks = []
        while True:
            size_line = await reader.readline()
            if not size_line:
                raise ConnectionError("the connection was closed in a chunked body")
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while True:  # trailers
                    t = await reader.readline()
                    if t in (b"\r\n", b"\n", b""):
                        break
                break
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
        body = b"".join(chunks)
    elif "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif status in (204, 304) or 100 <= status < 200:
        body = b""
    else:
        body = await reader.read()
        will_close = True
    return status, headers, body, will_close


class AsyncTransport:
    """SyncTransport's logic over asyncio streams. Use one AsyncClient per
    event loop (a new loop drops the old loop's connections)."""

    def __init__(self, seeds: List[str], *, api_key: Optional[str], timeout: float,
                 ssl_ctx: Optional[ssl.SSLContext], retries: int, backoff: Any, discovery: bool,
                 discovery_refresh: float, rate_limit_wait: float, max_idle: int, user_agent: str) -> None:
        self.seeds = seeds
        self.api_key = api_key
        self.timeout = timeout
        self.ssl_ctx = ssl_ctx
        self.retries = retries
        self.backoff = backoff
        self.discovery = discovery
        self.discovery_refresh = discovery_refresh
        self.rate_limit_wait = rate_limit_wait
        self.max_idle = max_idle
        self.user_agent = user_agent
        self.probe_timeout = DISCOVERY_PROBE_TIMEOUT
        self.route = Route(0, list(seeds), "", time.monotonic())
        self._pools: Dict[str, _AsyncPool] = {}
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._discovery_lock: Optional[asyncio.Lock] = None
        self.sent = 0

    def _bind(self) -> None:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            for p in self._pools.values():
                p.idle = []  # their transports belong to the old loop
            self._pools = {}
            self._loop = loop
            self._discovery_lock = asyncio.Lock()

    def _pool(self, base: str) -> _AsyncPool:
        p = self._pools.get(base)
        if p is None:
            p = self._pools[base] = _AsyncPool(base, self.ssl_ctx, self.max_idle)
        return p

    def close(self) -> None:
        for p in self._pools.values():
            p.close()
        self._pools = {}

    async def once(self, base: str, req: Request) -> Tuple[int, Any]:
        self._bind()
        pool = self._pool(base)
        timeout = (self.probe_timeout if req.probe else self.timeout) + req.extra_timeout
        rem = left(req.deadline)
        if rem is not None:
            if rem <= 0:
                raise transport_error(Unavailable, "%s %s: the call's time is up" % (req.method, base + req.path))
            timeout = min(timeout, rem)
        headers = req.header_lines(pool.netloc, self.api_key, self.user_agent)
        head = "%s %s HTTP/1.1\r\n" % (req.method, pool.prefix + req.target())
        head += "".join("%s: %s\r\n" % kv for kv in headers.items()) + "\r\n"
        payload = head.encode("latin-1") + (req.body or b"")
        where = "%s %s%s" % (req.method, base, req.path)
        maybe_sent = False
        for fresh_try in (0, 1):
            conn = pool.get()
            reused = conn is not None
            stage = ["connect"]
            try:
                if conn is None:
                    conn = await asyncio.wait_for(pool.open(), timeout)
            except (OSError, asyncio.TimeoutError, ssl.SSLError) as e:
                kind = OutcomeUnknown if maybe_sent else Unavailable
                raise transport_error(kind, "%s: %s" % (where, _describe(e))) from e
            self.sent += 1
            c = conn

            async def exchange() -> Tuple[int, Dict[str, str], bytes, bool]:
                stage[0] = "write"
                c.writer.write(payload)
                await c.writer.drain()
                stage[0] = "read"
                return await _read_response(c.reader)

            try:
                status, rh, data, will_close = await asyncio.wait_for(exchange(), timeout)
            except asyncio.CancelledError:
                c.close()
                raise
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError, ssl.SSLError) as e:
                c.close()
                wrote = stage[0] == "read"
                if reused and fresh_try == 0 and isinstance(e, (_StaleConnection, ConnectionResetError,
                                                                BrokenPipeError, asyncio.IncompleteReadError)):
                    maybe_sent = maybe_sent or (req.write and wrote)
                    continue
                kind = OutcomeUnknown if req.write and (wrote or maybe_sent) else Unavailable
                raise transport_error(kind, "%s: %s" % (where, _describe(e))) from e
            if will_close:
                c.close()
            else:
                pool.put(c)
            break
        if 200 <= status < 300:
            try:
                doc = json.loads(data.decode("utf-8")) if data else None
            except (ValueError, UnicodeDecodeError) as e:
                kind = OutcomeUnknown if req.write else Unavailable
                raise transport_error(kind, "%s: decoding the %d answer: %s" % (where, status, e)) from e
            return status, doc
        p = parse_problem(status, rh, data)
        if req.write and status in (502, 504):
            raise as_outcome_unknown(p)
        raise p

    def endpoints(self) -> List[str]:
        rt = self.route
        n = len(rt.addrs)
        return [rt.addrs[(rt.preferred + i) % n] for i in range(n)]

    async def current_route(self, deadline: Optional[float]) -> Route:
        rt = self.route
        if not self.discovery or (rt.version > 0 and time.monotonic() - rt.at < self.discovery_refresh):
            return rt
        return await self.rediscover(rt, deadline)

    async def rediscover(self, seen: Route, deadline: Optional[float]) -> Route:
        self._bind()
        assert self._discovery_lock is not None
        async with self._discovery_lock:
            cur = self.route
            if cur is not seen:
                return cur
            nxt = await self._discover(seen, deadline)
            self.route = nxt
            return nxt

    async def _discover(self, cur: Route, deadline: Optional[float]) -> Route:
        now = time.monotonic()
        nxt = Route(cur.version + 1, cur.addrs, cur.leader, now, cur.preferred)
        budget = self.probe_timeout * len(cur.addrs)
        rem = left(deadline)
        if rem is not None:
            budget = min(budget, rem / 2)
        end = now + budget
        found: Optional[Route] = None
        n = len(cur.addrs)
        for i in range(n):
            base = cur.addrs[(cur.preferred + i) % n]
            if time.monotonic() >= end:
                break
            try:
                _, doc = await self.once(base, Request("GET", "/v1/cluster", probe=True, deadline=end))
            except Problem:
                continue
            st = ClusterStatus.from_dict(doc if isinstance(doc, dict) else {})
            r = route_from_status(self.seeds, base, st)
            if r is None:
                continue
            candidate = Route(nxt.version, r[0], r[1], now, 0)
            if st.ready:
                found = candidate
                break
            if found is None:
                found = candidate
        return found if found is not None else nxt

    async def call(self, req: Request) -> Tuple[int, Any]:
        if req.addr:
            return await self.once(req.addr, req)
        rt = await self.current_route(req.deadline)
        idx = rt.preferred % len(rt.addrs)
        attempts = self.retries + 1
        tries = 0
        attempt = 0
        unknown = False
        rate_end = time.monotonic() + self.rate_limit_wait
        last: Optional[Problem] = None
        while True:
            base = rt.addrs[idx]
            try:
                out = await self.once(base, req)
                rt.preferred = idx
                return out
            except Problem as err:
                last = err
            if req.write and maybe_applied(last):
                unknown = True
            retry = can_retry(last)
            limited = is_rate_limited(last)
            if not limited:
                tries += 1
                if tries >= attempts:
                    retry = False
            if not retry:
                break
            wait = self.backoff(attempt, last.retry_after)
            attempt += 1
            rem = left(req.deadline)
            if rem is not None:
                if rem <= 0:
                    break
                wait = min(wait, rem)
            if limited and time.monotonic() + wait > rate_end:
                break
            await asyncio.sleep(wait)
            if req.deadline is not None and time.monotonic() >= req.deadline:
                break  # the last answer says more than "time is up"
            if limited:
                continue
            nxt = (idx + 1) % len(rt.addrs)
            if self.discovery:
                nrt = await self.rediscover(rt, req.deadline)
                if nrt is not rt:
                    rt = nrt
                    nxt = rt.preferred % len(rt.addrs)
                    if rt.addrs[nxt] == base and len(rt.addrs) > 1:
                        nxt = (nxt + 1) % len(rt.addrs)
            idx = nxt
        assert last is not None
        if unknown and not isinstance(last, OutcomeUnknown) and transient(last):
            raise as_outcome_unknown(last, "an earlier attempt may have been applied: %s" % last) from last
        raise last


def _describe(e: BaseException) -> str:
    if isinstance(e, asyncio.TimeoutError):
        return "timed out"
    s = str(e)
    return "%s: %s" % (type(e).__name__, s) if s else type(e).__name__


class AsyncClient:
    """Client for asyncio: the same options, calls and do() contract, as
    coroutines. do() takes an ``async def fn(grant)``; the lease is renewed
    by a task, and a refused renewal sets grant.cancelled and cancels fn's
    task (the asyncio form of Go cancelling fn's context): do() then records
    nothing and raises the refusal (Fenced or InDoubt). Cancelling do()
    itself while fn runs cancels fn and records nothing."""

    def __init__(self, addrs: Union[str, Sequence[str]], api_key: Optional[str] = None,
                 timeout: float = DEFAULT_TIMEOUT, tls: TLSArg = None, *, retries: int = DEFAULT_RETRIES,
                 backoff_base: float = DEFAULT_BACKOFF_BASE, backoff_max: float = DEFAULT_BACKOFF_MAX,
                 discovery: bool = True, discovery_refresh: float = DEFAULT_DISCOVERY_REFRESH,
                 max_wait: float = DEFAULT_MAX_WAIT, report_timeout: float = DEFAULT_REPORT_TIMEOUT,
                 approval_wait: Optional[float] = None, auto_commit: bool = True,
                 rate_limit_wait: float = DEFAULT_RATE_LIMIT_WAIT, max_idle_per_node: int = MAX_IDLE_PER_NODE,
                 user_agent: str = USER_AGENT) -> None:
        s = self._s = _Settings(addrs, api_key, timeout, tls, retries, backoff_base, backoff_max, discovery,
                                discovery_refresh, max_wait, report_timeout, approval_wait, auto_commit,
                                rate_limit_wait, max_idle_per_node, user_agent)
        self._t = AsyncTransport(s.seeds, api_key=s.api_key, timeout=s.timeout, ssl_ctx=s.ssl_ctx,
                                 retries=s.retries, backoff=s.backoff, discovery=s.discovery,
                                 discovery_refresh=s.discovery_refresh, rate_limit_wait=s.rate_limit_wait,
                                 max_idle=s.max_idle, user_agent=s.user_agent)

    async def aclose(self) -> None:
        """Closes the idle connections."""
        self._t.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    @property
    def addrs(self) -> List[str]:
        return list(self._s.seeds)

    @property
    def leader(self) -> str:
        return self._t.route.leader

    def endpoints(self) -> List[str]:
        return self._t.endpoints()

    async def discover(self) -> str:
        rt = await self._t.rediscover(self._t.route, None)
        if not rt.leader:
            raise NoLeader(detail="discovery: no node named a leader")
        return rt.leader

    async def _run(self, call: Call[T], deadline: Optional[float] = None) -> T:
        req, parse = call
        if deadline is not None:
            req.deadline = deadline
        status, doc = await self._t.call(req)
        return parse(status, doc)

    # -- intents (see Client for each call's contract) -----------------------------

    async def claim(self, key: str, tool: str, payload: Any = None, owner: Optional[str] = None,
                    policy: Optional[str] = None, lease: Any = None) -> ClaimResult:
        return await self._run(_api.claim(key, tool, payload, owner or new_owner(), policy, lease))

    async def complete(self, key: str, owner: str, fencing_token: int, outcome: str = Outcome.EXECUTED,
                       result: Any = UNSET) -> IntentResult:
        return await self._run(_api.complete(key, owner, fencing_token, outcome, result))

    async def renew(self, key: str, owner: str, fencing_token: int, lease: Any) -> IntentResult:
        return await self._run(_api.renew(key, owner, fencing_token, lease))

    async def commit(self, key: str, owner: str) -> IntentResult:
        return await self._run(_api.commit(key, owner))

    async def resolve(self, key: str, outcome: str, result: Any = UNSET, actor: str = "",
                      reason: str = "") -> IntentResult:
        return await self._run(_api.resolve(key, outcome, result, actor, reason))

    async def approve(self, key: str, actor: str = "", reason: str = "", fingerprint: str = "") -> IntentResult:
        return await self._run(_api.decide(key, True, actor, reason, fingerprint))

    async def reject(self, key: str, actor: str = "", reason: str = "", fingerprint: str = "") -> IntentResult:
        return await self._run(_api.decide(key, False, actor, reason, fingerprint))

    async def get(self, key: str, *, stale: bool = False, wait: Any = None, after_version: int = 0) -> Intent:
        return await self._run(_api.get(key, stale, wait, after_version))

    async def wait(self, key: str, after_version: int, wait: Any = 30.0) -> Intent:
        return await self.get(key, wait=wait, after_version=after_version)

    async def list(self, *, state: Optional[str] = None, prefix: Optional[str] = None, limit: int = 0,
                   cursor: Optional[str] = None, stale: bool = False) -> ListPage:
        return await self._run(_api.list_intents(state, prefix, limit, cursor, stale))

    async def approvals(self, *, prefix: Optional[str] = None, limit: int = 0,
                        cursor: Optional[str] = None) -> ListPage:
        return await self.list(state=State.PENDING_APPROVAL, prefix=prefix, limit=limit, cursor=cursor)

    async def audit(self, key: str) -> AuditTrail:
        return await self._run(_api.audit(key))

    async def verify_token(self, execution_token: str, payload: Any = UNSET,
                           fingerprint: str = "") -> TokenVerification:
        return await self._run(_api.verify_token(execution_token, payload, fingerprint))

    async def put_policy(self, policy: Policy, expect_version: int = 0) -> Policy:
        return await self._run(_api.put_policy(policy, expect_version))

    async def policy(self, name: str) -> Policy:
        return await self._run(_api.get_policy(name))

    get_policy = policy

    async def policies(self) -> List[Policy]:
        return await self._run(_api.list_policies())

    async def delete_policy(self, name: str) -> None:
        await self._run(_api.delete_policy(name))

    async def jwks(self) -> Dict[str, Any]:
        return await self._run(_api.jwks())

    async def cluster(self) -> ClusterStatus:
        return await self._run(_api.cluster())

    async def health(self, addr: Optional[str] = None) -> Health:
        base = normalize_addr(addr) if addr else self._s.seeds[0]
        h = Health(addr=base)
        await self._t.call(Request("GET", "/healthz", addr=base))
        h.live = True
        try:
            await self._t.call(Request("GET", "/readyz", addr=base))
            h.ready = True
        except Problem as e:
            if e.code != "not_ready":
                raise
            h.detail = e.detail
        return h

    # -- do -------------------------------------------------------------------------

    async def do(self, key: str, tool: str, payload: Any, fn: Callable[[Grant], Any], *, lease: Any = None,
                 policy: Optional[str] = None, owner: Optional[str] = None, wait_approval: Any = None,
                 max_wait: Any = None) -> EffectResult:
        """Client.do for asyncio: fn is ``async def fn(grant)`` (a plain
        function is called in the event loop)."""
        raw = check_effect(key, tool, payload, fn)
        lease_s = seconds(lease, "lease")
        mw = self._s.max_wait if max_wait is None else seconds(max_wait, "max_wait") or 0.0
        aw = self._s.approval_wait if wait_approval is None else seconds(wait_approval, "wait_approval") or 0.0
        fresh = not owner
        own = owner or new_owner()
        resp = await self._settle_claim(key, tool, raw, own, policy, lease_s, fresh, mw, aw)
        if resp.status == Status.GRANTED:
            return await self._execute(key, resp, lease_s, fn)
        if resp.status == Status.DUPLICATE:
            return EffectResult(status=Status.DUPLICATE, result=resp.intent.result if resp.intent else None,
                                intent=resp.intent, owner=own)
        if resp.status == Status.PENDING_APPROVAL:
            raise pending_error(resp, aw)
        raise IntentdError("claim %r: unexpected status %r" % (key, resp.status))

    async def _settle_claim(self, key: str, tool: str, raw: Optional[bytes], owner: str, policy: Optional[str],
                            lease_s: Optional[float], fresh: bool, max_wait: float,
                            approval_wait: float) -> ClaimResult:
        deadline = time.monotonic() + max_wait
        approval_end: Optional[float] = None
        unknown = False
        released = False
        attempt = 0
        while True:
            try:
                resp = await self._run(_api.claim(key, tool, raw, owner, policy, lease_s))
            except InFlight as err:
                unknown = False
                rem = deadline - time.monotonic()
                if rem <= 0:
                    raise
                await self._wait_change(key, err.intent.version if err.intent else 0, in_flight_wait(err, rem))
                continue
            except InDoubt as err:
                if not (fresh and not released and err.intent is not None and err.intent.owner == owner):
                    raise
                _, result = error_result(RuntimeError(
                    "the claim's answer was lost and its lease passed; the effect never ran"))
                await self._report(key, owner, err.intent.fencing_token, Outcome.FAILED, result)
                released, unknown = True, False
                continue
            except Problem as err:
                if not retryable(err):
                    raise
                if maybe_applied(err) or isinstance(err, OutcomeUnknown):
                    unknown = True
                rem = deadline - time.monotonic()
                if rem <= 0:
                    final = gave_up(err, unknown, key)
                    if final is err:
                        raise
                    raise final from err
                await asyncio.sleep(min(self._s.backoff(attempt, err.retry_after), rem))
                attempt += 1
                continue
            if resp.status == Status.PENDING_APPROVAL and approval_wait > 0:
                if approval_end is None:
                    approval_end = time.monotonic() + approval_wait
                intent = resp.intent
                while intent is not None and intent.state == State.PENDING_APPROVAL:
                    rem = approval_end - time.monotonic()
                    if rem <= 0:
                        return resp
                    intent = await self._wait_change(key, intent.version, min(rem, MAX_LONG_POLL))
                if intent is None and approval_end - time.monotonic() <= 0:
                    return resp
                continue
            return resp

    async def _wait_change(self, key: str, version: int, secs: float) -> Optional[Intent]:
        try:
            return await self.get(key, wait=secs, after_version=version)
        except NotFound:
            return None
        except Problem as err:
            if not retryable(err):
                raise
            await asyncio.sleep(min(self._s.backoff(0, err.retry_after), max(secs, 0.0)))
            return None

    async def _report(self, key: str, owner: str, token: int, outcome: str, result: Optional[bytes],
                      deadline: Optional[float] = None) -> IntentResult:
        if deadline is None:
            deadline = time.monotonic() + self._s.report_timeout
        attempt = 0
        while True:
            try:
                return await self._run(_api.complete(key, owner, token, outcome,
                                                     UNSET if result is None else result), deadline=deadline)
            except Problem as err:
                rem = deadline - time.monotonic()
                if not retryable(err) or rem <= 0:
                    raise
                await asyncio.sleep(min(self._s.backoff(attempt, err.retry_after), rem))
                attempt += 1
                if deadline - time.monotonic() <= 0:
                    raise

    async def _execute(self, key: str, resp: ClaimResult, lease_s: Optional[float],
                       fn: Callable[[Grant], Any]) -> EffectResult:
        g = Grant(key=key, owner=resp.owner, fencing_token=resp.fencing_token,
                  execution_token=resp.execution_token, intent=resp.intent)
        lease = lease_of(lease_s, resp)
        out = EffectResult(ran=True, intent=resp.intent, owner=g.owner, fencing_token=g.fencing_token)
        stop = asyncio.Event()
        fn_task: Optional["asyncio.Future[Any]"] = None
        tok = set_grant(g)
        try:
            try:
                r = fn(g)
                if inspect.isawaitable(r):
                    fn_task = asyncio.ensure_future(r)  # copies the context, grant included
            finally:
                reset_grant(tok)
        except EffectUnknown as e:
            attach(e, out)
            raise
        except Exception as e:
            return await self._failed(key, g, e, out)
        renewer = asyncio.ensure_future(self._keep_alive(g, lease, stop, fn_task))
        try:
            try:
                value = await fn_task if fn_task is not None else r
            finally:
                stop.set()
                try:
                    await renewer  # a renewal under way finishes first
                except asyncio.CancelledError:
                    pass
        except asyncio.CancelledError:
            if g.lost is not None and fn_task is not None and fn_task.cancelled():
                # The grant was lost and fn cancelled: record nothing.
                err = g.lost
                attach(err, out)
                raise err from None
            raise
        except EffectUnknown as e:
            attach(e, out)
            raise
        except Exception as e:
            return await self._failed(key, g, e, out)
        out.value = value
        return await self._record(key, g, value, out)

    async def _failed(self, key: str, g: Grant, e: Exception, out: EffectResult) -> EffectResult:
        _, result = error_result(e)
        try:
            done = await self._report(key, g.owner, g.fencing_token, Outcome.FAILED, result)
        except IntentdError as rerr:
            log.warning("intentd: effect %r failed (%s) and recording that failed: %s", key, e, rerr)
            setattr_quiet(e, "intentd_report_error", rerr)
            attach(e, out)
            raise e
        out.status, out.intent = Status.FAILED, done.intent
        out.result = recorded(done.intent, result)
        attach(e, out)
        raise e

    async def _record(self, key: str, g: Grant, value: Any, out: EffectResult) -> EffectResult:
        deadline = time.monotonic() + self._s.report_timeout
        enc_err: Optional[BadRequest] = None
        try:
            result = encode_json(value, "result")
        except BadRequest as e:
            enc_err, result = e, None
        try:
            try:
                done = await self._report(key, g.owner, g.fencing_token, Outcome.EXECUTED, result, deadline)
            except BadRequest as e:
                if result is None:
                    raise
                enc_err, result = e, None
                done = await self._report(key, g.owner, g.fencing_token, Outcome.EXECUTED, None, deadline)
        except IntentdError as e:
            attach(e, out)
            raise
        out.status, out.intent = Status.EXECUTED, done.intent
        out.result = recorded(done.intent, result)
        if self._s.auto_commit:
            try:
                cr = await self._run(_api.commit(key, g.owner), deadline=deadline)
                if cr.intent is not None:
                    out.intent = cr.intent
            except IntentdError:
                pass
        if enc_err is not None:
            err = BadRequest(detail="effect %r executed and recorded without its result: %s" % (key, enc_err.detail),
                             status=enc_err.status, code=enc_err.code, field="result")
            attach(err, out)
            raise err
        return out

    async def _keep_alive(self, g: Grant, lease: float, stop: asyncio.Event,
                          fn_task: Optional["asyncio.Future[Any]"]) -> None:
        every = max(lease / 3.0, 0.001)
        while True:
            try:
                await asyncio.wait_for(stop.wait(), every)
                return
            except asyncio.TimeoutError:
                pass
            if stop.is_set():
                return
            try:
                await self._run(_api.renew(g.key, g.owner, g.fencing_token, lease),
                                deadline=time.monotonic() + max(lease - every, 0.001))
            except (Fenced, InDoubt, InvalidState, NotFound) as err:
                g._lose(err)
                if fn_task is not None and not fn_task.done():
                    fn_task.cancel()
                return
            except Exception:  # noqa: BLE001 - the next tick tries again
                continue

    # -- decorator ----------------------------------------------------------------------

    def once(self, tool: str, key: Optional[KeySpec] = None, *, payload: Optional[Callable[..., Any]] = None,
             exclude: Iterable[str] = (), lease: Any = None, policy: Optional[str] = None,
             wait_approval: Any = None, max_wait: Any = None) -> Callable[[F], F]:
        """Client.once for ``async def`` functions: the wrapper is an
        ``async def`` with the function's name, docstring and signature."""

        def decorate(fn: F) -> F:
            if not inspect.iscoroutinefunction(fn):
                raise TypeError("AsyncClient.once decorates async def functions; use Client.once for %r"
                                % getattr(fn, "__name__", fn))
            spec = CallSpec(fn, tool, key, payload, exclude)

            @functools.wraps(fn)
            async def wrapper(*args: Any, **kwargs: Any) -> Any:
                k, p = spec.derive(args, kwargs)
                res = await self.do(k, tool, p, lambda _g: fn(*args, **kwargs), lease=lease, policy=policy,
                                    wait_approval=wait_approval, max_wait=max_wait)
                return res.value if res.ran else res.result

            wrapper.__intentd_tool__ = tool  # type: ignore[attr-defined]
            return wrapper  # type: ignore[return-value]

        return decorate
