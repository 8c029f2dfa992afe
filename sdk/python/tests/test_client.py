"""The blocking client against a fake cluster: discovery, failover,
retries with the same body, Retry-After, keep-alive, every call's wire
form."""

import os
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fakeledger import Cluster  # noqa: E402

import intentd  # noqa: E402


def fast(urls, **kw):
    kw.setdefault("backoff_base", 0.01)
    kw.setdefault("backoff_max", 0.05)
    return intentd.Client(urls, **kw)


def closed_port_url():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return "http://127.0.0.1:%d" % port


class ClusterTest(unittest.TestCase):
    nodes = 1
    leader = 0

    def setUp(self):
        self.c = Cluster(self.nodes, self.leader)
        self.addCleanup(self.c.stop)


class Discovery(ClusterTest):
    nodes = 3
    leader = 1

    def test_writes_go_to_the_discovered_leader(self):
        cl = fast(self.c.urls)
        self.addCleanup(cl.close)
        cl.claim("k1", "t", {"a": 1})
        self.assertEqual(cl.leader, self.c.nodes[1].url)
        self.assertEqual(cl.endpoints()[0], self.c.nodes[1].url)
        self.assertEqual(len(self.c.nodes[1].calls("POST", "/v1/intents")), 1)
        for n in (self.c.nodes[0], self.c.nodes[2]):
            self.assertEqual(n.calls("POST"), [])
        # Only the first call discovered.
        cl.get("k1")
        self.assertEqual(sum(len(n.calls("GET", "/v1/cluster")) for n in self.c.nodes), 1)

    def test_follows_the_leader_after_not_leader(self):
        cl = fast(self.c.urls)
        self.addCleanup(cl.close)
        cl.claim("k1", "t", None)
        self.c.leader = self.c.nodes[2]
        r = cl.claim("k2", "t", None)
        self.assertEqual(r.status, "granted")
        self.assertEqual(cl.leader, self.c.nodes[2].url)
        self.assertEqual(len(self.c.nodes[1].calls("POST", "/v1/intents")), 2)  # k1, then k2's not_leader
        self.assertEqual(len(self.c.nodes[2].calls("POST", "/v1/intents")), 1)

    def test_an_unreachable_seed_is_skipped(self):
        cl = fast([closed_port_url()] + self.c.urls)
        self.addCleanup(cl.close)
        self.assertEqual(cl.claim("k1", "t", None).status, "granted")
        self.assertEqual(cl.leader, self.c.nodes[1].url)

    def test_discovery_off_uses_the_configured_order(self):
        cl = fast(self.c.urls, discovery=False)
        self.addCleanup(cl.close)
        cl.claim("k1", "t", None)  # n1: not_leader, n2: granted
        self.assertEqual([len(n.calls("GET", "/v1/cluster")) for n in self.c.nodes], [0, 0, 0])
        self.assertEqual(len(self.c.nodes[1].calls("POST", "/v1/intents")), 1)

    def test_concurrent_first_calls_discover_once(self):
        cl = fast(self.c.urls)
        self.addCleanup(cl.close)
        def get():
            with self.assertRaises(intentd.NotFound):
                cl.get("nope", stale=True)

        ts = [threading.Thread(target=get) for _ in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        # (the gets raise NotFound in their threads; only discovery counts here)
        self.assertEqual(sum(len(n.calls("GET", "/v1/cluster")) for n in self.c.nodes), 1)


class Retries(ClusterTest):
    def test_outcome_unknown_is_retried_with_the_same_body(self):
        n = self.c.nodes[0]
        n.inject("POST", "/v1/intents", 503, "outcome_unknown", apply=True)
        n.inject("POST", "/v1/intents", drop=True, apply=True)
        cl = fast(self.c.urls)
        self.addCleanup(cl.close)
        r = cl.claim("k1", "t", {"a": 1}, owner="agent/1")
        self.assertEqual((r.status, r.created, r.owner), ("granted", False, "agent/1"))  # 200: the same grant again
        bodies = [c[2] for c in n.calls("POST", "/v1/intents")]
        self.assertEqual(len(bodies), 3)
        self.assertTrue(all(b == bodies[0] for b in bodies))

    def test_a_fresh_owner_is_reused_by_every_retry(self):
        n = self.c.nodes[0]
        n.inject("POST", "/v1/intents", 503, "no_leader", times=2)
        cl = fast(self.c.urls)
        self.addCleanup(cl.close)
        r = cl.claim("k1", "t", None)
        owners = {c[2]["owner"] for c in n.calls("POST", "/v1/intents")}
        self.assertEqual(owners, {r.owner})
        self.assertEqual(r.created, True)

    def test_gives_up_after_retries(self):
        n = self.c.nodes[0]
        n.inject("POST", "/v1/intents", 503, "no_leader", times=100)
        cl = fast(self.c.urls, retries=2)
        self.addCleanup(cl.close)
        with self.assertRaises(intentd.NoLeader):
            cl.claim("k1", "t", None)
        self.assertEqual(len(n.calls("POST", "/v1/intents")), 3)

    def test_an_earlier_unknown_outcome_is_not_forgotten(self):
        n = self.c.nodes[0]
        n.inject("POST", "/v1/intents", 503, "outcome_unknown", apply=True)
        n.inject("POST", "/v1/intents", 503, "no_leader", times=100)
        cl = fast(self.c.urls, retries=2)
        self.addCleanup(cl.close)
        with self.assertRaises(intentd.OutcomeUnknown):
            cl.claim("k1", "t", None)

    def test_definite_answers_are_not_retried(self):
        n = self.c.nodes[0]
        cl = fast(self.c.urls)
        self.addCleanup(cl.close)
        cl.claim("k1", "t", None, owner="a")
        with self.assertRaises(intentd.InFlight) as cm:
            cl.claim("k1", "t", None, owner="b")
        self.assertGreater(cm.exception.retry_after, 1)
        self.assertEqual(cm.exception.intent.owner, "a")
        with self.assertRaises(intentd.Divergent):
            cl.claim("k1", "t", {"x": 1}, owner="a")
        self.assertEqual(len(n.calls("POST", "/v1/intents")), 3)

    def test_rate_limited_waits_retry_after_on_the_same_node(self):
        n = self.c.nodes[0]
        n.inject("GET", "/v1/intents/", 429, "rate_limited", times=3, retry_after_ms=150)
        cl = fast(self.c.urls, retries=0, backoff_max=1.0)
        self.addCleanup(cl.close)
        cl.claim("k1", "t", None)
        t0 = time.monotonic()
        self.assertEqual(cl.get("k1").key, "k1")  # retries=0 does not bound 429s
        self.assertGreaterEqual(time.monotonic() - t0, 0.45)

    def test_rate_limit_wait_bounds_429s(self):
        n = self.c.nodes[0]
        n.inject("GET", "/v1/intents/", 429, "rate_limited", times=1000, retry_after_ms=100)
        cl = fast(self.c.urls, rate_limit_wait=0.5)
        self.addCleanup(cl.close)
        t0 = time.monotonic()
        with self.assertRaises(intentd.RateLimited):
            cl.get("k1")
        self.assertLess(time.monotonic() - t0, 2)

    def test_connection_errors_move_to_the_next_node(self):
        cl = fast([closed_port_url()] + self.c.urls, discovery=False)
        self.addCleanup(cl.close)
        self.assertEqual(cl.claim("k1", "t", None).status, "granted")

    def test_nothing_reachable_is_unavailable(self):
        cl = fast([closed_port_url()], retries=1)
        self.addCleanup(cl.close)
        with self.assertRaises(intentd.Unavailable) as cm:
            cl.get("k1")
        self.assertEqual(cm.exception.status, 0)

    def test_a_lost_write_answer_is_outcome_unknown(self):
        n = self.c.nodes[0]
        n.inject("POST", "/v1/intents/k1/complete", drop=True, times=100)
        cl = fast(self.c.urls, retries=1)
        self.addCleanup(cl.close)
        g = cl.claim("k1", "t", None)
        with self.assertRaises(intentd.OutcomeUnknown):
            cl.complete("k1", g.owner, g.fencing_token, "executed", {"r": 1})


class Wire(ClusterTest):
    def test_api_key_and_keep_alive(self):
        self.c.api_key = "ik_secret"
        cl = fast(self.c.urls, api_key="ik_secret")
        self.addCleanup(cl.close)
        for i in range(10):
            cl.claim("k%d" % i, "t", None)
        n = self.c.nodes[0]
        self.assertTrue(all(c[3].get("Authorization") == "Bearer ik_secret" for c in n.requests))
        self.assertEqual(len(n.peers), 1)  # one connection, kept alive
        bad = fast(self.c.urls, api_key="wrong")
        self.addCleanup(bad.close)
        with self.assertRaises(intentd.Unauthorized):
            bad.claim("x", "t", None)

    def test_every_call(self):
        n = self.c.nodes[0]
        cl = fast(self.c.urls)
        self.addCleanup(cl.close)
        g = cl.claim("a/b c%:d", "t", {"amount": 1}, owner="o1", lease=2.5, policy="p")
        self.assertEqual(n.calls("POST", "/v1/intents")[-1][2],
                         {"key": "a/b c%:d", "tool": "t", "payload": {"amount": 1}, "owner": "o1", "policy": "p",
                          "lease_ms": 2500})
        self.assertEqual(g.execution_token, "gex_a/b c%%:d_%d" % g.fencing_token)
        self.assertEqual(g.intent.state, "declared")
        r = cl.renew("a/b c%:d", "o1", g.fencing_token, 5)
        self.assertEqual(n.calls("POST", "/v1/intents/a%2Fb%20c%25:d/renew")[-1][2],
                         {"owner": "o1", "fencing_token": g.fencing_token, "lease_ms": 5000})
        self.assertEqual(r.status, "ok")
        r = cl.complete("a/b c%:d", "o1", g.fencing_token, "executed", None)
        self.assertEqual(n.calls("POST", "/v1/intents/a%2Fb%20c%25:d/complete")[-1][2],
                         {"owner": "o1", "fencing_token": g.fencing_token, "outcome": "executed"})
        self.assertEqual(cl.commit("a/b c%:d", "o1").intent.state, "committed")
        it = cl.get("a/b c%:d")
        self.assertEqual((it.state, it.has_result, it.result), ("committed", False, None))
        self.assertEqual(cl.audit("a/b c%:d").events[0].op, "claim")
        self.assertEqual([i.key for i in cl.list().intents], ["a/b c%:d"])
        cl.resolve("x", "failed", actor="me", reason="checked")
        self.assertEqual(n.calls("POST", "/v1/intents/x/resolve")[-1][2],
                         {"outcome": "failed", "actor": "me", "reason": "checked"})
        v = cl.verify_token("gex_1", payload={"amount": 1})
        self.assertEqual(n.calls("POST", "/v1/tokens/verify")[-1][2],
                         {"execution_token": "gex_1", "payload": {"amount": 1}})
        self.assertEqual((v.valid, v.claims.fencing_token, v.claims.tool), (True, 3, "payments.refund"))
        v = cl.verify_token("gex_1", tool="payments.refund")
        self.assertEqual(n.calls("POST", "/v1/tokens/verify")[-1][2],
                         {"execution_token": "gex_1", "tool": "payments.refund"})
        with self.assertRaises(intentd.TokenWrongTool) as cm:
            cl.verify_token("gex_1", payload={"amount": 1}, tool="email.send")
        self.assertIsInstance(cm.exception, intentd.TokenInvalid)
        self.assertEqual((cm.exception.status, cm.exception.code), (422, "token_wrong_tool"))
        self.assertIn('"payments.refund"', cm.exception.detail)
        p = cl.put_policy(intentd.Policy(name="refunds", tools=["payments.*"], require_approval=True,
                                         approvals_required=2), expect_version=3)
        self.assertEqual(n.calls("PUT", "/v1/policies/refunds")[-1][2],
                         {"name": "refunds", "tools": ["payments.*"], "require_approval": True,
                          "approvals_required": 2, "expect_version": 3})
        self.assertEqual((p.name, p.approvals_required), ("refunds", 2))
        self.assertEqual(cl.policy("refunds").tools, ["payments.*"])
        self.assertEqual([x.name for x in cl.policies()], ["default", "refunds"])
        cl.delete_policy("refunds")
        with self.assertRaises(intentd.NotFound):
            cl.policy("refunds")
        st = cl.cluster()
        self.assertEqual((st.node_id, st.leader_id, st.ready), ("n1", "n1", True))
        h = cl.health()
        self.assertEqual((h.live, h.ready), (True, True))
        with self.assertRaises(intentd.BadRequest):
            cl.get("k", wait=61)
        with self.assertRaises(intentd.BadRequest):
            cl.complete("k", "o", 1, "done")

    def test_approvals_and_long_poll(self):
        cl = fast(self.c.urls)
        self.addCleanup(cl.close)
        r = cl.claim("r1", "approve.refund", {"amount": 5}, owner="o")
        self.assertEqual(r.status, "pending_approval")
        self.assertEqual([i.key for i in cl.approvals().intents], ["r1"])
        v = r.intent.version
        t0 = time.monotonic()
        it = cl.get("r1", wait=0.3, after_version=v)
        self.assertGreaterEqual(time.monotonic() - t0, 0.25)
        self.assertEqual(it.version, v)
        threading.Timer(0.2, lambda: cl.approve("r1", fingerprint=r.intent.fingerprint)).start()
        it = cl.wait("r1", v, 10)
        self.assertEqual(it.state, "approved")
        with self.assertRaises(intentd.InvalidState):
            cl.reject("r1")


if __name__ == "__main__":
    unittest.main()
