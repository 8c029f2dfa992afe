"""The blocking client (Go's client.Client), with do() and the once()
decorator."""

from __future__ import annotations

import functools
import logging
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, TypeVar, Union

from . import _api
from ._api import UNSET, Call
from ._core import (DEFAULT_BACKOFF_BASE, DEFAULT_BACKOFF_MAX, DEFAULT_DISCOVERY_REFRESH, DEFAULT_MAX_WAIT,
                    DEFAULT_RATE_LIMIT_WAIT, DEFAULT_REPORT_TIMEOUT, DEFAULT_RETRIES, DEFAULT_TIMEOUT,
                    MAX_IDLE_PER_NODE, USER_AGENT, Backoff, Request, TLSArg, encode_json, make_tls, new_owner,
                    TraceInject, normalize_addr, seconds, split_addrs)
from . import _flow
from ._decorate import CallSpec, KeySpec, reset_grant, set_grant
from ._flow import Run, Step, attach
from ._sync import SyncTransport
from .errors import BadRequest, EffectUnknown, Fenced, InDoubt, InvalidState, NotFound, Problem
from .keys import validate_key
from .types import (AuditTrail, ClaimResult, ClusterStatus, EffectResult, Grant, Health, Intent, IntentResult,
                    ListPage, Outcome, Policy, State, TokenVerification)

__all__ = ["Client"]

log = logging.getLogger("intentd")

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class _Settings:
    """The options Client and AsyncClient share."""

    def __init__(self, addrs: Union[str, Sequence[str]], api_key: Optional[str], timeout: float, tls: TLSArg,
                 retries: int, backoff_base: float, backoff_max: float, discovery: bool, discovery_refresh: float,
                 max_wait: float, report_timeout: float, approval_wait: Optional[float], auto_commit: bool,
                 rate_limit_wait: float, max_idle_per_node: int, user_agent: str) -> None:
        self.ssl_ctx = make_tls(tls)
        self.seeds = split_addrs(addrs, "https" if self.ssl_ctx is not None else "http")
        self.api_key = api_key or None
        self.timeout = float(timeout)
        self.retries = max(0, int(retries))
        self.backoff = Backoff(backoff_base, backoff_max)
        self.discovery = discovery
        self.discovery_refresh = float(discovery_refresh)
        self.max_wait = float(max_wait)
        self.report_timeout = float(report_timeout)
        self.approval_wait = self.max_wait if approval_wait is None else float(approval_wait)
        self.auto_commit = auto_commit
        self.rate_limit_wait = float(rate_limit_wait)
        self.max_idle = max(0, int(max_idle_per_node))
        self.user_agent = user_agent


def check_effect(key: str, tool: str, payload: Any, fn: Any) -> Optional[bytes]:
    """do()'s local checks, before anything is sent: BadRequest for a bad
    key, no tool, a payload that is not JSON or no function."""
    if not callable(fn):
        raise BadRequest(detail="do: no function to run", field="fn")
    validate_key(key)
    if not isinstance(tool, str) or not tool:
        raise BadRequest(detail="do %r: tool is required" % (key,), field="tool")
    return encode_json(payload, "payload")


def lease_of(lease_s: Optional[float], resp: ClaimResult) -> float:
    if lease_s and lease_s > 0:
        return lease_s
    if resp.intent is not None and resp.intent.lease_ms > 0:
        return resp.intent.lease_ms / 1000.0
    return 30.0


