import type { AuditLogPage, AuditTrail, ClaimRequest, ClaimResponse, ClusterStatus, CommitRequest, CompleteRequest, DecisionRequest, EffectResult, Grant, Health, Intent, IntentResponse, ListPage, Policy, RenewRequest, ResolveRequest, Settings, State, TokenVerification } from "./types.js";
import type { FetchFn } from "./transport.js";
export type { FetchFn } from "./transport.js";
export { DEFAULTS, MAX_LONG_POLL_MS, normalizeAddr } from "./core.js";
export interface ClientOptions {
    /** Any node list: base URLs or host:port, an array or one comma-separated string. */
    addrs: string | readonly string[];
    /** An API key (ik_...), sent as a bearer token with every request. */
    apiKey?: string;
    /** Bound of one HTTP attempt, in ms (default 30 s); a long-poll gets its wait on top. */
    timeoutMs?: number;
    /** The fetch to use (default: globalThis.fetch). Passing one makes the client use fetch on Node too. */
    fetch?: FetchFn;
    /**
     * How requests are sent. "auto" (the default): on Node, HTTP/1.1 over node:net/node:tls with kept-alive
     * connections (a fraction of fetch's CPU per call), unless you pass `fetch`; fetch on every other
     * runtime (Bun, Deno, edge, browsers), and when node:net cannot be loaded. "fetch": always fetch.
     * "node": the Node transport (only on Node; calls fail if it cannot be loaded).
     */
    transport?: "auto" | "fetch" | "node";
    /** Retries of a call the cluster could not answer, after its first attempt (default 4; 0: none). 429s are counted apart (rateLimitWaitMs). */
    retries?: number;
    /** Exponential backoff between retries: base doubling up to max, with jitter (default 50 ms .. 2 s). */
    backoffBaseMs?: number;
    backoffMaxMs?: number;
    /** Leader discovery through GET /v1/cluster (default true). */
    discovery?: boolean;
    /** How old the client's knowledge of the leader may grow before a call asks again (default 60 s). */
    discoveryRefreshMs?: number;
    /** Bound of one discovery probe (default 1 s). */
    probeTimeoutMs?: number;
    /** How long do() waits for its claim to settle: another owner in flight, an unknown outcome (default 30 s). */
    maxWaitMs?: number;
    /** How long do() waits for a pending approval before throwing PendingApprovalError (default 30 s; 0: at once, like Go's Do). */
    approvalWaitMs?: number;
    /** How long one call keeps waiting out 429 rate_limited answers (default 30 s). */
    rateLimitWaitMs?: number;
    /** How long do() keeps trying to record an outcome, also after your signal aborted (default 30 s). */
    reportTimeoutMs?: number;
    /** Whether do() commits an executed intent after recording it (default true; best-effort). */
    autoCommit?: boolean;
    /** The first part of the owners do() and claim() make (default "intentd-ts"); e.g. `${hostname}/${pid}`. */
    ownerPrefix?: string;
    /** The User-Agent header (default "intentd-ts/0.1"; browsers may ignore it). */
    userAgent?: string;
    /**
     * Writes the caller's W3C trace context (traceparent, tracestate) into
     * carrier when a request is sent, so the ledger's spans join the agent's
     * trace. OpenTelemetry fits it in one line:
     * `traceInject: (carrier) => propagation.inject(context.active(), carrier)`.
     * Only a well-formed traceparent and its tracestate are sent.
     */
    traceInject?: (carrier: Record<string, string>) => void;
    /** The jitter source, a number in [0, 1) (default Math.random); for tests. */
    random?: () => number;
}
/** Options every call takes. */
export interface CallOptions {
    /** Aborting it ends the call (see README: what an abort means for a write). */
    signal?: AbortSignal;
}
export interface GetOptions extends CallOptions {
    /** Read the answering node's replica, possibly behind, instead of a linearizable read. */
    stale?: boolean;
    /** Long-poll: answer as soon as the intent's version is above afterVersion, or after waitMs (at most 60 s). */
    waitMs?: number;
    /** With waitMs: the version already seen (default 0). */
    afterVersion?: number;
}
export interface ListOptions extends CallOptions {
    state?: State;
    prefix?: string;
    /** The page size; absent: the server's default. */
    limit?: number;
    /** The nextCursor of the previous page. */
    cursor?: string;
    stale?: boolean;
}
/** One logical side effect for do() to run at most once (Go's Effect). */
export interface Effect {
    /** Names the logical effect (see key()): the same on every delivery and retry, never random per attempt. */
    key: string;
    /** Names the destination ("stripe.charge"); with payload it forms the fingerprint. */
    tool: string;
    /** The effect's arguments, any JSON value (null for none): a later claim with another payload is divergent. */
    payload: unknown;
    /** Leave it unset: do() makes a fresh owner per call. Set it only to resume a call that ended before fn ran (OutcomeUnknownError on its claim). */
    owner?: string;
    /** A ledger policy by name (optional). */
    policy?: string;
    /** How long the grant holds without a report, in ms; absent: the server's default (30 s). Renewed every lease/3 while fn runs. */
    leaseMs?: number;
}
export interface DoOptions extends CallOptions {
    /** Overrides the client's approvalWaitMs for this call. */
    approvalWaitMs?: number;
    /** Overrides the client's maxWaitMs for this call. */
    maxWaitMs?: number;
}
/** The function do() runs under a grant. signal aborts when the grant is lost (its reason is the FencedError/InDoubtError) or your signal aborts. */
export declare type EffectFn<R> = (grant: Grant, signal: AbortSignal) => R | Promise<R>;
/** What the function wrapped by once() gets besides its arguments. */
export interface OnceContext {
    grant: Grant;
    signal: AbortSignal;
}
/** How once() names and describes each call of a tool function. */
export interface OnceOptions<A> {
    /** The tool's name: the first part of the key and half of the fingerprint. */
    tool: string;
    /** The key of one call: a full key, or the parts after the tool (key(tool, ...parts)). */
    key: (args: A) => string | readonly string[];
    /** The payload of one call (default: the arguments themselves, null when undefined). */
    payload?: (args: A) => unknown;
    policy?: string;
    leaseMs?: number;
    approvalWaitMs?: number;
    maxWaitMs?: number;
}
/** The options a wrapped tool function takes as its second argument: a signal (also under the Vercel AI SDK's name). */
export interface OnceCallOptions {
    signal?: AbortSignal;
    abortSignal?: AbortSignal;
}
/**
 * Client talks to an intentd cluster. Any node answers any call; with
 * discovery (the default) the client asks the configured nodes for GET
 * /v1/cluster on its first call and sends every call to the leader first,
 * then to the other nodes; it asks again after an answer that says the node
 * could not serve. Every ledger write is idempotent when repeated with the
 * same key, owner, payload and fencing token, so the client retries writes
 * and reads the cluster could not answer (503, network errors, a lost
 * answer), with exponential backoff and jitter raised to Retry-After, and
 * waits 429s out; it never retries a definite answer. Refusals are thrown
 * as ProblemError subclasses (InFlightError, DivergentError, ...).
 */
