"""The decisions of the transport and of do(), written once for both
clients, without I/O (the "sans-I/O" style of h11 and hyper-h2).

Each flow is a generator that yields a step (Attempt, Pause, Refresh, Run)
and receives its outcome: the value, or the exception thrown in at the yield,
so a flow handles a failed step with an ordinary try/except. drive() runs a
flow with blocking I/O, adrive() with coroutines; Client, AsyncClient and
their transports supply only the I/O of each step. Reading the clock is the
only side effect here.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Awaitable, Callable, Generator, Optional, TypeVar, Union

from . import _api
from ._api import UNSET, Call
from ._core import MAX_LONG_POLL, Request, Route, encode_json, left, route_from_status
from .errors import (BadRequest, EffectUnknown, InDoubt, InFlight, IntentdError, NotFound, OutcomeUnknown,
                     PendingApproval, Problem, RateLimited, Unavailable, error_result, maybe_applied, parse_problem,
                     problem_retryable, retryable)
from .types import ClaimResult, ClusterStatus, EffectResult, Grant, Intent, IntentResult, Outcome, State, Status

log = logging.getLogger("intentd")

T = TypeVar("T")


class Attempt:
    """Send req once to the node at base: (status, decoded JSON) or a Problem."""
    __slots__ = ("base", "req")

    def __init__(self, base: str, req: Request) -> None:
        self.base = base
        self.req = req


class Pause:
    """Wait secs seconds."""
    __slots__ = ("secs",)

    def __init__(self, secs: float) -> None:
        self.secs = secs


class Refresh:
    """Discover the route again unless another call already replaced seen."""
    __slots__ = ("seen", "deadline")

    def __init__(self, seen: Route, deadline: Optional[float]) -> None:
        self.seen = seen
        self.deadline = deadline


class Run:
    """Perform an API call through the transport (retries included): its
    parsed answer or a Problem."""
    __slots__ = ("call", "deadline")

    def __init__(self, call: Call[Any], deadline: Optional[float] = None) -> None:
        self.call = call
        self.deadline = deadline


Step = Union[Attempt, Pause, Refresh, Run]
Flow = Generator[Step, Any, T]


def drive(flow: "Flow[T]", perform: Callable[[Step], Any]) -> T:
    """Runs flow, performing each step with perform (blocking)."""
    resume: Callable[[Any], Step] = flow.send
    arg: Any = None
    while True:
        try:
            step = resume(arg)
        except StopIteration as stop:
            return stop.value
        try:
            arg, resume = perform(step), flow.send
        except Exception as e:  # noqa: BLE001 - raised inside the flow, at its yield
            arg, resume = e, flow.throw


async def adrive(flow: "Flow[T]", perform: Callable[[Step], Awaitable[Any]]) -> T:
    """drive for asyncio: perform returns an awaitable."""
    resume: Callable[[Any], Step] = flow.send
    arg: Any = None
    while True:
        try:
            step = resume(arg)
        except StopIteration as stop:
            return stop.value
        try:
            arg, resume = await perform(step), flow.send
        except Exception as e:  # noqa: BLE001 - raised inside the flow, at its yield
            arg, resume = e, flow.throw


# -- transport -----------------------------------------------------------------


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
    """A Problem of the transport's own (no answer came)."""
    p = cls(detail=detail)
    p._transport = True  # type: ignore[attr-defined]
    return p


def as_outcome_unknown(p: Problem, detail: str = "") -> OutcomeUnknown:
    o = OutcomeUnknown(detail=detail or p.detail, status=p.status, code=p.code, title=p.title, type=p.type,
                       field=p.field, intent=p.intent, retry_after=p.retry_after, body=p.body)
    o._transport = getattr(p, "_transport", False)  # type: ignore[attr-defined]
    return o


