"""The API calls as (request, parser) pairs, shared by Client and
AsyncClient: each function checks its input, builds the Request and returns
it with the function that turns the answer (status, decoded JSON) into the
typed result."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar

from ._core import (MAX_LONG_POLL, RawJSON, Request, dump_body, duration_param, encode_json, intent_path, name_path,
                    seconds)
from .errors import BadRequest
from .types import (AuditTrail, ClaimResult, ClusterStatus, Intent, IntentResult, ListPage, Outcome, Policy,
                    TokenVerification)

T = TypeVar("T")
Call = Tuple[Request, Callable[[int, Any], T]]

# A marker for "no value given" where None is a value (a JSON null result).
UNSET: Any = object()


def _doc(d: Any) -> Dict[str, Any]:
    return d if isinstance(d, dict) else {}


def need_key(key: str) -> None:
    if not isinstance(key, str) or key == "":
        raise BadRequest(detail="key is required", field="key")


def _post(path: str, body: Dict[str, Any]) -> Request:
    return Request("POST", path, body=dump_body(body))


def claim(key: str, tool: str, payload: Any, owner: str, policy: Optional[str], lease: Any) -> Call[ClaimResult]:
    need_key(key)
    body: Dict[str, Any] = {"key": key, "tool": tool}
    raw = encode_json(payload, "payload")
    if raw is not None:
        body["payload"] = RawJSON(raw)
    body["owner"] = owner
    if policy:
        body["policy"] = policy
    lease_s = seconds(lease, "lease")
    if lease_s:
        body["lease_ms"] = int(lease_s * 1000)
    return _post("/v1/intents", body), lambda st, d: ClaimResult.from_dict(_doc(d), created=st == 201, owner=owner)


def _intent_call(key: str, action: str, body: Dict[str, Any]) -> Call[IntentResult]:
    need_key(key)
    return _post(intent_path(key, action), body), lambda st, d: IntentResult.from_dict(_doc(d))


def _outcome(outcome: str) -> str:
    if outcome not in (Outcome.EXECUTED, Outcome.FAILED):
        raise BadRequest(detail="outcome must be executed or failed, not %r" % (outcome,), field="outcome")
    return outcome


def complete(key: str, owner: str, fencing_token: int, outcome: str, result: Any = UNSET) -> Call[IntentResult]:
    body: Dict[str, Any] = {"owner": owner, "fencing_token": int(fencing_token), "outcome": _outcome(outcome)}
    if result is not UNSET:
        raw = encode_json(result, "result")
        if raw is not None:
            body["result"] = RawJSON(raw)
    return _intent_call(key, "complete", body)


def renew(key: str, owner: str, fencing_token: int, lease: Any) -> Call[IntentResult]:
    lease_s = seconds(lease, "lease") or 0.0
    return _intent_call(key, "renew", {"owner": owner, "fencing_token": int(fencing_token),
                                       "lease_ms": int(lease_s * 1000)})


def commit(key: str, owner: str) -> Call[IntentResult]:
    return _intent_call(key, "commit", {"owner": owner})


def resolve(key: str, outcome: str, result: Any = UNSET, actor: str = "", reason: str = "") -> Call[IntentResult]:
    body: Dict[str, Any] = {"outcome": _outcome(outcome)}
    if result is not UNSET:
        raw = encode_json(result, "result")
        if raw is not None:
            body["result"] = RawJSON(raw)
    body["actor"] = actor
    if reason:
        body["reason"] = reason
    return _intent_call(key, "resolve", body)


def decide(key: str, approve: bool, actor: str = "", reason: str = "", fingerprint: str = "") -> Call[IntentResult]:
    body: Dict[str, Any] = {}
    if actor:
        body["actor"] = actor
    if reason:
        body["reason"] = reason
    if fingerprint:
        body["fingerprint"] = fingerprint
    return _intent_call(key, "approve" if approve else "reject", body)


def get(key: str, stale: bool = False, wait: Any = None, after_version: int = 0) -> Call[Intent]:
    need_key(key)
    q: List[Tuple[str, str]] = []
    extra = 0.0
    if wait is not None:
        w = seconds(wait, "wait") or 0.0
        if w < 0 or w > MAX_LONG_POLL:
            raise BadRequest(detail="wait %gs is outside 0..%gs" % (w, MAX_LONG_POLL), field="wait")
        q += [("wait", duration_param(w)), ("after_version", str(int(after_version)))]
        extra = w
    if stale:
        q.append(("consistency", "stale"))
    return Request("GET", intent_path(key), query=q or None, extra_timeout=extra), \
        lambda st, d: Intent.from_dict(_doc(d))


def list_intents(state: Optional[str] = None, prefix: Optional[str] = None, limit: int = 0,
                 cursor: Optional[str] = None, stale: bool = False) -> Call[ListPage]:
    q: List[Tuple[str, str]] = []
    if state:
        q.append(("state", state))
    if prefix:
        q.append(("prefix", prefix))
    if limit:
        q.append(("limit", str(int(limit))))
    if cursor:
        q.append(("cursor", cursor))
    if stale:
        q.append(("consistency", "stale"))
    return Request("GET", "/v1/intents", query=q or None), lambda st, d: ListPage.from_dict(_doc(d))


def audit(key: str) -> Call[AuditTrail]:
    need_key(key)
    return Request("GET", intent_path(key, "audit")), lambda st, d: AuditTrail.from_dict(_doc(d))


def verify_token(execution_token: str, payload: Any = UNSET, fingerprint: str = "",
                 tool: str = "") -> Call[TokenVerification]:
    body: Dict[str, Any] = {"execution_token": execution_token}
    if payload is not UNSET and payload is not None:
        raw = encode_json(payload, "payload")
        if raw is not None:
            body["payload"] = RawJSON(raw)
    if fingerprint:
        body["fingerprint"] = fingerprint
    if tool:
        body["tool"] = tool
    return _post("/v1/tokens/verify", body), lambda st, d: TokenVerification.from_dict(_doc(d))


def _policy_of(st: int, d: Any) -> Policy:
    p = _doc(d).get("policy")
    return Policy.from_dict(p if isinstance(p, dict) else {})


def put_policy(policy: Policy, expect_version: int = 0) -> Call[Policy]:
    if not policy.name:
        raise BadRequest(detail="put policy: name is required", field="name")
    body = policy.to_dict()
    if expect_version:
        body["expect_version"] = int(expect_version)
    return Request("PUT", name_path("/v1/policies/", policy.name), body=dump_body(body)), _policy_of


def get_policy(name: str) -> Call[Policy]:
    if not name:
        raise BadRequest(detail="policy name is required", field="name")
    return Request("GET", name_path("/v1/policies/", name)), _policy_of


def list_policies() -> Call[List[Policy]]:
    return Request("GET", "/v1/policies"), \
        lambda st, d: [Policy.from_dict(p) for p in _doc(d).get("policies") or [] if isinstance(p, dict)]


def delete_policy(name: str) -> Call[None]:
    if not name:
        raise BadRequest(detail="policy name is required", field="name")
    return Request("DELETE", name_path("/v1/policies/", name)), lambda st, d: None


def cluster() -> Call[ClusterStatus]:
    return Request("GET", "/v1/cluster"), lambda st, d: ClusterStatus.from_dict(_doc(d))


def jwks() -> Call[Dict[str, Any]]:
    return Request("GET", "/v1/keys"), lambda st, d: _doc(d)
