// The client: routing (leader discovery, failover), retries, every call of
// the API table, and do(), the at-most-once contract (client/do.go).

import {
  BadRequestError,
  FencedError,
  InDoubtError,
  InFlightError,
  IntentdError,
  InvalidStateError,
  NoLeaderError,
  NotFoundError,
  OutcomeUnknownError,
  PendingApprovalError,
  ProblemError,
  RateLimitedError,
  ReportError,
  UnavailableError,
  badRequest,
  isEffectUnknown,
  maybeApplied,
  readProblem,
  retryableProblem,
  transient,
} from "./errors.js";
import { key as makeKey, hasLoneSurrogate, validateKey } from "./keys.js";
import {
  auditLogPageFromWire,
  auditTrailFromWire,
  claimResponseFromWire,
  clusterStatusFromWire,
  intentFromWire,
  intentResponseFromWire,
  listPageFromWire,
  policyFromWire,
  policyToWire,
  tokenVerificationFromWire,
} from "./types.js";
import type {
  AuditLogPage,
  AuditTrail,
  ClaimRequest,
  ClaimResponse,
  ClusterStatus,
  CommitRequest,
  CompleteRequest,
  DecisionRequest,
  EffectResult,
  Grant,
  Health,
  Intent,
  IntentResponse,
  ListPage,
  Policy,
  RenewRequest,
  ResolveRequest,
  Settings,
  State,
  TokenVerification,
} from "./types.js";
import { nodeSender, onNode } from "./node.js";
import { fetchSender, isTimeout } from "./transport.js";
import type { FetchFn, HttpAnswer, Sender } from "./transport.js";
import { encodeJSON, errorMessage, linkSignals, newOwner, sleep } from "./util.js";

export type { FetchFn } from "./transport.js";

/** Defaults of the options (client/client.go). */
export const DEFAULTS = Object.freeze({
  retries: 4,
  backoffBaseMs: 50,
  backoffMaxMs: 2000,
  timeoutMs: 30_000,
  maxWaitMs: 30_000,
  approvalWaitMs: 30_000,
  rateLimitWaitMs: 30_000,
  reportTimeoutMs: 30_000,
  discoveryRefreshMs: 60_000,
  probeTimeoutMs: 1_000,
});

/** The longest long-poll the cluster serves (GET /v1/intents/{key}?wait=), in ms. */
export const MAX_LONG_POLL_MS = 60_000;

/** Bounds the error message recorded for a failed effect (bytes). */
const MAX_ERROR_RESULT_BYTES = 1024;

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
export type EffectFn<R> = (grant: Grant, signal: AbortSignal) => R | Promise<R>;

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

interface Route {
  /** Counts discoveries; 0 is the configured list, never discovered. */
  version: number;
  addrs: string[];
  leader: string;
  at: number;
  preferred: number;
}

