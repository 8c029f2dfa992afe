// Types of the API, mirroring client/types.go. The SDK speaks camelCase:
// every record the ledger answers is converted from the snake_case wire
// field by field (fencing_token -> fencingToken, lease_ms -> leaseMs). The
// payload and result of an intent, and an audit-log event, are your data
// or hashed bytes: they are passed through as parsed JSON, never renamed.
// Times stay the RFC 3339 strings the ledger sends (nanoseconds included).

/** The lifecycle state of an intent. */
export type State =
  | "pending_approval"
  | "approved"
  | "rejected"
  | "declared"
  | "executed"
  | "failed"
  | "committed"
  | "in_doubt";

/** The word a successful answer carries. Refusals are thrown as ProblemError subclasses. */
export type Status = "granted" | "duplicate" | "pending_approval" | "ok";

/** What an executor or reconciler reports about an effect. */
export type Outcome = "executed" | "failed";

/** One approver's approval of a pending intent. */
export interface Approval {
  actor: string;
  at: string;
  reason?: string;
}

/** One logical side effect as the ledger records it. */
export interface Intent {
  key: string;
  namespace: string;
  tool: string;
  state: State;
  owner?: string;
  /** The API key the grant (or the pending intent) is bound to; absent when auth is off. */
  principal?: string;
  fencingToken: number;
  generation: number;
  fingerprint: string;
  payload?: unknown;
  result?: unknown;
  policy?: string;
  /** The version of policy the intent was decided under. */
  policyVersion?: number;
  approvalsRequired?: number;
  approvals?: Approval[];
  /** The current grant's execution token was spent. */
  tokenUsed?: boolean;
  leaseMs?: number;
  /** Absent when the intent holds no lease. */
  leaseDeadline?: string;
  createdAt: string;
  updatedAt: string;
  duplicates: number;
  divergent: number;
  /** The log index of the last change to the record. */
  version: number;
}

/** A claim (claim()). */
export interface ClaimRequest {
  /** Names the logical effect, from the business entity, never a random value per attempt. */
  key: string;
  tool: string;
  /** Any JSON value; undefined is refused (use null for "no arguments"). */
  payload: unknown;
  /** Names this one execution attempt; empty: a fresh one (newOwner()), returned in ClaimResponse.owner. */
  owner?: string;
  policy?: string;
  /** How long the grant holds without a report; 0/absent: the server's default (30 s). */
  leaseMs?: number;
}

/** A successful claim: granted, duplicate or pending_approval. */
export interface ClaimResponse {
  status: Status;
  /** Set when status is granted. */
  fencingToken: number;
  executionToken: string;
  intent: Intent | undefined;
  /** True when this claim granted a new generation (HTTP 201) rather than returning an earlier grant to the same owner. */
  created: boolean;
  /** The owner the claim was made with. */
  owner: string;
}

export interface CompleteRequest {
  key: string;
  owner: string;
  fencingToken: number;
  outcome: Outcome;
  result?: unknown;
}

export interface RenewRequest {
  key: string;
  owner: string;
  fencingToken: number;
  leaseMs: number;
}

export interface CommitRequest {
  key: string;
  owner: string;
}

export interface ResolveRequest {
  key: string;
  outcome: Outcome;
  result?: unknown;
  actor: string;
  reason?: string;
}

export interface DecisionRequest {
  key: string;
  actor?: string;
  reason?: string;
  /** Binds the decision to the payload the decider saw: refused (divergent) if the intent's differs. */
  fingerprint?: string;
}

/** The answer of a successful call about one intent. */
export interface IntentResponse {
  status: Status;
  intent: Intent | undefined;
}

/** One page of intents in key order. */
export interface ListPage {
  intents: Intent[];
  /** Continues the listing; empty at the end. */
  nextCursor: string;
}

/** One recorded attempt on a key. */
export interface AuditEvent {
  index: number;
  at: string;
  op: string;
  status: string;
  state: State;
  owner?: string;
  actor?: string;
  fingerprint?: string;
  fencingToken?: number;
  outcome?: Outcome;
  reason?: string;
}

