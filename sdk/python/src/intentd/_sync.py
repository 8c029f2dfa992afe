"""The blocking transport: a small keep-alive pool of http.client
connections per node, leader discovery and the retry loop (Go's
request.go and discovery.go)."""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import time
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import urlsplit

from ._core import (DISCOVERY_PROBE_TIMEOUT, IDLE_CONN_MAX_AGE, Backoff, Request, Route, left, route_from_status)
from .errors import (OutcomeUnknown, Problem, RateLimited, Unavailable, maybe_applied, parse_problem,
                     problem_retryable)
from .types import ClusterStatus


class TransportError(Exception):
    """Internal: marks an error as the transport's (no answer)."""


def can_retry(err: Problem) -> bool:
    """Whether the same call may be sent again after err: a transport failure
    (no answer) or an answer that says the cluster could not serve."""
    if getattr(err, "_transport", False):
        return True
    return problem_retryable(err)


def transient(err: Problem) -> bool:
    if getattr(err, "_transport", False):
        return True
    return problem_retryable(err) or err.status >= 500


def transport_error(cls: type, detail: str) -> Problem:
    p = cls(detail=detail)
    p._transport = True  # type: ignore[attr-defined]
    return p


def as_outcome_unknown(p: Problem, detail: str = "") -> OutcomeUnknown:
    o = OutcomeUnknown(detail=detail or p.detail, status=p.status, code=p.code, title=p.title, type=p.type,
                       field=p.field, intent=p.intent, retry_after=p.retry_after, body=p.body)
    o._transport = getattr(p, "_transport", False)  # type: ignore[attr-defined]
    return o


def is_rate_limited(p: Problem) -> bool:
    return p.status == 429 or isinstance(p, RateLimited)


