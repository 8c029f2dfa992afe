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
import logging
import ssl
import time
from typing import Any, Awaitable, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, TypeVar, Union
from urllib.parse import urlsplit

from . import _api
from ._api import UNSET, Call
from ._core import (DEFAULT_BACKOFF_BASE, DEFAULT_BACKOFF_MAX, DEFAULT_DISCOVERY_REFRESH, DEFAULT_MAX_WAIT,
                    DEFAULT_RATE_LIMIT_WAIT, DEFAULT_REPORT_TIMEOUT, DEFAULT_RETRIES, DEFAULT_TIMEOUT,
                    DISCOVERY_PROBE_TIMEOUT, IDLE_CONN_MAX_AGE, MAX_IDLE_PER_NODE, USER_AGENT, Request, Route, TLSArg,
                    TraceInject, left, new_owner, normalize_addr, seconds)
from . import _flow
from ._decorate import CallSpec, KeySpec, reset_grant, set_grant
from ._flow import Attempt, Pause, Run, Step, attach, transport_error
from ._http11 import READ_HEAD, READ_LINE, BadResponse, ReadExactly, Response, read_response, request_bytes
from .client import _Settings, check_effect, lease_of
from .errors import (EffectUnknown, Fenced, InDoubt, InvalidState, NoLeader, NotFound, OutcomeUnknown, Problem,
                     Unavailable)
from .types import (AuditTrail, ClaimResult, ClusterStatus, EffectResult, Grant, Health, Intent, IntentResult,
                    ListPage, Outcome, Policy, State, TokenVerification)

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


async def _read_answer(reader: asyncio.StreamReader, head_only: bool) -> Response:
    """Takes one answer off a connection (_http11's reads)."""
    reads = read_response(head_only)
    arg: Any = None
    while True:
        try:
            step = reads.send(arg)
        except StopIteration as stop:
            return stop.value
        if step is READ_HEAD:
            try:
                arg = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError as e:
                if e.partial:
                    raise BadResponse("the connection was closed in the headers") from None
                arg = b""
        elif step is READ_LINE:
            arg = await reader.readline()
        elif type(step) is ReadExactly:
            arg = await reader.readexactly(step.n)
        else:
            arg = await reader.read()


if hasattr(asyncio, "timeout"):  # Python 3.11+: no task per bounded call
    async def _bounded(aw: Awaitable[T], secs: float) -> T:
        async with asyncio.timeout(secs):  # type: ignore[attr-defined]
            return await aw
else:  # pragma: no cover - Python 3.9 and 3.10
    _bounded = asyncio.wait_for  # type: ignore[assignment]