def answer_document(req: Request, where: str, status: int, headers: Any, data: bytes) -> Any:
    """The JSON document of a 2xx answer to req; any other answer is raised
    as its Problem (a write's 502 or 504 as OutcomeUnknown: it may have been
    applied). A 2xx body that does not decode is a transport error, unknown
    for a write."""
    if 200 <= status < 300:
        try:
            return json.loads(data.decode("utf-8")) if data else None
        except (ValueError, UnicodeDecodeError) as e:
            kind = OutcomeUnknown if req.write else Unavailable
            raise transport_error(kind, "%s: decoding the %d answer: %s" % (where, status, e)) from e
    p = parse_problem(status, headers, data)
    if req.write and status in (502, 504):
        raise as_outcome_unknown(p)
    raise p


def is_rate_limited(p: Problem) -> bool:
    return p.status == 429 or isinstance(p, RateLimited)


def current_route(t: Any, deadline: Optional[float]) -> "Flow[Route]":
    """The route to use: t's, discovered again when it is stale."""
    rt = t.route
    if not t.discovery or (rt.version > 0 and time.monotonic() - rt.at < t.discovery_refresh):
        return rt
    nrt = yield Refresh(rt, deadline)
    return nrt


def call(t: Any, req: Request) -> "Flow[Any]":
    """One API call through transport settings t (retries, backoff,
    rate_limit_wait, discovery, route): answers that say the cluster could
    not serve (503, 502, 504) and transport failures are sent again up to
    t.retries times, moving through the nodes and rediscovering the leader;
    429 on the same node, honouring Retry-After, for up to rate_limit_wait
    seconds. A definite answer (any other 4xx) is raised at once. A write
    that may have been applied by an earlier attempt ends as OutcomeUnknown
    rather than as the last attempt's clean failure."""
    if req.addr:
        out = yield Attempt(req.addr, req)
        return out
    rt = yield from current_route(t, req.deadline)
    idx = rt.preferred % len(rt.addrs)
    attempts = t.retries + 1
    tries = 0
    attempt = 0
    unknown = False
    rate_end = time.monotonic() + t.rate_limit_wait
    last: Optional[Problem] = None
    while True:
        base = rt.addrs[idx]
        try:
            out = yield Attempt(base, req)
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
        wait = t.backoff(attempt, last.retry_after)
        attempt += 1
        rem = left(req.deadline)
        if rem is not None:
            if rem <= 0:
                break
            wait = min(wait, rem)
        if limited and time.monotonic() + wait > rate_end:
            break
        yield Pause(wait)
        if req.deadline is not None and time.monotonic() >= req.deadline:
            break  # the last answer says more than "time is up"
        if limited:
            continue  # the node is up and asked us to slow down: same node
        nxt = (idx + 1) % len(rt.addrs)
        if t.discovery:
            nrt = yield Refresh(rt, req.deadline)
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


def discover(seeds: "list[str]", cur: Route, probe_timeout: float, deadline: Optional[float]) -> "Flow[Route]":
    """Asks the nodes in cur's order for GET /v1/cluster and returns the
    next route: the first ready node's view, else the first that named a
    leader, else cur's addresses again (a new version)."""
    now = time.monotonic()
    nxt = Route(cur.version + 1, cur.addrs, cur.leader, now, cur.preferred)
    budget = probe_timeout * len(cur.addrs)
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
            _, doc = yield Attempt(base, Request("GET", "/v1/cluster", probe=True, deadline=end))
        except Problem:
            continue
        st = ClusterStatus.from_dict(doc if isinstance(doc, dict) else {})
        r = route_from_status(seeds, base, st)
        if r is None:
            continue
        candidate = Route(nxt.version, r[0], r[1], now, 0)
        if st.ready:
            found = candidate
            break
        if found is None:
            found = candidate
    return found if found is not None else nxt


# -- do() ------------------------------------------------------------------------


def in_flight_wait(err: Problem, rem: float) -> float:
    """How long to long-poll an in_flight key: until it changes, at most
    until the holder's lease would pass (retry_after), the rest of the
    wait, and the cluster's long-poll limit."""
    ra = err.retry_after if err.retry_after else 1.0
    return max(0.0, min(rem, ra + 0.25, MAX_LONG_POLL))


