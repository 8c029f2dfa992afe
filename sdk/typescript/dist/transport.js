// The HTTP transport under the client: one attempt of one request to one
// node, as a Sender. Two implement it: fetch (here; every runtime) and
// node:http with a keep-alive agent (node.ts; Node only, loaded on demand),
// which costs a fraction of fetch's CPU per request on Node. Retries,
// routing and error semantics stay in core.ts and flow.ts (driven by
// client.ts), the same for both.
import { linkSignals } from "./util.js";
const timeouts = new WeakSet();
/** markTimeout records that err ended an attempt because its timeoutMs passed. */
export function markTimeout(err) {
    if (err && typeof err === "object")
        timeouts.add(err);
    return err;
}
/** isTimeout reports whether a Sender rejected with err because the attempt's timeoutMs passed. */
export function isTimeout(err) {
    return !!err && typeof err === "object" && timeouts.has(err);
}
/** fetchSender sends through a fetch function (the global one or the caller's). */
export function fetchSender(fetchFn) {
    return async (c) => {
        const linked = linkSignals([c.signal], c.timeoutMs);
        try {
            const resp = await fetchFn(c.base + c.path, {
                method: c.method, headers: c.headers, body: c.body, signal: linked.signal,
            });
            const retryAfter = resp.headers.get("retry-after");
            const text = await resp.text();
            return { status: resp.status, retryAfter, text };
        }
        catch (e) {
            if (linked.timedOut() && !c.signal?.aborted) {
                // fetch rejects with the signal's reason, the TimeoutError; a
                // runtime that rejects with something else is still a timeout.
                throw markTimeout(e && typeof e === "object" ? e : linked.signal.reason);
            }
            throw e;
        }
        finally {
            linked.dispose();
        }
    };
}
