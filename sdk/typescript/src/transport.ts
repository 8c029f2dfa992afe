// The HTTP transport under the client: one attempt of one request to one
// node, as a Sender. Two implement it: fetch (here; every runtime) and
// node:http with a keep-alive agent (node.ts; Node only, loaded on demand),
// which costs a fraction of fetch's CPU per request on Node. Retries,
// routing and error semantics stay in core.ts and flow.ts (driven by
// client.ts), the same for both.

import { linkSignals } from "./util.js";

/** One HTTP request to one node. */
export interface HttpCall {
  method: string;
  /** The node's base URL (normalizeAddr: "http://host:port", no trailing slash). */
  base: string;
  /** The path and query, from "/". */
  path: string;
  /** The request headers; the Sender may not change the object (it is shared). */
  headers: Readonly<Record<string, string>>;
  /** JSON text, or undefined for no body. */
  body: string | undefined;
  /** The caller's signal: when it aborts, the Sender rejects with its reason. */
  signal: AbortSignal | undefined;
  /** Bound of the whole attempt (answer and body), in ms: then the Sender rejects with an error isTimeout() knows. */
  timeoutMs: number;
}

/** An HTTP answer, its body read in full. */
export interface HttpAnswer {
  status: number;
  /** The Retry-After header, or null. */
  retryAfter: string | null;
  text: string;
}

/** Sends one attempt; rejects when no answer came (network error, timeout, the caller's abort). */
export type Sender = (call: HttpCall) => Promise<HttpAnswer>;

/** A fetch function: the global one, or yours (a proxy agent, a test double). */
export type FetchFn = (input: string, init: RequestInit) => Promise<Response>;

const timeouts = new WeakSet<object>();

/** markTimeout records that err ended an attempt because its timeoutMs passed. */
export function markTimeout<E>(err: E): E {
  if (err && typeof err === "object") timeouts.add(err as unknown as object);
  return err;
}

/** isTimeout reports whether a Sender rejected with err because the attempt's timeoutMs passed. */
export function isTimeout(err: unknown): boolean {
  return !!err && typeof err === "object" && timeouts.has(err);
}

/** fetchSender sends through a fetch function (the global one or the caller's). */
export function fetchSender(fetchFn: FetchFn): Sender {
  return async (c: HttpCall): Promise<HttpAnswer> => {
    const linked = linkSignals([c.signal], c.timeoutMs);
    try {
      const resp = await fetchFn(c.base + c.path, {
        method: c.method, headers: c.headers as Record<string, string>, body: c.body, signal: linked.signal,
      });
      const retryAfter = resp.headers.get("retry-after");
      const text = await resp.text();
      return { status: resp.status, retryAfter, text };
    } catch (e) {
      if (linked.timedOut() && !c.signal?.aborted) {
        // fetch rejects with the signal's reason, the TimeoutError; a
        // runtime that rejects with something else is still a timeout.
        throw markTimeout(e && typeof e === "object" ? e : linked.signal.reason);
      }
      throw e;
    } finally {
      linked.dispose();
    }
  };
}
