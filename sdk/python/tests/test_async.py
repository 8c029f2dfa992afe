"""AsyncClient: the same contract over asyncio streams."""

import asyncio
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


def client_threads():
    """Threads that are not the fake server's (one per connection)."""
    return sum(1 for t in threading.enumerate() if t.name != "fake-server-conn")


class AsyncTest(unittest.TestCase):
    nodes = 1

    def setUp(self):
        self.c = Cluster(self.nodes)
        self.addCleanup(self.c.stop)
        self.n = self.c.nodes[0]
        self.runs = 0

    def client(self, **kw):
        kw.setdefault("backoff_base", 0.01)
        kw.setdefault("backoff_max", 0.05)
        kw.setdefault("max_wait", 5)
        return intentd.AsyncClient(self.c.urls, **kw)

    def run_async(self, coro):
        return asyncio.run(asyncio.wait_for(coro, 30))


class Do(AsyncTest):
    def test_granted_then_duplicate(self):
        async def main():
            cl = self.client()

            async def fn(g):
                self.runs += 1
                await asyncio.sleep(0.01)
                assert intentd.current_grant() is g
                return {"charge": g.fencing_token}

            a = await cl.do("k1", "t", {"a": 1}, fn)
            b = await cl.do("k1", "t", {"a": 1}, fn)
            await cl.aclose()
            return a, b

        a, b = self.run_async(main())
        self.assertEqual((a.status, a.value, a.intent.state), ("executed", {"charge": a.fencing_token}, "committed"))
        self.assertEqual((b.status, b.result, self.runs), ("duplicate", a.value, 1))

    def test_concurrent_callers_run_once(self):
        async def main():
            cl = self.client()

            async def fn(g):
                self.runs += 1
                await asyncio.sleep(0.3)
                return "once"

            before = client_threads()
            outs = await asyncio.gather(*[cl.do("k1", "t", None, fn) for _ in range(8)])
            self.assertLessEqual(client_threads(), before)  # other tests' threads may end meanwhile
            await cl.aclose()
            return outs

        outs = self.run_async(main())
        self.assertEqual(self.runs, 1)
        self.assertEqual({o.value if o.ran else o.result for o in outs}, {"once"})

    def test_long_polls_take_no_threads(self):
        async def main():
            cl = self.client()
            await cl.claim("k1", "t", None, owner="o")
            v = (await cl.get("k1")).version
            before = client_threads()
            polls = [asyncio.ensure_future(cl.get("k1", wait=0.5, after_version=v)) for _ in range(30)]
            await asyncio.sleep(0.2)
            during = client_threads()
            await asyncio.gather(*polls)
            await cl.aclose()
            return before, during

        before, during = self.run_async(main())
        self.assertLessEqual(during, before)

    def test_failed_and_effect_unknown(self):
        async def main():
            cl = self.client()

            async def boom(g):
                raise ValueError("declined")

            async def unknown(g):
                raise intentd.EffectUnknown("timeout")

            with self.assertRaises(ValueError):
                await cl.do("k1", "t", None, boom)
            self.assertEqual((await cl.get("k1")).state, "failed")
            with self.assertRaises(intentd.EffectUnknown):
                await cl.do("k2", "t", None, unknown)
            self.assertEqual((await cl.get("k2")).state, "declared")
            await cl.aclose()

        self.run_async(main())
        self.assertEqual(self.n.calls("POST", "/v1/intents/k2/complete"), [])
        self.assertEqual(self.n.calls("POST", "/v1/intents/k1/complete")[0][2]["outcome"], "failed")

    def test_a_refused_renewal_cancels_fn(self):
        self.n.inject("POST", "/v1/intents/k1/renew", 409, "fenced", times=10)
        state = {}

        async def main():
            cl = self.client()

            async def fn(g):
                try:
                    await asyncio.sleep(5)
                except asyncio.CancelledError:
                    state["cancelled"] = g.cancelled.is_set()
                    raise
                return "never"

            with self.assertRaises(intentd.Fenced) as cm:
                await cl.do("k1", "t", None, fn, lease=0.3)
            self.assertTrue(cm.exception.effect.ran)
            await cl.aclose()

        self.run_async(main())
        self.assertEqual(state, {"cancelled": True})
        self.assertEqual(self.n.calls("POST", "/v1/intents/k1/complete"), [])

    def test_renewal_keeps_the_grant(self):
        async def main():
            cl = self.client()

            async def fn(g):
                await asyncio.sleep(0.7)
                return g.cancelled.is_set()

            res = await cl.do("k1", "t", None, fn, lease=0.3)
            await cl.aclose()
            return res

        res = self.run_async(main())
        self.assertEqual(res.value, False)
        self.assertGreaterEqual(len(self.n.calls("POST", "/v1/intents/k1/renew")), 2)

    def test_pending_approval_and_in_flight(self):
        async def main():
            cl = self.client()

            async def approve():
                await asyncio.sleep(0.2)
                it = await cl.get("r1")
                await cl.approve("r1", fingerprint=it.fingerprint)

            async def fn(g):
                return "refunded"

            t = asyncio.ensure_future(approve())
            res = await cl.do("r1", "approve.refund", {"a": 1}, fn, wait_approval=5)
            await t
            g = await cl.claim("k2", "t", None, owner="holder")

            async def finish():
                await asyncio.sleep(0.2)
                await cl.complete("k2", "holder", g.fencing_token, "executed", "theirs")

            t = asyncio.ensure_future(finish())
            dup = await cl.do("k2", "t", None, fn)
            await t
            await cl.aclose()
            return res, dup

        res, dup = self.run_async(main())
        self.assertEqual((res.status, res.value), ("executed", "refunded"))
        self.assertEqual((dup.status, dup.result), ("duplicate", "theirs"))

    def test_bad_input_sends_nothing(self):
        async def main():
            cl = self.client()
            for args in [("", "t", None), ("k", "", None), ("k", "t", {1, 2})]:
                with self.assertRaises(intentd.BadRequest):
                    await cl.do(*args, fn=lambda g: None)
            return cl._t.sent

        self.assertEqual(self.run_async(main()), 0)
        self.assertEqual(self.n.requests, [])

    def test_decorator(self):
        cl = self.client()

        @cl.once(tool="email.send", key=lambda to, subject: (to, subject))
        async def send_email(to: str, subject: str) -> str:
            """Send one email."""
            self.runs += 1
            return "m-%d" % intentd.current_grant().fencing_token

        self.assertTrue(inspect.iscoroutinefunction(send_email))
        self.assertEqual((send_email.__name__, send_email.__doc__), ("send_email", "Send one email."))
        self.assertEqual(str(inspect.signature(send_email)), "(to: str, subject: str) -> str")

        async def main():
            a = await send_email("a@x", "hi")
            b = await send_email("a@x", subject="hi")
            await cl.aclose()
            return a, b

        a, b = self.run_async(main())
        self.assertEqual((a, b, self.runs), (a, a, 1))
        with self.assertRaises(TypeError):
            cl.once(tool="t", key="k")(lambda: 1)