def pending_error(resp: ClaimResult, waited: float) -> PendingApproval:
    detail = "the intent waits for an approver; nothing may run before it is approved"
    if waited > 0:
        detail += " (waited %gs)" % waited
    return PendingApproval(detail=detail, status=202, title="Pending approval", intent=resp.intent)


def gave_up(err: Problem, unknown: bool, key: str) -> Problem:
    if unknown and not isinstance(err, OutcomeUnknown):
        return OutcomeUnknown(detail="claim %r: an earlier attempt may have been granted: %s" % (key, err),
                              status=err.status, title=err.title, intent=err.intent, retry_after=err.retry_after)
    return err


def attach(e: BaseException, out: EffectResult) -> None:
    """Hangs the EffectResult on an error raised after fn ran."""
    try:
        if isinstance(e, IntentdError):
            e.effect = out
        else:
            setattr(e, "intentd_effect", out)
    except Exception:  # an exception type that takes no attributes
        pass


def setattr_quiet(obj: Any, name: str, value: Any) -> None:
    try:
        setattr(obj, name, value)
    except Exception:
        pass


def recorded(intent: Optional[Intent], sent: Optional[bytes]) -> Any:
    """The result the ledger stored, or what was sent, decoded."""
    if intent is not None and intent.has_result:
        return intent.result
    if sent is None:
        return None
    import json
    return json.loads(sent.decode("utf-8"))


def wait_change(key: str, version: int, secs: float, backoff: Any) -> "Flow[Optional[Intent]]":
    """Long-polls key until its version passes version or secs pass; the
    intent, or None when it could not be read."""
    try:
        intent = yield Run(_api.get(key, False, secs, version))
        return intent
    except NotFound:
        return None
    except Problem as err:
        if not retryable(err):
            raise
        yield Pause(min(backoff(0, err.retry_after), max(secs, 0.0)))
        return None


def report(key: str, owner: str, token: int, outcome: str, result: Optional[bytes], deadline: float,
           backoff: Any) -> "Flow[IntentResult]":
    """Sends a complete until the ledger answers definitely or deadline
    passes; every attempt is the same request."""
    attempt = 0
    while True:
        try:
            done = yield Run(_api.complete(key, owner, token, outcome, UNSET if result is None else result), deadline)
            return done
        except Problem as err:
            rem = deadline - time.monotonic()
            if not retryable(err) or rem <= 0:
                raise
            yield Pause(min(backoff(attempt, err.retry_after), rem))
            attempt += 1
            if deadline - time.monotonic() <= 0:
                raise


def settle_claim(key: str, tool: str, raw: Optional[bytes], owner: str, policy: Optional[str],
                 lease_s: Optional[float], fresh: bool, max_wait: float, approval_wait: float,
                 s: Any) -> "Flow[ClaimResult]":
    """Claims key until the answer is one do() acts on: granted, duplicate,
    or pending_approval once approval_wait has passed. Waits out another
    owner in flight (long-polls the key) and a pending approval, re-sends
    the same claim while its answer is lost, and releases this call's own
    grant whose answer was lost and whose lease passed. s: the settings
    (backoff, report_timeout)."""
    deadline = time.monotonic() + max_wait
    approval_end: Optional[float] = None
    unknown = False  # an attempt of this call may have been granted
    released = False  # this call already reported its own unused grant
    attempt = 0
    while True:
        try:
            resp = yield Run(_api.claim(key, tool, raw, owner, policy, lease_s))
        except InFlight as err:
            # Definite: another owner holds the key, so no attempt of this
            # call was granted. Wait for the key to change.
            unknown = False
            rem = deadline - time.monotonic()
            if rem <= 0:
                raise
            yield from wait_change(key, err.intent.version if err.intent else 0, in_flight_wait(err, rem), s.backoff)
            continue
        except InDoubt as err:
            if not (fresh and not released and err.intent is not None and err.intent.owner == owner):
                raise
            # A lost answer granted this call's own owner, whose lease then
            # passed unused: say so and claim again.
            _, result = error_result(RuntimeError(
                "the claim's answer was lost and its lease passed; the effect never ran"))
            yield from report(key, owner, err.intent.fencing_token, Outcome.FAILED, result,
                              time.monotonic() + s.report_timeout, s.backoff)
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
            yield Pause(min(s.backoff(attempt, err.retry_after), rem))
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
                intent = yield from wait_change(key, intent.version, min(rem, MAX_LONG_POLL), s.backoff)
            if intent is None and approval_end - time.monotonic() <= 0:
                return resp
            continue  # decided (or changed): claim again
        return resp


