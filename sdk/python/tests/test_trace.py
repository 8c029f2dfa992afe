"""The W3C trace context the clients send: from intentd.traceparent(), or
else from the trace_inject hook (opentelemetry.propagate.inject fits it);
a malformed traceparent and other headers the hook writes are not sent."""

import asyncio
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fakeledger import Cluster  # noqa: E402

import intentd  # noqa: E402

TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
HOOK_TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
BAD_TP = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def hook(tp):
    def inject(carrier):
        carrier["traceparent"] = tp
        carrier["tracestate"] = "vendor=x"
        carrier["Authorization"] = "Bearer stolen"
    return inject


# (name, traceparent() around the call or None, hook or None, want traceparent, want tracestate)
CASES = [
    ("none", None, None, None, None),
    ("from traceparent()", TP, None, TP, None),
    ("from the hook", None, hook(HOOK_TP), HOOK_TP, "vendor=x"),
    ("traceparent() wins over the hook", TP, hook(HOOK_TP), TP, None),
    ("a malformed one from traceparent()", BAD_TP, None, None, None),
    ("a malformed one from the hook", None, hook(BAD_TP), None, None),
]


def lower(headers):
    return {k.lower(): v for k, v in headers.items()}


class TraceHeaders(unittest.TestCase):
    def setUp(self):
        self.c = Cluster(1, 0)
        self.addCleanup(self.c.stop)

    def last_claim(self):
        return lower(self.c.nodes[0].calls("POST", "/v1/intents")[-1][3])

    def check(self, name, want_tp, want_ts):
        h = self.last_claim()
        self.assertEqual(h.get("traceparent"), want_tp, name)
        self.assertEqual(h.get("tracestate"), want_ts, name)
        self.assertNotIn("authorization", h, name)

    def test_sync_client(self):
        for i, (name, tp, inject, want_tp, want_ts) in enumerate(CASES):
            with self.subTest(name):
                cl = intentd.Client(self.c.urls, trace_inject=inject, discovery=False)
                self.addCleanup(cl.close)
                if tp is None:
                    cl.claim("sync-%d" % i, "t", {"a": 1})
                else:
                    with intentd.traceparent(tp):
                        cl.claim("sync-%d" % i, "t", {"a": 1})
                self.check(name, want_tp, want_ts)

    def test_async_client(self):
        async def run(i, tp, inject):
            cl = intentd.AsyncClient(self.c.urls, trace_inject=inject, discovery=False)
            try:
                if tp is None:
                    await cl.claim("async-%d" % i, "t", {"a": 1})
                else:
                    with intentd.traceparent(tp):
                        await cl.claim("async-%d" % i, "t", {"a": 1})
            finally:
                await cl.aclose()

        for i, (name, tp, inject, want_tp, want_ts) in enumerate(CASES):
            with self.subTest(name):
                asyncio.run(run(i, tp, inject))
                self.check(name, want_tp, want_ts)


class ValidTraceparent(unittest.TestCase):
    def test_format(self):
        for tp, want in [
            (TP, True),
            ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", True),
            ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", False),
            ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", False),
            (TP.upper(), False),
            (BAD_TP, False),
            ("", False),
            (None, False),
        ]:
            self.assertEqual(intentd.valid_traceparent(tp), want, tp)


if __name__ == "__main__":
    unittest.main()
