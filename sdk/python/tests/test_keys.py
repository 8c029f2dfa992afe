"""key() / key_of() / validate_key(), against the Go SDK's vectors."""

import json
import os
import sys
import unicodedata
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import intentd  # noqa: E402
from intentd.keys import is_printable  # noqa: E402

VECTORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "conformance", "key-vectors.json")


class KeyVectors(unittest.TestCase):
    def test_every_vector_matches_go(self):
        with open(VECTORS, encoding="utf-8") as f:
            vectors = json.load(f)
        self.assertGreaterEqual(len(vectors), 20)
        for v in vectors:
            with self.subTest(parts=v["parts"][:3]):
                self.assertEqual(intentd.key_of(*v["parts"]), v["key"])
                if len(v["parts"]) != 3 or v["parts"][2] != "":
                    self.assertEqual(intentd.key(*v["parts"]), v["key"])


class Keys(unittest.TestCase):
    def test_key_drops_an_empty_step_like_go(self):
        self.assertEqual(intentd.key("stripe.charge", "order-91", ""), "stripe.charge:order-91")
        self.assertEqual(intentd.key("stripe.charge", "order-91", "step-1"), "stripe.charge:order-91:step-1")
        self.assertEqual(intentd.key_of("stripe.charge", "order-91", ""), "stripe.charge:order-91:")

    def test_escapes(self):
        self.assertEqual(intentd.key_of("t", "a:b", "100%"), "t:a%3Ab:100%25")
        self.assertEqual(intentd.key_of("t", "\t\x00\x7f"), "t:%09%00%7F")
        self.assertEqual(intentd.key_of("t", b"\xff\xfeok"), "t:%FF%FEok")
        # A lone surrogate is three bytes that are not UTF-8: escaped.
        self.assertEqual(intentd.key_of("t", "\ud800"), "t:%ED%A0%80")
        self.assertEqual(intentd.key_of("t", "é日🚀"), "t:é日🚀")

    def test_distinct_parts_give_distinct_keys(self):
        self.assertNotEqual(intentd.key_of("a:b", "c"), intentd.key_of("a", "b:c"))
        self.assertNotEqual(intentd.key_of("a%3Ab"), intentd.key_of("a:b"))

    def test_long_keys_are_shortened_stably_at_a_character_boundary(self):
        for part in ("x" * 300, "é" * 200, "🚀" * 70, "ab" + "日" * 120):
            with self.subTest(part=part[:3]):
                k = intentd.key_of("tool", part)
                b = k.encode("utf-8")
                self.assertLessEqual(len(b), 256)
                self.assertRegex(k, r"~[0-9a-f]{32}$")
                self.assertEqual(k, intentd.key_of("tool", part))
                intentd.validate_key(k)
        self.assertNotEqual(intentd.key_of("tool", "x" * 300), intentd.key_of("tool", "x" * 301))

    def test_validate_key(self):
        intentd.validate_key("a")
        intentd.validate_key("x" * 256)
        intentd.validate_key("é" * 128)
        for bad in ("", "x" * 257, "é" * 129, "tab\there", "nl\n", "\u00ad", "\u200b", "\ud800", "\u2028"):
            with self.subTest(bad=bad[:5]):
                with self.assertRaises(intentd.BadRequest) as cm:
                    intentd.validate_key(bad)
                self.assertEqual(cm.exception.status, 0)
                self.assertEqual(cm.exception.code, "bad_request")

    def test_printable_agrees_with_go_categories(self):
        # Go's IsPrint: L, M, N, P, S and U+0020. Where Python's Unicode
        # version agrees with Go's (assigned characters), so must the table.
        for cp in list(range(0, 0x3000)) + list(range(0xFE00, 0x10000)):
            cat = unicodedata.category(chr(cp))
            if cat == "Cn":
                continue
            want = cat[0] in "LMNPS" or cp == 0x20
            self.assertEqual(is_printable(cp), want, "U+%04X %s" % (cp, cat))


if __name__ == "__main__":
    unittest.main()