def claimed(key: str, resp: ClaimResult, owner: str, approval_wait: float) -> Optional[EffectResult]:
    """What do() returns for a settled claim that is not a grant (None for
    a grant: fn runs)."""
    if resp.status == Status.GRANTED:
        return None
    if resp.status == Status.DUPLICATE:
        return EffectResult(status=Status.DUPLICATE, result=resp.intent.result if resp.intent else None,
                            intent=resp.intent, owner=owner)
    if resp.status == Status.PENDING_APPROVAL:
        raise pending_error(resp, approval_wait)
    raise IntentdError("claim %r: unexpected status %r" % (key, resp.status))


def failed(key: str, g: Grant, e: BaseException, out: EffectResult, s: Any) -> "Flow[None]":
    """Records that fn raised e (failed, with the error as the result),
    then re-raises e with the effect attached; when recording fails too,
    the report's error hangs on e as intentd_report_error."""
    _, result = error_result(e)
    try:
        done = yield from report(key, g.owner, g.fencing_token, Outcome.FAILED, result,
                                 time.monotonic() + s.report_timeout, s.backoff)
    except IntentdError as rerr:
        log.warning("intentd: effect %r failed (%s) and recording that failed: %s", key, e, rerr)
        setattr_quiet(e, "intentd_report_error", rerr)
        attach(e, out)
        raise e
    out.status, out.intent = Status.FAILED, done.intent
    out.result = recorded(done.intent, result)
    attach(e, out)
    raise e


def record(key: str, g: Grant, value: Any, out: EffectResult, s: Any) -> "Flow[EffectResult]":
    """Records that fn returned value (executed, value as the result; a
    result the ledger will not store is left out rather than leaving the
    effect to turn in_doubt) and commits it when s.auto_commit."""
    deadline = time.monotonic() + s.report_timeout
    enc_err: Optional[BadRequest] = None
    try:
        result = encode_json(value, "result")
    except BadRequest as e:
        enc_err, result = e, None
    try:
        try:
            done = yield from report(key, g.owner, g.fencing_token, Outcome.EXECUTED, result, deadline, s.backoff)
        except BadRequest as e:
            if result is None:
                raise
            enc_err, result = e, None
            done = yield from report(key, g.owner, g.fencing_token, Outcome.EXECUTED, None, deadline, s.backoff)
    except IntentdError as e:
        attach(e, out)
        raise
    out.status, out.intent = Status.EXECUTED, done.intent
    out.result = recorded(done.intent, result)
    if s.auto_commit:
        try:
            cr = yield Run(_api.commit(key, g.owner), deadline)
            if cr.intent is not None:
                out.intent = cr.intent
        except IntentdError:
            pass  # best-effort: the effect is recorded as executed
    if enc_err is not None:
        err = BadRequest(detail="effect %r executed and recorded without its result: %s" % (key, enc_err.detail),
                         status=enc_err.status, code=enc_err.code, field="result")
        attach(err, out)
        raise err
    return out


__all__ = ["Attempt", "Pause", "Refresh", "Run", "drive", "adrive", "call", "discover", "settle_claim", "record",
           "failed", "claimed", "EffectUnknown"]
