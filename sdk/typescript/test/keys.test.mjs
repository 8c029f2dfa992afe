import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

import { BadRequestError, MAX_KEY_BYTES, PRINTABLE_UNICODE_VERSION, isPrintable, key, keyOf, validateKey } from "../dist/index.js";
import { sha256, hex } from "../dist/sha256.js";

const vectorsPath = fileURLToPath(new URL("../../conformance/key-vectors.json", import.meta.url));
const vectors = JSON.parse(readFileSync(vectorsPath, "utf8"));

test("key() of every conformance key vector is Go's KeyOf, byte for byte", () => {
  assert.ok(vectors.length >= 20);
  for (const v of vectors) {
    assert.equal(key(...v.parts), v.key, JSON.stringify(v.parts));
    assert.equal(keyOf(...v.parts), v.key, JSON.stringify(v.parts));
  }
});

test("key() follows Go's Key: an empty step is dropped", () => {
  assert.equal(key("stripe.charge", "order-91", "step-1"), "stripe.charge:order-91:step-1");
  assert.equal(key("stripe.charge", "order-91"), "stripe.charge:order-91");
  assert.equal(key("stripe.charge", "order-91", ""), "stripe.charge:order-91");
  assert.equal(keyOf("stripe.charge", "order-91", ""), "stripe.charge:order-91:");
});

test("escaping: separator, escape char, unprintables, lone surrogates", () => {
  assert.equal(keyOf("a:b", "c%d"), "a%3Ab:c%25d");
  assert.equal(keyOf("x\u00a0y"), "x%C2%A0y");
  assert.equal(keyOf("\ud800"), "%ED%A0%80"); // WTF-8 of a lone surrogate
  assert.equal(keyOf("\ufffd"), "\ufffd"); // a real U+FFFD is printable
  // Unicode 16/17 characters are not printable for Go 1.26 (Unicode 15.0):
  // escaped, whatever the JS engine's tables say.
  assert.equal(keyOf("\u0897"), "%E0%A2%97");
  assert.equal(PRINTABLE_UNICODE_VERSION, "15.0.0");
});

test("isPrintable agrees with Go's categories on samples", () => {
  for (const [cp, want] of [
    [0x20, true], [0x41, true], [0x7e, true], [0x7f, false], [0x0, false], [0xa0, false], [0xa1, true],
    [0xad, false], [0x200b, false], [0x2028, false], [0xfeff, false], [0x1f680, true], [0x65e5, true],
    [0x301, true], [0x10ffff, false], [0xe000, false],
  ]) {
    assert.equal(isPrintable(cp), want, "U+" + cp.toString(16));
  }
});

test("the engine's \\p{...} classes agree with the Go table wherever the table prints", () => {
  // The table may only be narrower (older Unicode), never wider.
  const re = /^[\p{L}\p{M}\p{N}\p{P}\p{S} ]$/u;
  for (let cp = 0; cp < 0x110000; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    if (isPrintable(cp)) assert.ok(re.test(String.fromCodePoint(cp)), "U+" + cp.toString(16));
  }
});

test("long keys: stable hashed tail, cut at a UTF-8 boundary, at most 256 bytes", () => {
  const enc = new TextEncoder();
  for (const parts of [["tool", "x".repeat(300)], ["tool", "é".repeat(200)], ["t", "🚀".repeat(100)], ["t", ":".repeat(200)]]) {
    const k = keyOf(...parts);
    assert.ok(enc.encode(k).length <= MAX_KEY_BYTES);
    assert.match(k, /~[0-9a-f]{32}$/);
    assert.equal(keyOf(...parts), k);
    validateKey(k);
    const full = parts.map((p) => p.replace(/%/g, "%25").replace(/:/g, "%3A")).join(":");
    assert.equal(k.slice(-32), createHash("sha256").update(full).digest("hex").slice(0, 32));
  }
  assert.notEqual(keyOf("tool", "x".repeat(300)), keyOf("tool", "x".repeat(301)));
});

test("sha256 matches node:crypto", () => {
  for (const len of [0, 1, 55, 56, 63, 64, 65, 119, 120, 1000]) {
    const data = new Uint8Array(len).map((_, i) => (i * 31 + len) & 255);
    assert.equal(hex(sha256(data)), createHash("sha256").update(data).digest("hex"), "length " + len);
  }
});

test("validateKey refuses what the ledger refuses", () => {
  for (const bad of ["", "a".repeat(257), "é".repeat(129), "tab\there", "nbsp\u00a0", "\ud800x"]) {
    assert.throws(() => validateKey(bad), BadRequestError, JSON.stringify(bad));
  }
  validateKey("a".repeat(256));
  validateKey("é".repeat(128));
  validateKey("deploy:café:日本語 x");
});