class Client:
    """A client of an intentd cluster. Thread-safe; share one per process.

    ``addrs``: any node list ("http://127.0.0.1:8101", "127.0.0.1:8101", or
    one comma-separated str). With discovery (the default) the client asks
    the nodes for GET /v1/cluster on its first call, sends calls to the
    leader first, and asks again when a node could not serve or every
    ``discovery_refresh`` seconds.

    ``api_key``: sent as a bearer token (clusters with --auth=required).
    ``timeout``: seconds one HTTP request may take (a long-poll adds its
    wait). ``tls``: an ssl.SSLContext, a CA file path, or a mapping/tuple of
    CA, client certificate and key paths; addresses without a scheme are
    https then.

    Retries: calls are retried on what the cluster could not answer (503
    no_leader, not_leader, outcome_unknown, unavailable, shutting_down;
    502/504; connection errors) up to ``retries`` times with exponential
    backoff (``backoff_base``..``backoff_max`` seconds, jittered, at least
    the server's Retry-After up to the max), moving through the nodes; 429
    on the same node for up to ``rate_limit_wait`` seconds. Every write is
    retried with the same body (key, owner, payload, fencing token), so a
    retry never does more than the first attempt. A definite answer (any
    other 4xx) is raised at once as its Problem subclass.

    do(): ``max_wait`` bounds the wait for a claim to settle (another owner
    in flight, an unknown outcome), ``approval_wait`` the wait for an
    approver (default: max_wait; 0 raises PendingApproval at once, as Go's
    Do), ``report_timeout`` how long the outcome of an effect that ran is
    retried, ``auto_commit`` whether an executed intent is then committed.
    """

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
        self._t = SyncTransport(s.seeds, api_key=s.api_key, timeout=s.timeout, ssl_ctx=s.ssl_ctx,
                                retries=s.retries, backoff=s.backoff, discovery=s.discovery,
                                discovery_refresh=s.discovery_refresh, rate_limit_wait=s.rate_limit_wait,
                                max_idle=s.max_idle, user_agent=s.user_agent, trace_inject=trace_inject)

    # -- lifecycle ----------------------------------------------------------

    def close(self) -> None:
        """Closes the idle connections."""
        self._t.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def addrs(self) -> List[str]:
        """The configured addresses, normalized."""
        return list(self._s.seeds)

    @property
    def leader(self) -> str:
        """The leader's address as last discovered ("" when none was)."""
        return self._t.route.leader

    def endpoints(self) -> List[str]:
        """The addresses in the order the next call tries them."""
        return self._t.endpoints()

    def discover(self) -> str:
        """Asks the nodes for the cluster's status now and puts the leader
        first; returns its address. Raises NoLeader when no node named one."""
        from .errors import NoLeader
        leader = self._t.discover()
        if not leader:
            raise NoLeader(detail="discovery: no node named a leader")
        return leader

    def _run(self, call: Call[T], deadline: Optional[float] = None) -> T:
        req, parse = call
        if deadline is not None:
            req.deadline = deadline
        status, doc = self._t.call(req)
        return parse(status, doc)

    # -- intents --------------------------------------------------------------

    def claim(self, key: str, tool: str, payload: Any = None, owner: Optional[str] = None,
              policy: Optional[str] = None, lease: Any = None) -> ClaimResult:
        """Asks for the right to execute the effect named by key. Granted
        (new: created, or repeated to the same owner), duplicate (use
        intent.result) and pending_approval are answers; every refusal is
        raised (InFlight, InDoubt, Divergent, Rejected, BadRequest ...).
        owner=None makes a fresh one (returned in .owner); retries reuse it.
        lease: seconds (or a timedelta)."""
        return self._run(_api.claim(key, tool, payload, owner or new_owner(), policy, lease))

    def complete(self, key: str, owner: str, fencing_token: int, outcome: str = Outcome.EXECUTED,
                 result: Any = UNSET) -> IntentResult:
        """Reports the outcome ("executed" or "failed") of the effect by its
        owner and fencing token; a stale one raises Fenced."""
        return self._run(_api.complete(key, owner, fencing_token, outcome, result))

    def renew(self, key: str, owner: str, fencing_token: int, lease: Any) -> IntentResult:
        """Extends the owner's lease (seconds) while a long effect runs."""
        return self._run(_api.renew(key, owner, fencing_token, lease))

    def commit(self, key: str, owner: str) -> IntentResult:
        """Acknowledges an executed intent's result (executed -> committed)."""
        return self._run(_api.commit(key, owner))

    def resolve(self, key: str, outcome: str, result: Any = UNSET, actor: str = "", reason: str = "") -> IntentResult:
        """Settles an in_doubt intent as executed or failed, after checking
        the tool's side."""
        return self._run(_api.resolve(key, outcome, result, actor, reason))

    def approve(self, key: str, actor: str = "", reason: str = "", fingerprint: str = "") -> IntentResult:
        """Approves a pending intent; fingerprint binds the approval to the
        payload the approver saw (Divergent if the intent's differs)."""
        return self._run(_api.decide(key, True, actor, reason, fingerprint))

    def reject(self, key: str, actor: str = "", reason: str = "", fingerprint: str = "") -> IntentResult:
        """Rejects a pending intent."""
        return self._run(_api.decide(key, False, actor, reason, fingerprint))

    def get(self, key: str, *, stale: bool = False, wait: Any = None, after_version: int = 0) -> Intent:
        """Reads one intent (linearizable unless stale); NotFound when there
        is none. With wait (seconds, at most 60) it long-polls: it answers
        as soon as the intent's version is above after_version, or after
        wait with the intent as it is."""
        return self._run(_api.get(key, stale, wait, after_version))

    def wait(self, key: str, after_version: int, wait: Any = 30.0) -> Intent:
        """Long-polls one intent (Go's Wait): get(key, wait=wait,
        after_version=after_version)."""
        return self.get(key, wait=wait, after_version=after_version)

    def list(self, *, state: Optional[str] = None, prefix: Optional[str] = None, limit: int = 0,
             cursor: Optional[str] = None, stale: bool = False) -> ListPage:
        """A page of intents in key order; pass .next_cursor on."""
        return self._run(_api.list_intents(state, prefix, limit, cursor, stale))

    def approvals(self, *, prefix: Optional[str] = None, limit: int = 0, cursor: Optional[str] = None) -> ListPage:
        """The pending_approval queue (list(state="pending_approval"))."""
        return self.list(state=State.PENDING_APPROVAL, prefix=prefix, limit=limit, cursor=cursor)

    def audit(self, key: str) -> AuditTrail:
        """Every recorded attempt on key, oldest first."""
        return self._run(_api.audit(key))

    # -- gate -------------------------------------------------------------------

    def verify_token(self, execution_token: str, payload: Any = UNSET, fingerprint: str = "", *,
                     tool: str = "") -> TokenVerification:
        """The tool side (role tool): asks the ledger whether it may act on an
        execution token, bound to payload (or fingerprint) when given. tool
        names the tool about to act: a token granted for another tool raises
        TokenWrongTool, and one for a tool outside the API key's tools
        raises TokenToolForbidden; neither spends the token. A valid answer
        spends it (its claims.tool names the tool it is for); later ones
        raise TokenUsed. Others: TokenExpired, TokenInvalid, Fenced,
        InDoubt. An OutcomeUnknown may have spent it: do not act on it."""
        return self._run(_api.verify_token(execution_token, payload, fingerprint, tool))

    def put_policy(self, policy: Policy, expect_version: int = 0) -> Policy:
        """Creates or replaces a policy (admin); expect_version makes it a
        compare-and-set (InvalidState when someone changed it)."""
        return self._run(_api.put_policy(policy, expect_version))

    def policy(self, name: str) -> Policy:
        """Reads one policy; NotFound when there is none."""
        return self._run(_api.get_policy(name))

    get_policy = policy

    def policies(self) -> List[Policy]:
        """Every policy: the default first, then in matching order."""
        return self._run(_api.list_policies())

    def delete_policy(self, name: str) -> None:
        """Removes a policy (admin)."""
        self._run(_api.delete_policy(name))

    def jwks(self) -> Dict[str, Any]:
        """The execution-token public keys (a JWKS)."""
        return self._run(_api.jwks())

    # -- cluster ----------------------------------------------------------------

    def cluster(self) -> ClusterStatus:
        """The cluster's status as the answering node sees it."""
        return self._run(_api.cluster())

    def health(self, addr: Optional[str] = None) -> Health:
        """Whether the node at addr (default: the first configured) is live
        and ready, without retries. Not being ready is an answer; failing to
        reach the node raises Unavailable."""
        base = normalize_addr(addr) if addr else self._s.seeds[0]
        h = Health(addr=base)
        self._t.call(Request("GET", "/healthz", addr=base))
        h.live = True
        try:
            self._t.call(Request("GET", "/readyz", addr=base))
            h.ready = True
        except Problem as e:
            if e.code != "not_ready":
                raise
            h.detail = e.detail
        return h

    # -- do -----------------------------------------------------------------------

    def do(self, key: str, tool: str, payload: Any, fn: Callable[[Grant], Any], *, lease: Any = None,
           policy: Optional[str] = None, owner: Optional[str] = None, wait_approval: Any = None,
           max_wait: Any = None) -> EffectResult:
        """Runs fn at most once for the logical effect named by key, across
        retries, duplicate deliveries, concurrent callers and processes, and
        records its outcome (Go's Client.Do):

        - claims key with one owner for this call (``owner``, or a fresh
          one) and re-sends the same claim with that owner whenever the
          answer is lost or the cluster cannot answer;
        - granted: runs ``fn(grant)`` once, in this thread, while a
          background thread renews the lease every lease/3. A refused
          renewal (fenced, in_doubt) sets ``grant.cancelled`` (and
          ``grant.lost``): fn should check it before performing the effect;
        - fn returns v: records executed with v (JSON) as the result,
          commits it, returns EffectResult(status="executed", value=v,
          result=v as recorded, ran=True);
        - fn raises EffectUnknown: records nothing (the key turns in_doubt
          when its lease passes) and re-raises it;
        - fn raises another Exception: records failed with {"error": ...}
          (a later call may run the effect again) and re-raises it
          (KeyboardInterrupt and other BaseExceptions record nothing, as a
          Go panic);
        - duplicate: fn does not run; returns EffectResult(status=
          "duplicate", result=<the recorded result>);
        - in_flight (another owner holds the key): long-polls the key and
          claims again (same owner) until the holder's outcome is there,
          for up to max_wait seconds: then its result (duplicate), a grant
          of a new generation if it failed, or its error (in_doubt); still
          in flight at the end: InFlight;
        - pending_approval: long-polls the key for the decision for up to
          wait_approval seconds, claims again once approved and runs fn;
          Rejected when rejected; PendingApproval when the wait ends;
        - divergent, in_doubt, rejected ...: fn does not run; raises the
          Problem (with .intent);
        - the claim's outcome stays unknown: fn does not run; raises
          OutcomeUnknown. Pass the same owner to a later do() to resume.
        - the outcome of an effect that ran cannot be recorded (within
          report_timeout): raises that error with .effect (ran=True).

        Bad input (invalid key, no tool, a payload that is not JSON) raises
        BadRequest before anything is sent."""
        raw = check_effect(key, tool, payload, fn)
        lease_s = seconds(lease, "lease")
        mw = self._s.max_wait if max_wait is None else seconds(max_wait, "max_wait") or 0.0
        aw = self._s.approval_wait if wait_approval is None else seconds(wait_approval, "wait_approval") or 0.0
        fresh = not owner
        own = owner or new_owner()
        resp = self._drive(_flow.settle_claim(key, tool, raw, own, policy, lease_s, fresh, mw, aw, self._s))
        done = _flow.claimed(key, resp, own, aw)
        if done is not None:
            return done
        return self._execute(key, resp, lease_s, fn)

    def _perform(self, step: Step) -> Any:
        if type(step) is Run:
            return self._run(step.call, step.deadline)
        time.sleep(step.secs)
        return None

    def _drive(self, flow: "_flow.Flow[T]") -> T:
        return _flow.drive(flow, self._perform)

    def _execute(self, key: str, resp: ClaimResult, lease_s: Optional[float],
                 fn: Callable[[Grant], Any]) -> EffectResult:
        g = Grant(key=key, owner=resp.owner, fencing_token=resp.fencing_token,
                  execution_token=resp.execution_token, intent=resp.intent)
        lease = lease_of(lease_s, resp)
        stop = threading.Event()
        renewer = threading.Thread(target=self._keep_alive, args=(g, lease, stop), name="intentd-renew", daemon=True)
        renewer.start()
        out = EffectResult(ran=True, intent=resp.intent, owner=g.owner, fencing_token=g.fencing_token)
        tok = set_grant(g)
        try:
            try:
                value = fn(g)
            finally:
                reset_grant(tok)
                stop.set()  # a renewal under way finishes first
                renewer.join()
        except EffectUnknown as e:
            attach(e, out)
            raise
        except Exception as e:
            self._drive(_flow.failed(key, g, e, out, self._s))
        out.value = value
        return self._drive(_flow.record(key, g, value, out, self._s))

    def _keep_alive(self, g: Grant, lease: float, stop: threading.Event) -> None:
        """Renews the grant's lease every lease/3 until stop is set. A
        refusal means the right to execute is gone: it sets g.cancelled.
        Other failures (the cluster could not answer) are tried again at the
        next tick."""
        every = max(lease / 3.0, 0.001)
        while not stop.wait(every):
            try:
                self._run(_api.renew(g.key, g.owner, g.fencing_token, lease),
                          deadline=time.monotonic() + max(lease - every, 0.001))
            except (Fenced, InDoubt, InvalidState, NotFound) as err:
                g._lose(err)
                return
            except Exception:  # noqa: BLE001 - the next tick tries again
                continue

    # -- decorator ------------------------------------------------------------------

    def once(self, tool: str, key: Optional[KeySpec] = None, *, payload: Optional[Callable[..., Any]] = None,
             exclude: Iterable[str] = (), lease: Any = None, policy: Optional[str] = None,
             wait_approval: Any = None, max_wait: Any = None) -> Callable[[F], F]:
        """Decorates a plain function so every call of it runs through
        do(): at most once per key. The wrapped function keeps its name,
        docstring and signature (functools.wraps), so agent frameworks
        register it as a tool as they would the original.

        ``key``: a function of the call's arguments, passed by name
        (``key=lambda order_id, **_: order_id``), returning the key (a str,
        used as it is) or a tuple of parts (made into key(tool, *parts));
        or a constant str. ``payload``: a function of the call's arguments
        (by name) returning the payload; by default the call's arguments by
        name (defaults applied; ``exclude`` names and a leading self/cls
        left out), which must be JSON-serialisable.

        A call returns the function's value when this call ran it, or the
        recorded result of the call that did (duplicate; decoded JSON, so a
        tuple comes back as a list). Inside, current_grant() gives the
        grant. Errors are do()'s."""

        def decorate(fn: F) -> F:
            spec = CallSpec(fn, tool, key, payload, exclude)

            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                k, p = spec.derive(args, kwargs)
                res = self.do(k, tool, p, lambda _g: fn(*args, **kwargs), lease=lease, policy=policy,
                              wait_approval=wait_approval, max_wait=max_wait)
                return res.value if res.ran else res.result

            wrapper.__intentd_tool__ = tool  # type: ignore[attr-defined]
            return wrapper  # type: ignore[return-value]

        return decorate
