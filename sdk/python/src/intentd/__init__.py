"""intentd: the Python SDK of the intentd intent ledger, the at-most-once
gate in front of side-effecting tool calls.

Most callers need three things: Client (or AsyncClient) to connect to a
cluster, key() to name a logical effect after the business entity it acts
on, and Client.do() (or the Client.once() decorator) to run the effect at
most once under that key::

    import intentd

    ledger = intentd.Client(["http://127.0.0.1:8101", "http://127.0.0.1:8102"], api_key=KEY)
    res = ledger.do(intentd.key("stripe.charge", order_id), "stripe.charge", charge,
                    lambda grant: stripe_charge(charge, grant.fencing_token))
    res.status   # "executed" (this call ran it) or "duplicate" (res.result is the earlier result)

The Go SDK (client/ in the intentd repository) is the reference: the same
contract, errors and keys.
"""

from __future__ import annotations

from ._core import new_owner, tls_context, traceparent, valid_traceparent
from ._decorate import current_grant
from .aio import AsyncClient
from .client import Client
from .errors import (BadRequest, BadSnapshot, Blocked, Divergent, EffectUnknown, Fenced, Forbidden, InDoubt, InFlight,
                     IntentdError, InvalidState, LedgerFull, NamespaceFull, NoLeader, NotEmpty, NotFound, NotGrantHolder, OutcomeUnknown,
                     PendingApproval, Problem, RateLimited, Rejected, SelfApproval, TokenExpired, TokenInvalid,
                     TokenToolForbidden, TokenUsed, TokenWrongTool, Unauthorized, Unavailable, problem_class)
from .keys import KEY_SEPARATOR, MAX_KEY_BYTES, key, key_of, validate_key
from .types import (Approval, AuditEvent, AuditTrail, ClaimResult, ClusterStatus, EffectResult, Grant, Health, Intent,
                    IntentResult, ListPage, NodeStatus, Outcome, Policy, State, Status, TokenClaims,
                    TokenVerification)

__version__ = "0.1.0"

__all__ = [
    "Client", "AsyncClient", "key", "key_of", "validate_key", "new_owner", "current_grant", "tls_context",
    "MAX_KEY_BYTES", "KEY_SEPARATOR", "traceparent", "valid_traceparent",
    # errors
    "IntentdError", "Problem", "InFlight", "InDoubt", "Divergent", "Fenced", "Rejected", "PendingApproval",
    "NotFound", "InvalidState", "BadRequest", "Blocked", "TokenUsed", "TokenExpired", "TokenInvalid",
    "TokenWrongTool", "TokenToolForbidden", "Unauthorized", "Forbidden", "NotGrantHolder", "SelfApproval", "RateLimited", "NamespaceFull", "LedgerFull",
    "Unavailable", "NoLeader", "OutcomeUnknown", "BadSnapshot", "NotEmpty", "EffectUnknown", "problem_class",
    # types
    "Intent", "Approval", "ClaimResult", "IntentResult", "Grant", "EffectResult", "ListPage", "AuditEvent",
    "AuditTrail", "Policy", "TokenClaims", "TokenVerification", "ClusterStatus", "NodeStatus", "Health", "State",
    "Status", "Outcome",
]
