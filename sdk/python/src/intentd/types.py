"""Typed answers of the API, mirroring client/types.go.

Every type keeps the JSON object it was decoded from in ``raw``, so fields a
newer server adds are not lost. Durations are seconds (float) where Go has a
time.Duration; times are timezone-aware datetimes (None where Go has the
zero time). JSON values (payload, result) are decoded Python values.
"""

from __future__ import annotations

import datetime as _dt
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional

__all__ = [
    "State", "Status", "Outcome", "Intent", "Approval", "ClaimResult", "IntentResult", "Grant", "EffectResult",
    "ListPage", "AuditEvent", "AuditTrail", "Policy", "TokenClaims", "TokenVerification", "ClusterStatus",
    "NodeStatus", "Health",
]


class State:
    """The lifecycle states of an intent."""
    PENDING_APPROVAL = "pending_approval"
    APPROVED = "approved"
    REJECTED = "rejected"
    DECLARED = "declared"
    EXECUTED = "executed"
    FAILED = "failed"
    COMMITTED = "committed"
    IN_DOUBT = "in_doubt"


class Status:
    """The words of successful answers (refusals are raised)."""
    GRANTED = "granted"
    DUPLICATE = "duplicate"
    PENDING_APPROVAL = "pending_approval"
    OK = "ok"
    # Of EffectResult only:
    EXECUTED = "executed"
    FAILED = "failed"


class Outcome:
    """What complete() and resolve() report."""
    EXECUTED = "executed"
    FAILED = "failed"


_TIME_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})?$")


def parse_time(v: Any) -> Optional[_dt.datetime]:
    """An RFC 3339 time (nanoseconds cut to microseconds); None for the zero
    time, an empty or a malformed value."""
    if not isinstance(v, str) or not v:
        return None
    if len(v) >= 20 and v[-1] == "Z" and v[10] == "T" and v[19] in ".Z" and v[4] == v[7] == "-" and v[13] == v[16] == ":":
        # The form intentd writes (UTC, nanoseconds): no regex on the hot path.
        try:
            frac = v[20:-1] if v[19] == "." else ""
            if frac.isdigit() or not frac:
                t = _dt.datetime(int(v[0:4]), int(v[5:7]), int(v[8:10]), int(v[11:13]), int(v[14:16]), int(v[17:19]),
                                 int((frac[:6] or "0").ljust(6, "0")), tzinfo=_dt.timezone.utc)
                return None if t.year <= 1 else t
        except ValueError:
            return None
    m = _TIME_RE.match(v)
    if not m:
        return None
    date, clock, frac, tz = m.groups()
    frac = (frac or "")[:6].ljust(6, "0")
    tzs = "+00:00" if tz in (None, "Z", "z") else tz
    try:
        t = _dt.datetime.fromisoformat("%sT%s.%s%s" % (date, clock, frac, tzs))
    except ValueError:
        return None
    if t.year <= 1:
        return None
    return t


class _Lazy:
    """A dataclass field decoded on first read: the answer stores the raw
    JSON value (of type raw) and decode turns it into the field's value
    once. Most answers are never asked for every field: parsing the three
    times of an intent was a tenth of the SDK's CPU per call, and a claim's
    caller often needs only the status, the owner and the fencing token,
    not the intent. Setting a decoded value (or None) stores it as it is."""

    def __init__(self, raw: type, decode: Callable[[Any], Any]) -> None:
        self.raw = raw
        self.decode = decode

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return None  # the dataclass field's default
        v = obj.__dict__.get(self.slot)
        if isinstance(v, self.raw):
            v = self.decode(v)
            obj.__dict__[self.slot] = v
        return v

    def __set__(self, obj: Any, v: Any) -> None:
        obj.__dict__[self.slot] = v


def _Time() -> Any:
    """A datetime field kept as its RFC 3339 text until read."""
    return _Lazy(str, parse_time)


def _int(d: Mapping[str, Any], k: str) -> int:
    v = d.get(k)
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


def _time_text(d: Mapping[str, Any], k: str) -> Any:
    """A time as the answer carries it, for a _Time field to parse when read
    (anything but text reads as None)."""
    v = d.get(k)
    return v if isinstance(v, str) else None


