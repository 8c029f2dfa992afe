"""What the sync and the async client share: addresses, routes, backoff,
JSON encoding, request descriptions. No I/O here."""

from __future__ import annotations

import contextlib
import contextvars
import datetime as _dt
import re
import json
import os
import random
import secrets
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union
from urllib.parse import quote, urlencode, urlsplit

from .errors import BadRequest
from .types import ClusterStatus

DEFAULT_RETRIES = 4
DEFAULT_BACKOFF_BASE = 0.05
DEFAULT_BACKOFF_MAX = 2.0
DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_WAIT = 30.0
DEFAULT_REPORT_TIMEOUT = 30.0
DEFAULT_DISCOVERY_REFRESH = 60.0
DEFAULT_RATE_LIMIT_WAIT = 30.0
DISCOVERY_PROBE_TIMEOUT = 1.0
#: The longest long-poll the cluster accepts, seconds.
MAX_LONG_POLL = 60.0
MAX_IDLE_PER_NODE = 16
IDLE_CONN_MAX_AGE = 60.0
USER_AGENT = "intentd-python/0.1"
JSON_ACCEPT = "application/json, application/problem+json"

TLSArg = Union[None, ssl.SSLContext, str, Mapping[str, str], Tuple[str, ...]]


def new_owner() -> str:
    """A fresh owner name, "host/pid/random": unique to one execution
    attempt, as the ledger requires (Go's NewOwner)."""
    host = socket.gethostname() or "unknown-host"
    return "%s/%d/%s" % (host, os.getpid(), secrets.token_hex(6))


def tls_context(ca: Optional[str] = None, cert: Optional[str] = None, key: Optional[str] = None) -> ssl.SSLContext:
    """An SSLContext that trusts ca (or the system's roots) and presents
    cert/key as the client certificate when given."""
    ctx = ssl.create_default_context(cafile=ca)
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


def make_tls(tls: TLSArg) -> Optional[ssl.SSLContext]:
    """tls as the Client takes it: an SSLContext, a CA file path, a mapping
    {"ca", "cert", "key"} or a tuple (ca, cert, key)."""
    if tls is None or isinstance(tls, ssl.SSLContext):
        return tls
    if isinstance(tls, str):
        return tls_context(ca=tls)
    if isinstance(tls, Mapping):
        return tls_context(ca=tls.get("ca"), cert=tls.get("cert"), key=tls.get("key"))
    if isinstance(tls, tuple):
        parts = list(tls) + [None] * (3 - len(tls))
        return tls_context(ca=parts[0], cert=parts[1], key=parts[2])
    raise TypeError("tls must be an ssl.SSLContext, a CA path, a mapping or a tuple")


def normalize_addr(a: str, scheme: str = "http") -> str:
    """"host:port" or a URL as a base URL without a trailing slash."""
    if "://" not in a:
        a = scheme + "://" + a
    u = urlsplit(a)
    if not u.netloc or u.scheme not in ("http", "https"):
        raise ValueError("intentd: address %r: want http://host:port" % a)
    if u.query or u.fragment:
        raise ValueError("intentd: address %r: no query or fragment allowed" % a)
    return ("%s://%s%s" % (u.scheme, u.netloc, u.path)).rstrip("/")


def split_addrs(addrs: Union[str, Sequence[str]], scheme: str = "http") -> List[str]:
    """The configured addresses, normalized: a str or a list, each element
    possibly a comma-separated list."""
    if isinstance(addrs, str):
        addrs = [addrs]
    out: List[str] = []
    for a in addrs:
        for part in a.split(","):
            part = part.strip()
            if part:
                out.append(normalize_addr(part, scheme))
    if not out:
        raise ValueError("intentd: no server address")
    return dedupe(out)


def dedupe(addrs: Sequence[str]) -> List[str]:
    seen = set()
    out = []
    for a in addrs:
        if a and a not in seen:
            seen.add(a)
            out.append(a)
    return out


def scheme_of(base: str) -> str:
    return urlsplit(base).scheme or "http"


class Route:
    """One immutable order of the addresses to try, with the index of the
    one that answered last (Go's route)."""

    __slots__ = ("version", "addrs", "leader", "at", "preferred")

    def __init__(self, version: int, addrs: List[str], leader: str, at: float, preferred: int = 0) -> None:
        self.version = version
        self.addrs = addrs
        self.leader = leader
        self.at = at
        self.preferred = preferred