class _NodePool:
    """Idle keep-alive connections to one node."""

    def __init__(self, base: str, ssl_ctx: Optional[ssl.SSLContext], max_idle: int) -> None:
        u = urlsplit(base)
        self.https = u.scheme == "https"
        self.host = u.hostname or ""
        self.port = u.port or (443 if self.https else 80)
        self.netloc = u.netloc
        self.prefix = u.path.rstrip("/")
        self.ssl_ctx = ssl_ctx
        self.max_idle = max_idle
        self._idle: List[Tuple[http.client.HTTPConnection, float]] = []
        self._lock = threading.Lock()

    def get(self, timeout: float) -> Tuple[http.client.HTTPConnection, bool]:
        now = time.monotonic()
        with self._lock:
            while self._idle:
                conn, at = self._idle.pop()
                if now - at < IDLE_CONN_MAX_AGE:
                    return conn, True
                conn.close()
        if self.https:
            ctx = self.ssl_ctx or ssl.create_default_context()
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=ctx), False
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout), False

    def put(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < self.max_idle:
                self._idle.append((conn, time.monotonic()))
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()


_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class SyncTransport:
    """Sends calls to the cluster: the leader first once discovered, with
    retries on what the cluster could not answer. Thread-safe."""

    def __init__(self, seeds: List[str], *, api_key: Optional[str], timeout: float,
                 ssl_ctx: Optional[ssl.SSLContext], retries: int, backoff: Backoff, discovery: bool,
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
        self._pools: Dict[str, _NodePool] = {}
        self._pools_lock = threading.Lock()
        self._discovery_lock = threading.Lock()
        #: Requests sent (attempts, discovery probes included); for tests.
        self.sent = 0
        self._sent_lock = threading.Lock()
        self.closed = False

    # -- connections ------------------------------------------------------

    def _pool(self, base: str) -> _NodePool:
        with self._pools_lock:
            p = self._pools.get(base)
            if p is None:
                p = self._pools[base] = _NodePool(base, self.ssl_ctx, self.max_idle)
            return p

    def close(self) -> None:
        self.closed = True
        with self._pools_lock:
            pools = list(self._pools.values())
        for p in pools:
            p.close()

    def once(self, base: str, req: Request) -> Tuple[int, Any]:
        """Sends req to one node: (status, decoded JSON) of a 2xx answer;
        raises the Problem of any other answer, Unavailable when the node
        could not be reached or answered nothing (nothing was written),
        OutcomeUnknown when a write was sent and no answer came."""
        pool = self._pool(base)
        timeout = (self.probe_timeout if req.probe else self.timeout) + req.extra_timeout
        rem = left(req.deadline)
        if rem is not None:
            if rem <= 0:
                raise transport_error(Unavailable, "%s %s: the call's time is up" % (req.method, base + req.path))
            timeout = min(timeout, rem)
        target = pool.prefix + req.target()
        headers = req.header_lines(pool.netloc, self.api_key, self.user_agent)
        where = "%s %s%s" % (req.method, base, req.path)
        maybe_sent = False  # a write went out on a connection that then died
        for fresh_try in (0, 1):
            conn, reused = pool.get(timeout)
            try:
                if conn.sock is None:
                    conn.connect()
                else:
                    conn.sock.settimeout(timeout)
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                kind = OutcomeUnknown if maybe_sent else Unavailable
                raise transport_error(kind, "%s: %s" % (where, _describe(e))) from e
            with self._sent_lock:
                self.sent += 1
            wrote = False
            try:
                conn.putrequest(req.method, target, skip_host=True, skip_accept_encoding=True)
                for k, v in headers.items():
                    conn.putheader(k, v)
                conn.endheaders(req.body)
                wrote = True
                resp = conn.getresponse()
                data = resp.read()
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                if reused and fresh_try == 0 and isinstance(e, _STALE):
                    # The node closed the idle connection; every call is
                    # idempotent, so send it again on a fresh one.
                    maybe_sent = maybe_sent or (req.write and wrote)
                    continue
                kind = OutcomeUnknown if req.write and (wrote or maybe_sent) else Unavailable
                raise transport_error(kind, "%s: %s" % (where, _describe(e))) from e
            if resp.will_close:
                conn.close()
            else:
                pool.put(conn)
            break
        status = resp.status
        if 200 <= status < 300:
            try:
                doc = json.loads(data.decode("utf-8")) if data else None
            except (ValueError, UnicodeDecodeError) as e:
                kind = OutcomeUnknown if req.write else Unavailable
                raise transport_error(kind, "%s: decoding the %d answer: %s" % (where, status, e)) from e
            return status, doc
        p = parse_problem(status, dict(resp.getheaders()), data)
        if req.write and status in (502, 504):
            raise as_outcome_unknown(p)
        raise p

    # -- routing ----------------------------------------------------------

    def endpoints(self) -> List[str]:
        rt = self.route
        n = len(rt.addrs)
        return [rt.addrs[(rt.preferred + i) % n] for i in range(n)]

    def current_route(self, deadline: Optional[float]) -> Route:
        rt = self.route
        if not self.discovery or (rt.version > 0 and time.monotonic() - rt.at < self.discovery_refresh):
            return rt
        return self.rediscover(rt, deadline)

    def rediscover(self, seen: Route, deadline: Optional[float]) -> Route:
        """Replaces seen by a freshly discovered route, unless another call
        already did. One discovery runs at a time."""
        with self._discovery_lock:
            cur = self.route
            if cur is not seen:
                return cur
            nxt = self._discover(seen, deadline)
            self.route = nxt
            return nxt

    def _discover(self, cur: Route, deadline: Optional[float]) -> Route:
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
                _, doc = self.once(base, Request("GET", "/v1/cluster", probe=True, deadline=end))
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

    def discover(self, deadline: Optional[float] = None) -> str:
        rt = self.rediscover(self.route, deadline)
        return rt.leader

    # -- calls ------------------------------------------------------------

    def call(self, req: Request) -> Tuple[int, Any]:
        """Performs the call, retrying as the package documents: answers
        that say the cluster could not serve (503, 502, 504) and transport
        failures up to retries times, moving through the nodes and
        rediscovering the leader; 429 on the same node, honouring
        Retry-After, for up to rate_limit_wait seconds. Never a definite
        answer (any other 4xx)."""
        if req.addr:
            return self.once(req.addr, req)
        rt = self.current_route(req.deadline)
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
                out = self.once(base, req)
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
            time.sleep(wait)
            if req.deadline is not None and time.monotonic() >= req.deadline:
                break  # the last answer says more than "time is up"
            if limited:
                continue  # the node is up and asked us to slow down: same node
            nxt = (idx + 1) % len(rt.addrs)
            if self.discovery:
                nrt = self.rediscover(rt, req.deadline)
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
    s = str(e)
    return "%s: %s" % (type(e).__name__, s) if s else type(e).__name__
