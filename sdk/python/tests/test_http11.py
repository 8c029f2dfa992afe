"""The HTTP/1.1 both transports speak: request bytes and answer parsing,
through the blocking reader (a buffered file over the bytes) and the asyncio
one (a StreamReader fed the same bytes)."""

import asyncio
import io
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from intentd._http11 import MAX_HEADERS, BadResponse, request_bytes  # noqa: E402
from intentd._sync import read_answer  # noqa: E402
from intentd.aio import _read_answer  # noqa: E402


def sync_read(data: bytes, head_only: bool = False):
    return read_answer(io.BufferedReader(io.BytesIO(data)), head_only)


def async_read(data: bytes, head_only: bool = False):
    async def run():
        r = asyncio.StreamReader()
        r.feed_data(data)
        r.feed_eof()
        return await _read_answer(r, head_only)
    return asyncio.run(run())


READERS = [("sync", sync_read), ("async", async_read)]


class ReadResponseTest(unittest.TestCase):
    def test_answers_intentd_sends(self):
        cases = [
            ("content-length, keep-alive",
             b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"a\":\"bc\"}\nNEXT",
             False, (201, {"content-type": "application/json", "content-length": "11"}, b"{\"a\":\"bc\"}\n", False)),
            ("chunked with an extension and a trailer",
             b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nabcd\r\n2\r\nef\r\n0\r\nT: v\r\n\r\n",
             False, (200, {"transfer-encoding": "chunked"}, b"abcdef", False)),
            ("connection close", b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
             False, (503, {"connection": "close", "content-length": "0"}, b"", True)),
            ("HTTP/1.0 without keep-alive closes", b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
             False, (200, {"content-length": "2"}, b"ok", True)),
            ("no length: read to the end, then close", b"HTTP/1.1 200 OK\r\n\r\nall of it",
             False, (200, {}, b"all of it", True)),
            ("204 has no body", b"HTTP/1.1 204 No Content\r\n\r\n", False, (204, {}, b"", False)),
            ("HEAD has no body whatever the length", b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n",
             True, (200, {"content-length": "99"}, b"", False)),
            ("repeated headers are joined, names lower-cased, values trimmed",
             b"HTTP/1.1 429 Too Many Requests\r\nRetry-After:  3 \r\nX-A: 1\r\nx-a: 2\r\nContent-Length: 0\r\n\r\n",
             False, (429, {"retry-after": "3", "x-a": "1, 2", "content-length": "0"}, b"", False)),
        ]
        for name, data, head_only, want in cases:
            for kind, read in READERS:
                with self.subTest(case=name, reader=kind):
                    self.assertEqual(read(data, head_only), want)

    def test_refuses_what_is_not_an_answer(self):
        cases = [
            ("nothing at all", b"", EOFError),
            ("not HTTP", b"SSH-2.0-OpenSSH\r\n\r\n", BadResponse),
            ("no status code", b"HTTP/1.1 OK\r\n\r\n", BadResponse),
            ("an interim answer", b"HTTP/1.1 100 Continue\r\n\r\n", BadResponse),
            ("a header without a colon", b"HTTP/1.1 200 OK\r\nbroken\r\n\r\n", BadResponse),
            ("closed in the headers", b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n", BadResponse),
            ("a negative length", b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", BadResponse),
            ("a length that is no number", b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", BadResponse),
            ("a short body", b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", EOFError),
            ("a bad chunk size", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", BadResponse),
            ("closed in a chunked body", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", BadResponse),
            ("bare LF line ends (intentd writes CRLF)", b"HTTP/1.1 200 OK\nContent-Length: 1\n\nz", BadResponse),
            ("endless headers", b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * (MAX_HEADERS + 1) + b"\r\n", BadResponse),
        ]
        for name, data, exc in cases:
            for kind, read in READERS:
                with self.subTest(case=name, reader=kind):
                    with self.assertRaises(exc):
                        read(data)

    def test_request_bytes(self):
        got = request_bytes("POST", "/v1/intents?x=1", {"Host": "n1:8101", "Content-Length": "2"}, b"{}")
        self.assertEqual(got, b"POST /v1/intents?x=1 HTTP/1.1\r\nHost: n1:8101\r\nContent-Length: 2\r\n\r\n{}")
        self.assertEqual(request_bytes("GET", "/healthz", {}, None), b"GET /healthz HTTP/1.1\r\n\r\n")


if __name__ == "__main__":
    unittest.main()