def route_from_status(seeds: List[str], base: str, st: ClusterStatus) -> Optional[Tuple[List[str], str]]:
    """Orders the addresses by st, the status as the node at base sees it:
    the leader first (base itself when it is the leader), then the
    configured addresses, then the other members. None when st names no
    reachable leader."""
    if not st.leader_id:
        return None
    scheme = scheme_of(base)
    if st.node_id == st.leader_id:
        leader = base
    else:
        if not st.leader_http:
            return None
        try:
            leader = normalize_addr(st.leader_http, scheme)
        except ValueError:
            return None
    addrs = [leader] + list(seeds)
    for n in st.nodes:
        if n.id in (st.node_id, st.leader_id) or not n.http_addr or n.gossip in ("left", "dead"):
            continue
        try:
            addrs.append(normalize_addr(n.http_addr, scheme))
        except ValueError:
            continue
    return dedupe(addrs), leader


class Backoff:
    """Exponential backoff with jitter in [d/2, d], raised to the server's
    Retry-After, capped at max (Go's backoff)."""

    def __init__(self, base: float = DEFAULT_BACKOFF_BASE, max: float = DEFAULT_BACKOFF_MAX) -> None:
        self.base = base if base > 0 else DEFAULT_BACKOFF_BASE
        self.max = max if max > 0 else DEFAULT_BACKOFF_MAX
        if self.max < self.base:
            self.max = self.base
        self._rand = random.Random()
        self._lock = threading.Lock()

    def __call__(self, attempt: int, retry_after: Optional[float] = None) -> float:
        d = self.base
        i = 0
        while i < attempt and d < self.max:
            d *= 2
            i += 1
        d = min(d, self.max)
        with self._lock:
            j = self._rand.random()
        d = d / 2 + j * d / 2
        if retry_after and retry_after > d:
            d = min(retry_after, self.max)
        return d


def seconds(v: Any, what: str) -> Optional[float]:
    """A duration argument: seconds (int or float) or a timedelta."""
    if v is None:
        return None
    if isinstance(v, _dt.timedelta):
        return v.total_seconds()
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise BadRequest(detail="%s must be seconds or a timedelta, not %s" % (what, type(v).__name__), field=what)
    return float(v)


# Encoders built once: json.dumps with any non-default option builds a new
# JSONEncoder on every call, a measurable part of each request's CPU.
# encode() keeps no state between calls, so threads share them.
_STRICT_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_COMPACT_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def encode_json(v: Any, what: str = "payload") -> Optional[bytes]:
    """A payload or result as JSON bytes: bytes/bytearray/memoryview are
    taken as JSON text (checked), None stays None (nothing sent), anything
    else is serialised with json.dumps (NaN and infinities refused).
    Raises BadRequest when it cannot."""
    if v is None:
        return None
    if isinstance(v, (bytes, bytearray, memoryview)):
        raw = bytes(v)
        if not raw.strip():
            return None
        try:
            json.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise BadRequest(detail="%s: not valid JSON: %s" % (what, e), field=what) from None
        return raw
    try:
        return _STRICT_JSON.encode(v).encode("utf-8")
    except (TypeError, ValueError, RecursionError) as e:
        raise BadRequest(detail="%s: not JSON-serialisable: %s" % (what, e), field=what) from None


