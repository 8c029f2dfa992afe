"""Typed errors, mirroring the Go SDK's sentinels (client/errors.go).

Every answer of the ledger that is not a success is an RFC 9457 problem
document; it is raised as an instance of the Problem subclass its ``code``
maps to (the same code -> sentinel table as the Go SDK), so::

    try:
        ledger.do(...)
    except intentd.Divergent as e:   # errors.Is(err, client.ErrDivergent)
        print(e.intent.fingerprint, e.request_fingerprint)

A failure to reach the cluster is an Unavailable (nothing was written) or,
for a write that was sent, an OutcomeUnknown (it may have been applied);
status is then 0. Bad input the SDK refuses before sending is a BadRequest
with status 0.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Tuple, Type

if TYPE_CHECKING:  # pragma: no cover
    from .types import EffectResult, Intent

__all__ = [
    "IntentdError", "Problem", "InFlight", "InDoubt", "Divergent", "Fenced", "Rejected", "PendingApproval",
    "NotFound", "InvalidState", "BadRequest", "Blocked", "TokenUsed", "TokenExpired", "TokenInvalid",
    "TokenWrongTool", "TokenToolForbidden", "Unauthorized", "Forbidden", "NotGrantHolder", "SelfApproval", "RateLimited", "NamespaceFull", "LedgerFull",
    "Unavailable", "NoLeader", "OutcomeUnknown", "BadSnapshot", "NotEmpty", "EffectUnknown", "problem_class", "PROBLEM_TYPE_BASE",
]

PROBLEM_TYPE_BASE = "https://github.com/intentledger/intentd/blob/main/docs/problems.md#"


class IntentdError(Exception):
    """Base of every error this SDK raises.

    ``effect`` is set on errors raised by do() after fn ran (the effect ran
    but its outcome could not be recorded, or fn raised EffectUnknown): the
    EffectResult with ``ran`` true and fn's ``value``."""

    effect: Optional["EffectResult"] = None


class EffectUnknown(IntentdError):
    """Raise it (or a subclass) from the function do() runs when you cannot
    tell whether the effect happened (the provider timed out mid-call).

    do() then reports nothing, so the key is not granted again: its lease
    passes, the intent turns in_doubt and must be resolved after checking
    the tool's side. do() re-raises it. The ledger never answers with it.
    (Go: wrap client.ErrEffectUnknown.)"""


class Problem(IntentdError):
    """An error answer of the API (a problem document), or a failure the
    SDK names the same way.

    Attributes: ``type`` (the URI of the code's documentation), ``status``
    (HTTP status; 0 when the SDK decided locally or no answer came),
    ``code`` (the stable word: in_flight, divergent ...), ``title``,
    ``detail``, ``field`` (the offending request field of bad input),
    ``intent`` (the record, when the answer carries it), ``retry_after``
    (seconds, or None), ``fingerprint`` / ``request_fingerprint``
    (divergent answers) and ``body`` (the problem document as decoded)."""

    #: The code a Problem raised without one gets.
    default_code = ""

    def __init__(
        self,
        detail: str = "",
        *,
        status: int = 0,
        code: Optional[str] = None,
        title: str = "",
        type: str = "",
        field: str = "",
        intent: Optional["Intent"] = None,
        retry_after: Optional[float] = None,
        fingerprint: str = "",
        request_fingerprint: str = "",
        body: Optional[Mapping[str, Any]] = None,
    ) -> None:
        self.status = status
        self.code = self.default_code if code is None else code
        self.title = title
        self.detail = detail
        self.type = type or (PROBLEM_TYPE_BASE + self.code if self.code else "")
        self.field = field
        self.intent = intent
        self.retry_after = retry_after
        self.fingerprint = fingerprint
        self.request_fingerprint = request_fingerprint
        self.body: Dict[str, Any] = dict(body) if body else {}
        super().__init__(self._message())

    def _message(self) -> str:
        msg = "%d %s" % (self.status, self.code) if self.status else (self.code or "error")
        if self.title:
            msg += ": " + self.title
        if self.detail:
            msg += ": " + self.detail
        return msg

    def __str__(self) -> str:
        return self._message()

    def __repr__(self) -> str:
        return "%s(status=%d, code=%r, detail=%r)" % (type(self).__name__, self.status, self.code, self.detail)

    def to_dict(self) -> Dict[str, Any]:
        """The problem document (as the API would have sent it)."""
        d: Dict[str, Any] = {"type": self.type, "title": self.title, "status": self.status, "code": self.code}
        if self.detail:
            d["detail"] = self.detail
        if self.field:
            d["field"] = self.field
        if self.intent is not None:
            d["intent"] = self.intent.raw
        if self.fingerprint:
            d["fingerprint"] = self.fingerprint
        if self.request_fingerprint:
            d["request_fingerprint"] = self.request_fingerprint
        if self.retry_after:
            d["retry_after_ms"] = int(self.retry_after * 1000)
        return d