def _str(d: Mapping[str, Any], k: str) -> str:
    v = d.get(k)
    return v if isinstance(v, str) else ""


@dataclass
class Approval:
    """One approver's approval of a pending intent."""
    actor: str = ""
    at: Optional[_dt.datetime] = None
    reason: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Approval":
        return cls(actor=_str(d, "actor"), at=parse_time(d.get("at")), reason=_str(d, "reason"))


@dataclass
class Intent:
    """One logical side effect as the ledger records it."""
    key: str = ""
    namespace: str = ""
    tool: str = ""
    state: str = ""
    owner: str = ""
    #: The API key the grant (or the pending intent) is bound to.
    principal: str = ""
    fencing_token: int = 0
    generation: int = 0
    fingerprint: str = ""
    #: The payload as decoded JSON (None when there is none).
    payload: Any = None
    #: The recorded result as decoded JSON (None when there is none).
    result: Any = None
    policy: str = ""
    policy_version: int = 0
    approvals_required: int = 0
    approvals: List[Approval] = field(default_factory=list)
    token_used: bool = False
    lease_ms: int = 0
    lease_deadline: Optional[_dt.datetime] = _Time()  # type: ignore[assignment]
    created_at: Optional[_dt.datetime] = _Time()  # type: ignore[assignment]
    updated_at: Optional[_dt.datetime] = _Time()  # type: ignore[assignment]
    duplicates: int = 0
    divergent: int = 0
    #: The log index of the last change to the record.
    version: int = 0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def has_result(self) -> bool:
        """Whether a result is recorded (a recorded JSON null counts)."""
        return "result" in self.raw

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Intent":
        return cls(
            key=_str(d, "key"), namespace=_str(d, "namespace"), tool=_str(d, "tool"), state=_str(d, "state"),
            owner=_str(d, "owner"), principal=_str(d, "principal"), fencing_token=_int(d, "fencing_token"),
            generation=_int(d, "generation"), fingerprint=_str(d, "fingerprint"), payload=d.get("payload"),
            result=d.get("result"), policy=_str(d, "policy"), policy_version=_int(d, "policy_version"),
            approvals_required=_int(d, "approvals_required"),
            approvals=[Approval.from_dict(a) for a in d.get("approvals") or [] if isinstance(a, dict)],
            token_used=bool(d.get("token_used")), lease_ms=_int(d, "lease_ms"),
            lease_deadline=_time_text(d, "lease_deadline"), created_at=_time_text(d, "created_at"),
            updated_at=_time_text(d, "updated_at"), duplicates=_int(d, "duplicates"),
            divergent=_int(d, "divergent"), version=_int(d, "version"), raw=dict(d),
        )


def _LazyIntent() -> Any:
    """An Intent field kept as its JSON object until read."""
    return _Lazy(dict, lambda v: Intent.from_dict(v))


def _intent_json(v: Any) -> Optional[Dict[str, Any]]:
    """An answer's intent as its JSON object, for a _LazyIntent field."""
    return v if isinstance(v, dict) else None


def _intent(v: Any) -> Optional[Intent]:
    return Intent.from_dict(v) if isinstance(v, dict) else None


@dataclass
class ClaimResult:
    """A successful claim: granted, duplicate or pending_approval. Refusals
    (in_flight, in_doubt, divergent ...) are raised."""
    status: str = ""
    #: Set when status is granted.
    fencing_token: int = 0
    execution_token: str = ""
    intent: Optional[Intent] = _LazyIntent()  # type: ignore[assignment]
    #: True when this claim granted a new generation (HTTP 201) rather than
    #: returning an earlier grant to the same owner.
    created: bool = False
    #: The owner the claim was made with.
    owner: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], created: bool = False, owner: str = "") -> "ClaimResult":
        return cls(status=_str(d, "status"), fencing_token=_int(d, "fencing_token"),
                   execution_token=_str(d, "execution_token"), intent=_intent_json(d.get("intent")), created=created,
                   owner=owner)