export declare class Client {
    #private;
    /** The settings, the route and every decision (core.ts, flow.ts); this class performs their steps. */
    private readonly core;
    /** The transport once chosen; until then, sending waits for senderReady. */
    private sender;
    private senderReady;
    /** The headers of every request, and of a request with a body. */
    private readonly headers;
    private readonly bodyHeaders;
    private readonly traceInject?;
    private readonly ownerPrefix;
    private readonly userAgent;
    /** The discovery under way, which concurrent calls wait for. */
    private discovering;
    constructor(options: ClientOptions);
    /** The configured addresses, normalized. */
    addrs(): string[];
    /** The addresses in the order the next call tries them: the one that answered last first (the leader, once discovered). */
    endpoints(): string[];
    /** The leader's HTTP address as last discovered, or "" when no discovery has named one. */
    leader(): string;
    /** A fresh owner name for one execution attempt ("prefix/instance/random"). */
    newOwner(): string;
    /** Asks the nodes for the cluster's status now and puts the leader first; returns the leader's address. */
    discover(options?: CallOptions): Promise<string>;
    /**
     * rediscover replaces seen by a freshly discovered route (flow.ts's
     * discover), unless another call already replaced it. One discovery runs
     * at a time; concurrent callers wait for it, each within its own signal.
     * A failed discovery still yields a new route (the same order), so a
     * failing cluster is asked at most once per failed attempt.
     */
    private rediscover;
    /** run drives flow, performing its steps within signal. */
    private run;
    /** perform does one step of a flow: the I/O, the waits and the signals. */
    private perform;
    /**
     * request performs a call (flow.ts's call: routes, retries, backoff) and
     * returns the HTTP status and the decoded 2xx answer.
     */
    private request;
    /** withTrace adds the trace context traceInject writes to headers (headers as they are without one). */
    private withTrace;
    /** attempt sends the call to one node, once; core.ts says what came of it. */
    private attempt;
    /** poll long-polls one intent, the whole call bounded by step.boundMs and signal. */
    private poll;
    /**
     * claim asks for the right to execute the effect named by req.key. A grant
     * (new: created, or repeated to the same owner), a duplicate (the effect
     * already ran: use intent.result) and pending_approval are answers; every
     * refusal is thrown (InFlightError, InDoubtError, DivergentError,
     * RejectedError, BadRequestError, ...). The claim is retried with the same
     * owner, so a lost answer comes back as the same grant.
     */
    claim(req: ClaimRequest, options?: CallOptions): Promise<ClaimResponse>;
    /** complete reports the outcome of the effect by its owner and fencing token; a stale one is refused with FencedError. */
    complete(req: CompleteRequest, options?: CallOptions): Promise<IntentResponse>;
    /** renew extends the owner's lease while a long effect runs. */
    renew(req: RenewRequest, options?: CallOptions): Promise<IntentResponse>;
    /** commit acknowledges an executed intent's result (executed -> committed). */
    commit(req: CommitRequest, options?: CallOptions): Promise<IntentResponse>;
    /** resolve settles an in_doubt intent as executed or failed, after someone checked the tool's side. */
    resolve(req: ResolveRequest, options?: CallOptions): Promise<IntentResponse>;
    /** approve approves a pending intent (role approver). */
    approve(req: DecisionRequest, options?: CallOptions): Promise<IntentResponse>;
    /** reject rejects a pending intent (role approver). */
    reject(req: DecisionRequest, options?: CallOptions): Promise<IntentResponse>;
    private intentCall;
    /**
     * get reads one intent, linearizable unless stale; NotFoundError when there
     * is none. With waitMs it long-polls: it answers as soon as the intent's
     * version is above afterVersion, or after waitMs with the intent as it is.
     */
    get(key: string, options?: GetOptions): Promise<Intent>;
    private getWith;
    /** wait long-polls one intent (get with waitMs and afterVersion). */
    wait(key: string, afterVersion: number, waitMs: number, options?: CallOptions): Promise<Intent>;
    /** list reads a page of intents in key order. */
    list(options?: ListOptions): Promise<ListPage>;
    /** approvals reads a page of the pending_approval queue. */
    approvals(options?: Omit<ListOptions, "state">): Promise<ListPage>;
    /** audit reads every recorded attempt on key. */
    audit(key: string, options?: CallOptions): Promise<AuditTrail>;
    /**
     * verifyToken asks the ledger whether the tool may act on an execution
     * token (role tool): signature, expiry, the token's tool (`tool`: the
     * tool about to act; and the API key's tools), the binding to payload
     * (or fingerprint; neither: not checked) and to the current grant, and
     * single use. A token for another tool throws TokenWrongToolError, one
     * for a tool outside the key's tools TokenToolForbiddenError; neither
     * spends it. A valid answer spends the token (claims.tool names its
     * tool); any later one throws TokenUsedError. An OutcomeUnknownError may
     * have spent it: do not act.
     */
    verifyToken(executionToken: string, options?: CallOptions & {
        payload?: unknown;
        fingerprint?: string;
        tool?: string;
    }): Promise<TokenVerification>;
    /** putPolicy creates or replaces a policy (admin); expectVersion makes it a compare-and-set (InvalidStateError). */
    putPolicy(policy: Policy, options?: CallOptions & {
        expectVersion?: number;
    }): Promise<Policy>;
    /** getPolicy reads one policy; NotFoundError when there is none. */
    getPolicy(name: string, options?: CallOptions): Promise<Policy>;
    /** listPolicies reads every policy: the default first, then in matching order. */
    listPolicies(options?: CallOptions): Promise<Policy[]>;
    /** deletePolicy removes a policy (admin). */
    deletePolicy(name: string, options?: CallOptions): Promise<void>;
    /** jwks returns the execution-token public keys as a JSON Web Key Set. */
    jwks(options?: CallOptions): Promise<unknown>;
    /** rotateKey makes the cluster sign new execution tokens with a new key (admin) and returns its id. */
    rotateKey(options?: CallOptions): Promise<string>;
    /** auditLog reads a page of the namespace's hash-chained audit log from seq since on. */
    auditLog(options?: CallOptions & {
        namespace?: string;
        since?: number;
        limit?: number;
    }): Promise<AuditLogPage>;
    /** settings reads the cluster-wide settings. */
    settings(options?: CallOptions): Promise<Settings>;
    /** putSettings replaces the cluster-wide settings (admin). */
    putSettings(settings: Settings, options?: CallOptions): Promise<Settings>;
    /** cluster reads the cluster's status as the answering node sees it. */
    cluster(options?: CallOptions): Promise<ClusterStatus>;
    /** health asks one node (default: the first configured) whether it is live and ready, without retries. */
    health(addr?: string, options?: CallOptions): Promise<Health>;
    /**
     * do runs fn at most once for the logical effect named by effect.key,
     * across retries, duplicate deliveries, concurrent callers and processes,
     * and records its outcome: Go's client.Do.
     *
     * - One owner per call (effect.owner or a fresh one), re-sent with every
     *   retry of the claim; never a new owner per attempt.
     * - granted: fn runs exactly once with the Grant, while the lease is
     *   renewed every lease/3; a refused renewal (fenced, in_doubt) aborts
     *   fn's signal with that error as its reason.
     * - fn resolves: complete(executed, its value as JSON), then commit
     *   (best-effort); returns status "executed" with value and result.
     * - fn throws EffectUnknown: nothing is reported (the key turns in_doubt
     *   when its lease passes) and the error is rethrown.
     * - fn throws anything else: complete(failed, {"error": message}) and the
     *   error is rethrown; a later call may run the effect again.
     * - The outcome is reported with the same owner, token and result until the
     *   ledger answers, for up to reportTimeoutMs, even after your signal
     *   aborted; if it cannot be, a ReportError (effect.ran true) is thrown.
     * - duplicate: fn does not run; returns status "duplicate" with the
     *   recorded result.
     * - in_flight: fn does not run; do() long-polls the key until the holder's
     *   record changes and claims again with the same owner, for up to
     *   maxWaitMs: the holder's result (duplicate), a new grant if it failed,
     *   in_doubt, or InFlightError at the end.
     * - pending_approval: fn does not run until an approver decides: do()
     *   long-polls for the decision for up to approvalWaitMs, then claims
     *   again (granted: fn runs once; rejected: RejectedError); still pending
     *   at the end: PendingApprovalError.
     * - divergent, in_doubt, rejected, ...: fn does not run; the typed error.
     * - The claim's outcome stays unknown: fn does not run; OutcomeUnknownError.
     *   To resume, set effect.owner yourself and call do() again.
     *
     * Bad input (an invalid key, no tool, a payload that is not JSON) is
     * refused before anything is sent, with BadRequestError.
     */
    do<R>(effect: Effect, fn: EffectFn<R>, options?: DoOptions): Promise<EffectResult<R>>;
    /**
     * once wraps a tool function so that each logical call of it runs at most
     * once: the returned function takes the same arguments (and an optional
     * {signal} / {abortSignal}), claims key(args) under tool with the
     * arguments as payload, and returns fn's value, or for a duplicate the
     * recorded result of the first run (its JSON form). Refusals are thrown.
     */
    once<A, R>(options: OnceOptions<A>, fn: (args: A, ctx: OnceContext) => R | Promise<R>): (args: A, callOptions?: OnceCallOptions) => Promise<R>;
    /**
     * execute runs fn under the grant while a timer renews its lease every
     * lease/3, then records how fn ended (flow.ts's record) under the
     * report's own deadline, also after the caller's signal ended: an effect
     * that happened is reported rather than left to turn in_doubt.
     */
    private execute;
}
/** once wraps a tool function with client.once(options, fn). */
export declare function once<A, R>(client: Client, options: OnceOptions<A>, fn: (args: A, ctx: OnceContext) => R | Promise<R>): (args: A, callOptions?: OnceCallOptions) => Promise<R>;
/** validTraceparent reports whether tp is a W3C traceparent of version 00 (the IDs not all zero). */
export declare function validTraceparent(tp: string): boolean;
