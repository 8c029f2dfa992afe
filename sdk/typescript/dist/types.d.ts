/** The lifecycle state of an intent. */
export declare type State = "pending_approval" | "approved" | "rejected" | "declared" | "executed" | "failed" | "committed" | "in_doubt";
/** The word a successful answer carries. Refusals are thrown as ProblemError subclasses. */
export declare type Status = "granted" | "duplicate" | "pending_approval" | "ok";
/** What an executor or reconciler reports about an effect. */
export declare type Outcome = "executed" | "failed";
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
declare type Wire = Record<string, unknown>;
/** intentFromWire converts an intent record of the API. */
export declare function intentFromWire(v: unknown): Intent;
export declare function intentResponseFromWire(v: unknown): IntentResponse;
export declare function claimResponseFromWire(v: unknown, httpStatus: number, owner: string): ClaimResponse;
export declare function listPageFromWire(v: unknown): ListPage;
export declare function auditTrailFromWire(v: unknown): AuditTrail;
export declare function policyFromWire(v: unknown): Policy;
export declare function policyToWire(p: Policy, expectVersion?: number): Wire;
export declare function tokenVerificationFromWire(v: unknown): TokenVerification;
export declare function clusterStatusFromWire(v: unknown): ClusterStatus;
export declare function auditLogPageFromWire(v: unknown): AuditLogPage;
export {};