@dataclass
class IntentResult:
    """The answer of a successful call about one intent (complete, renew,
    commit, resolve, approve, reject)."""
    status: str = ""
    intent: Optional[Intent] = _LazyIntent()  # type: ignore[assignment]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "IntentResult":
        return cls(status=_str(d, "status"), intent=_intent_json(d.get("intent")))


@dataclass
class Grant:
    """The right to perform an effect, handed by do() to the function it
    runs (Go's client.Grant).

    ``cancelled`` is set when a renewal of the lease was refused (fenced or
    in_doubt: the right to execute is gone; ``lost`` is then that error):
    check it before performing the effect, as a Go tool checks ctx.Done().
    """
    key: str = ""
    owner: str = ""
    #: Increases strictly with every grant across the cluster: pass it to
    #: systems that can refuse stale writers.
    fencing_token: int = 0
    #: The signed proof of the grant for the tool side.
    execution_token: str = ""
    #: The record as granted.
    intent: Optional[Intent] = None
    cancelled: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)
    lost: Optional[BaseException] = field(default=None, repr=False, compare=False)

    def raise_if_lost(self) -> None:
        """Raises the error that took the grant away, if it is gone."""
        if self.cancelled.is_set() and self.lost is not None:
            raise self.lost

    def _lose(self, err: BaseException) -> None:
        self.lost = err
        self.cancelled.set()


@dataclass
class EffectResult:
    """What do() returns about an effect (Go's EffectResult)."""
    #: "executed" (this call ran fn and recorded its result) or "duplicate"
    #: (an earlier call ran it; result is its recorded result). Empty when
    #: fn ran but its outcome could not be recorded (then do() raised).
    status: str = ""
    #: The recorded result, decoded: fn's result (executed) or the earlier
    #: call's (duplicate).
    result: Any = None
    #: fn's return value as it returned it, when ran.
    value: Any = None
    #: Whether fn ran in this call.
    ran: bool = False
    intent: Optional[Intent] = None
    #: The owner this call claimed with.
    owner: str = ""
    #: This call's grant's token (0 unless granted).
    fencing_token: int = 0


@dataclass
class ListPage:
    """One page of intents in key order."""
    intents: List[Intent] = field(default_factory=list)
    #: Continues the listing; empty at the end.
    next_cursor: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ListPage":
        return cls(intents=[Intent.from_dict(i) for i in d.get("intents") or [] if isinstance(i, dict)],
                   next_cursor=_str(d, "next_cursor"))


@dataclass
class AuditEvent:
    """One recorded attempt on a key."""
    index: int = 0
    at: Optional[_dt.datetime] = None
    op: str = ""
    status: str = ""
    state: str = ""
    owner: str = ""
    actor: str = ""
    fingerprint: str = ""
    fencing_token: int = 0
    outcome: str = ""
    reason: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "AuditEvent":
        return cls(index=_int(d, "index"), at=parse_time(d.get("at")), op=_str(d, "op"), status=_str(d, "status"),
                   state=_str(d, "state"), owner=_str(d, "owner"), actor=_str(d, "actor"),
                   fingerprint=_str(d, "fingerprint"), fencing_token=_int(d, "fencing_token"),
                   outcome=_str(d, "outcome"), reason=_str(d, "reason"), raw=dict(d))


@dataclass
class AuditTrail:
    """Every attempt on one key, oldest first."""
    key: str = ""
    namespace: str = ""
    events: List[AuditEvent] = field(default_factory=list)
    #: The oldest events the ledger no longer keeps.
    dropped: int = 0

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "AuditTrail":
        return cls(key=_str(d, "key"), namespace=_str(d, "namespace"),
                   events=[AuditEvent.from_dict(e) for e in d.get("events") or [] if isinstance(e, dict)],
                   dropped=_int(d, "dropped"))


