import { ProblemError } from "./errors.js";
import type { ClaimResponse, ClusterStatus } from "./types.js";
/** Defaults of the options (client/client.go). */
export declare const DEFAULTS: Readonly<{
    retries: 4;
    backoffBaseMs: 50;
    backoffMaxMs: 2000;
    timeoutMs: 30000;
    maxWaitMs: 30000;
    approvalWaitMs: 30000;
    rateLimitWaitMs: 30000;
    reportTimeoutMs: 30000;
    discoveryRefreshMs: 60000;
    probeTimeoutMs: 1000;
}>;
/** The longest long-poll the cluster serves (GET /v1/intents/{key}?wait=), in ms. */
export declare const MAX_LONG_POLL_MS = 60000;
export interface Route {
    /** Counts discoveries; 0 is the configured list, never discovered. */
    version: number;
    addrs: string[];
    leader: string;
    at: number;
    preferred: number;
}
export interface Req {
    method: "GET" | "POST" | "PUT" | "DELETE";
    path: string;
    query?: URLSearchParams;
    /** JSON text. */
    body?: string;
    /** Pins the call to one node without retries. */
    addr?: string;
    /** Overrides the attempt timeout (a long-poll). */
    timeoutMs?: number;
    /** Overrides how long 429s are waited out (do()'s long-polls: 0, they fall back to claiming). */
    rateLimitWaitMs?: number;
}
/** What one attempt of a request to one node came to. */
export declare type AttemptResult = {
    ok: true;
    status: number;
    data: unknown;
} | {
    ok: false;
    err: ProblemError;
    retry: boolean;
    wait: number;
};
/** The caller's stop, as the core reads it (an AbortSignal is one); the core never listens to it. */
export interface Stop {
    readonly aborted: boolean;
    readonly reason?: unknown;
}
/** The options the core reads (ClientOptions is one). */
export interface CoreOptions {
    timeoutMs?: number;
    retries?: number;
    backoffBaseMs?: number;
    backoffMaxMs?: number;
    discovery?: boolean;
    discoveryRefreshMs?: number;
    probeTimeoutMs?: number;
    maxWaitMs?: number;
    approvalWaitMs?: number;
    rateLimitWaitMs?: number;
    reportTimeoutMs?: number;
    autoCommit?: boolean;
    random?: () => number;
}
export declare function positive(v: number | undefined, d: number): number;
export declare function nonNegative(v: number | undefined, d: number): number;
/**
 * Core holds the client's settings and its route: which nodes to ask, in
 * which order, and when to ask the cluster again. The transport replaces
 * the route with what a discovery (flow.ts) returns.
 */
export declare class Core {
    readonly seeds: string[];
    readonly timeoutMs: number;
    readonly retries: number;
    readonly base: number;
    readonly max: number;
    readonly discovery: boolean;
    readonly discoveryRefreshMs: number;
    readonly probeTimeoutMs: number;
    readonly maxWaitMs: number;
    readonly approvalWaitMs: number;
    readonly rateLimitWaitMs: number;
    readonly reportTimeoutMs: number;
    readonly autoCommit: boolean;
    readonly random: () => number;
    /** The route calls use now. */
    route: Route;
    constructor(seeds: string[], options: CoreOptions);
    /** backoff is the wait before retry number attempt+1: exponential with jitter in [d/2, d], raised to Retry-After, capped at max. */
    backoff(attempt: number, retryAfterMs: number): number;
    /** The route to use now, or undefined when it is time to ask the cluster (currentRoute). */
    freshRoute(): Route | undefined;
    /** The addresses in the order the next call tries them. */
    endpoints(): string[];
    /**
     * routeFromStatus orders the addresses by st, as the node at base sees
     * it: the leader first (base itself when it leads), then the configured
     * addresses, then the other members' advertised HTTP addresses.
     */
    routeFromStatus(base: string, st: ClusterStatus, version: number, at: number): {
        route: Route;
        ready: boolean;
    } | undefined;
}
/** normalizeAddr turns "host:port" or a URL into a base URL without a trailing slash. */
export declare function normalizeAddr(a: string, scheme?: string): string;
export declare function dedupe(addrs: string[]): string[];
/** Raw JSON text to embed in a request body as it is. */
export declare class RawJSON {
    readonly text: string;
    constructor(text: string);
}
/**
 * jsonBody writes an object from fields, skipping undefined ones and
 * embedding RawJSON as it is. The field names are the API's (snake_case
 * words), written as they are.
 */
