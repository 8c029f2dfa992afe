"""The blocking transport: a small keep-alive pool of socket connections
per node speaking _http11; the retry loop and leader discovery (Go's
request.go and discovery.go) are _flow's, run with blocking I/O."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from typing import Any, BinaryIO, Dict, List, Optional, Tuple
from urllib.parse import urlsplit

from . import _flow
from ._core import DISCOVERY_PROBE_TIMEOUT, IDLE_CONN_MAX_AGE, Backoff, Request, Route, TraceInject, left
from ._flow import Attempt, Pause, Step, transport_error
from ._http11 import MAX_HEAD, READ_HEAD, READ_LINE, BadResponse, ReadExactly, Response, read_response, request_bytes
from .errors import OutcomeUnknown, Unavailable


class _Conn:
    """One kept-alive connection: the socket and its buffered reader."""
    __slots__ = ("sock", "rfile", "at")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.rfile: BinaryIO = sock.makefile("rb")
        self.at = time.monotonic()

    def close(self) -> None:
        try:
            self.rfile.close()
            self.sock.close()
        except OSError:
            pass


def read_answer(rfile: BinaryIO, head_only: bool) -> Response:
    """Takes one answer off a buffered socket file (_http11's reads)."""
    reads = read_response(head_only)
    arg: Any = None
    while True:
        try:
            step = reads.send(arg)
        except StopIteration as stop:
            return stop.value
        if step is READ_HEAD:
            arg = read_head(rfile)
        elif step is READ_LINE:
            arg = rfile.readline(65537)
        elif type(step) is ReadExactly:
            arg = rfile.read(step.n)
            if len(arg) != step.n:
                raise EOFError("the connection was closed in the body")
        else:
            arg = rfile.read()


def read_head(rfile: BinaryIO) -> bytes:
    """The bytes up to and including the first empty line (b"" when the
    stream ends before any byte)."""
    lines = []
    size = 0
    while True:
        line = rfile.readline(65537)
        if not line:
            if lines:
                raise BadResponse("the connection was closed in the headers")
            return b""
        lines.append(line)
        size += len(line)
        if line == b"\r\n" or size > MAX_HEAD:
            return b"".join(lines)
        if not line.endswith(b"\r\n"):
            raise BadResponse("a header line that does not end with CRLF: %r" % line[:80])


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
        self._idle: List[_Conn] = []
        self._lock = threading.Lock()

    def get(self) -> Optional[_Conn]:
        """An idle connection young enough to use, or None."""
        now = time.monotonic()
        with self._lock:
            while self._idle:
                conn = self._idle.pop()
                if now - conn.at < IDLE_CONN_MAX_AGE:
                    return conn
                conn.close()
        return None

    def open(self, timeout: float) -> _Conn:
        sock = socket.create_connection((self.host, self.port), timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.https:
                ctx = self.ssl_ctx or ssl.create_default_context()
                sock = ctx.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise
        return _Conn(sock)

    def put(self, conn: _Conn) -> None:
        with self._lock:
            if len(self._idle) < self.max_idle:
                conn.at = time.monotonic()
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


# What a kept-alive connection the node has closed looks like.
_STALE = (EOFError, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class SyncTransport:
    """Sends calls to the cluster: the leader first once discovered, with
    retries on what the cluster could not answer. Thread-safe."""

    def __init__(self, seeds: List[str], *, api_key: Optional[str], timeout: float,
                 ssl_ctx: Optional[ssl.SSLContext], retries: int, backoff: Backoff, discovery: bool,
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
        payload = request_bytes(req.method, pool.prefix + req.target(),
                                req.header_lines(pool.netloc, self.api_key, self.user_agent, self.trace_inject), req.body)
        where = "%s %s%s" % (req.method, base, req.path)
        maybe_sent = False  # a write went out on a connection that then died
        for fresh_try in (0, 1):
            conn = pool.get()
            reused = conn is not None
            try:
                if conn is None:
                    conn = pool.open(timeout)
                else:
                    conn.sock.settimeout(timeout)
            except OSError as e:
                if conn is not None:
                    conn.close()
                kind = OutcomeUnknown if maybe_sent else Unavailable
                raise transport_error(kind, "%s: %s" % (where, _describe(e))) from e
            with self._sent_lock:
                self.sent += 1
            wrote = False
            try:
                conn.sock.sendall(payload)
                wrote = True
                status, headers, data, will_close = read_answer(conn.rfile, req.method == "HEAD")
            except (OSError, EOFError, BadResponse) as e:
                conn.close()
                if reused and fresh_try == 0 and isinstance(e, _STALE):
                    # The node closed the idle connection; every call is
                    # idempotent, so send it again on a fresh one.
                    maybe_sent = maybe_sent or (req.write and wrote)
                    continue
                kind = OutcomeUnknown if req.write and (wrote or maybe_sent) else Unavailable
                raise transport_error(kind, "%s: %s" % (where, _describe(e))) from e
            if will_close:
                conn.close()
            else:
                pool.put(conn)
            break
        return status, _flow.answer_document(req, where, status, headers, data)

    # -- routing ----------------------------------------------------------

    def endpoints(self) -> List[str]:
        rt = self.route
        n = len(rt.addrs)
        return [rt.addrs[(rt.preferred + i) % n] for i in range(n)]

    def _perform(self, step: Step) -> Any:
        if type(step) is Attempt:
            return self.once(step.base, step.req)
        if type(step) is Pause:
            time.sleep(step.secs)
            return None
        return self.rediscover(step.seen, step.deadline)

    def rediscover(self, seen: Route, deadline: Optional[float]) -> Route:
        """Replaces seen by a freshly discovered route, unless another call
        already did. One discovery runs at a time."""
        with self._discovery_lock:
            cur = self.route
            if cur is not seen:
                return cur
            nxt = _flow.drive(_flow.discover(self.seeds, seen, self.probe_timeout, deadline), self._perform)
            self.route = nxt
            return nxt

    def discover(self, deadline: Optional[float] = None) -> str:
        rt = self.rediscover(self.route, deadline)
        return rt.leader

    # -- calls ------------------------------------------------------------

    def call(self, req: Request) -> Tuple[int, Any]:
        """Performs the call with _flow.call's retries."""
        return _flow.drive(_flow.call(self, req), self._perform)


def _describe(e: BaseException) -> str:
    s = str(e)
    return "%s: %s" % (type(e).__name__, s) if s else type(e).__name__