# Refusals about the intent (definite answers).
class InFlight(Problem):
    """in_flight (409): another owner holds the lease; do not execute. Wait
    retry_after and claim again with the same owner."""
    default_code = "in_flight"


class InDoubt(Problem):
    """in_doubt (409): the lease passed without a report; someone must check
    the tool's side and resolve the intent."""
    default_code = "in_doubt"


class Divergent(Problem):
    """divergent (422): same key, different payload (or tool); never
    execute."""
    default_code = "divergent"


class Fenced(Problem):
    """fenced (409): a stale owner or fencing token; you no longer hold the
    intent."""
    default_code = "fenced"


class Rejected(Problem):
    """rejected (403): an approver rejected the intent."""
    default_code = "rejected"


class PendingApproval(Problem):
    """pending_approval: the intent waits for an approver; do not execute.
    A claim answers it as a success (202); do() raises it when the wait for
    the decision ends without one."""
    default_code = "pending_approval"


class NotFound(Problem):
    """not_found / policy_not_found (404)."""
    default_code = "not_found"


class InvalidState(Problem):
    """invalid_state, not_pending_approval, already_approved,
    version_mismatch (409): the call does not fit the state."""
    default_code = "invalid_state"


class BadRequest(Problem):
    """bad_request (400), too_large (413), unprocessable / unknown_policy
    (422), or bad input refused locally (status 0); nothing was written."""
    default_code = "bad_request"


class Blocked(Problem):
    """blocked (403): the policy that selects the tool blocks it."""
    default_code = "blocked"


class TokenUsed(Problem):
    """token_used (409): the execution token was already verified once."""
    default_code = "token_used"


class TokenExpired(Problem):
    """token_expired (410)."""
    default_code = "token_expired"


class TokenInvalid(Problem):
    """token_invalid / token_mismatch (422)."""
    default_code = "token_invalid"


class TokenWrongTool(TokenInvalid):
    """token_wrong_tool (422): verify_token named the tool about to run
    (``tool=``) and the execution token was granted for another one. The
    ledger wrote nothing: the token was not spent, and the tool it is for
    can still verify it. Do not act on it. (Go: ErrTokenWrongTool, which
    also matches ErrTokenInvalid.)"""
    default_code = "token_wrong_tool"


class Unauthorized(Problem):
    """unauthenticated (401), and the base of every refusal of the caller's
    credentials (Go's ErrUnauthorized matches them all)."""
    default_code = "unauthenticated"


class Forbidden(Unauthorized):
    """forbidden / not_an_approver (403): the key's roles do not allow it."""
    default_code = "forbidden"


class NotGrantHolder(Forbidden):
    """not_grant_holder (403): the grant is bound to another API key; do not
    retry with this key."""
    default_code = "not_grant_holder"


class SelfApproval(Forbidden):
    """self_approval (403): the claimant may not approve its own intent."""
    default_code = "self_approval"


class TokenToolForbidden(Forbidden):
    """token_tool_forbidden (403): the client's API key is bound to tools
    (its ``tools`` in the key configuration) that do not include the
    execution token's. The token was not spent. Do not act on it. (Go:
    ErrTokenToolForbidden, which also matches ErrUnauthorized.)"""
    default_code = "token_tool_forbidden"


