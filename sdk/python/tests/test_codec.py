"""The hot-path encoders and decoders: request bodies and answer times."""

import datetime as dt
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from intentd._core import RawJSON, dump_body  # noqa: E402
from intentd.types import parse_time  # noqa: E402


class DumpBodyTest(unittest.TestCase):
    def test_plain_and_raw_members_decode_to_the_same_object(self):
        cases = [
            {},
            {"a": 1},
            {"a": RawJSON(b'{"x":1}')},
            {"key": "é", "payload": RawJSON(b"[1,2]"), "owner": None, "lease_ms": 30000},
            {"result": RawJSON(b"null")},
        ]
        for body in cases:
            want = {k: (json.loads(v.data) if isinstance(v, RawJSON) else v) for k, v in body.items()}
            self.assertEqual(json.loads(dump_body(body)), want, body)

    def test_raw_body_and_non_objects_pass(self):
        self.assertEqual(dump_body(RawJSON(b'{"a":1}')), b'{"a":1}')
        self.assertEqual(json.loads(dump_body([1, "x"])), [1, "x"])


class ParseTimeTest(unittest.TestCase):
    def test_the_form_intentd_writes_and_others(self):
        utc = dt.timezone.utc
        cases = {
            "2026-12-02T08:05:09.123456789Z": dt.datetime(2026, 12, 2, 8, 5, 9, 123456, tzinfo=utc),
            "2026-12-02T08:05:09Z": dt.datetime(2026, 12, 2, 8, 5, 9, tzinfo=utc),
            "2026-12-02T08:05:09.5Z": dt.datetime(2026, 12, 2, 8, 5, 9, 500000, tzinfo=utc),
            "2026-12-02T08:05:09.123+02:00": dt.datetime(2026, 12, 2, 8, 5, 9, 123000,
                                                          tzinfo=dt.timezone(dt.timedelta(hours=2))),
            "0001-01-01T00:00:00Z": None,  # Go's zero time
            "2026-13-02T08:05:09Z": None,
            "2026-12-02T08:05:09.12a4Z": None,
            "garbage": None,
            "": None,
        }
        for text, want in cases.items():
            self.assertEqual(parse_time(text), want, text)
        self.assertIsNone(parse_time(None))


class LazyTimesTest(unittest.TestCase):
    def test_times_read_as_parse_time_would_give_them(self):
        from intentd.types import Intent
        d = {"key": "k", "created_at": "2026-11-29T22:36:52.561493774Z", "updated_at": "0001-01-01T00:00:00Z",
             "lease_deadline": 17}
        got = Intent.from_dict(d)
        self.assertEqual(got.created_at, parse_time(d["created_at"]))
        self.assertIsInstance(got.created_at, dt.datetime)
        self.assertIsNone(got.updated_at)  # the zero time
        self.assertIsNone(got.lease_deadline)  # not text
        eager = Intent(key="k", created_at=parse_time(d["created_at"]), raw=dict(d))
        self.assertEqual(got, eager)
        self.assertIn("created_at=datetime.datetime(2026, 11, 29", repr(got))
        self.assertIsNone(Intent().created_at)

    def test_answers_decode_their_intent_when_read(self):
        from intentd.types import ClaimResult, Intent, IntentResult
        raw = {"key": "k", "state": "declared", "fencing_token": 4, "created_at": "2026-11-29T22:36:52.5Z"}
        claim = ClaimResult.from_dict({"status": "granted", "fencing_token": 4, "intent": raw}, created=True, owner="o")
        self.assertIsInstance(claim.intent, Intent)
        self.assertEqual(claim.intent, Intent.from_dict(raw))
        self.assertIs(claim.intent, claim.intent)  # decoded once
        self.assertEqual(claim, ClaimResult(status="granted", fencing_token=4, intent=Intent.from_dict(raw),
                                            created=True, owner="o"))
        self.assertIsNone(IntentResult.from_dict({"status": "ok", "intent": "not an object"}).intent)
        self.assertIsNone(IntentResult().intent)


if __name__ == "__main__":
    unittest.main()