class _Sleeps:
    """Stands in for the asyncio module of intentd.aio: records the pauses
    the client takes (and takes them)."""

    def __init__(self):
        self.pauses = []

    async def sleep(self, secs):
        self.pauses.append(secs)
        await asyncio.sleep(secs)

    def __getattr__(self, name):
        return getattr(asyncio, name)


class Quotas(AsyncTest):
    # name, status, code, retry_after_ms, want class (None: executed), claims sent, pauses
    cases = [
        ("namespace_rate_limited waits the hint once", 429, "namespace_rate_limited", 200, None, 2, [0.2]),
        ("rate_limited waits the hint once (control)", 429, "rate_limited", 200, None, 2, [0.2]),
        ("namespace_full refuses, no retry", 507, "namespace_full", 0, intentd.NamespaceFull, 1, []),
        ("ledger_full refuses, no retry", 507, "ledger_full", 0, intentd.LedgerFull, 1, []),
    ]

    def test_quota_answers_to_a_claim(self):
        import intentd.aio as aio_mod
        for i, (name, status, code, retry_ms, want, claims, pauses) in enumerate(self.cases):
            with self.subTest(name):
                key, self.runs = "q%d" % i, 0
                self.n.inject("POST", "/v1/intents", status, code, times=1, retry_after_ms=retry_ms)
                sleeps = _Sleeps()

                async def fn(g):
                    self.runs += 1
                    return "v"

                async def main():
                    cl = self.client(backoff_max=1.0)  # above the hint: the pause is the hint
                    try:
                        with mock.patch.object(aio_mod, "asyncio", sleeps):
                            if want is None:
                                return await cl.do(key, "t", {"a": i}, fn)
                            with self.assertRaises(want) as cm:
                                await cl.do(key, "t", {"a": i}, fn)
                            with self.assertRaises(intentd.NotFound):  # nothing was written
                                await cl.get(key)
                            return cm.exception
                    finally:
                        await cl.aclose()

                out = self.run_async(main())
                if want is None:
                    self.assertEqual((out.status, self.runs), ("executed", 1))
                else:
                    self.assertEqual((out.status, out.code, self.runs), (status, code, 0))
                sent = [c for c in self.n.calls("POST", "/v1/intents") if c[1] == "/v1/intents" and c[2]["key"] == key]
                self.assertEqual(len(sent), claims)
                self.assertEqual(sleeps.pauses, pauses)


