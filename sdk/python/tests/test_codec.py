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


if __name__ == "__main__":
    unittest.main()
