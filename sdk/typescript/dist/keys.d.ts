/** The longest key the ledger accepts, in UTF-8 bytes. */
export declare const MAX_KEY_BYTES = 256;
/** Separates the parts of a key made by key() and keyOf(). */
export declare const KEY_SEPARATOR = ":";
/**
 * isPrintable is Go's unicode.IsPrint: letters, marks, numbers,
 * punctuation, symbols (categories L, M, N, P, S) and U+0020, as Go's
 * Unicode tables (15.0.0) define them. It uses a table generated from Go
 * (src/printable.ts), not the engine's \p{...} classes: Node 20 ships
 * Unicode 17, which prints some 10,000 code points Go does not, and the
 * ledger validates keys with Go's tables.
 */
export declare function isPrintable(cp: number): boolean;
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
export declare function key(tool: string, ...parts: string[]): string;
/**
 * keyOf joins any number of parts into a key the way Go's client.KeyOf
 * does: inside a part, '%', ':' and anything that is not printable UTF-8
 * are percent-escaped (the UTF-8 bytes, upper-case hex), the parts are
 * joined with ':', and a key over 256 bytes keeps its beginning (cut at a
 * UTF-8 boundary) and replaces the rest by "~" and 32 hex digits of the
 * SHA-256 of the whole key. A lone surrogate (not valid UTF-16, so not
 * valid UTF-8) is escaped as its three WTF-8 bytes.
 */
export declare function keyOf(...parts: string[]): string;
/** utf8Length is the length of s in UTF-8 bytes (a lone surrogate counts 3). */
export declare function utf8Length(s: string): number;
/** hasLoneSurrogate reports whether s is not well-formed UTF-16 (so not encodable as UTF-8). */
export declare function hasLoneSurrogate(s: string): boolean;
/**
 * validateKey throws a BadRequestError unless the ledger accepts key: 1..256
 * bytes of printable UTF-8 (Go's client.ValidateKey).
 */
export declare function validateKey(key: string): void;