interface Req {
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

type Attempt =
  | { ok: true; status: number; data: unknown }
  | { ok: false; err: ProblemError; retry: boolean; wait: number };

/** Raw JSON text to embed in a request body as it is. */
class RawJSON {
  constructor(readonly text: string) {}
}

/**
 * jsonBody writes an object from fields, skipping undefined ones and
 * embedding RawJSON as it is. The field names are the API's (snake_case
 * words), written as they are.
 */
function jsonBody(fields: Record<string, unknown>): string {
  let out = "";
  for (const k in fields) {
    const v = fields[k];
    if (v === undefined) continue;
    out += (out === "" ? '{"' : ',"') + k + '":' + (v instanceof RawJSON ? v.text : JSON.stringify(v));
  }
  return out === "" ? "{}" : out + "}";
}

/** Network errors that say the request never left: nothing was written. */
const NOT_SENT_CODES = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL"]);

function notSent(err: unknown): boolean {
  for (let e = err, depth = 0; e && typeof e === "object" && depth < 8; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && NOT_SENT_CODES.has(code)) return true;
    const errors = (e as { errors?: unknown }).errors;
    if (Array.isArray(errors) && errors.length > 0 && errors.every((x) => notSent(x))) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/** normalizeAddr turns "host:port" or a URL into a base URL without a trailing slash. */
export function normalizeAddr(a: string, scheme = "http"): string {
  let s = a.trim();
  if (!s.includes("://")) s = `${scheme}://${s}`;
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    throw new IntentdError(`intentd: address ${JSON.stringify(a)}: want http://host:port`);
  }
  if (!u.host || (u.protocol !== "http:" && u.protocol !== "https:")) {
    throw new IntentdError(`intentd: address ${JSON.stringify(a)}: want http://host:port`);
  }
  if (u.search || u.hash) throw new IntentdError(`intentd: address ${JSON.stringify(a)}: no query or fragment allowed`);
  return `${u.protocol}//${u.host}${u.pathname}`.replace(/\/+$/, "");
}

function dedupe(addrs: string[]): string[] {
  return [...new Set(addrs.filter((a) => a !== ""))];
}

/** The escaped path of an intent and an optional action: the key is one path segment. */
function intentPath(key: string, action?: string): string {
  return "/v1/intents/" + encodeURIComponent(key) + (action ? "/" + action : "");
}

function needKey(key: string): void {
  if (typeof key !== "string" || key === "") throw badRequest("key is required", "key");
  if (hasLoneSurrogate(key)) throw badRequest("key is not valid UTF-8 (a lone surrogate)", "key");
}

function optionalJSON(value: unknown, field: string): RawJSON | undefined {
  return value === undefined ? undefined : new RawJSON(encodeJSON(value, field));
}

function positive(v: number | undefined, d: number): number {
  return typeof v === "number" && Number.isFinite(v) && v > 0 ? v : d;
}

function nonNegative(v: number | undefined, d: number): number {
  return typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : d;
}

/** errorResult is the result recorded for a failed effect: {"error": message}, cut to 1 KiB at a UTF-8 boundary. */
function errorResult(err: unknown): string {
  let msg = errorMessage(err);
  const bytes = new TextEncoder().encode(msg);
  if (bytes.length > MAX_ERROR_RESULT_BYTES) {
    let cut = MAX_ERROR_RESULT_BYTES;
    while (cut > 0 && (bytes[cut] & 0xc0) === 0x80) cut--;
    msg = new TextDecoder().decode(bytes.subarray(0, cut)) + "...";
  }
  return JSON.stringify({ error: msg });
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
export class Client {
  private readonly seeds: string[];
  /** The transport once chosen; until then, sending waits for senderReady. */
  private sender: Sender | undefined;
  private senderReady: Promise<Sender> | undefined;
  /** The headers of every request, and of a request with a body. */
  private readonly headers: Readonly<Record<string, string>>;
  private readonly bodyHeaders: Readonly<Record<string, string>>;
  // An ES private field: util.inspect and console.log do not show it.
  readonly #apiKey: string;
  private readonly timeoutMs: number;
  private readonly retries: number;
  private readonly base: number;
  private readonly max: number;
  private readonly discovery: boolean;
  private readonly discoveryRefreshMs: number;
  private readonly probeTimeoutMs: number;
  private readonly maxWaitMs: number;
  private readonly approvalWaitMs: number;
  private readonly rateLimitWaitMs: number;
  private readonly reportTimeoutMs: number;
  private readonly autoCommit: boolean;
  private readonly ownerPrefix: string;
  private readonly userAgent: string;
  private readonly random: () => number;
  private rt: Route;
  private discovering: Promise<void> | undefined;

  constructor(options: ClientOptions) {
    if (!options || options.addrs === undefined) throw new IntentdError("intentd: no server address");
    const list = typeof options.addrs === "string" ? [options.addrs] : [...options.addrs];
    const seeds: string[] = [];
    for (const a of list) {
      for (const part of String(a).split(",")) {
        if (part.trim() !== "") seeds.push(normalizeAddr(part));
      }
    }
    if (seeds.length === 0) throw new IntentdError("intentd: no server address");
    this.seeds = seeds;
    this.#apiKey = options.apiKey ?? "";
    this.timeoutMs = positive(options.timeoutMs, DEFAULTS.timeoutMs);
    this.retries = Math.floor(nonNegative(options.retries, DEFAULTS.retries));
    this.base = positive(options.backoffBaseMs, DEFAULTS.backoffBaseMs);
    this.max = Math.max(positive(options.backoffMaxMs, DEFAULTS.backoffMaxMs), this.base);
    this.discovery = options.discovery ?? true;
    this.discoveryRefreshMs = positive(options.discoveryRefreshMs, DEFAULTS.discoveryRefreshMs);
    this.probeTimeoutMs = positive(options.probeTimeoutMs, DEFAULTS.probeTimeoutMs);
    this.maxWaitMs = positive(options.maxWaitMs, DEFAULTS.maxWaitMs);
    this.approvalWaitMs = nonNegative(options.approvalWaitMs, DEFAULTS.approvalWaitMs);
    this.rateLimitWaitMs = nonNegative(options.rateLimitWaitMs, DEFAULTS.rateLimitWaitMs);
    this.reportTimeoutMs = positive(options.reportTimeoutMs, DEFAULTS.reportTimeoutMs);
    this.autoCommit = options.autoCommit ?? true;
    this.ownerPrefix = options.ownerPrefix || "intentd-ts";
    this.userAgent = options.userAgent ?? "intentd-ts/0.1";
    this.random = options.random ?? Math.random;
    for (const [what, v] of [["apiKey", this.#apiKey], ["userAgent", this.userAgent]]) {
      // Refused here rather than by every request (fetch and node:net alike).
      if (/[^\t\x20-\x7e]/.test(v)) throw new IntentdError(`intentd: ${what} must be printable ASCII (it is sent as an HTTP header)`);
    }
    const headers: Record<string, string> = { accept: "application/json, application/problem+json" };
    if (this.userAgent) headers["user-agent"] = this.userAgent;
    if (this.#apiKey) headers.authorization = `Bearer ${this.#apiKey}`;
    this.headers = Object.freeze(headers);
    this.bodyHeaders = Object.freeze({ ...headers, "content-type": "application/json" });
    const transport = options.transport ?? "auto";
    if (transport !== "auto" && transport !== "fetch" && transport !== "node") {
      throw new IntentdError(`intentd: transport ${JSON.stringify(transport)}: want "auto", "fetch" or "node"`);
    }
    if (transport === "node" && options.fetch) throw new IntentdError('intentd: transport "node" does not use options.fetch');
    if (transport === "node" && !onNode()) throw new IntentdError('intentd: transport "node" needs Node (use "auto" or "fetch")');
    const f = options.fetch ?? (globalThis as { fetch?: FetchFn }).fetch;
    const viaFetch = options.fetch
      ? fetchSender(options.fetch)
      : typeof f === "function" ? fetchSender((input, init) => (globalThis.fetch as FetchFn)(input, init)) : undefined;
    if (transport === "node" || (transport === "auto" && !options.fetch && onNode())) {
      // node:net loads asynchronously; the first call waits for it.
      this.senderReady = nodeSender().then(
        (send) => (this.sender = send),
        (err) => {
          if (transport === "node" || !viaFetch) {
            throw new IntentdError(`intentd: cannot load the node transport: ${errorMessage(err)}`, { cause: err });
          }
          return (this.sender = viaFetch);
        },
      );
      // Not an unhandled rejection if no call is ever made; each call sees the error.
      this.senderReady.catch(() => {});
    } else {
      if (!viaFetch) throw new IntentdError("intentd: no fetch in this runtime: pass options.fetch");
      this.sender = viaFetch;
    }
    this.rt = { version: 0, addrs: dedupe(seeds), leader: "", at: Date.now(), preferred: 0 };
  }

  /** The configured addresses, normalized. */
  addrs(): string[] {
    return [...this.seeds];
  }

  /** The addresses in the order the next call tries them: the one that answered last first (the leader, once discovered). */
  endpoints(): string[] {
    const rt = this.rt;
    const out: string[] = [];
    for (let i = 0; i < rt.addrs.length; i++) out.push(rt.addrs[(rt.preferred + i) % rt.addrs.length]);
    return out;
  }

  /** The leader's HTTP address as last discovered, or "" when no discovery has named one. */
  leader(): string {
    return this.rt.leader;
  }

  /** A fresh owner name for one execution attempt ("prefix/instance/random"). */
  newOwner(): string {
    return newOwner(this.ownerPrefix);
  }

  // ---------------------------------------------------------------- routing

  /** Asks the nodes for the cluster's status now and puts the leader first; returns the leader's address. */
  async discover(options: CallOptions = {}): Promise<string> {
    const rt = await this.rediscover(this.rt, options.signal);
    if (!rt.leader) {
      throw new NoLeaderError({
        status: 0, code: "no_leader", title: "No leader", detail: "discovery: no node named a leader",
      });
    }
    return rt.leader;
  }

  /** The route to use now, or undefined when it is time to ask the cluster (currentRoute). */
  private freshRoute(): Route | undefined {
    const rt = this.rt;
    if (!this.discovery || (rt.version > 0 && Date.now() - rt.at < this.discoveryRefreshMs)) return rt;
    return undefined;
  }

  private async currentRoute(signal?: AbortSignal): Promise<Route> {
    return this.freshRoute() ?? this.rediscover(this.rt, signal);
  }

  /**
   * rediscover replaces seen by a freshly discovered route, unless another
   * call already replaced it. One discovery runs at a time; concurrent
   * callers wait for it, each within its own signal. A failed discovery
   * still yields a new route (the same order), so a failing cluster is
   * asked at most once per failed attempt.
   */
  private async rediscover(seen: Route, signal?: AbortSignal): Promise<Route> {
    for (;;) {
      if (this.rt !== seen) return this.rt;
      if (this.discovering) {
        try {
          await raceSignal(this.discovering, signal);
        } catch {
          return this.rt;
        }
        continue;
      }
      this.discovering = this.discoverOnce(seen).then((next) => {
        this.rt = next;
        this.discovering = undefined;
      });
      try {
        await raceSignal(this.discovering, signal);
      } catch {
        // the caller stopped waiting; the discovery goes on for the others
      }
      return this.rt;
    }
  }

  /**
   * discoverOnce asks the nodes of cur, in its order, for the cluster's
   * status and returns the route it implies. A node that is ready wins over
   * one that is not; without any answer naming a leader the order stays.
   * It takes at most one probe timeout per node.
   */
  private async discoverOnce(cur: Route): Promise<Route> {
    const at = Date.now();
    let found: Route | undefined;
    for (let i = 0; i < cur.addrs.length; i++) {
      const base = cur.addrs[(cur.preferred + i) % cur.addrs.length];
      const a = await this.attempt(base, { method: "GET", path: "/v1/cluster", timeoutMs: this.probeTimeoutMs }, undefined);
      if (!a.ok) continue;
      const r = this.routeFromStatus(base, clusterStatusFromWire(a.data), cur.version + 1, at);
      if (!r) continue;
      if (r.ready) {
        found = r.route;
        break;
      }
      if (!found) found = r.route;
    }
    return found ?? { version: cur.version + 1, addrs: cur.addrs, leader: cur.leader, at, preferred: cur.preferred };
  }

  /**
   * routeFromStatus orders the addresses by st, as the node at base sees
   * it: the leader first (base itself when it leads), then the configured
   * addresses, then the other members' advertised HTTP addresses.
   */
  private routeFromStatus(
    base: string,
    st: ClusterStatus,
    version: number,
    at: number,
  ): { route: Route; ready: boolean } | undefined {
    if (!st.leaderId) return undefined;
    const scheme = base.startsWith("https://") ? "https" : "http";
    let leader: string;
    if (st.nodeId === st.leaderId) {
      leader = base;
    } else {
      if (!st.leaderHttp) return undefined;
      try {
        leader = normalizeAddr(st.leaderHttp, scheme);
      } catch {
        return undefined;
      }
    }
    const addrs = [leader, ...this.seeds];
    for (const n of st.nodes) {
      if (n.id === st.nodeId || n.id === st.leaderId || !n.httpAddr || n.gossip === "left" || n.gossip === "dead") continue;
      try {
        addrs.push(normalizeAddr(n.httpAddr, scheme));
      } catch {
        // skip an address that does not parse
      }
    }
    return { route: { version, addrs: dedupe(addrs), leader, at, preferred: 0 }, ready: st.ready };
  }

  // ------------------------------------------------------------- transport

  /** backoff is the wait before retry number attempt+1: exponential with jitter in [d/2, d], raised to Retry-After, capped at max. */
  private backoff(attempt: number, retryAfterMs: number): number {
    let d = this.base;
    for (let i = 0; i < attempt && d < this.max; i++) d *= 2;
    d = Math.min(d, this.max);
    d = d / 2 + this.random() * (d / 2);
    if (retryAfterMs > d) d = Math.min(retryAfterMs, this.max);
    return d;
  }

  /**
   * request performs a call, retrying as the class documents, and returns
   * the HTTP status and the decoded 2xx answer. When the caller's signal
   * aborts, it rejects with the signal's reason, or with an
   * OutcomeUnknownError (cause: the reason) when a write may have been
   * applied.
   */
  private async request(r: Req, signal?: AbortSignal): Promise<{ status: number; data: unknown }> {
    const write = r.method !== "GET";
    if (signal?.aborted) throw signal.reason;
    if (r.addr) {
      const a = await this.attempt(r.addr, r, signal);
      if (a.ok) return a;
      if (signal?.aborted && !(write && maybeApplied(a.err))) throw signal.reason;
      throw a.err;
    }
    let rt = this.freshRoute() ?? (await this.currentRoute(signal));
    let idx = rt.preferred % rt.addrs.length;
    let unknown = false; // an attempt of this write may have been applied
    let lastErr: ProblemError | undefined;
    let attempt = 0;
    let limited = 0;
    const limitDeadline = Date.now() + (r.rateLimitWaitMs ?? this.rateLimitWaitMs);
    for (;;) {
      const base = rt.addrs[idx];
      const a = await this.attempt(base, r, signal);
      if (a.ok) {
        rt.preferred = idx;
        return a;
      }
      const err = a.err;
      if (write && maybeApplied(err)) unknown = true;
      lastErr = err;
      if (signal?.aborted || !a.retry) break;
      if (err instanceof RateLimitedError || err.status === 429) {
        // The node is up and asked us to slow down: nothing was written.
        // Wait it out on the same node, bounded by time, not by retries.
        const left = limitDeadline - Date.now();
        if (left <= 0) break;
        try {
          await sleep(Math.min(this.backoff(limited++, a.wait), left), signal);
        } catch {
          break;
        }
        continue;
      }
      if (attempt >= this.retries) break;
      try {
        await sleep(this.backoff(attempt++, a.wait), signal);
      } catch {
        break;
      }
      // The node could not serve: perhaps the leader moved or died. Ask the
      // cluster again (at most once per failed route), else move on.
      let next = (idx + 1) % rt.addrs.length;
      if (this.discovery) {
        const nrt = await this.rediscover(rt, signal);
        if (nrt !== rt) {
          rt = nrt;
          next = rt.preferred % rt.addrs.length;
          if (rt.addrs[next] === base && rt.addrs.length > 1) next = (next + 1) % rt.addrs.length;
        }
      }
      idx = next;
    }
    if (signal?.aborted) {
      if (!unknown) throw signal.reason;
      throw new OutcomeUnknownError({
        status: 0, code: "outcome_unknown", title: "Outcome unknown",
        detail: `${r.method} ${r.path}: stopped by the caller after an attempt that may have been applied`,
        cause: signal.reason,
      });
    }
    if (unknown && lastErr && !(lastErr instanceof OutcomeUnknownError) && transient(lastErr)) {
      // An earlier attempt may have been applied even though the last one
      // definitely was not.
      throw new OutcomeUnknownError({
        status: lastErr.status, code: "outcome_unknown", title: "Outcome unknown",
        detail: `an earlier attempt may have been applied: ${lastErr.message}`, cause: lastErr,
        retryAfterMs: lastErr.retryAfterMs,
      });
    }
    throw lastErr as ProblemError;
  }

  /** attempt sends the call to one node, once. */
  private async attempt(base: string, r: Req, signal: AbortSignal | undefined): Promise<Attempt> {
    const write = r.method !== "GET";
    let path = r.path;
    if (r.query) {
      const qs = r.query.toString();
      if (qs) path += "?" + qs;
    }
    const timeoutMs = r.timeoutMs ?? this.timeoutMs;
    let send = this.sender;
    if (!send) {
      try {
        send = await (this.senderReady as Promise<Sender>);
      } catch (e) {
        // transport "node" where node:net cannot be loaded: nothing was sent.
        return {
          ok: false,
          err: new UnavailableError({ status: 0, code: "unavailable", title: "No transport", detail: errorMessage(e), cause: e }),
          retry: false,
          wait: 0,
        };
      }
    }
    let answer: HttpAnswer;
    try {
      answer = await send({
        method: r.method, base, path, headers: r.body === undefined ? this.headers : this.bodyHeaders, body: r.body, signal, timeoutMs,
      });
    } catch (e) {
      const byCaller = !!signal?.aborted;
      const cause = byCaller ? signal?.reason : e;
      const timedOut = !byCaller && isTimeout(e);
      const unsent = !byCaller && !timedOut && notSent(e);
      const Kind = write && !unsent ? OutcomeUnknownError : UnavailableError;
      const why = timedOut ? `no answer within ${timeoutMs} ms` : errorMessage(e);
      return {
        ok: false,
        err: new Kind({
          status: 0, code: Kind === OutcomeUnknownError ? "outcome_unknown" : "unavailable", title: "No answer",
          detail: `${r.method} ${base + path}: ${why}`, cause,
        }),
        // The caller's signal ending is not the server's fault: stop.
        retry: !byCaller,
        wait: 0,
      };
    }
    const { status, text } = answer;
    if (status >= 200 && status < 300) {
      if (text === "" || text.trim() === "") return { ok: true, status, data: undefined };
      try {
        return { ok: true, status, data: JSON.parse(text) };
      } catch (e) {
        // The call was answered; only its body is lost. For a write, what it
        // did is not known to the caller.
        const Kind = write ? OutcomeUnknownError : UnavailableError;
        return {
          ok: false,
          err: new Kind({
            status: 0, code: write ? "outcome_unknown" : "unavailable", title: "Undecodable answer",
            detail: `${r.method} ${base + path}: decoding the ${status} answer: ${errorMessage(e)}`, cause: e,
          }),
          retry: !signal?.aborted,
          wait: 0,
        };
      }
    }
    let p = readProblem(status, text, answer.retryAfter);
    if (write && (status === 502 || status === 504)) {
      p = new OutcomeUnknownError({
        status: p.status, code: p.code, title: p.title, detail: p.detail, type: p.type,
        retryAfterMs: p.retryAfterMs, cause: p,
      });
    }
    return { ok: false, err: p, retry: retryableProblem(p), wait: p.retryAfterMs };
  }

  // ------------------------------------------------------------- intents

  /**
   * claim asks for the right to execute the effect named by req.key. A grant
   * (new: created, or repeated to the same owner), a duplicate (the effect
   * already ran: use intent.result) and pending_approval are answers; every
   * refusal is thrown (InFlightError, InDoubtError, DivergentError,
   * RejectedError, BadRequestError, ...). The claim is retried with the same
   * owner, so a lost answer comes back as the same grant.
   */
  async claim(req: ClaimRequest, options: CallOptions = {}): Promise<ClaimResponse> {
    needKey(req.key);
    const owner = req.owner || this.newOwner();
    const body = jsonBody({
      key: req.key,
      tool: req.tool,
      payload: new RawJSON(encodeJSON(req.payload, "payload")),
      owner,
      policy: req.policy || undefined,
      lease_ms: req.leaseMs && req.leaseMs > 0 ? Math.round(req.leaseMs) : undefined,
    });
    return this.claimRaw(body, owner, options.signal);
  }

  private async claimRaw(body: string, owner: string, signal?: AbortSignal): Promise<ClaimResponse> {
    const { status, data } = await this.request({ method: "POST", path: "/v1/intents", body }, signal);
    return claimResponseFromWire(data, status, owner);
  }

  /** complete reports the outcome of the effect by its owner and fencing token; a stale one is refused with FencedError. */
  async complete(req: CompleteRequest, options: CallOptions = {}): Promise<IntentResponse> {
    return this.intentCall(req.key, "complete", jsonBody({
      owner: req.owner,
      fencing_token: req.fencingToken,
      outcome: req.outcome,
      result: optionalJSON(req.result, "result"),
    }), options.signal);
  }

  /** renew extends the owner's lease while a long effect runs. */
  async renew(req: RenewRequest, options: CallOptions = {}): Promise<IntentResponse> {
    return this.intentCall(req.key, "renew", jsonBody({
      owner: req.owner, fencing_token: req.fencingToken, lease_ms: Math.round(req.leaseMs),
    }), options.signal);
  }

  /** commit acknowledges an executed intent's result (executed -> committed). */
  async commit(req: CommitRequest, options: CallOptions = {}): Promise<IntentResponse> {
    return this.intentCall(req.key, "commit", jsonBody({ owner: req.owner }), options.signal);
  }

  /** resolve settles an in_doubt intent as executed or failed, after someone checked the tool's side. */
  async resolve(req: ResolveRequest, options: CallOptions = {}): Promise<IntentResponse> {
    return this.intentCall(req.key, "resolve", jsonBody({
      outcome: req.outcome, result: optionalJSON(req.result, "result"), actor: req.actor, reason: req.reason || undefined,
    }), options.signal);
  }

  /** approve approves a pending intent (role approver). */
  async approve(req: DecisionRequest, options: CallOptions = {}): Promise<IntentResponse> {
    return this.intentCall(req.key, "approve", jsonBody({
      actor: req.actor || undefined, reason: req.reason || undefined, fingerprint: req.fingerprint || undefined,
    }), options.signal);
  }

  /** reject rejects a pending intent (role approver). */
  async reject(req: DecisionRequest, options: CallOptions = {}): Promise<IntentResponse> {
    return this.intentCall(req.key, "reject", jsonBody({
      actor: req.actor || undefined, reason: req.reason || undefined, fingerprint: req.fingerprint || undefined,
    }), options.signal);
  }

  private async intentCall(key: string, action: string, body: string, signal?: AbortSignal): Promise<IntentResponse> {
    needKey(key);
    const { data } = await this.request({ method: "POST", path: intentPath(key, action), body }, signal);
    return intentResponseFromWire(data);
  }

  /**
   * get reads one intent, linearizable unless stale; NotFoundError when there
   * is none. With waitMs it long-polls: it answers as soon as the intent's
   * version is above afterVersion, or after waitMs with the intent as it is.
   */
  async get(key: string, options: GetOptions = {}): Promise<Intent> {
    return this.getWith(key, options);
  }

  private async getWith(key: string, options: GetOptions, rateLimitWaitMs?: number): Promise<Intent> {
    needKey(key);
    const q = new URLSearchParams();
    let timeoutMs: number | undefined;
    if (options.waitMs !== undefined) {
      const w = options.waitMs;
      if (!(w >= 0 && w <= MAX_LONG_POLL_MS)) {
        throw badRequest(`wait ${w} ms is outside 0..${MAX_LONG_POLL_MS} ms`, "wait");
      }
      q.set("wait", `${Math.round(w)}ms`);
      q.set("after_version", String(Math.max(0, Math.floor(options.afterVersion ?? 0))));
      timeoutMs = this.timeoutMs + w;
    }
    if (options.stale) q.set("consistency", "stale");
    const { data } = await this.request({ method: "GET", path: intentPath(key), query: q, timeoutMs, rateLimitWaitMs }, options.signal);
    return intentFromWire(data);
  }

  /** wait long-polls one intent (get with waitMs and afterVersion). */
  async wait(key: string, afterVersion: number, waitMs: number, options: CallOptions = {}): Promise<Intent> {
    return this.get(key, { waitMs, afterVersion, signal: options.signal });
  }

  /** list reads a page of intents in key order. */
  async list(options: ListOptions = {}): Promise<ListPage> {
    const q = new URLSearchParams();
    if (options.state) q.set("state", options.state);
    if (options.prefix) q.set("prefix", options.prefix);
    if (options.limit) q.set("limit", String(options.limit));
    if (options.cursor) q.set("cursor", options.cursor);
    if (options.stale) q.set("consistency", "stale");
    const { data } = await this.request({ method: "GET", path: "/v1/intents", query: q }, options.signal);
    return listPageFromWire(data);
  }

  /** approvals reads a page of the pending_approval queue. */
  async approvals(options: Omit<ListOptions, "state"> = {}): Promise<ListPage> {
    return this.list({ ...options, state: "pending_approval" });
  }

  /** audit reads every recorded attempt on key. */
  async audit(key: string, options: CallOptions = {}): Promise<AuditTrail> {
    needKey(key);
    const { data } = await this.request({ method: "GET", path: intentPath(key, "audit") }, options.signal);
    return auditTrailFromWire(data);
  }

  // ------------------------------------------------------------- the gate

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
  async verifyToken(
    executionToken: string,
    options: CallOptions & { payload?: unknown; fingerprint?: string; tool?: string } = {},
  ): Promise<TokenVerification> {
    const body = jsonBody({
      execution_token: executionToken,
      payload: optionalJSON(options.payload, "payload"),
      fingerprint: options.fingerprint || undefined,
      tool: options.tool || undefined,
    });
    const { data } = await this.request({ method: "POST", path: "/v1/tokens/verify", body }, options.signal);
    return tokenVerificationFromWire(data);
  }

  /** putPolicy creates or replaces a policy (admin); expectVersion makes it a compare-and-set (InvalidStateError). */
  async putPolicy(policy: Policy, options: CallOptions & { expectVersion?: number } = {}): Promise<Policy> {
    if (!policy || !policy.name) throw badRequest("policy name is required", "name");
    const { data } = await this.request({
      method: "PUT", path: "/v1/policies/" + encodeURIComponent(policy.name),
      body: JSON.stringify(policyToWire(policy, options.expectVersion)),
    }, options.signal);
    return policyFromWire((data as { policy?: unknown } | undefined)?.policy);
  }

  /** getPolicy reads one policy; NotFoundError when there is none. */
  async getPolicy(name: string, options: CallOptions = {}): Promise<Policy> {
    if (!name) throw badRequest("policy name is required", "name");
    const { data } = await this.request({ method: "GET", path: "/v1/policies/" + encodeURIComponent(name) }, options.signal);
    return policyFromWire((data as { policy?: unknown } | undefined)?.policy);
  }

  /** listPolicies reads every policy: the default first, then in matching order. */
  async listPolicies(options: CallOptions = {}): Promise<Policy[]> {
    const { data } = await this.request({ method: "GET", path: "/v1/policies" }, options.signal);
    const list = (data as { policies?: unknown } | undefined)?.policies;
    return Array.isArray(list) ? list.map(policyFromWire) : [];
  }

  /** deletePolicy removes a policy (admin). */
  async deletePolicy(name: string, options: CallOptions = {}): Promise<void> {
    if (!name) throw badRequest("policy name is required", "name");
    await this.request({ method: "DELETE", path: "/v1/policies/" + encodeURIComponent(name) }, options.signal);
  }

  /** jwks returns the execution-token public keys as a JSON Web Key Set. */
  async jwks(options: CallOptions = {}): Promise<unknown> {
    return (await this.request({ method: "GET", path: "/v1/keys" }, options.signal)).data;
  }

  /** rotateKey makes the cluster sign new execution tokens with a new key (admin) and returns its id. */
  async rotateKey(options: CallOptions = {}): Promise<string> {
    const { data } = await this.request({ method: "POST", path: "/v1/keys/rotate", body: "{}" }, options.signal);
    const kid = (data as { kid?: unknown } | undefined)?.kid;
    return typeof kid === "string" ? kid : "";
  }

  /** auditLog reads a page of the namespace's hash-chained audit log from seq since on. */
  async auditLog(options: CallOptions & { namespace?: string; since?: number; limit?: number } = {}): Promise<AuditLogPage> {
    const q = new URLSearchParams({ since: String(options.since ?? 0) });
    if (options.limit) q.set("limit", String(options.limit));
    if (options.namespace) q.set("namespace", options.namespace);
    const { data } = await this.request({ method: "GET", path: "/v1/audit", query: q }, options.signal);
    return auditLogPageFromWire(data);
  }

  /** settings reads the cluster-wide settings. */
  async settings(options: CallOptions = {}): Promise<Settings> {
    const { data } = await this.request({ method: "GET", path: "/v1/settings" }, options.signal);
    const v = (data as { audit_retention?: unknown } | undefined)?.audit_retention;
    return { auditRetention: typeof v === "number" ? v : 0 };
  }

  /** putSettings replaces the cluster-wide settings (admin). */
  async putSettings(settings: Settings, options: CallOptions = {}): Promise<Settings> {
    const r = settings.auditRetention;
    if (!Number.isInteger(r) || r < 0 || r > 10_000_000) {
      throw badRequest(`audit retention ${r} is outside 0..10000000`, "audit_retention");
    }
    const { data } = await this.request({
      method: "PUT", path: "/v1/settings", body: JSON.stringify({ audit_retention: r }),
    }, options.signal);
    const v = (data as { audit_retention?: unknown } | undefined)?.audit_retention;
    return { auditRetention: typeof v === "number" ? v : 0 };
  }

  // ------------------------------------------------------------- cluster

  /** cluster reads the cluster's status as the answering node sees it. */
  async cluster(options: CallOptions = {}): Promise<ClusterStatus> {
    const { data } = await this.request({ method: "GET", path: "/v1/cluster" }, options.signal);
    return clusterStatusFromWire(data);
  }

  /** health asks one node (default: the first configured) whether it is live and ready, without retries. */
  async health(addr?: string, options: CallOptions = {}): Promise<Health> {
    const base = normalizeAddr(addr || this.seeds[0]);
    await this.request({ method: "GET", path: "/healthz", addr: base }, options.signal);
    try {
      await this.request({ method: "GET", path: "/readyz", addr: base }, options.signal);
      return { addr: base, live: true, ready: true };
    } catch (err) {
      if (err instanceof ProblemError && err.code === "not_ready") {
        return { addr: base, live: true, ready: false, detail: err.detail };
      }
      throw err;
    }
  }

  // ------------------------------------------------------------- do

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
  async do<R>(effect: Effect, fn: EffectFn<R>, options: DoOptions = {}): Promise<EffectResult<R>> {
    if (typeof fn !== "function") throw badRequest("no function to run");
    if (!effect || typeof effect !== "object") throw badRequest("no effect", "key");
    validateKey(effect.key);
    if (typeof effect.tool !== "string" || effect.tool === "") throw badRequest("tool is required", "tool");
    const payload = encodeJSON(effect.payload, "payload");
    if (effect.leaseMs !== undefined && !(Number.isFinite(effect.leaseMs) && effect.leaseMs >= 0)) {
      throw badRequest(`leaseMs ${effect.leaseMs} is not a duration`, "lease_ms");
    }
    const signal = options.signal;
    const fresh = !effect.owner;
    const owner = effect.owner || this.newOwner();
    const body = jsonBody({
      key: effect.key,
      tool: effect.tool,
      payload: new RawJSON(payload),
      owner,
      policy: effect.policy || undefined,
      lease_ms: effect.leaseMs && effect.leaseMs > 0 ? Math.round(effect.leaseMs) : undefined,
    });
    const maxWaitMs = positive(options.maxWaitMs, this.maxWaitMs);
    const approvalDeadline = Date.now() + nonNegative(options.approvalWaitMs, this.approvalWaitMs);
    let resp = await this.settleClaim(effect.key, body, owner, fresh, maxWaitMs, signal);
    for (;;) {
      switch (resp.status) {
        case "granted":
          return this.execute(effect, resp, fn, signal);
        case "duplicate":
          return {
            status: "duplicate", result: resp.intent?.result, value: undefined, ran: false,
            intent: resp.intent, owner, fencingToken: 0,
          };
        case "pending_approval":
          await this.awaitDecision(effect.key, resp.intent, approvalDeadline, signal);
          resp = await this.settleClaim(effect.key, body, owner, fresh, maxWaitMs, signal);
          continue;
      }
      throw new IntentdError(`intentd: claim ${JSON.stringify(effect.key)}: unexpected status ${JSON.stringify(resp.status)}`);
    }
  }

  /**
   * once wraps a tool function so that each logical call of it runs at most
   * once: the returned function takes the same arguments (and an optional
   * {signal} / {abortSignal}), claims key(args) under tool with the
   * arguments as payload, and returns fn's value, or for a duplicate the
   * recorded result of the first run (its JSON form). Refusals are thrown.
   */
  once<A, R>(
    options: OnceOptions<A>,
    fn: (args: A, ctx: OnceContext) => R | Promise<R>,
  ): (args: A, callOptions?: OnceCallOptions) => Promise<R> {
    if (!options || typeof options.tool !== "string" || options.tool === "") throw badRequest("once: tool is required", "tool");
    if (typeof options.key !== "function") throw badRequest("once: key(args) is required", "key");
    if (typeof fn !== "function") throw badRequest("once: no function to wrap");
    const { tool } = options;
    return async (args: A, callOptions?: OnceCallOptions): Promise<R> => {
      const k = options.key(args);
      const key = typeof k === "string" ? k : makeKey(tool, ...k);
      const payload = options.payload ? options.payload(args) : args === undefined ? null : args;
      const signal = callOptions?.signal ?? callOptions?.abortSignal;
      const res = await this.do<R>(
        { key, tool, payload, policy: options.policy, leaseMs: options.leaseMs },
        (grant, sig) => fn(args, { grant, signal: sig }),
        { signal, approvalWaitMs: options.approvalWaitMs, maxWaitMs: options.maxWaitMs },
      );
      return (res.ran ? res.value : res.result) as R;
    };
  }

  /**
   * settleClaim claims until the answer is definite: it re-sends the same
   * claim (same owner) while its outcome is unknown or the cluster cannot
   * answer, and waits (long-poll) while another owner holds the key, for up
   * to maxWaitMs and within signal. fresh says the owner was made for this
   * call, so any grant to it is this call's.
   */
  private async settleClaim(
    key: string,
    body: string,
    owner: string,
    fresh: boolean,
    maxWaitMs: number,
    signal?: AbortSignal,
  ): Promise<ClaimResponse> {
    const deadline = Date.now() + maxWaitMs;
    let unknown = false; // an attempt of this call may have been granted
    let released = false; // this call already reported its own unused grant
    for (let attempt = 0; ; attempt++) {
      let err: unknown;
      try {
        return await this.claimRaw(body, owner, signal);
      } catch (e) {
        err = e;
      }
      if (signal?.aborted) {
        if (err instanceof OutcomeUnknownError) throw err;
        if (unknown) throw this.claimGaveUp(key, err, true, maxWaitMs);
        throw err;
      }
      let wait: number;
      if (err instanceof InFlightError) {
        // Definite: another owner holds the key, so no attempt of this call
        // was granted.
        unknown = false;
        const left = deadline - Date.now();
        if (left <= 0) throw this.claimGaveUp(key, err, false, maxWaitMs);
        try {
          await this.awaitHolder(key, err, attempt, left, signal);
        } catch (e) {
          if (signal?.aborted) throw e;
        }
        continue;
      } else if (err instanceof InDoubtError && fresh && !released && err.intent?.owner === owner) {
        // A lost answer granted this call's own owner, whose lease then
        // passed while the call could not reach the cluster. This call has
        // not run the effect, and the owner is this call's alone: say the
        // grant failed unused and claim again.
        try {
          await this.report({
            key, owner, fencingToken: err.intent.fencingToken, outcome: "failed",
            result: JSON.stringify({ error: "the claim's answer was lost and its lease passed; the effect never ran" }),
          }, signal);
        } catch (e) {
          throw new IntentdError(
            `intentd: claim ${JSON.stringify(key)}: its own earlier grant passed unused and reporting that failed: ${errorMessage(e)}`,
            { cause: e },
          );
        }
        released = true;
        unknown = false;
        continue;
      } else if (retryableForDo(err)) {
        if (maybeApplied(err)) unknown = true;
        wait = this.backoff(attempt, err instanceof ProblemError ? err.retryAfterMs : 0);
      } else {
        throw err;
      }
      const left = deadline - Date.now();
      if (left <= 0) throw this.claimGaveUp(key, err, unknown, maxWaitMs);
      try {
        await sleep(Math.min(wait, left), signal);
      } catch (e) {
        if (unknown) throw this.claimGaveUp(key, err, true, maxWaitMs);
        throw e;
      }
    }
  }

  /** claimGaveUp is the error of a claim that never got a definite answer (or stayed in flight). */
  private claimGaveUp(key: string, last: unknown, unknown: boolean, maxWaitMs: number): Error {
    if (last instanceof InFlightError) return last;
    if (unknown && !(last instanceof OutcomeUnknownError)) {
      return new OutcomeUnknownError({
        status: last instanceof ProblemError ? last.status : 0, code: "outcome_unknown", title: "Outcome unknown",
        detail: `claim ${JSON.stringify(key)}: no definite answer within ${maxWaitMs} ms and an earlier attempt may have been granted: ${errorMessage(last)}`,
        cause: last,
      });
    }
    return last instanceof Error ? last : new IntentdError(errorMessage(last), { cause: last });
  }

  /**
   * awaitHolder waits while another owner holds the key: a long-poll for the
   * next change of its record (a renewal, a report, the lease passing), else
   * backoff bounded by the holder's Retry-After.
   */
  private async awaitHolder(key: string, err: InFlightError, attempt: number, left: number, signal?: AbortSignal): Promise<void> {
    const version = err.intent?.version;
    if (version !== undefined && version > 0) {
      // Wake at the latest when the holder's lease should have passed.
      const until = err.retryAfterMs > 0 ? err.retryAfterMs + 250 : 30_000;
      const waitMs = Math.max(50, Math.min(left, until, MAX_LONG_POLL_MS));
      const started = Date.now();
      // The poll (and any 429 it waits out) ends with the wait.
      const bounded = linkSignals([signal], left + 1_000);
      try {
        await this.getWith(key, { waitMs, afterVersion: version, signal: bounded.signal }, 0);
        return;
      } catch (e) {
        if (signal?.aborted) throw e;
        if (e instanceof NotFoundError || bounded.timedOut()) return; // gone (purged), or out of time: claim again
        // Too many waiters, unavailable ...: fall back to backoff, unless
        // the poll itself took its time.
        if (Date.now() - started >= waitMs) return;
      } finally {
        bounded.dispose();
      }
    }
    let wait = this.backoff(attempt, 0);
    if (err.retryAfterMs > 0 && err.retryAfterMs < wait) wait = err.retryAfterMs;
    await sleep(Math.min(wait, Math.max(0, left)), signal);
  }

  /**
   * awaitDecision long-polls a pending intent until it is no longer
   * pending_approval, or throws PendingApprovalError at the deadline.
   */
  private async awaitDecision(key: string, intent: Intent | undefined, deadline: number, signal?: AbortSignal): Promise<void> {
    let current = intent;
    for (let attempt = 0; ; attempt++) {
      if (current && current.state !== "pending_approval") return;
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new PendingApprovalError({
          status: 202, code: "pending_approval", title: "Pending approval",
          detail: "the intent waits for an approver; nothing may run before it is approved", intent: current,
        });
      }
      // The poll (and any 429 it waits out) ends with the approval wait.
      const bounded = linkSignals([signal], left + 1_000);
      try {
        current = await this.getWith(key, {
          waitMs: Math.min(left, MAX_LONG_POLL_MS), afterVersion: current?.version ?? 0, signal: bounded.signal,
        }, 0);
      } catch (e) {
        if (signal?.aborted) throw e;
        if (bounded.timedOut()) continue;
        if (!retryableForDo(e)) throw e;
        await sleep(Math.min(this.backoff(attempt, e instanceof ProblemError ? e.retryAfterMs : 0), left), signal);
        if (e instanceof ProblemError && e.status === 429) {
          // The node will not hold another long-poll now (too_many_waiters):
          // read without waiting instead.
          try {
            current = await this.getWith(key, { signal }, 0);
          } catch (e2) {
            if (signal?.aborted) throw e2;
          }
        }
      } finally {
        bounded.dispose();
      }
    }
  }

  /** report sends a complete until the ledger answers definitely or signal ends. result is JSON text. */
  private async report(
    req: { key: string; owner: string; fencingToken: number; outcome: "executed" | "failed"; result?: string },
    signal?: AbortSignal,
  ): Promise<IntentResponse> {
    const body = jsonBody({
      owner: req.owner, fencing_token: req.fencingToken, outcome: req.outcome,
      result: req.result === undefined ? undefined : new RawJSON(req.result),
    });
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.intentCall(req.key, "complete", body, signal);
      } catch (err) {
        if (signal?.aborted || !retryableForDo(err)) throw err;
        try {
          await sleep(this.backoff(attempt, err instanceof ProblemError ? err.retryAfterMs : 0), signal);
        } catch {
          throw err;
        }
      }
    }
  }

  /** execute runs fn under the grant, renewing its lease, and records the outcome. */
  private async execute<R>(effect: Effect, resp: ClaimResponse, fn: EffectFn<R>, signal?: AbortSignal): Promise<EffectResult<R>> {
    const grant: Grant = {
      key: effect.key, owner: resp.owner, fencingToken: resp.fencingToken,
      executionToken: resp.executionToken, intent: resp.intent,
    };
    let lease = effect.leaseMs && effect.leaseMs > 0 ? effect.leaseMs : 0;
    if (lease <= 0 && resp.intent?.leaseMs) lease = resp.intent.leaseMs;
    if (lease <= 0) lease = 30_000;

    const fnSignal = linkSignals([signal]);
    const every = Math.max(lease / 3, 1);
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let renewing: Promise<void> | undefined;
    const tick = () => {
      timer = undefined;
      if (stopped || signal?.aborted) return;
      renewing = (async () => {
        // Each renewal is abandoned after 2/3 of the lease, when the lease
        // would pass anyway.
        const rs = linkSignals([signal], Math.max(lease - every, 1));
        try {
          await this.renew({ key: grant.key, owner: grant.owner, fencingToken: grant.fencingToken, leaseMs: lease }, { signal: rs.signal });
        } catch (err) {
          if (stopped || signal?.aborted) return;
          if (err instanceof FencedError || err instanceof InDoubtError || err instanceof InvalidStateError || err instanceof NotFoundError) {
            // The right to execute is gone.
            stopped = true;
            fnSignal.abort(err);
            return;
          }
          // The cluster could not answer: try again at the next tick.
        } finally {
          rs.dispose();
        }
      })();
      void renewing.then(() => {
        renewing = undefined;
        if (!stopped) timer = setTimeout(tick, every);
      });
    };
    timer = setTimeout(tick, every);
    const stop = async () => {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      // A renewal under way finishes first, so it cannot land after the report.
      if (renewing) await renewing;
      fnSignal.dispose();
    };

    let value: R | undefined;
    let threw = false;
    let ferr: unknown;
    try {
      value = await fn(grant, fnSignal.signal);
    } catch (e) {
      threw = true;
      ferr = e;
    } finally {
      await stop();
    }

    const out: EffectResult<R> = {
      status: undefined, result: undefined, value, ran: true, intent: resp.intent, owner: grant.owner, fencingToken: grant.fencingToken,
    };
    if (threw && isEffectUnknown(ferr)) {
      // Nothing recorded: the intent turns in_doubt when its lease passes.
      throw ferr;
    }

    // Reported with its own deadline, also after the caller's signal ended:
    // an effect that happened is reported rather than left to turn in_doubt.
    const rs = linkSignals([], this.reportTimeoutMs);
    try {
      if (threw) {
        try {
          const done = await this.report({ key: grant.key, owner: grant.owner, fencingToken: grant.fencingToken, outcome: "failed", result: errorResult(ferr) }, rs.signal);
          out.status = "failed";
          out.intent = done.intent;
        } catch {
          // Recording the failure failed: the key turns in_doubt when its
          // lease passes. The function's own error is what the caller gets.
        }
        throw ferr;
      }

      let result: string | undefined;
      let encErr: unknown;
      if (value !== undefined) {
        try {
          result = encodeJSON(value, "result");
        } catch (e) {
          encErr = e;
        }
      }
      let done: IntentResponse;
      try {
        try {
          done = await this.report({ key: grant.key, owner: grant.owner, fencingToken: grant.fencingToken, outcome: "executed", result }, rs.signal);
        } catch (e) {
          if (!(e instanceof BadRequestError) || result === undefined) throw e;
          // The ledger will not store this result (too large): record the
          // effect without it rather than leave it to turn in_doubt.
          encErr = e;
          result = undefined;
          done = await this.report({ key: grant.key, owner: grant.owner, fencingToken: grant.fencingToken, outcome: "executed" }, rs.signal);
        }
      } catch (e) {
        throw new ReportError(
          `intentd: effect ${JSON.stringify(effect.key)} ran but recording it failed: ${errorMessage(e)}`, out, e,
        );
      }
      out.status = "executed";
      out.intent = done.intent;
      out.result = done.intent?.result !== undefined ? done.intent.result : result !== undefined ? JSON.parse(result) : undefined;
      if (this.autoCommit) {
        try {
          const cr = await this.commit({ key: grant.key, owner: grant.owner }, { signal: rs.signal });
          if (cr.intent) out.intent = cr.intent;
        } catch {
          // best-effort
        }
      }
      if (encErr !== undefined) {
        throw new ReportError(
          `intentd: effect ${JSON.stringify(effect.key)} executed and recorded without its result: ${errorMessage(encErr)}`, out, encErr,
        );
      }
      return out;
    } finally {
      rs.dispose();
    }
  }
}

/** retryableForDo: err says the cluster could not answer, or asked to slow down (do()'s retryable). */
function retryableForDo(err: unknown): boolean {
  if (err instanceof ProblemError && (err.status >= 500 || err.status === 429)) return true;
  return err instanceof OutcomeUnknownError || err instanceof UnavailableError || err instanceof RateLimitedError;
}

/** raceSignal settles with p, or rejects with signal's reason when it aborts first. */
function raceSignal<T>(p: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return p;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const on = () => reject(signal.reason);
    signal.addEventListener("abort", on, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener("abort", on);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener("abort", on);
        reject(e);
      },
    );
  });
}

/** once wraps a tool function with client.once(options, fn). */
export function once<A, R>(
  client: Client,
  options: OnceOptions<A>,
  fn: (args: A, ctx: OnceContext) => R | Promise<R>,
): (args: A, callOptions?: OnceCallOptions) => Promise<R> {
  return client.once(options, fn);
}
