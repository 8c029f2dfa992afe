#!/usr/bin/env python3
"""The Python SDK's runner of the conformance suite (sdk/conformance).

Started from the repository root by the harness with INTENTD_ADDRS,
INTENTD_API_KEY, INTENTD_APPROVER_KEY, INTENTD_CONTROL, INTENTD_RUN,
INTENTD_SCENARIOS and INTENTD_KEY_VECTORS set (sdk/conformance/README.md).
It runs every scenario of scenarios.json in order and prints one JSON line
per scenario on stdout, {"scenario": ID, "ok": bool, "detail": text};
anything else goes to stderr. It exits 0 only if every scenario passed.

Standard library only; the SDK is imported from sdk/python/src, so nothing
needs installing.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
import traceback
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import intentd  # noqa: E402

Result = Tuple[bool, str]


def log(*a: Any) -> None:
    print(*a, file=sys.stderr, flush=True)


class Counter:
    """Counts fn runs, per key."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_key: Dict[str, int] = {}

    def inc(self, key: str) -> int:
        with self.lock:
            self.by_key[key] = self.by_key.get(key, 0) + 1
            return self.by_key[key]

    def get(self, key: str) -> int:
        with self.lock:
            return self.by_key.get(key, 0)


class ClaimWatch:
    """The claim answers one client received: how many the ledger answered
    (a result, or an in_flight refusal) and which owners were refused."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.answered = 0
        self.refused: Dict[str, int] = {}

    def saw(self, owner: str, refused: bool) -> None:
        with self.cond:
            self.answered += 1
            if refused:
                self.refused[owner] = self.refused.get(owner, 0) + 1
            self.cond.notify_all()

    def state(self) -> Tuple[int, int]:
        with self.cond:
            return self.answered, len(self.refused)

    def wait_refused(self, owners: int, timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: len(self.refused) >= owners, timeout)


# The reason of a coalesced refusal note (fsm/refusalnote.go): its N is the
# claims it stands for.
REFUSAL_NOTE = re.compile(r"^(\d+) (in_flight|in_doubt) refusals of fencing token \d+ by owners ")


def count_claims(trail: Any) -> Dict[str, int]:
    """The claims a key's audit trail records: an op claim event counts 1,
    a refusal note its N."""
    c = {"total": 0, "granted": 0, "duplicate": 0, "refused_events": 0, "refused_noted": 0, "notes": 0}
    for e in trail.events:
        if e.op != "claim":
            continue
        m = REFUSAL_NOTE.match(e.reason or "")
        if m:
            k = int(m.group(1))
            c["notes"] += 1
            c["refused_noted"] += k
            c["total"] += k
            continue
        if e.status == "granted":
            c["granted"] += 1
        elif e.status == "duplicate":
            c["duplicate"] += 1
        elif e.status == "in_flight":
            c["refused_events"] += 1
        c["total"] += 1
    return c


def describe_claims(c: Dict[str, int]) -> str:
    if not c:
        return "nothing"
    return "%d claims (%d granted, %d duplicate, %d refused as events, %d refused in %d notes)" % (
        c["total"], c["granted"], c["duplicate"], c["refused_events"], c["refused_noted"], c["notes"])


class Runner:
    def __init__(self) -> None:
        env = os.environ
        self.addrs = [a for a in env.get("INTENTD_ADDRS", "").split(",") if a.strip()]
        self.api_key = env.get("INTENTD_API_KEY") or None
        self.approver_key = env.get("INTENTD_APPROVER_KEY") or None
        self.control = env.get("INTENTD_CONTROL", "").rstrip("/")
        self.run = env.get("INTENTD_RUN") or "py-%d" % int(time.time() * 1000)
        self.scenarios_path = env.get("INTENTD_SCENARIOS", "sdk/conformance/scenarios.json")
        self.vectors_path = env.get("INTENTD_KEY_VECTORS", "sdk/conformance/key-vectors.json")
        self.ledger = intentd.Client(self.addrs, api_key=self.api_key) if self.addrs else None
        self.shared: Dict[str, Any] = {}

    def k(self, *parts: str) -> str:
        """A key of this run: INTENTD_RUN, then the parts."""
        return self.run + ":" + ":".join(parts)

    def control_call(self, method: str, path: str, timeout: float = 120.0) -> Any:
        req = urllib.request.Request(self.control + path, method=method, data=b"" if method == "POST" else None)
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read().decode("utf-8") or "null")

    # -- scenarios ---------------------------------------------------------------

    def key_vectors(self, sc: Dict[str, Any]) -> Result:
        with open(self.vectors_path, encoding="utf-8") as f:
            vectors = json.load(f)
        bad = []
        for i, v in enumerate(vectors):
            got = intentd.key_of(*v["parts"])
            if got != v["key"]:
                bad.append("vector %d: %r -> %r, want %r" % (i, v["parts"], got, v["key"]))
        if bad:
            return False, "; ".join(bad)
        return True, "%d vectors match" % len(vectors)

    def bad_input_local(self, sc: Dict[str, Any]) -> Result:
        c = self.ledger
        assert c is not None
        runs = Counter()

        def fn(g: intentd.Grant) -> Any:
            runs.inc("x")
            return "ran"

        k_payload = self.k("bad-input", "payload")
        k_tool = self.k("bad-input", "tool")
        long_key = self.k("bad-input", "long") + "x" * 257
        cases = [
            ("payload not JSON", k_payload, "conformance.charge", {"when": object()}),
            ("key over 256 bytes", long_key, "conformance.charge", {"a": 1}),
            ("empty key", "", "conformance.charge", {"a": 1}),
            ("empty tool", k_tool, "", {"a": 1}),
        ]
        notes = []
        before = c._t.sent
        for name, key, tool, payload in cases:
            try:
                c.do(key, tool, payload, fn)
                return False, "%s: do() returned" % name
            except intentd.BadRequest as e:
                notes.append("%s: %s" % (name, e.detail))
            if c._t.sent != before:
                return False, "%s: %d request(s) were sent" % (name, c._t.sent - before)
        if runs.get("x"):
            return False, "fn ran %d times" % runs.get("x")
        for key in (k_payload, k_tool):
            try:
                c.get(key)
                return False, "%r exists afterwards" % key
            except intentd.NotFound:
                pass
        return True, "fn ran 0 times, no request sent; " + "; ".join(notes)

    def granted_executed(self, sc: Dict[str, Any]) -> Result:
        c = self.ledger
        assert c is not None
        runs = Counter()
        key = self.k("charge", "order-1")
        payload = {"amount": 1299, "currency": "usd"}
        self.shared["charge"] = (key, payload)

        def fn(g: intentd.Grant) -> Any:
            runs.inc(key)
            return {"charge": "ch_1"}

        res = c.do(key, sc["tool"], payload, fn)
        if runs.get(key) != 1 or res.status != "executed" or res.value != {"charge": "ch_1"}:
            return False, "fn ran %d times; status %s; value %r" % (runs.get(key), res.status, res.value)
        it = c.get(key)
        if it.state not in ("executed", "committed") or it.result != {"charge": "ch_1"}:
            return False, "get: state %s result %r" % (it.state, it.result)
        return True, "fn ran 1 time; state %s; result %s" % (it.state, json.dumps(it.result))

    def duplicate(self, sc: Dict[str, Any]) -> Result:
        c = self.ledger
        assert c is not None
        key, payload = self.shared["charge"]
        runs = Counter()
        res = c.do(key, sc["tool"], dict(payload), lambda g: runs.inc(key))
        if runs.get(key) or res.status != "duplicate" or res.result != {"charge": "ch_1"}:
            return False, "fn ran %d times; status %s; result %r" % (runs.get(key), res.status, res.result)
        return True, "fn ran 0 times; result %s" % json.dumps(res.result)

    def divergent(self, sc: Dict[str, Any]) -> Result:
        c = self.ledger
        assert c is not None
        key, payload = self.shared["charge"]
        runs = Counter()
        other = dict(payload, amount=9999)
        try:
            res = c.do(key, sc["tool"], other, lambda g: runs.inc(key))
            return False, "do() returned %s" % res.status
        except intentd.Divergent as e:
            if runs.get(key):
                return False, "fn ran %d times" % runs.get(key)
            return True, "fn ran 0 times; %s" % e.code

    def concurrent_one_effect(self, sc: Dict[str, Any]) -> Result:
        c = self.ledger
        assert c is not None
        key = self.k("concurrent", "order-1")
        n, fn_s = int(sc.get("callers", 10)), sc.get("fn_ms", 300) / 1000.0
        runs = Counter()
        start = threading.Barrier(n)

        def fn(g: intentd.Grant) -> Any:
            runs.inc(key)
            time.sleep(fn_s)
            return {"charge": "ch_once", "fence": g.fencing_token}

        def call(i: int) -> Any:
            start.wait()
            res = c.do(key, sc["tool"], {"amount": 500}, fn)
            return res.value if res.ran else res.result

        with ThreadPoolExecutor(n) as ex:
            results = list(ex.map(call, range(n)))
        if runs.get(key) != 1:
            return False, "fn ran %d times" % runs.get(key)
        if any(r != results[0] for r in results) or not isinstance(results[0], dict):
            return False, "results differ: %r" % results
        return True, "fn ran 1 time for %d callers; every call returned %s" % (n, json.dumps(results[0]))

    def waiters_claim_once_per_change(self, sc: Dict[str, Any]) -> Result:
        key = self.k("waiters", "order-1")
        n = int(sc.get("waiters", 4))
        wait_s = sc.get("wait_ms", 20000) / 1000.0
        settle_s = sc.get("settle_ms", 1500) / 1000.0
        # A client of its own whose claim answers the runner watches: it
        # wraps this instance's transport's once() (one request to one
        # node), the SDK's source untouched.
        c = intentd.Client(self.addrs, api_key=self.api_key)
        watch = ClaimWatch()
        orig_once = c._t.once

        def once(base: str, req: Any) -> Any:
            if req.method != "POST" or req.path != "/v1/intents":
                return orig_once(base, req)
            try:
                owner = json.loads(req.body.decode("utf-8")).get("owner", "")
            except Exception:  # noqa: BLE001 - not a claim we can read
                owner = ""
            try:
                out = orig_once(base, req)
            except intentd.Problem as e:
                if e.code == "in_flight":
                    watch.saw(owner, refused=True)
                raise
            watch.saw(owner, refused=False)
            return out

        c._t.once = once  # type: ignore[method-assign]
        result = {"charge": "ch_waited"}
        runs = Counter()
        granted, release = threading.Event(), threading.Event()

        def fn(g: intentd.Grant) -> Any:
            if runs.inc(key) == 1:
                granted.set()
            if not release.wait(wait_s + 30):
                raise RuntimeError("never released")
            return result

        outs: Dict[int, Any] = {}

        def call(i: int) -> None:
            try:
                outs[i] = c.do(key, sc["tool"], {"amount": 700}, fn)
            except BaseException as e:  # noqa: BLE001 - reported below
                outs[i] = e

        threads = [threading.Thread(target=call, args=(0,))]
        threads[0].start()
        try:
            if not granted.wait(wait_s):
                return False, "the holder was not granted within %gs: %r" % (wait_s, outs.get(0))
            for i in range(1, n + 1):
                threads.append(threading.Thread(target=call, args=(i,)))
                threads[-1].start()
            # Release once every waiter's first claim was answered in_flight.
            if not watch.wait_refused(n, wait_s):
                return False, "only %d of %d waiters were refused in_flight within %gs" % (
                    watch.state()[1], n, wait_s)
        finally:
            release.set()
            for t in threads:
                t.join(wait_s + 60)
            c.close()
        if any(t.is_alive() for t in threads):
            return False, "a do() did not return"
        h = outs[0]
        if isinstance(h, BaseException) or h.status != "executed" or h.value != result:
            return False, "the holder's do(): %r, want executed with %r" % (h, result)
        for i in range(1, n + 1):
            w = outs[i]
            if isinstance(w, BaseException) or w.status != "duplicate" or w.ran or w.result != result:
                return False, "a waiter's do(): %r, want the duplicate with %r" % (w, result)
        if runs.get(key) != 1:
            return False, "fn ran %d times" % runs.get(key)
        # Count the trail once it holds every answer the client saw and has
        # not changed for settle_ms (the leader notes refusals every second).
        answered = watch.state()[0]
        counted: Dict[str, int] = {}
        stable = time.monotonic()
        end = stable + wait_s
        while True:
            got = count_claims(self.ledger.audit(key))  # type: ignore[union-attr]
            if got != counted:
                counted, stable = got, time.monotonic()
            if counted["total"] >= answered and time.monotonic() - stable >= settle_s:
                break
            if time.monotonic() > end:
                return False, "the trail did not settle within %gs: %s; the client saw %d claim answers" % (
                    wait_s, describe_claims(counted), answered)
            time.sleep(0.1)
        bound = 1 + 2 * n
        if counted["total"] > bound:
            return False, "the trail counts %s, more than 1 + 2 x %d = %d" % (describe_claims(counted), n, bound)
        return True, "%d waiters returned the duplicate, fn ran once; the client saw %d claim answers; the trail counts %s (bound %d)" % (
            n, answered, describe_claims(counted), bound)

    def effect_unknown_in_doubt(self, sc: Dict[str, Any]) -> Result:
        c = self.ledger
        assert c is not None
        key = self.k("unknown", "order-1")

        def fn(g: intentd.Grant) -> Any:
            raise intentd.EffectUnknown("the provider timed out mid-call")

        try:
            c.do(key, sc["tool"], {"amount": 7}, fn, lease=sc.get("lease_ms", 1000) / 1000.0)
            return False, "do() returned"
        except intentd.EffectUnknown:
            pass
        end = time.monotonic() + sc.get("wait_ms", 20000) / 1000.0
        it = c.get(key)
        while it.state != "in_doubt":
            rem = end - time.monotonic()
            if rem <= 0:
                return False, "state %s after %dms" % (it.state, sc.get("wait_ms", 20000))
            it = c.get(key, wait=min(rem, 5.0), after_version=it.version)
        return True, "do() raised EffectUnknown; state in_doubt; nothing reported (result %r)" % (it.result,)

    def lease_renewal(self, sc: Dict[str, Any]) -> Result:
        c = self.ledger
        assert c is not None
        key = self.k("renewal", "order-1")
        runs = Counter()
        lost: List[bool] = []

        def fn(g: intentd.Grant) -> Any:
            runs.inc(key)
            time.sleep(sc.get("fn_ms", 3000) / 1000.0)
            lost.append(g.cancelled.is_set())
            return {"done": True}

        res = c.do(key, sc["tool"], {"job": "long"}, fn, lease=sc.get("lease_ms", 1000) / 1000.0)
        it = c.get(key)
        if runs.get(key) != 1 or lost != [False] or res.value != {"done": True}:
            return False, "fn ran %d times; grant lost %r; value %r" % (runs.get(key), lost, res.value)
        if it.state not in ("executed", "committed"):
            return False, "state %s" % it.state
        return True, "fn ran 1 time over 3 leases, grant kept; state %s" % it.state

    def approval(self, sc: Dict[str, Any]) -> Result:
        c = self.ledger
        assert c is not None
        key = self.k("approval", "refund-1")
        runs = Counter()
        payload = {"order": "ord_1", "amount": 4200}
        box: Dict[str, Any] = {}

        def fn(g: intentd.Grant) -> Any:
            runs.inc(key)
            return {"refund": "re_1"}

        def agent() -> None:
            try:
                box["res"] = c.do(key, sc["tool"], payload, fn, wait_approval=sc.get("wait_ms", 30000) / 1000.0)
            except BaseException as e:  # noqa: BLE001 - reported below
                box["err"] = e

        t = threading.Thread(target=agent)
        t.start()
        time.sleep(sc.get("approve_after_ms", 500) / 1000.0)
        if runs.get(key):
            return False, "fn ran before the approval"
        it = c.get(key)
        if it.state != "pending_approval":
            return False, "state %s before the approval" % it.state
        approver = intentd.Client(self.addrs, api_key=self.approver_key)
        try:
            approver.approve(key, reason="conformance", fingerprint=it.fingerprint)
        finally:
            approver.close()
        t.join(sc.get("wait_ms", 30000) / 1000.0 + 30)
        if t.is_alive():
            return False, "do() did not return"
        if "err" in box:
            return False, "do() raised %r" % box["err"]
        res = box["res"]
        if runs.get(key) != 1 or res.value != {"refund": "re_1"}:
            return False, "fn ran %d times; value %r" % (runs.get(key), res.value)
        return True, "pending_approval, fn ran 0 times; approved; fn ran 1 time; result %s" % json.dumps(res.value)

    def rate_limited_waited_out(self, sc: Dict[str, Any]) -> Result:
        c = self.ledger
        assert c is not None
        key = self.k("ratelimited", "order-1")
        c.do(key, sc["tool"], {"amount": 1}, lambda g: {"ok": True})
        before = self.control_call("GET", "/rate-limited")["count"]
        n = int(sc.get("callers", 400))
        start = threading.Barrier(n)
        errors: List[str] = []

        def call(i: int) -> None:
            start.wait()
            try:
                c.get(key)
            except Exception as e:  # noqa: BLE001 - counted
                errors.append(repr(e))

        t0 = time.monotonic()
        with ThreadPoolExecutor(n) as ex:
            list(ex.map(call, range(n)))
        took = time.monotonic() - t0
        after = self.control_call("GET", "/rate-limited")["count"]
        if errors:
            return False, "%d of %d get() failed: %s" % (len(errors), n, errors[0])
        if after <= before:
            return False, "every get() succeeded but the cluster answered no 429 (%d -> %d)" % (before, after)
        return True, "%d get() succeeded in %.1fs; the cluster answered %d 429s, waited out" % (n, took, after - before)

    def leader_kill(self, sc: Dict[str, Any]) -> Result:
        c = self.ledger
        assert c is not None
        n = int(sc.get("calls", 20))
        fn_s = sc.get("fn_ms", 500) / 1000.0
        runs = Counter()
        attempt = "%x" % int(time.time() * 1000)  # keys of this scenario run only
        keys = [self.k("leaderkill", attempt, "order-%d" % i) for i in range(n)]
        outcomes: List[Tuple[str, Any]] = [("", None)] * n

        def call(i: int) -> None:
            key = keys[i]

            def fn(g: intentd.Grant) -> Any:
                runs.inc(key)
                time.sleep(fn_s)
                return {"n": i}

            try:
                res = c.do(key, sc["tool"], {"n": i}, fn)
                outcomes[i] = ("result", res.value if res.ran else res.result)
            except intentd.IntentdError as e:
                outcomes[i] = ("error", e)
            except Exception as e:  # noqa: BLE001 - not a definite error
                outcomes[i] = ("other", e)

        threads = [threading.Thread(target=call, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        time.sleep(sc.get("kill_after_ms", 200) / 1000.0)
        killed = self.control_call("POST", "/kill-leader")
        for t in threads:
            t.join(180)
        try:
            problems = []
            for i, (kind, v) in enumerate(outcomes):
                ran = runs.get(keys[i])
                if ran > 1:
                    problems.append("key %d: fn ran %d times" % (i, ran))
                if kind == "result":
                    if ran != 1:
                        problems.append("key %d: returned a result but fn ran %d times" % (i, ran))
                    elif v != {"n": i}:
                        problems.append("key %d: result %r" % (i, v))
                elif kind == "error":
                    log("leader-kill: key %d ended with %r" % (i, v))
                else:
                    problems.append("key %d: ended with %r" % (i, v or "nothing (hung)"))
            results = sum(1 for k, _ in outcomes if k == "result")
            errors = sum(1 for k, _ in outcomes if k == "error")
        finally:
            self.control_call("POST", "/restart", timeout=300)
        if problems:
            return False, "killed %s; %s" % (killed.get("killed"), "; ".join(problems))
        return True, "killed %s; %d calls returned fn's result (fn ran once each), %d definite errors" % (
            killed.get("killed"), results, errors)


def main() -> int:
    r = Runner()
    with open(r.scenarios_path, encoding="utf-8") as f:
        scenarios = json.load(f)["scenarios"]
    handlers: Dict[str, Callable[[Dict[str, Any]], Result]] = {
        "key-vectors": r.key_vectors,
        "bad-input-local": r.bad_input_local,
        "granted-executed": r.granted_executed,
        "duplicate": r.duplicate,
        "divergent": r.divergent,
        "concurrent-one-effect": r.concurrent_one_effect,
        "waiters-claim-once-per-change": r.waiters_claim_once_per_change,
        "effect-unknown-in-doubt": r.effect_unknown_in_doubt,
        "lease-renewal": r.lease_renewal,
        "approval": r.approval,
        "rate-limited-waited-out": r.rate_limited_waited_out,
        "leader-kill": r.leader_kill,
    }
    all_ok = True
    for sc in scenarios:
        sid = sc["id"]
        t0 = time.monotonic()
        h = handlers.get(sid)
        if h is None:
            ok, detail = False, "this runner does not implement the scenario"
        else:
            try:
                ok, detail = h(sc)
            except Exception as e:  # noqa: BLE001 - a failed scenario
                log("scenario %s:\n%s" % (sid, traceback.format_exc()))
                ok, detail = False, "%s: %s" % (type(e).__name__, e)
        log("scenario %s: %s in %.1fs" % (sid, "ok" if ok else "FAILED", time.monotonic() - t0))
        all_ok = all_ok and ok
        print(json.dumps({"scenario": sid, "ok": ok, "detail": detail}), flush=True)
    if r.ledger is not None:
        r.ledger.close()
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
