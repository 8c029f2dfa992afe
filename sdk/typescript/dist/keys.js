// Idempotency keys, byte for byte as client/keys.go derives them.
import { badRequest } from "./errors.js";
import { PRINTABLE_RANGES } from "./printable.js";
import { hex, sha256 } from "./sha256.js";
/** The longest key the ledger accepts, in UTF-8 bytes. */
export const MAX_KEY_BYTES = 256;
/** Separates the parts of a key made by key() and keyOf(). */
export const KEY_SEPARATOR = ":";
/** How many hex digits of SHA-256 stand for the tail of a key that would be too long. */
const KEY_HASH_HEX = 32;
const encoder = new TextEncoder();
const decoder = new TextDecoder();
/**
 * isPrintable is Go's unicode.IsPrint: letters, marks, numbers,
 * punctuation, symbols (categories L, M, N, P, S) and U+0020, as Go's
 * Unicode tables (15.0.0) define them. It uses a table generated from Go
 * (src/printable.ts), not the engine's \p{...} classes: Node 20 ships
 * Unicode 17, which prints some 10,000 code points Go does not, and the
 * ledger validates keys with Go's tables.
 */
export function isPrintable(cp) {
    if (cp >= 0x20 && cp <= 0x7e)
        return true;
    if (cp < 0xa1)
        return false;
    // Binary search over the ranges: the largest start <= cp.
    let lo = 0;
    let hi = PRINTABLE_RANGES.length / 2 - 1;
    while (lo <= hi) {
        const mid = (lo + hi) >> 1;
        if (PRINTABLE_RANGES[2 * mid] <= cp)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return hi >= 0 && cp <= PRINTABLE_RANGES[2 * hi + 1];
}
/**
 * key derives the idempotency key of one logical effect from the tool that
 * performs it, the business entity it acts on and, when one entity sees
 * several effects of the same tool, the step:
 *
 *     key("stripe.charge", "order-91", "step-1") === "stripe.charge:order-91:step-1"
 *     key("stripe.charge", "order-91")           === "stripe.charge:order-91"
 *     key("stripe.charge", "order-91", "")       === "stripe.charge:order-91"   (Go's Key(tool, entity, ""))
 *
 * It is keyOf(tool, ...parts), except that key(tool, entity, "") drops the
 * empty step as Go's client.Key does, so both SDKs name the same effect
 * alike. Build a key only from values that are the same on every delivery
 * and retry of the same logical call (an order ID, a ticket number, a
 * workflow step), never from a random value, a timestamp or an attempt
 * counter.
 */
export function key(tool, ...parts) {
    if (parts.length === 2 && parts[1] === "")
        return keyOf(tool, parts[0]);
    return keyOf(tool, ...parts);
}
/**
 * keyOf joins any number of parts into a key the way Go's client.KeyOf
 * does: inside a part, '%', ':' and anything that is not printable UTF-8
 * are percent-escaped (the UTF-8 bytes, upper-case hex), the parts are
 * joined with ':', and a key over 256 bytes keeps its beginning (cut at a
 * UTF-8 boundary) and replaces the rest by "~" and 32 hex digits of the
 * SHA-256 of the whole key. A lone surrogate (not valid UTF-16, so not
 * valid UTF-8) is escaped as its three WTF-8 bytes.
 */
export function keyOf(...parts) {
    return shortenKey(parts.map(escapeKeyPart).join(KEY_SEPARATOR));
}
function escapeKeyPart(s) {
    let out = "";
    for (const ch of String(s)) {
        const cp = ch.codePointAt(0);
        if (ch === "%" || ch === ":") {
            out += percent(cp);
        }
        else if ((cp >= 0xd800 && cp <= 0xdfff) || !isPrintable(cp)) {
            for (const b of utf8Bytes(cp))
                out += percent(b);
        }
        else {
            out += ch;
        }
    }
    return out;
}
function percent(b) {
    return "%" + b.toString(16).toUpperCase().padStart(2, "0");
}
/** The UTF-8 bytes of a code point (WTF-8 for a surrogate). */
function utf8Bytes(cp) {
    if (cp < 0x80)
        return [cp];
    if (cp < 0x800)
        return [0xc0 | (cp >> 6), 0x80 | (cp & 0x3f)];
    if (cp < 0x10000)
        return [0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 0x3f), 0x80 | (cp & 0x3f)];
    return [0xf0 | (cp >> 18), 0x80 | ((cp >> 12) & 0x3f), 0x80 | ((cp >> 6) & 0x3f), 0x80 | (cp & 0x3f)];
}
function shortenKey(k) {
    const bytes = encoder.encode(k);
    if (bytes.length <= MAX_KEY_BYTES)
        return k;
    const sum = hex(sha256(bytes)).slice(0, KEY_HASH_HEX);
    let keep = MAX_KEY_BYTES - 1 - KEY_HASH_HEX;
    while (keep > 0 && (bytes[keep] & 0xc0) === 0x80)
        keep--;
    return decoder.decode(bytes.subarray(0, keep)) + "~" + sum;
}
/** utf8Length is the length of s in UTF-8 bytes (a lone surrogate counts 3). */
export function utf8Length(s) {
    let len = 0;
    for (const ch of s) {
        const cp = ch.codePointAt(0);
        len += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    }
    return len;
}
/** hasLoneSurrogate reports whether s is not well-formed UTF-16 (so not encodable as UTF-8). */
export function hasLoneSurrogate(s) {
    for (const ch of s) {
        const cp = ch.codePointAt(0);
        if (cp >= 0xd800 && cp <= 0xdfff)
            return true;
    }
    return false;
}
/**
 * validateKey throws a BadRequestError unless the ledger accepts key: 1..256
 * bytes of printable UTF-8 (Go's client.ValidateKey).
 */
export function validateKey(key) {
    if (typeof key !== "string" || key === "")
        throw badRequest("key is empty", "key");
    const len = utf8Length(key);
    if (len > MAX_KEY_BYTES)
        throw badRequest(`key is ${len} bytes, over the limit of ${MAX_KEY_BYTES}`, "key");
    for (const ch of key) {
        const cp = ch.codePointAt(0);
        if (cp >= 0xd800 && cp <= 0xdfff)
            throw badRequest("key is not valid UTF-8 (a lone surrogate)", "key");
        if (!isPrintable(cp)) {
            throw badRequest(`key holds the unprintable character U+${cp.toString(16).toUpperCase().padStart(4, "0")}`, "key");
        }
    }
}
