"""HTTP/1.1 as the clients speak it to intentd, without I/O: the request
bytes, the answer's head, and the reading of an answer as a flow of reads
(ReadHead, ReadLine, ReadExactly, ReadToEOF) that the blocking transport
performs on a buffered socket file and the asyncio transport on a
StreamReader (the head in one readuntil: one await per answer, not one per
header line). Lines end with CRLF, as RFC 9112 and intentd's server write
them.

Why not http.client: its answer parsing goes through the email package's
header parser, which cost the blocking client more CPU per call than the
rest of the SDK together (measured: docs in the SDK README). This module
covers what intentd's server sends: a status line, headers,
Content-Length or chunked bodies, keep-alive.
"""

from __future__ import annotations

from typing import Dict, Generator, Mapping, Optional, Tuple, Union


class BadResponse(ValueError):
    """The bytes on the connection are not an HTTP/1.1 answer."""


class ReadHead:
    """Read the answer's head: every byte up to and including the first
    CRLFCRLF (an error if the stream ends first, b"" if it ends before any
    byte)."""
    __slots__ = ()


class ReadLine:
    """Read one line, its CRLF included (b"" at end of stream)."""
    __slots__ = ()


class ReadExactly:
    """Read exactly n bytes (an error if the stream ends first)."""
    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n


class ReadToEOF:
    """Read until the peer closes."""
    __slots__ = ()


READ_HEAD = ReadHead()
READ_LINE = ReadLine()
READ_TO_EOF = ReadToEOF()

Read = Union[ReadHead, ReadLine, ReadExactly, ReadToEOF]
#: status, lower-case header names to values, body, whether the connection closes after it.
Response = Tuple[int, Dict[str, str], bytes, bool]

#: Bounds on what an answer's head may hold, so a confused peer cannot make
#: the client buffer without end.
MAX_HEADERS = 100
MAX_LINE = 64 << 10
MAX_HEAD = 1 << 20


def request_bytes(method: str, target: str, headers: Mapping[str, str], body: Optional[bytes]) -> bytes:
    """The whole request: request line, headers, blank line, body."""
    head = "%s %s HTTP/1.1\r\n%s\r\n" % (method, target, "".join("%s: %s\r\n" % kv for kv in headers.items()))
    data = head.encode("latin-1")
    return data + body if body else data


def read_response(head_only: bool = False) -> Generator[Read, bytes, Response]:
    """The reads that take one answer off a connection. head_only: an
    answer to HEAD (no body whatever the headers say)."""
    head = yield READ_HEAD
    if not head:
        raise EOFError("the connection was closed before an answer")
    if len(head) > MAX_HEAD:
        raise BadResponse("an answer head of %d bytes" % len(head))
    if not head.endswith(b"\r\n\r\n"):
        raise BadResponse("an answer head that does not end with an empty line")
    lines = head[:-4].decode("latin-1").split("\r\n")
    line = lines[0]
    try:
        version, rest = line.split(" ", 1)
        status = int(rest[:3])
    except ValueError:
        raise BadResponse("bad status line %r" % line[:80]) from None
    if not version.startswith("HTTP/1.") or not 100 <= status <= 999:
        raise BadResponse("bad status line %r" % line[:80])
    if len(lines) > MAX_HEADERS + 1:
        raise BadResponse("more than %d header lines" % MAX_HEADERS)
    headers: Dict[str, str] = {}
    for h in lines[1:]:
        if len(h) > MAX_LINE:
            raise BadResponse("a header line of %d bytes" % len(h))
        name, sep, value = h.partition(":")
        if not sep:
            raise BadResponse("bad header line %r" % h[:80])
        name = name.strip().lower()
        value = value.strip()
        headers[name] = headers[name] + ", " + value if name in headers else value
    conn = headers.get("connection", "").lower()
    will_close = conn == "close" or (version == "HTTP/1.0" and conn != "keep-alive")
    if 100 <= status < 200:
        raise BadResponse("an interim answer %d, which intentd never sends" % status)
    if head_only or status in (204, 304):
        return status, headers, b"", will_close
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks = []
        while True:
            size_line = yield READ_LINE
            if not size_line:
                raise BadResponse("the connection was closed in a chunked body")
            try:
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            except ValueError:
                raise BadResponse("bad chunk size %r" % size_line[:40]) from None
            if size == 0:
                while True:  # trailers
                    t = yield READ_LINE
                    if t in (b"\r\n", b"\n", b""):
                        break
                break
            chunks.append((yield ReadExactly(size)))
            yield ReadExactly(2)
        return status, headers, b"".join(chunks), will_close
    cl = headers.get("content-length")
    if cl is not None:
        try:
            n = int(cl)
        except ValueError:
            raise BadResponse("bad Content-Length %r" % cl) from None
        if n < 0:
            raise BadResponse("bad Content-Length %r" % cl)
        body = (yield ReadExactly(n)) if n else b""
        return status, headers, body, will_close
    body = yield READ_TO_EOF
    return status, headers, body, True