/** Every attempt on one key, oldest first. */
export interface AuditTrail {
  key: string;
  namespace: string;
  events: AuditEvent[];
  /** The oldest events the ledger no longer keeps. */
  dropped: number;
}

/** A ledger policy (README "Gate"); absent fields defer to the default policy. */
export interface Policy {
  name: string;
  version?: number;
  tools?: string[];
  priority?: number;
  dedupeWindowMs?: number;
  leaseMs?: number;
  tokenTtlMs?: number;
  requireApproval?: boolean;
  approvalsRequired?: number;
  approvers?: string[];
  blocked?: boolean;
  maxPayloadBytes?: number;
  allowSelfApproval?: boolean;
}

/** What an execution token binds. */
export interface TokenClaims {
  /**
   * The token's audience (the JWS claim "aud"): the tool the intent was granted for, the only one that may act on
   * it. Empty for a token signed before tokens named their tool.
   */
  tool: string;
  namespace: string;
  key: string;
  fingerprint: string;
  fencingToken: number;
  owner: string;
  issuedAt: number;
  expires: number;
}

/** The ledger's word on an execution token. */
export interface TokenVerification {
  status: string;
  valid: boolean;
  claims: TokenClaims;
  intent: Intent | undefined;
}

/** One member of the cluster. */
export interface NodeStatus {
  id: string;
  raftAddr: string;
  httpAddr?: string;
  suffrage?: string;
  gossip: string;
  leader: boolean;
  /** The log entry format version the member reads (0: not announced). */
  decodes?: number;
}

/** The cluster as one node sees it. */
export interface ClusterStatus {
  nodeId: string;
  state: string;
  leaderId: string;
  leaderHttp: string;
  term: number;
  commitIndex: number;
  appliedIndex: number;
  lastIndex: number;
  ready: boolean;
  nodes: NodeStatus[];
}

/** One node's liveness and readiness. */
export interface Health {
  addr: string;
  live: boolean;
  ready: boolean;
  detail?: string;
}

/** The head of a namespace's hash-chained audit log. */
export interface AuditHead {
  namespace: string;
  firstSeq: number;
  anchor: string;
  lastSeq: number;
  lastHash: string;
  dropped: number;
}

/** One event of the audit log; event is the hashed JSON, parsed, with its wire names. */
export interface AuditRecord {
  seq: number;
  hash: string;
  event: unknown;
}

export interface AuditLogPage {
  head: AuditHead;
  events: AuditRecord[];
  /** The since of the next page; 0 at the end. */
  next: number;
}

/** The cluster-wide settings. */
export interface Settings {
  /** Events each namespace's audit log keeps (0: the default, 100,000). */
  auditRetention: number;
}

/** What do() returns about an effect (Go's EffectResult). */
export interface EffectResult<R = unknown> {
  /**
   * What the ledger recorded for this call: "executed" (this call ran fn),
   * "duplicate" (an earlier call did; result is its recorded result) or
   * "failed". undefined only on a ReportError's effect (nothing recorded).
   */
  status: "executed" | "duplicate" | "failed" | undefined;
  /** The recorded result as parsed JSON: fn's (executed) or the earlier call's (duplicate); undefined when none. */
  result: unknown;
  /** fn's return value as fn returned it, when ran. */
  value: R | undefined;
  /** Whether fn ran in this call. */
  ran: boolean;
  /** The record as the ledger last answered about it. */
  intent: Intent | undefined;
  /** The owner this call claimed with. */
  owner: string;
  /** This call's grant's fencing token (0 unless granted). */
  fencingToken: number;
}

/** The right to perform an effect, handed by do() to the function it runs. */
export interface Grant {
  key: string;
  owner: string;
  /** Increases strictly with every grant across the cluster; pass it to systems that can refuse stale writers. */
  fencingToken: number;
  /** The signed proof of the grant for the tool side (POST /v1/tokens/verify). */
  executionToken: string;
  /** The record as granted. */
  intent: Intent | undefined;
}

