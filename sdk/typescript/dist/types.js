// Types of the API, mirroring client/types.go. The SDK speaks camelCase:
// every record the ledger answers is converted from the snake_case wire
// field by field (fencing_token -> fencingToken, lease_ms -> leaseMs). The
// payload and result of an intent, and an audit-log event, are your data
// or hashed bytes: they are passed through as parsed JSON, never renamed.
// Times stay the RFC 3339 strings the ledger sends (nanoseconds included).
function obj(v) {
    return v && typeof v === "object" && !Array.isArray(v) ? v : {};
}
function s(v) {
    return typeof v === "string" ? v : "";
}
function n(v) {
    return typeof v === "number" ? v : 0;
}
function optS(out, name, v) {
    if (typeof v === "string" && v !== "")
        out[name] = v;
}
function optN(out, name, v) {
    if (typeof v === "number" && v !== 0)
        out[name] = v;
}
function optB(out, name, v) {
    if (v === true)
        out[name] = true;
}
function strings(v) {
    return Array.isArray(v) ? v.filter((x) => typeof x === "string") : undefined;
}
/** intentFromWire converts an intent record of the API. */
export function intentFromWire(v) {
    const w = obj(v);
    const out = {
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
    if (w.payload !== undefined)
        out.payload = w.payload;
    if (w.result !== undefined)
        out.result = w.result;
    optS(out, "policy", w.policy);
    optN(out, "policyVersion", w.policy_version);
    optN(out, "approvalsRequired", w.approvals_required);
    if (Array.isArray(w.approvals)) {
        out.approvals = w.approvals.map((a) => {
            const aw = obj(a);
            const ap = { actor: s(aw.actor), at: s(aw.at) };
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
    return out;
}
function optIntent(v) {
    return v && typeof v === "object" ? intentFromWire(v) : undefined;
}
export function intentResponseFromWire(v) {
    const w = obj(v);
    return { status: s(w.status), intent: optIntent(w.intent) };
}
export function claimResponseFromWire(v, httpStatus, owner) {
    const w = obj(v);
    return {
        status: s(w.status),
        fencingToken: n(w.fencing_token),
        executionToken: s(w.execution_token),
        intent: optIntent(w.intent),
        created: httpStatus === 201,
        owner,
    };
}
export function listPageFromWire(v) {
    const w = obj(v);
    return {
        intents: Array.isArray(w.intents) ? w.intents.map(intentFromWire) : [],
        nextCursor: s(w.next_cursor),
    };
}
export function auditTrailFromWire(v) {
    const w = obj(v);
    const events = Array.isArray(w.events)
        ? w.events.map((e) => {
            const ew = obj(e);
            const out = { index: n(ew.index), at: s(ew.at), op: s(ew.op), status: s(ew.status), state: s(ew.state) };
            optS(out, "owner", ew.owner);
            optS(out, "actor", ew.actor);
            optS(out, "fingerprint", ew.fingerprint);
            optN(out, "fencingToken", ew.fencing_token);
            optS(out, "outcome", ew.outcome);
            optS(out, "reason", ew.reason);
            return out;
        })
        : [];
    return { key: s(w.key), namespace: s(w.namespace), events, dropped: n(w.dropped) };
}
export function policyFromWire(v) {
    const w = obj(v);
    const out = { name: s(w.name) };
    optN(out, "version", w.version);
    const tools = strings(w.tools);
    if (tools && tools.length)
        out.tools = tools;
    optN(out, "priority", w.priority);
    optN(out, "dedupeWindowMs", w.dedupe_window_ms);
    optN(out, "leaseMs", w.lease_ms);
    optN(out, "tokenTtlMs", w.token_ttl_ms);
    optB(out, "requireApproval", w.require_approval);
    optN(out, "approvalsRequired", w.approvals_required);
    const approvers = strings(w.approvers);
    if (approvers && approvers.length)
        out.approvers = approvers;
    optB(out, "blocked", w.blocked);
    optN(out, "maxPayloadBytes", w.max_payload_bytes);
    optB(out, "allowSelfApproval", w.allow_self_approval);
    return out;
}
export function policyToWire(p, expectVersion) {
    const out = { name: p.name };
    optN(out, "version", p.version);
    if (p.tools && p.tools.length)
        out.tools = [...p.tools];
    optN(out, "priority", p.priority);
    optN(out, "dedupe_window_ms", p.dedupeWindowMs);
    optN(out, "lease_ms", p.leaseMs);
    optN(out, "token_ttl_ms", p.tokenTtlMs);
    optB(out, "require_approval", p.requireApproval);
    optN(out, "approvals_required", p.approvalsRequired);
    if (p.approvers && p.approvers.length)
        out.approvers = [...p.approvers];
    optB(out, "blocked", p.blocked);
    optN(out, "max_payload_bytes", p.maxPayloadBytes);
    optB(out, "allow_self_approval", p.allowSelfApproval);
    optN(out, "expect_version", expectVersion);
    return out;
}
export function tokenVerificationFromWire(v) {
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
export function clusterStatusFromWire(v) {
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
                const out = { id: s(nw.id), raftAddr: s(nw.raft_addr), gossip: s(nw.gossip), leader: nw.leader === true };
                optS(out, "httpAddr", nw.http_addr);
                optS(out, "suffrage", nw.suffrage);
                optN(out, "decodes", nw.decodes);
                return out;
            })
            : [],
    };
}
export function auditLogPageFromWire(v) {
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