class RateLimited(Problem):
    """rate_limited, namespace_rate_limited (429): the SDK waits
    Retry-After and sends the call again; raised only when that wait would
    pass the client's bound. (namespace_rate_limited: the claim's namespace
    is over its quota of claims per second; nothing was written.)"""
    default_code = "rate_limited"


class NamespaceFull(Problem):
    """namespace_full (507): the claim would add an intent to a namespace
    that holds its quota of intents; nothing was written, and do() does not
    run the effect. Not retried: claims of keys the namespace holds,
    reports and reads are still served; claim again once intents were
    purged. (Go: client.ErrNamespaceFull.)"""
    default_code = "namespace_full"


class LedgerFull(Problem):
    """ledger_full (507): the claim would add an intent while the cluster's
    leader is past a capacity (free disk under its reserve, data dir over
    its cap, or live heap over its memory's high water); nothing was
    written, and do() does not run the effect. Not retried (no Retry-After
    is sent: room comes back with purges or an operator, at no promised
    time): claims of keys the ledger holds, reports and reads are still
    served. (Go: client.ErrLedgerFull.)"""
    default_code = "ledger_full"


class Unavailable(Problem):
    """unavailable, shutting_down, not_ready (503), or the cluster could not
    be reached: nothing was written. The SDK retries these itself."""
    default_code = "unavailable"


class NoLeader(Unavailable):
    """no_leader / not_leader (503): nothing was written; retried."""
    default_code = "no_leader"


class OutcomeUnknown(Problem):
    """outcome_unknown (503), or a write sent without an answer: it may or
    may not have been applied. Retry the same call (same key, owner,
    payload, fencing token) to learn which; the SDK does so itself."""
    default_code = "outcome_unknown"


class BadSnapshot(Problem):
    """bad_snapshot (422)."""
    default_code = "bad_snapshot"


class NotEmpty(Problem):
    """not_empty (409)."""
    default_code = "not_empty"


# The code -> class table (client/errors.go's sentinelCodes). A code that is
# not listed is a plain Problem.
_CODES: Dict[str, Type[Problem]] = {
    "in_flight": InFlight,
    "in_doubt": InDoubt,
    "divergent": Divergent,
    "fenced": Fenced,
    "rejected": Rejected,
    "pending_approval": PendingApproval,
    "not_found": NotFound,
    "policy_not_found": NotFound,
    "invalid_state": InvalidState,
    "not_pending_approval": InvalidState,
    "already_approved": InvalidState,
    "version_mismatch": InvalidState,
    "bad_request": BadRequest,
    "too_large": BadRequest,
    "unprocessable": BadRequest,
    "unknown_policy": BadRequest,
    "blocked": Blocked,
    "token_used": TokenUsed,
    "token_expired": TokenExpired,
    "token_invalid": TokenInvalid,
    "token_mismatch": TokenInvalid,
    "token_wrong_tool": TokenWrongTool,
    "token_tool_forbidden": TokenToolForbidden,
    "unauthenticated": Unauthorized,
    "forbidden": Forbidden,
    "not_an_approver": Forbidden,
    "not_grant_holder": NotGrantHolder,
    "self_approval": SelfApproval,
    "outcome_unknown": OutcomeUnknown,
    "no_leader": NoLeader,
    "not_leader": NoLeader,
    "unavailable": Unavailable,
    "shutting_down": Unavailable,
    "not_ready": Unavailable,
    "rate_limited": RateLimited,
    "namespace_rate_limited": RateLimited,
    "namespace_full": NamespaceFull,
    "ledger_full": LedgerFull,
    "bad_snapshot": BadSnapshot,
    "not_empty": NotEmpty,
}

# 503 answers after which the same request may be sent again.
RETRYABLE_CODES = frozenset({"no_leader", "not_leader", "outcome_unknown", "shutting_down", "unavailable", "not_ready"})

_STATUS_TEXT = {
    400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
    409: "Conflict", 410: "Gone", 413: "Request Entity Too Large", 422: "Unprocessable Entity",
    429: "Too Many Requests", 500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway",
    503: "Service Unavailable", 504: "Gateway Timeout", 507: "Insufficient Storage",
}