// ---- wire mapping ----

type Wire = Record<string, unknown>;

function obj(v: unknown): Wire {
  return v && typeof v === "object" && !Array.isArray(v) ? (v as Wire) : {};
}
function s(v: unknown): string {
  return typeof v === "string" ? v : "";
}
function n(v: unknown): number {
  return typeof v === "number" ? v : 0;
}
function optS(out: Wire, name: string, v: unknown): void {
  if (typeof v === "string" && v !== "") out[name] = v;
}
function optN(out: Wire, name: string, v: unknown): void {
  if (typeof v === "number" && v !== 0) out[name] = v;
}
function optB(out: Wire, name: string, v: unknown): void {
  if (v === true) out[name] = true;
}
function strings(v: unknown): string[] | undefined {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : undefined;
}

/** intentFromWire converts an intent record of the API. */
export function intentFromWire(v: unknown): Intent {
  const w = obj(v);
  const out: Wire = {
    key: s(w.key),
    namespace: s(w.namespace),
    tool: s(w.tool),
    state: s(w.state),
    fencingToken: n(w.fencing_token),
    generation: n(w.generation),
    fingerprint: s(w.fingerprint),
  };
  optS(out, "owner", w.owner);
  optS(out, "principal", w.principal);
  if (w.payload !== undefined) out.payload = w.payload;
  if (w.result !== undefined) out.result = w.result;
  optS(out, "policy", w.policy);
  optN(out, "policyVersion", w.policy_version);
  optN(out, "approvalsRequired", w.approvals_required);
  if (Array.isArray(w.approvals)) {
    out.approvals = w.approvals.map((a) => {
      const aw = obj(a);
      const ap: Wire = { actor: s(aw.actor), at: s(aw.at) };
      optS(ap, "reason", aw.reason);
      return ap;
    });
  }
  optB(out, "tokenUsed", w.token_used);
  optN(out, "leaseMs", w.lease_ms);
  optS(out, "leaseDeadline", w.lease_deadline);
  out.createdAt = s(w.created_at);
  out.updatedAt = s(w.updated_at);
  out.duplicates = n(w.duplicates);
  out.divergent = n(w.divergent);
  out.version = n(w.version);
  return out as unknown as Intent;
}

function optIntent(v: unknown): Intent | undefined {
  return v && typeof v === "object" ? intentFromWire(v) : undefined;
}

export function intentResponseFromWire(v: unknown): IntentResponse {
  const w = obj(v);
  return { status: s(w.status) as Status, intent: optIntent(w.intent) };
}

export function claimResponseFromWire(v: unknown, httpStatus: number, owner: string): ClaimResponse {
  const w = obj(v);
  return {
    status: s(w.status) as Status,
    fencingToken: n(w.fencing_token),
    executionToken: s(w.execution_token),
    intent: optIntent(w.intent),
    created: httpStatus === 201,
    owner,
  };
}

export function listPageFromWire(v: unknown): ListPage {
  const w = obj(v);
  return {
    intents: Array.isArray(w.intents) ? w.intents.map(intentFromWire) : [],
    nextCursor: s(w.next_cursor),
  };
}

export function auditTrailFromWire(v: unknown): AuditTrail {
  const w = obj(v);
  const events = Array.isArray(w.events)
    ? w.events.map((e) => {
        const ew = obj(e);
        const out: Wire = { index: n(ew.index), at: s(ew.at), op: s(ew.op), status: s(ew.status), state: s(ew.state) };
        optS(out, "owner", ew.owner);
        optS(out, "actor", ew.actor);
        optS(out, "fingerprint", ew.fingerprint);
        optN(out, "fencingToken", ew.fencing_token);
        optS(out, "outcome", ew.outcome);
        optS(out, "reason", ew.reason);
        return out as unknown as AuditEvent;
      })
    : [];
  return { key: s(w.key), namespace: s(w.namespace), events, dropped: n(w.dropped) };
}

