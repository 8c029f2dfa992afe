// Small helpers: abortable sleeps, linked signals, strict JSON encoding,
// owner names. Runtime-neutral: timers, AbortController, fetch, TextEncoder
// and (optionally) crypto.getRandomValues only.

import { badRequest } from "./errors.js";

/** sleep resolves after ms, or rejects with signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, Math.max(0, ms));
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * A controller aborted when any of the given signals aborts (with its
 * reason) or after timeoutMs (with a TimeoutError DOMException). Call
 * dispose() when done, so no listener or timer outlives the call.
 * (AbortSignal.any is Node 20.3+, so it is not relied on.)
 */
export interface Linked {
  signal: AbortSignal;
  /** Whether the timeout (not a parent signal) fired. */
  timedOut(): boolean;
  abort(reason?: unknown): void;
  dispose(): void;
}

export function linkSignals(parents: (AbortSignal | undefined)[], timeoutMs?: number): Linked {
  const ctl = new AbortController();
  let fired = false;
  const cleanups: (() => void)[] = [];
  for (const p of parents) {
    if (!p) continue;
    if (p.aborted) {
      ctl.abort(p.reason);
      break;
    }
    const on = () => ctl.abort(p.reason);
    p.addEventListener("abort", on, { once: true });
    cleanups.push(() => p.removeEventListener("abort", on));
  }
  if (timeoutMs !== undefined && timeoutMs > 0 && !ctl.signal.aborted) {
    const t = setTimeout(() => {
      fired = true;
      ctl.abort(timeoutError(timeoutMs));
    }, timeoutMs);
    cleanups.push(() => clearTimeout(t));
  }
  return {
    signal: ctl.signal,
    timedOut: () => fired,
    abort: (reason?: unknown) => ctl.abort(reason),
    dispose: () => {
      for (const c of cleanups) c();
      cleanups.length = 0;
    },
  };
}

/** timeoutError is the TimeoutError DOMException (an Error where there is none) of a wait that ran out. */
export function timeoutError(ms: number): Error {
  const msg = `timed out after ${ms} ms`;
  try {
    return new DOMException(msg, "TimeoutError");
  } catch {
    const e = new Error(msg);
    e.name = "TimeoutError";
    return e;
  }
}

/**
 * encodeJSON turns a payload or result into JSON text, refusing what would
 * not survive the trip or would silently change: undefined, a function or a
 * symbol as the value itself, a BigInt, a cycle, a number that is not
 * finite (JSON.stringify writes null) or an integer beyond ±(2^53-1)
 * anywhere (the ledger refuses those: send such IDs as strings). Nested
 * undefined properties are dropped, as JSON.stringify does. It throws a
 * BadRequestError naming what (field).
 */
export function encodeJSON(value: unknown, field: string): string {
  if (value === undefined || typeof value === "function" || typeof value === "symbol") {
    throw badRequest(`${field}: ${typeof value} is not JSON (use null for none)`, field);
  }
  if (plainJSON(value, 0)) {
    // Nothing to refuse: no replacer needed (it costs a call per value).
    const fast = JSON.stringify(value);
    if (fast !== undefined) return fast;
  }
  let text: string | undefined;
  try {
    text = JSON.stringify(value, (_k, v: unknown) => {
      if (typeof v === "number") {
        if (!Number.isFinite(v)) throw new TypeError(`the number ${v} is not JSON`);
        if (Number.isInteger(v) && !Number.isSafeInteger(v)) {
          throw new TypeError(`the integer ${v} is beyond ±(2^53-1) and cannot be sent exactly: send it as a string`);
        }
      }
      return v;
    });
  } catch (err) {
    throw badRequest(`${field}: ${(err as Error)?.message ?? String(err)}`, field, err);
  }
  if (text === undefined) throw badRequest(`${field}: not JSON-serialisable`, field);
  return text;
}

/** How deep plainJSON looks before leaving a value to the checking encoder (which also finds cycles). */
const PLAIN_DEPTH = 32;

/**
 * plainJSON reports whether JSON.stringify of v needs no checks: only
 * strings, booleans, null, finite numbers (integers within ±(2^53-1)),
 * arrays and plain objects, to PLAIN_DEPTH. Anything else (a BigInt, a
 * toJSON, a class instance, a boxed number, a deep or cyclic value) goes
 * through encodeJSON's checking replacer. undefined, functions and symbols
 * inside are fine: both ways drop them (or write null in an array).
 */
function plainJSON(v: unknown, depth: number): boolean {
  switch (typeof v) {
    case "string":
    case "boolean":
    case "undefined":
    case "function":
    case "symbol":
      return true;
    case "number":
      return Number.isFinite(v) && (Number.isSafeInteger(v) || !Number.isInteger(v));
    case "object": {
      if (v === null) return true;
      if (depth >= PLAIN_DEPTH) return false;
      if (Array.isArray(v)) {
        if (Object.getPrototypeOf(v) !== Array.prototype) return false;
        for (let i = 0; i < v.length; i++) if (!plainJSON(v[i], depth + 1)) return false;
        return true;
      }
      const proto = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null) return false;
      const o = v as Record<string, unknown>;
      if (typeof o.toJSON === "function") return false;
      for (const k in o) {
        if (!plainJSON(o[k], depth + 1)) return false;
      }
      return true;
    }
  }
  return false;
}

const hexDigits = "0123456789abcdef";

/** Random bytes drawn at once and handed out in slices: one getRandomValues per 64 owners, not one per owner. */
const POOL_BYTES = 384;
let pool: Uint8Array | undefined;
let poolAt = POOL_BYTES;

/** randomHex returns n random bytes as hex (crypto.getRandomValues when the runtime has it). */
export function randomHex(n: number): string {
  if (n > POOL_BYTES) {
    let s = "";
    for (; n > POOL_BYTES; n -= POOL_BYTES) s += randomHex(POOL_BYTES);
    return s + randomHex(n);
  }
  if (!pool) pool = new Uint8Array(POOL_BYTES);
  if (poolAt + n > POOL_BYTES) {
    const c = (globalThis as { crypto?: { getRandomValues?: (a: Uint8Array) => Uint8Array } }).crypto;
    if (c && typeof c.getRandomValues === "function") {
      c.getRandomValues(pool);
    } else {
      for (let i = 0; i < POOL_BYTES; i++) pool[i] = Math.floor(Math.random() * 256);
    }
    poolAt = 0;
  }
  let s = "";
  for (let i = poolAt, end = poolAt + n; i < end; i++) s += hexDigits[pool[i] >> 4] + hexDigits[pool[i] & 15];
  poolAt += n;
  return s;
}

/** Stands for the process (Go's owners carry host/pid): one random word per load of the module. */
const instance = randomHex(4);

/**
 * newOwner returns a fresh owner name, "prefix/instance/random": unique to
 * one execution attempt, as the ledger requires. instance is random per
 * load of the SDK (the core cannot read a host name or pid; pass
 * ownerPrefix, e.g. `${os.hostname()}/${process.pid}`, to see them).
 */
export function newOwner(prefix = "intentd-ts"): string {
  return `${prefix}/${instance}/${randomHex(6)}`;
}

/** errorMessage renders anything thrown as a message. */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  try {
    return typeof err === "string" ? err : JSON.stringify(err) ?? String(err);
  } catch {
    return String(err);
  }
}