class RawJSON:
    """A JSON value already encoded, put into a request body as it is."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


def dump_body(body: Any) -> bytes:
    """Encodes a request body whose values may be RawJSON: the plain members
    in one json.dumps, the raw ones spliced in after them (one dumps per
    body rather than one per member: it is on every call's path)."""
    if isinstance(body, RawJSON):
        return body.data
    if not isinstance(body, dict):
        return _COMPACT_JSON.encode(body).encode("utf-8")
    plain = {}
    raw = []
    for k, v in body.items():
        if isinstance(v, RawJSON):
            raw.append((k, v))
        else:
            plain[k] = v
    head = _COMPACT_JSON.encode(plain)
    if not raw:
        return head.encode("utf-8")
    tail = ",".join("%s:%s" % (_COMPACT_JSON.encode(k), v.data.decode("utf-8")) for k, v in raw)
    return (("{" if head == "{}" else head[:-1] + ",") + tail + "}").encode("utf-8")


def intent_path(key: str, action: str = "") -> str:
    """The escaped path of an intent (the key as one path segment, escaped
    as Go's url.PathEscape does) and an optional action."""
    p = "/v1/intents/" + quote(key, safe="$&+:=@")
    if action:
        p += "/" + action
    return p


def name_path(prefix: str, name: str) -> str:
    return prefix + quote(name, safe="$&+:=@")


def duration_param(secs: float) -> str:
    """A Go duration string for ?wait= (milliseconds)."""
    return "%dms" % max(0, int(round(secs * 1000)))


# -- trace context ------------------------------------------------------------
#
# Every request carries the caller's W3C trace context (traceparent,
# tracestate) when it has one, so the ledger's spans join the agent's trace
# (docs/operations.md, "Traces"). No dependency: the headers are text. They
# come from ``with intentd.traceparent(tp, ts):`` around the calls, or else
# from the client's ``trace_inject`` hook, which OpenTelemetry's
# ``opentelemetry.propagate.inject`` fits as it is::
#
#     ledger = intentd.Client(addrs, api_key=KEY, trace_inject=opentelemetry.propagate.inject)

#: A hook that writes the current trace context into a dict of headers.
TraceInject = Callable[[Dict[str, str]], None]

_TRACEPARENT = re.compile(r"00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}")
_MAX_TRACESTATE = 512
_current_trace: "contextvars.ContextVar[Optional[Tuple[str, str]]]" = contextvars.ContextVar(
    "intentd_trace", default=None)


def valid_traceparent(tp: Optional[str]) -> bool:
    """Whether tp is a W3C traceparent of version 00 (the IDs not all zero)."""
    return isinstance(tp, str) and _TRACEPARENT.fullmatch(tp) is not None


@contextlib.contextmanager
def traceparent(tp: str, tracestate: str = "") -> Iterator[None]:
    """Within the block (thread, or asyncio task), every request sends tp
    and tracestate; a malformed tp is ignored. It wins over the client's
    trace_inject hook."""
    token = _current_trace.set((tp, tracestate) if valid_traceparent(tp) else None)
    try:
        yield
    finally:
        _current_trace.reset(token)


def trace_headers(inject: Optional[TraceInject]) -> Dict[str, str]:
    """The trace headers of a request: traceparent() first, else the hook's;
    only a well-formed traceparent and its tracestate are kept."""
    cur = _current_trace.get()
    if cur is None and inject is not None:
        carrier: Dict[str, str] = {}
        inject(carrier)
        cur = (carrier.get("traceparent", ""), carrier.get("tracestate", ""))
    if cur is None or not valid_traceparent(cur[0]):
        return {}
    h = {"traceparent": cur[0]}
    if cur[1] and len(cur[1]) <= _MAX_TRACESTATE:
        h["tracestate"] = cur[1]
    return h


@dataclass
class Request:
    """One API call."""
    method: str
    path: str
    query: Optional[List[Tuple[str, str]]] = None
    body: Optional[bytes] = None
    #: Pins the call to one node, without retries (health).
    addr: str = ""
    #: Extra seconds the answer may take (a long-poll's wait).
    extra_timeout: float = 0.0
    #: The deadline (time.monotonic()) of the whole call, retries included.
    deadline: Optional[float] = None
    #: Discovery probes are sent once, with the probe timeout.
    probe: bool = False
    headers: Dict[str, str] = field(default_factory=dict)

    @property
    def write(self) -> bool:
        return self.method not in ("GET", "HEAD")

    def target(self) -> str:
        if self.query:
            return self.path + "?" + urlencode(self.query)
        return self.path

    def header_lines(self, host: str, api_key: Optional[str], user_agent: str,
                     trace_inject: Optional[TraceInject] = None) -> Dict[str, str]:
        h = {"Host": host, "User-Agent": user_agent, "Accept": JSON_ACCEPT}
        if api_key:
            h["Authorization"] = "Bearer " + api_key
        h.update(trace_headers(trace_inject))
        if self.body is not None:
            h["Content-Type"] = "application/json"
            h["Content-Length"] = str(len(self.body))
        elif self.write:
            h["Content-Length"] = "0"
        h.update(self.headers)
        return h


def left(deadline: Optional[float]) -> Optional[float]:
    if deadline is None:
        return None
    return deadline - time.monotonic()


def decode_json(data: bytes) -> Any:
    if not data:
        return None
    return json.loads(data.decode("utf-8"))
