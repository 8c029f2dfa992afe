"""Client.do(), the at-most-once contract, and the once() decorator,
against the fake cluster."""

import inspect
import os
import sys
import threading
import time
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fakeledger import Cluster  # noqa: E402

import intentd  # noqa: E402


class DoTest(unittest.TestCase):
    def setUp(self):
        self.c = Cluster(1)
        self.addCleanup(self.c.stop)
        self.n = self.c.nodes[0]
        self.cl = intentd.Client(self.c.urls, backoff_base=0.01, backoff_max=0.05, max_wait=5)
        self.addCleanup(self.cl.close)
        self.runs = 0
        self.lock = threading.Lock()

    def count(self, value=None):
        def fn(g):
            with self.lock:
                self.runs += 1
            return value
        return fn

    def ops(self, key):
        return [(p.rsplit("/", 1)[-1] if p != "/v1/intents" else "claim")
                for m, p, b, h, q in self.n.requests if m == "POST" and (p == "/v1/intents" and b["key"] == key
                                                                       or p.startswith("/v1/intents/%s/" % key))]


class Paths(DoTest):
    def test_granted_runs_once_records_and_commits(self):
        seen = []

        def fn(g):
            seen.append((g.key, g.fencing_token, g.execution_token, intentd.current_grant() is g))
            return {"charge": "ch_1"}

        res = self.cl.do("k1", "stripe.charge", {"amount": 1}, fn)
        self.assertEqual((res.status, res.ran, res.value, res.result), ("executed", True, {"charge": "ch_1"},
                                                                       {"charge": "ch_1"}))
        self.assertEqual(res.intent.state, "committed")
        self.assertEqual(seen, [("k1", res.fencing_token, "gex_k1_%d" % res.fencing_token, True)])
        self.assertIsNone(intentd.current_grant())
        self.assertEqual(self.ops("k1"), ["claim", "complete", "commit"])
        complete = self.n.calls("POST", "/v1/intents/k1/complete")[0][2]
        self.assertEqual(complete, {"owner": res.owner, "fencing_token": res.fencing_token, "outcome": "executed",
                                    "result": {"charge": "ch_1"}})

    def test_auto_commit_off_leaves_executed(self):
        cl = intentd.Client(self.c.urls, auto_commit=False)
        self.addCleanup(cl.close)
        res = cl.do("k1", "t", None, self.count(1))
        self.assertEqual(res.intent.state, "executed")
        self.assertEqual(self.ops("k1"), ["claim", "complete"])

    def test_duplicate_returns_the_recorded_result_without_running(self):
        self.cl.do("k1", "t", {"a": 1}, self.count({"r": 1}))
        res = self.cl.do("k1", "t", {"a": 1}, self.count({"r": 2}))
        self.assertEqual(self.runs, 1)
        self.assertEqual((res.status, res.ran, res.result, res.value), ("duplicate", False, {"r": 1}, None))

    def test_divergent_is_refused_without_running(self):
        self.cl.do("k1", "t", {"a": 1}, self.count())
        with self.assertRaises(intentd.Divergent) as cm:
            self.cl.do("k1", "t", {"a": 2}, self.count())
        self.assertEqual(self.runs, 1)
        self.assertEqual(cm.exception.intent.key, "k1")

    def test_a_failing_fn_is_recorded_failed_and_reraised_and_a_later_call_runs(self):
        class Boom(Exception):
            pass

        def fn(g):
            raise Boom("card declined")

        with self.assertRaises(Boom) as cm:
            self.cl.do("k1", "t", None, fn)
        self.assertEqual(cm.exception.intentd_effect.status, "failed")
        self.assertEqual(self.n.calls("POST", "/v1/intents/k1/complete")[0][2]["result"],
                         {"error": "Boom: card declined"})
        self.assertEqual(self.cl.get("k1").state, "failed")
        res = self.cl.do("k1", "t", None, self.count("ok"))
        self.assertEqual((res.status, self.runs), ("executed", 1))
        self.assertEqual(res.intent.generation, 2)

    def test_effect_unknown_records_nothing(self):
        def fn(g):
            raise intentd.EffectUnknown("provider timed out")

        with self.assertRaises(intentd.EffectUnknown) as cm:
            self.cl.do("k1", "t", None, fn, lease=0.2)
        self.assertTrue(cm.exception.effect.ran)
        self.assertEqual(self.ops("k1"), ["claim"])
        time.sleep(0.3)
        self.assertEqual(self.cl.get("k1").state, "in_doubt")
        with self.assertRaises(intentd.InDoubt):
            self.cl.do("k1", "t", None, self.count())
        self.assertEqual(self.runs, 0)

    def test_keyboard_interrupt_records_nothing(self):
        def fn(g):
            raise KeyboardInterrupt

        with self.assertRaises(KeyboardInterrupt):
            self.cl.do("k1", "t", None, fn)
        self.assertEqual(self.ops("k1"), ["claim"])

    def test_bad_input_is_refused_before_sending(self):
        for key, tool, payload, fn in [("k", "t", {"x": object()}, self.count()), ("", "t", None, self.count()),
                                       ("x" * 257, "t", None, self.count()), ("k", "", None, self.count()),
                                       ("k\n", "t", None, self.count()), ("k", "t", float("nan"), self.count()),
                                       ("k", "t", b"{not json", self.count()), ("k", "t", None, None)]:
            with self.subTest(key=key[:5], tool=tool):
                with self.assertRaises(intentd.BadRequest):
                    self.cl.do(key, tool, payload, fn)
        self.assertEqual((self.runs, self.n.requests, self.cl._t.sent), (0, [], 0))

    def test_raw_json_bytes_payload(self):
        self.cl.do("k1", "t", b'{"a": 1}', self.count())
        self.assertEqual(self.n.calls("POST", "/v1/intents")[0][2]["payload"], {"a": 1})