class AsyncTransport:
    """SyncTransport's logic over asyncio streams. Use one AsyncClient per
    event loop (a new loop drops the old loop's connections)."""

    def __init__(self, seeds: List[str], *, api_key: Optional[str], timeout: float,
                 ssl_ctx: Optional[ssl.SSLContext], retries: int, backoff: Any, discovery: bool,
                 discovery_refresh: float, rate_limit_wait: float, max_idle: int, user_agent: str,
                 trace_inject: Optional[TraceInject] = None) -> None:
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
        self.trace_inject = trace_inject
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
        payload = request_bytes(req.method, pool.prefix + req.target(),
                                req.header_lines(pool.netloc, self.api_key, self.user_agent, self.trace_inject), req.body)
        where = "%s %s%s" % (req.method, base, req.path)
        maybe_sent = False
        for fresh_try in (0, 1):
            conn = pool.get()
            reused = conn is not None
            stage = ["connect"]
            try:
                if conn is None:
                    conn = await _bounded(pool.open(), timeout)
            except (OSError, asyncio.TimeoutError, ssl.SSLError) as e:
                kind = OutcomeUnknown if maybe_sent else Unavailable
                raise transport_error(kind, "%s: %s" % (where, _describe(e))) from e
            self.sent += 1
            c = conn

            async def exchange() -> Response:
                stage[0] = "write"
                c.writer.write(payload)
                await c.writer.drain()
                stage[0] = "read"
                return await _read_answer(c.reader, req.method == "HEAD")

            try:
                status, rh, data, will_close = await _bounded(exchange(), timeout)
            except asyncio.CancelledError:
                c.close()
                raise
            except (OSError, EOFError, asyncio.TimeoutError, ValueError, ssl.SSLError) as e:
                c.close()
                wrote = stage[0] == "read"
                if reused and fresh_try == 0 and isinstance(e, (EOFError, ConnectionResetError, BrokenPipeError)):
                    maybe_sent = maybe_sent or (req.write and wrote)
                    continue
                kind = OutcomeUnknown if req.write and (wrote or maybe_sent) else Unavailable
                raise transport_error(kind, "%s: %s" % (where, _describe(e))) from e
            if will_close:
                c.close()
            else:
                pool.put(c)
            break
        return status, _flow.answer_document(req, where, status, rh, data)

    def endpoints(self) -> List[str]:
        rt = self.route
        n = len(rt.addrs)
        return [rt.addrs[(rt.preferred + i) % n] for i in range(n)]

    async def _perform(self, step: Step) -> Any:
        if type(step) is Attempt:
            return await self.once(step.base, step.req)
        if type(step) is Pause:
            await asyncio.sleep(step.secs)
            return None
        return await self.rediscover(step.seen, step.deadline)

    async def rediscover(self, seen: Route, deadline: Optional[float]) -> Route:
        self._bind()
        assert self._discovery_lock is not None
        async with self._discovery_lock:
            cur = self.route
            if cur is not seen:
                return cur
            nxt = await _flow.adrive(_flow.discover(self.seeds, seen, self.probe_timeout, deadline), self._perform)
            self.route = nxt
            return nxt

    async def call(self, req: Request) -> Tuple[int, Any]:
        return await _flow.adrive(_flow.call(self, req), self._perform)


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
                 user_agent: str = USER_AGENT, trace_inject: Optional[TraceInject] = None) -> None:
        s = self._s = _Settings(addrs, api_key, timeout, tls, retries, backoff_base, backoff_max, discovery,
                                discovery_refresh, max_wait, report_timeout, approval_wait, auto_commit,
                                rate_limit_wait, max_idle_per_node, user_agent)
        self._t = AsyncTransport(s.seeds, api_key=s.api_key, timeout=s.timeout, ssl_ctx=s.ssl_ctx,
                                 retries=s.retries, backoff=s.backoff, discovery=s.discovery,
                                 discovery_refresh=s.discovery_refresh, rate_limit_wait=s.rate_limit_wait,
                                 max_idle=s.max_idle, user_agent=s.user_agent, trace_inject=trace_inject)

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
                           fingerprint: str = "", *, tool: str = "") -> TokenVerification:
        """Client.verify_token: tool names the tool about to act
        (TokenWrongTool, TokenToolForbidden: not spent)."""
        return await self._run(_api.verify_token(execution_token, payload, fingerprint, tool))

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
        resp = await self._drive(_flow.settle_claim(key, tool, raw, own, policy, lease_s, fresh, mw, aw, self._s))
        done = _flow.claimed(key, resp, own, aw)
        if done is not None:
            return done
        return await self._execute(key, resp, lease_s, fn)

    async def _perform(self, step: Step) -> Any:
        if type(step) is Run:
            return await self._run(step.call, step.deadline)
        await asyncio.sleep(step.secs)
        return None

    async def _drive(self, flow: "_flow.Flow[T]") -> T:
        return await _flow.adrive(flow, self._perform)

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
            return await self._drive(_flow.failed(key, g, e, out, self._s))
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
            return await self._drive(_flow.failed(key, g, e, out, self._s))
        out.value = value
        return await self._drive(_flow.record(key, g, value, out, self._s))

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
