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
export declare type Sender = (call: HttpCall) => Promise<HttpAnswer>;
/** A fetch function: the global one, or yours (a proxy agent, a test double). */
export declare type FetchFn = (input: string, init: RequestInit) => Promise<Response>;
/** markTimeout records that err ended an attempt because its timeoutMs passed. */
export declare function markTimeout<E>(err: E): E;
/** isTimeout reports whether a Sender rejected with err because the attempt's timeoutMs passed. */
export declare function isTimeout(err: unknown): boolean;
/** fetchSender sends through a fetch function (the global one or the caller's). */
export declare function fetchSender(fetchFn: FetchFn): Sender;