@dataclass
class Policy:
    """Selects intents by tool pattern and sets how they are gated. Zero
    fields defer to the default policy."""
    name: str = ""
    version: int = 0
    tools: List[str] = field(default_factory=list)
    priority: int = 0
    dedupe_window_ms: int = 0
    lease_ms: int = 0
    token_ttl_ms: int = 0
    require_approval: bool = False
    approvals_required: int = 0
    approvers: List[str] = field(default_factory=list)
    blocked: bool = False
    max_payload_bytes: int = 0
    allow_self_approval: bool = False
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    _FIELDS = ("name", "version", "tools", "priority", "dedupe_window_ms", "lease_ms", "token_ttl_ms",
               "require_approval", "approvals_required", "approvers", "blocked", "max_payload_bytes",
               "allow_self_approval")

    def to_dict(self) -> Dict[str, Any]:
        """The policy's JSON, zero fields left out (Go's omitempty)."""
        out: Dict[str, Any] = {"name": self.name}
        for k in self._FIELDS[1:]:
            v = getattr(self, k)
            if v:
                out[k] = list(v) if isinstance(v, list) else v
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Policy":
        return cls(name=_str(d, "name"), version=_int(d, "version"), tools=list(d.get("tools") or []),
                   priority=_int(d, "priority"), dedupe_window_ms=_int(d, "dedupe_window_ms"),
                   lease_ms=_int(d, "lease_ms"), token_ttl_ms=_int(d, "token_ttl_ms"),
                   require_approval=bool(d.get("require_approval")), approvals_required=_int(d, "approvals_required"),
                   approvers=list(d.get("approvers") or []), blocked=bool(d.get("blocked")),
                   max_payload_bytes=_int(d, "max_payload_bytes"),
                   allow_self_approval=bool(d.get("allow_self_approval")), raw=dict(d))


@dataclass
class TokenClaims:
    """What an execution token binds. ``tool`` is its audience (the JWS
    claim "aud"): the tool the intent was granted for, the only one that
    may act on it; empty for a token signed before tokens named their
    tool."""
    namespace: str = ""
    key: str = ""
    fingerprint: str = ""
    fencing_token: int = 0
    owner: str = ""
    issued_at: int = 0
    expires: int = 0
    tool: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TokenClaims":
        return cls(namespace=_str(d, "ns"), key=_str(d, "key"), fingerprint=_str(d, "fp"),
                   fencing_token=_int(d, "fence"), owner=_str(d, "owner"), issued_at=_int(d, "iat"),
                   expires=_int(d, "exp"), tool=_str(d, "aud"))


@dataclass
class TokenVerification:
    """The ledger's word on an execution token."""
    status: str = ""
    valid: bool = False
    claims: TokenClaims = field(default_factory=TokenClaims)
    intent: Optional[Intent] = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TokenVerification":
        c = d.get("claims")
        return cls(status=_str(d, "status"), valid=bool(d.get("valid")),
                   claims=TokenClaims.from_dict(c if isinstance(c, dict) else {}), intent=_intent(d.get("intent")))


@dataclass
class NodeStatus:
    """One member of the cluster."""
    id: str = ""
    raft_addr: str = ""
    http_addr: str = ""
    suffrage: str = ""
    gossip: str = ""
    leader: bool = False
    decodes: int = 0

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "NodeStatus":
        return cls(id=_str(d, "id"), raft_addr=_str(d, "raft_addr"), http_addr=_str(d, "http_addr"),
                   suffrage=_str(d, "suffrage"), gossip=_str(d, "gossip"), leader=bool(d.get("leader")),
                   decodes=_int(d, "decodes"))


@dataclass
class ClusterStatus:
    """The cluster as one node sees it."""
    node_id: str = ""
    state: str = ""
    leader_id: str = ""
    leader_http: str = ""
    term: int = 0
    commit_index: int = 0
    applied_index: int = 0
    last_index: int = 0
    ready: bool = False
    nodes: List[NodeStatus] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ClusterStatus":
        return cls(node_id=_str(d, "node_id"), state=_str(d, "state"), leader_id=_str(d, "leader_id"),
                   leader_http=_str(d, "leader_http"), term=_int(d, "term"), commit_index=_int(d, "commit_index"),
                   applied_index=_int(d, "applied_index"), last_index=_int(d, "last_index"),
                   ready=bool(d.get("ready")),
                   nodes=[NodeStatus.from_dict(n) for n in d.get("nodes") or [] if isinstance(n, dict)], raw=dict(d))


@dataclass
class Health:
    """One node's liveness and readiness."""
    addr: str = ""
    live: bool = False
    ready: bool = False
    detail: str = ""