class Waiting(DoTest):
    def test_in_flight_waits_for_the_holder_and_returns_its_result(self):
        g = self.cl.claim("k1", "t", {"a": 1}, owner="holder")

        def finish():
            time.sleep(0.3)
            self.cl.complete("k1", "holder", g.fencing_token, "executed", {"by": "holder"})

        threading.Thread(target=finish).start()
        t0 = time.monotonic()
        res = self.cl.do("k1", "t", {"a": 1}, self.count())
        self.assertLess(time.monotonic() - t0, 2)
        self.assertEqual((res.status, res.result, self.runs), ("duplicate", {"by": "holder"}, 0))
        # It long-polled rather than re-claiming in a loop.
        self.assertLessEqual(len(self.n.calls("POST", "/v1/intents")), 4)
        self.assertTrue(any("wait=" in c[4] for c in self.n.calls("GET", "/v1/intents/k1")))

    def test_in_flight_holder_fails_then_this_call_runs(self):
        g = self.cl.claim("k1", "t", None, owner="holder")
        threading.Timer(0.2, lambda: self.cl.complete("k1", "holder", g.fencing_token, "failed")).start()
        res = self.cl.do("k1", "t", None, self.count("mine"))
        self.assertEqual((res.status, res.value, self.runs, res.intent.generation), ("executed", "mine", 1, 2))

    def test_in_flight_past_max_wait(self):
        self.cl.claim("k1", "t", None, owner="holder")
        t0 = time.monotonic()
        with self.assertRaises(intentd.InFlight):
            self.cl.do("k1", "t", None, self.count(), max_wait=0.4)
        self.assertLess(time.monotonic() - t0, 1.5)
        self.assertEqual(self.runs, 0)

    def test_concurrent_callers_run_fn_once(self):
        def fn(g):
            with self.lock:
                self.runs += 1
            time.sleep(0.3)
            return {"fence": g.fencing_token}

        out = []
        ts = [threading.Thread(target=lambda: out.append(self.cl.do("k1", "t", {"a": 1}, fn))) for _ in range(6)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(self.runs, 1)
        self.assertEqual(len(out), 6)
        self.assertEqual({repr(r.value if r.ran else r.result) for r in out}, {repr(out[0].result)})
        self.assertEqual(sorted(r.status for r in out), ["duplicate"] * 5 + ["executed"])

    def test_pending_approval_waits_then_runs(self):
        def approve():
            time.sleep(0.3)
            it = self.cl.get("r1")
            self.cl.approve("r1", fingerprint=it.fingerprint)

        threading.Thread(target=approve).start()
        res = self.cl.do("r1", "approve.refund", {"amount": 5}, self.count("refunded"), wait_approval=5)
        self.assertEqual((res.status, res.value, self.runs), ("executed", "refunded", 1))

    def test_pending_approval_without_waiting(self):
        with self.assertRaises(intentd.PendingApproval) as cm:
            self.cl.do("r1", "approve.refund", None, self.count(), wait_approval=0)
        self.assertEqual((cm.exception.status, cm.exception.intent.state), (202, "pending_approval"))
        t0 = time.monotonic()
        with self.assertRaises(intentd.PendingApproval):
            self.cl.do("r1", "approve.refund", None, self.count(), wait_approval=0.3)
        self.assertGreaterEqual(time.monotonic() - t0, 0.25)
        self.assertEqual(self.runs, 0)

    def test_rejected_while_waiting(self):
        threading.Timer(0.2, lambda: self.cl.reject("r1")).start()
        with self.assertRaises(intentd.Rejected):
            self.cl.do("r1", "approve.refund", None, self.count(), wait_approval=5)
        self.assertEqual(self.runs, 0)


class Failures(DoTest):
    def test_an_unknown_claim_is_retried_with_the_same_owner(self):
        self.n.inject("POST", "/v1/intents", 503, "outcome_unknown", apply=True, times=1)
        self.n.inject("POST", "/v1/intents", drop=True, times=1)
        res = self.cl.do("k1", "t", {"a": 1}, self.count("v"))
        owners = {c[2]["owner"] for c in self.n.calls("POST", "/v1/intents")}
        self.assertEqual(owners, {res.owner})
        self.assertEqual((res.status, self.runs), ("executed", 1))

    def test_gives_up_on_an_unknown_claim_without_running(self):
        self.n.inject("POST", "/v1/intents", 503, "outcome_unknown", times=1000)
        with self.assertRaises(intentd.OutcomeUnknown):
            self.cl.do("k1", "t", None, self.count(), max_wait=0.3)
        self.assertEqual(self.runs, 0)

    def test_own_grant_that_passed_unused_is_released_and_claimed_again(self):
        # The grant's answer is lost; the retries fail until its lease passed.
        self.n.inject("POST", "/v1/intents", 503, "outcome_unknown", apply=True, times=1)
        self.n.inject("POST", "/v1/intents", 503, "no_leader", times=4, delay=0.06)
        res = self.cl.do("k1", "t", None, self.count("v"), lease=0.2)
        self.assertEqual((res.status, self.runs), ("executed", 1))
        self.assertEqual(res.intent.generation, 2)
        first = self.n.calls("POST", "/v1/intents/k1/complete")[0][2]
        self.assertEqual(first["outcome"], "failed")

    def test_a_lost_report_is_retried(self):
        self.n.inject("POST", "/v1/intents/k1/complete", drop=True, apply=True, times=1)
        self.n.inject("POST", "/v1/intents/k1/complete", 503, "no_leader", times=6)
        res = self.cl.do("k1", "t", None, self.count({"r": 1}))
        self.assertEqual((res.status, res.result), ("executed", {"r": 1}))

    def test_a_result_the_ledger_refuses_is_recorded_without_it(self):
        self.n.inject("POST", "/v1/intents/k1/complete", 413, "too_large", times=1)
        with self.assertRaises(intentd.BadRequest) as cm:  # as Go: recorded, and the error says without what
            self.cl.do("k1", "t", None, self.count({"big": "x"}))
        self.assertEqual((cm.exception.effect.status, cm.exception.effect.value), ("executed", {"big": "x"}))
        self.assertEqual(self.cl.get("k1").state, "committed")
        self.assertNotIn("result", self.n.calls("POST", "/v1/intents/k1/complete")[-1][2])

    def test_an_unserialisable_result_is_recorded_without_it_and_raised(self):
        with self.assertRaises(intentd.BadRequest) as cm:
            self.cl.do("k1", "t", None, self.count(object()))
        self.assertEqual(cm.exception.effect.status, "executed")
        self.assertEqual(self.cl.get("k1").state, "committed")

    def test_a_report_that_cannot_land_raises_with_the_effect(self):
        cl = intentd.Client(self.c.urls, backoff_base=0.01, backoff_max=0.05, report_timeout=0.3)
        self.addCleanup(cl.close)
        self.n.inject("POST", "/v1/intents/k1/complete", 503, "no_leader", times=1000)
        # NoLeader when the report timeout passes between attempts; the
        # Unavailable it derives from when it passes during one.
        with self.assertRaises(intentd.Unavailable) as cm:
            cl.do("k1", "t", None, self.count("v"))
        self.assertEqual((cm.exception.effect.ran, cm.exception.effect.value, cm.exception.effect.status),
                         (True, "v", ""))


class Renewal(DoTest):
    def test_the_lease_is_renewed_while_fn_runs(self):
        def fn(g):
            time.sleep(0.7)
            return g.cancelled.is_set()

        res = self.cl.do("k1", "t", None, fn, lease=0.3)
        self.assertEqual((res.status, res.value), ("executed", False))
        renews = self.n.calls("POST", "/v1/intents/k1/renew")
        self.assertGreaterEqual(len(renews), 2)
        self.assertEqual(renews[0][2]["lease_ms"], 300)

    def test_a_refused_renewal_cancels_the_grant(self):
        self.n.inject("POST", "/v1/intents/k1/renew", 409, "fenced", times=10)

        def fn(g):
            self.assertTrue(g.cancelled.wait(2))
            self.assertIsInstance(g.lost, intentd.Fenced)
            with self.assertRaises(intentd.Fenced):
                g.raise_if_lost()
            raise intentd.EffectUnknown("stopped before the effect")

        with self.assertRaises(intentd.EffectUnknown):
            self.cl.do("k1", "t", None, fn, lease=0.3)
        self.assertEqual(len(self.n.calls("POST", "/v1/intents/k1/renew")), 1)

    def test_renewal_failures_that_are_not_refusals_keep_going(self):
        self.n.inject("POST", "/v1/intents/k1/renew", 503, "no_leader", times=3)

        def fn(g):
            time.sleep(0.8)
            return g.cancelled.is_set()

        res = self.cl.do("k1", "t", None, fn, lease=0.3)
        self.assertEqual(res.value, False)


class Decorator(DoTest):
    def test_a_plain_function_in_a_plain_function_out(self):
        calls = []

        @self.cl.once(tool="stripe.charge", key=lambda order_id, **_: order_id)
        def charge(order_id: str, amount: int, currency: str = "usd") -> dict:
            """Charge the customer for an order."""
            calls.append((order_id, amount, currency))
            g = intentd.current_grant()
            return {"charge": "ch_%s" % order_id, "fence": g.fencing_token}

        self.assertEqual(charge.__name__, "charge")
        self.assertEqual(charge.__doc__, "Charge the customer for an order.")
        self.assertEqual(str(inspect.signature(charge)), "(order_id: str, amount: int, currency: str = 'usd') -> dict")
        first = charge("o-1", 1299)
        again = charge("o-1", amount=1299)
        self.assertEqual(calls, [("o-1", 1299, "usd")])
        self.assertEqual(first, again)
        self.assertEqual(self.n.calls("POST", "/v1/intents")[0][2]["payload"],
                         {"order_id": "o-1", "amount": 1299, "currency": "usd"})
        with self.assertRaises(intentd.Divergent):
            charge("o-1", 5)

    def test_key_parts_exclude_and_methods(self):
        cl = self.cl

        class Mailer:
            @cl.once(tool="email.send", key=lambda self, ticket, step, ctx=None: (ticket, step), exclude=("ctx",))
            def send(self, ticket, step, ctx=None):
                return "sent %s/%s" % (ticket, step)

        m = Mailer()
        self.assertEqual(m.send("t:1", 2, ctx=object()), "sent t:1/2")
        body = self.n.calls("POST", "/v1/intents")[0][2]
        self.assertEqual((body["key"], body["payload"]), ("email.send:t%3A1:2", {"ticket": "t:1", "step": 2}))

    def test_kwargs_and_a_payload_function(self):
        @self.cl.once(tool="t", key=lambda ticket, **_: ticket, payload=lambda ticket, **kw: {"t": ticket, **kw})
        def open_ticket(ticket, **extra):
            return extra

        self.assertEqual(open_ticket("T-1", prio=2), {"prio": 2})
        self.assertEqual(open_ticket(ticket="T-1", prio=2), {"prio": 2})
        self.assertEqual(self.n.calls("POST", "/v1/intents")[0][2]["payload"], {"t": "T-1", "prio": 2})

    def test_decorator_needs_a_key(self):
        with self.assertRaises(TypeError):
            self.cl.once(tool="t")(lambda: 1)


class _Sleeps:
    """Stands in for the time module of intentd._sync: records the pauses
    the client takes (and takes them), so a test reads the wait a
    Retry-After asked for instead of timing it."""

    def __init__(self):
        self.pauses = []

    def sleep(self, secs):
        self.pauses.append(secs)
        time.sleep(secs)

    def __getattr__(self, name):
        return getattr(time, name)


# Namespace quotas (docs/operations.md#namespace-quotas-and-usage): the claim
# answers of one row, then what do() must do with them.
QUOTA_CASES = [
    # name, status, code, retry_after_ms, want class (None: executed), claims sent, pauses
    ("namespace_rate_limited waits the hint once", 429, "namespace_rate_limited", 200, None, 2, [0.2]),
    ("rate_limited waits the hint once (control)", 429, "rate_limited", 200, None, 2, [0.2]),
    ("namespace_full refuses, no retry", 507, "namespace_full", 0, intentd.NamespaceFull, 1, []),
    ("ledger_full refuses, no retry", 507, "ledger_full", 0, intentd.LedgerFull, 1, []),
]


class Quotas(DoTest):
    def setUp(self):
        super().setUp()
        # backoff_max above the hint, so the pause is the hint itself.
        self.cl = intentd.Client(self.c.urls, backoff_base=0.01, backoff_max=1.0, max_wait=5)
        self.addCleanup(self.cl.close)

    def test_quota_answers_to_a_claim(self):
        import intentd._sync as sync_mod
        for i, (name, status, code, retry_ms, want, claims, pauses) in enumerate(QUOTA_CASES):
            with self.subTest(name):
                key, self.runs = "q%d" % i, 0
                self.n.inject("POST", "/v1/intents", status, code, times=1, retry_after_ms=retry_ms)
                sleeps = _Sleeps()
                with mock.patch.object(sync_mod, "time", sleeps):
                    if want is None:
                        res = self.cl.do(key, "t", {"a": i}, self.count("v"))
                        self.assertEqual((res.status, self.runs), ("executed", 1))
                    else:
                        with self.assertRaises(want) as cm:
                            self.cl.do(key, "t", {"a": i}, self.count("v"))
                        self.assertEqual((cm.exception.status, cm.exception.code, self.runs), (status, code, 0))
                        with self.assertRaises(intentd.NotFound):  # nothing was written
                            self.cl.get(key)
                self.assertEqual(len([c for c in self.n.calls("POST", "/v1/intents") if c[1] == "/v1/intents" and c[2]["key"] == key]), claims)
                self.assertEqual(sleeps.pauses, pauses)

    def test_namespace_rate_limited_past_the_wait_is_rate_limited(self):
        self.n.inject("POST", "/v1/intents", 429, "namespace_rate_limited", times=1000, retry_after_ms=100)
        cl = intentd.Client(self.c.urls, backoff_base=0.01, backoff_max=0.05, rate_limit_wait=0.2)
        self.addCleanup(cl.close)
        with self.assertRaises(intentd.RateLimited) as cm:
            cl.do("k1", "t", None, self.count(), max_wait=0.3)
        self.assertEqual((cm.exception.code, self.runs), ("namespace_rate_limited", 0))

    def test_once_does_not_run_the_function_on_namespace_full(self):
        calls = []

        @self.cl.once(tool="stripe.charge", key=lambda order_id: order_id)
        def charge(order_id: str) -> str:
            calls.append(order_id)
            return "ch"

        self.n.inject("POST", "/v1/intents", 507, "namespace_full", times=1)
        with self.assertRaises(intentd.NamespaceFull):
            charge("o-1")
        self.assertEqual(calls, [])
        self.assertEqual(charge("o-1"), "ch")  # served once the namespace has room
        self.assertEqual(calls, ["o-1"])


if __name__ == "__main__":
    unittest.main()