export function policyFromWire(v: unknown): Policy {
  const w = obj(v);
  const out: Wire = { name: s(w.name) };
  optN(out, "version", w.version);
  const tools = strings(w.tools);
  if (tools && tools.length) out.tools = tools;
  optN(out, "priority", w.priority);
  optN(out, "dedupeWindowMs", w.dedupe_window_ms);
  optN(out, "leaseMs", w.lease_ms);
  optN(out, "tokenTtlMs", w.token_ttl_ms);
  optB(out, "requireApproval", w.require_approval);
  optN(out, "approvalsRequired", w.approvals_required);
  const approvers = strings(w.approvers);
  if (approvers && approvers.length) out.approvers = approvers;
  optB(out, "blocked", w.blocked);
  optN(out, "maxPayloadBytes", w.max_payload_bytes);
  optB(out, "allowSelfApproval", w.allow_self_approval);
  return out as unknown as Policy;
}

export function policyToWire(p: Policy, expectVersion?: number): Wire {
  const out: Wire = { name: p.name };
  optN(out, "version", p.version);
  if (p.tools && p.tools.length) out.tools = [...p.tools];
  optN(out, "priority", p.priority);
  optN(out, "dedupe_window_ms", p.dedupeWindowMs);
  optN(out, "lease_ms", p.leaseMs);
  optN(out, "token_ttl_ms", p.tokenTtlMs);
  optB(out, "require_approval", p.requireApproval);
  optN(out, "approvals_required", p.approvalsRequired);
  if (p.approvers && p.approvers.length) out.approvers = [...p.approvers];
  optB(out, "blocked", p.blocked);
  optN(out, "max_payload_bytes", p.maxPayloadBytes);
  optB(out, "allow_self_approval", p.allowSelfApproval);
  optN(out, "expect_version", expectVersion);
  return out;
}

export function tokenVerificationFromWire(v: unknown): TokenVerification {
  const w = obj(v);
  const c = obj(w.claims);
  return {
    status: s(w.status),
    valid: w.valid === true,
    claims: {
      tool: s(c.aud),
      namespace: s(c.ns),
      key: s(c.key),
      fingerprint: s(c.fp),
      fencingToken: n(c.fence),
      owner: s(c.owner),
      issuedAt: n(c.iat),
      expires: n(c.exp),
    },
    intent: optIntent(w.intent),
  };
}

export function clusterStatusFromWire(v: unknown): ClusterStatus {
  const w = obj(v);
  return {
    nodeId: s(w.node_id),
    state: s(w.state),
    leaderId: s(w.leader_id),
    leaderHttp: s(w.leader_http),
    term: n(w.term),
    commitIndex: n(w.commit_index),
    appliedIndex: n(w.applied_index),
    lastIndex: n(w.last_index),
    ready: w.ready === true,
    nodes: Array.isArray(w.nodes)
      ? w.nodes.map((x) => {
          const nw = obj(x);
          const out: Wire = { id: s(nw.id), raftAddr: s(nw.raft_addr), gossip: s(nw.gossip), leader: nw.leader === true };
          optS(out, "httpAddr", nw.http_addr);
          optS(out, "suffrage", nw.suffrage);
          optN(out, "decodes", nw.decodes);
          return out as unknown as NodeStatus;
        })
      : [],
  };
}

export function auditLogPageFromWire(v: unknown): AuditLogPage {
  const w = obj(v);
  const h = obj(w.head);
  return {
    head: {
      namespace: s(h.namespace),
      firstSeq: n(h.first_seq),
      anchor: s(h.anchor),
      lastSeq: n(h.last_seq),
      lastHash: s(h.last_hash),
      dropped: n(h.dropped),
    },
    events: Array.isArray(w.events)
      ? w.events.map((e) => {
          const ew = obj(e);
          return { seq: n(ew.seq), hash: s(ew.hash), event: ew.event };
        })
      : [],
    next: n(w.next),
  };
}