def problem_class(code: str) -> Type[Problem]:
    """The Problem subclass a code maps to (Problem for unknown codes)."""
    return _CODES.get(code, Problem)


def code_for_status(status: int) -> str:
    """Names a problem that came without a document (from a proxy) by its
    status, as the Go SDK does."""
    return {
        400: "bad_request", 401: "unauthenticated", 403: "forbidden", 413: "too_large", 422: "unprocessable",
        429: "rate_limited", 502: "unavailable", 503: "unavailable", 504: "unavailable",
    }.get(status, "")


def parse_problem(status: int, headers: Mapping[str, str], data: bytes) -> Problem:
    """Decodes an error answer into the Problem subclass of its code."""
    from .types import Intent  # a cycle otherwise

    body: Dict[str, Any] = {}
    try:
        doc = json.loads(data.decode("utf-8")) if data else None
    except (ValueError, UnicodeDecodeError):
        doc = None
    fields: Dict[str, Any] = {}
    if isinstance(doc, dict) and (doc.get("code") or doc.get("title") or doc.get("type")):
        body = doc
        fields = dict(
            code=str(doc.get("code") or ""), title=str(doc.get("title") or ""), detail=str(doc.get("detail") or ""),
            type=str(doc.get("type") or ""), field=str(doc.get("field") or ""),
            fingerprint=str(doc.get("fingerprint") or ""),
            request_fingerprint=str(doc.get("request_fingerprint") or ""),
        )
        if isinstance(doc.get("intent"), dict):
            fields["intent"] = Intent.from_dict(doc["intent"])
        ms = doc.get("retry_after_ms")
        if isinstance(ms, (int, float)) and ms > 0:
            fields["retry_after"] = ms / 1000.0
    else:
        text = data.decode("utf-8", "replace").strip()
        if len(text) > 200:
            text = text[:200] + "..."
        fields["detail"] = text
    if not fields.get("code"):
        fields["code"] = code_for_status(status)
    if not fields.get("title"):
        fields["title"] = _STATUS_TEXT.get(status, "")
    if not fields.get("retry_after"):
        ra = _header(headers, "Retry-After")
        if ra is not None:
            try:
                secs = int(ra.strip())
                if secs > 0:
                    fields["retry_after"] = float(secs)
            except ValueError:
                pass
    cls = problem_class(fields["code"])
    return cls(status=status, body=body, **fields)


def _header(headers: Mapping[str, str], name: str) -> Optional[str]:
    for k, v in headers.items():
        if k.lower() == name.lower():
            return v
    return None


def problem_retryable(p: Problem) -> bool:
    """Whether the same request may be sent again after p."""
    if p.status == 503:
        return p.code == "" or p.code in RETRYABLE_CODES
    return p.status in (502, 504, 429)


def maybe_applied(err: BaseException) -> bool:
    """Whether a write that failed with err may have been applied."""
    if isinstance(err, OutcomeUnknown):
        return True
    if isinstance(err, Problem):
        return err.status in (500, 502, 504) or err.code == "outcome_unknown"
    return False


def retryable(err: BaseException) -> bool:
    """Whether err says the cluster could not answer (so the same request may
    be sent again), rather than a definite answer (Go's do.go retryable).
    NamespaceFull and LedgerFull (507) are definite refusals."""
    if isinstance(err, (NamespaceFull, LedgerFull)):
        return False
    if isinstance(err, Problem) and err.status >= 500:
        return True
    return isinstance(err, (OutcomeUnknown, Unavailable, RateLimited))


def error_result(err: BaseException, limit: int = 1024) -> Tuple[str, bytes]:
    """The message and JSON result recorded for a failed effect."""
    text = str(err)
    msg = "%s: %s" % (type(err).__name__, text) if text else type(err).__name__
    b = msg.encode("utf-8", "replace")
    if len(b) > limit:
        cut = limit
        while cut > 0 and (b[cut] & 0xC0) == 0x80:
            cut -= 1
        msg = b[:cut].decode("utf-8", "replace") + "..."
    return msg, json.dumps({"error": msg}, ensure_ascii=False).encode("utf-8")