class Transport(AsyncTest):
    nodes = 3

    def test_discovery_failover_retries_chunked(self):
        self.c.leader = self.c.nodes[1]
        self.c.chunked = True

        async def main():
            cl = self.client()
            r = await cl.claim("k1", "t", {"a": 1})
            self.assertEqual(cl.leader, self.c.nodes[1].url)
            self.c.leader = self.c.nodes[2]
            self.c.nodes[2].inject("POST", "/v1/intents", 503, "outcome_unknown", apply=True)
            r2 = await cl.claim("k2", "t", {"b": 2}, owner="o2")
            self.assertEqual(cl.leader, self.c.nodes[2].url)
            self.c.nodes[2].inject("GET", "/v1/intents/", 429, "rate_limited", times=2, retry_after_ms=100)
            t0 = time.monotonic()
            it = await cl.get("k2")
            self.assertGreaterEqual(time.monotonic() - t0, 0.1)
            await cl.aclose()
            return r, r2, it

        r, r2, it = self.run_async(main())
        self.assertEqual((r.status, r2.status, r2.created, it.owner), ("granted", "granted", False, "o2"))
        bodies = [c[2] for c in self.c.nodes[2].calls("POST", "/v1/intents")]
        self.assertEqual(len(bodies), 2)
        self.assertEqual(bodies[0], bodies[1])

    def test_a_closed_keep_alive_connection_is_replaced(self):
        self.c.leader = self.c.nodes[0]

        async def main():
            cl = self.client(retries=0)
            await cl.claim("k1", "t", None)
            self.n.inject("GET", "/v1/intents/k1", drop=True)
            it = await cl.get("k1")
            await cl.aclose()
            return it

        self.assertEqual(self.run_async(main()).key, "k1")


class SyncStaleConnection(unittest.TestCase):
    def test_a_closed_keep_alive_connection_is_replaced(self):
        c = Cluster(1)
        self.addCleanup(c.stop)
        cl = intentd.Client(c.urls, retries=0)
        self.addCleanup(cl.close)
        cl.claim("k1", "t", None)
        c.nodes[0].inject("GET", "/v1/intents/k1", drop=True)
        self.assertEqual(cl.get("k1").key, "k1")


if __name__ == "__main__":
    unittest.main()
