"""Idempotency keys, derived exactly as the Go SDK's client.Key / client.KeyOf.

A key names the logical effect, never the attempt: build it only from values
that are the same on every delivery and retry of the same logical call (an
order ID, a ticket number, a workflow step), never from a random value, a
timestamp or an attempt counter.
"""

from __future__ import annotations

import bisect
import hashlib
from typing import Tuple, Union

from ._printable import BOUNDS
from .errors import BadRequest

__all__ = ["MAX_KEY_BYTES", "KEY_SEPARATOR", "key", "key_of", "validate_key", "is_printable"]

#: The longest key the ledger accepts, in UTF-8 bytes.
MAX_KEY_BYTES = 256
#: Separates the parts of a key made by key() and key_of().
KEY_SEPARATOR = ":"
# How many hex digits of SHA-256 stand for the tail of a key that would be
# too long.
_KEY_HASH_HEX = 32

Part = Union[str, bytes]


def is_printable(cp: int) -> bool:
    """Reports whether the code point is printable as Go's unicode.IsPrint
    says (letters, marks, numbers, punctuation, symbols and U+0020), by
    Go's Unicode tables, whatever Python's unicodedata version is."""
    return bisect.bisect_right(BOUNDS, cp) % 2 == 1


def key(tool: str, *parts: Part) -> str:
    """The idempotency key of one logical effect: the tool, the business
    entity and, when one entity sees several effects of the same tool, the
    step::

        key("stripe.charge", "order-91", "step-1") == "stripe.charge:order-91:step-1"
        key("stripe.charge", "order-91")           == "stripe.charge:order-91"

    It is key_of(tool, *parts), except that, like Go's Key(tool, entity,
    step), an empty step after the entity is left out:
    key("stripe.charge", "order-91", "") == "stripe.charge:order-91".
    """
    if len(parts) == 2 and _as_bytes(parts[1]) == b"":
        parts = parts[:1]
    return key_of(tool, *parts)


def key_of(*parts: Part) -> str:
    """Joins any number of parts into a key, as Go's client.KeyOf: inside a
    part '%', ':' and every byte that is not part of a printable UTF-8
    character are percent-escaped (so different parts never give the same
    key); parts are joined with ':'; a key over 256 bytes keeps its
    beginning (cut at a character boundary) and ends with "~" and 32 hex
    digits of the SHA-256 of the whole key.

    Parts are str (encoded as UTF-8; a lone surrogate is encoded as its
    three bytes, which are not valid UTF-8 and so are escaped) or bytes
    (taken as they are, like a Go string)."""
    escaped = b":".join(_escape_part(_as_bytes(p)) for p in parts)
    return _shorten(escaped).decode("utf-8")


def validate_key(k: str) -> None:
    """Raises BadRequest unless the ledger accepts k: 1..256 bytes of
    printable UTF-8 (Go's ValidateKey)."""
    if not isinstance(k, str):
        raise BadRequest(detail="key must be a str, not %s" % type(k).__name__, field="key")
    if k == "":
        raise BadRequest(detail="key is empty", field="key")
    try:
        b = k.encode("utf-8")
    except UnicodeEncodeError:
        raise BadRequest(detail="key is not valid UTF-8", field="key") from None
    if len(b) > MAX_KEY_BYTES:
        raise BadRequest(detail="key is %d bytes, over the limit of %d" % (len(b), MAX_KEY_BYTES), field="key")
    for ch in k:
        if not is_printable(ord(ch)):
            raise BadRequest(detail="key holds the unprintable character U+%04X" % ord(ch), field="key")


def _as_bytes(p: Part) -> bytes:
    if isinstance(p, bytes):
        return p
    if isinstance(p, str):
        return p.encode("utf-8", "surrogatepass")
    raise TypeError("key part must be str or bytes, not %s" % type(p).__name__)


def _decode_rune(s: bytes, i: int) -> Tuple[int, int]:
    """Go's utf8.DecodeRune at s[i:]: (code point, size), or (0xFFFD, 1) for
    an invalid or short sequence."""
    c0 = s[i]
    if c0 < 0x80:
        return c0, 1
    n = len(s) - i
    if 0xC2 <= c0 <= 0xDF:
        if n >= 2 and 0x80 <= s[i + 1] <= 0xBF:
            return ((c0 & 0x1F) << 6) | (s[i + 1] & 0x3F), 2
        return 0xFFFD, 1
    if 0xE0 <= c0 <= 0xEF:
        lo, hi = 0x80, 0xBF
        if c0 == 0xE0:
            lo = 0xA0
        elif c0 == 0xED:
            hi = 0x9F
        if n >= 3 and lo <= s[i + 1] <= hi and 0x80 <= s[i + 2] <= 0xBF:
            return ((c0 & 0x0F) << 12) | ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F), 3
        return 0xFFFD, 1
    if 0xF0 <= c0 <= 0xF4:
        lo, hi = 0x80, 0xBF
        if c0 == 0xF0:
            lo = 0x90
        elif c0 == 0xF4:
            hi = 0x8F
        if n >= 4 and lo <= s[i + 1] <= hi and 0x80 <= s[i + 2] <= 0xBF and 0x80 <= s[i + 3] <= 0xBF:
            return (((c0 & 0x07) << 18) | ((s[i + 1] & 0x3F) << 12) | ((s[i + 2] & 0x3F) << 6)
                    | (s[i + 3] & 0x3F)), 4
        return 0xFFFD, 1
    return 0xFFFD, 1


def _escape_part(s: bytes) -> bytes:
    out = bytearray()
    i = 0
    while i < len(s):
        r, size = _decode_rune(s, i)
        if r == 0x25 or r == 0x3A:  # '%', ':'
            out += b"%%%02X" % s[i]
        elif (r == 0xFFFD and size <= 1) or not is_printable(r):
            for j in range(size):
                out += b"%%%02X" % s[i + j]
        else:
            out += s[i:i + size]
        i += size
    return bytes(out)


def _shorten(k: bytes) -> bytes:
    if len(k) <= MAX_KEY_BYTES:
        return k
    digest = hashlib.sha256(k).hexdigest()[:_KEY_HASH_HEX].encode("ascii")
    keep = MAX_KEY_BYTES - 1 - _KEY_HASH_HEX
    while keep > 0 and (k[keep] & 0xC0) == 0x80:
        keep -= 1
    return k[:keep] + b"~" + digest