export declare function jsonBody(fields: Record<string, unknown>): string;
export declare function optionalJSON(value: unknown, field: string): RawJSON | undefined;
/** The escaped path of an intent and an optional action: the key is one path segment. */
export declare function intentPath(key: string, action?: string): string;
export declare function needKey(key: string): void;
/** The body of a claim (POST /v1/intents); payload is JSON text. */
export declare function claimBody(c: {
    key: string;
    tool: string;
    payload: string;
    owner: string;
    policy?: string;
    leaseMs?: number;
}): string;
/** The body of a complete; result is JSON text. */
export declare function completeBody(owner: string, fencingToken: number, outcome: "executed" | "failed", result?: string): string;
/**
 * getRequest is the request of get(): a linearizable (or stale) read, or
 * with waitMs a long-poll whose attempt may take timeoutMs + waitMs.
 */
export declare function getRequest(key: string, options: {
    stale?: boolean;
    waitMs?: number;
    afterVersion?: number;
}, timeoutMs: number, rateLimitWaitMs?: number): Req;
/** The path and query of r, as sent. */
export declare function requestPath(r: Req): string;
export declare function notSent(err: unknown): boolean;
/** noTransport is the attempt of a client whose transport could not be loaded: nothing was sent. */
export declare function noTransport(e: unknown): AttemptResult;
/**
 * noAnswer is the attempt that got no answer: the Sender rejected with e.
 * byCaller: the caller's signal ended it (cause: its reason); timedOut:
 * the attempt's timeout did. A write that may have left is unknown.
 */
export declare function noAnswer(r: Req, base: string, path: string, timeoutMs: number, e: unknown, how: {
    byCaller: boolean;
    timedOut: boolean;
    cause: unknown;
}): AttemptResult;
/**
 * answered is the attempt that got an answer: the decoded 2xx document, or
 * the Problem (a write's 502 or 504 as OutcomeUnknownError: it may have been
 * applied). aborted: the caller's signal has ended (then no retry).
 */
export declare function answered(r: Req, base: string, path: string, answer: {
    status: number;
    text: string;
    retryAfter: string | null;
}, aborted: boolean): AttemptResult;
/** rateLimited: the node is up and asked us to slow down (nothing was written). */
export declare function rateLimited(err: ProblemError): boolean;
/**
 * retryableForDo: err says the cluster could not answer, or asked to slow down (do()'s retryable). NamespaceFullError
 * and LedgerFullError (507) are definite refusals.
 */
export declare function retryableForDo(err: unknown): boolean;
/** retryAfterOf is err's Retry-After in ms, 0 for anything but a Problem. */
export declare function retryAfterOf(err: unknown): number;
/** leaseFor is the lease do() renews: the effect's, else the grant's, else 30 s. */
export declare function leaseFor(effectLeaseMs: number | undefined, resp: ClaimResponse): number;
/** grantLost: a renewal refused with err says the right to execute is gone. */
export declare function grantLost(err: unknown): boolean;
/** refusedResult: the ledger refused a report carrying result (too large): record the effect without it. */
export declare function refusedResult(err: unknown, result: string | undefined): boolean;
/** errorResult is the result recorded for a failed effect: {"error": message}, cut to 1 KiB at a UTF-8 boundary. */
export declare function errorResult(err: unknown): string;
