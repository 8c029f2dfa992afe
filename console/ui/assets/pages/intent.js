// One intent: its record and its per-key audit trail as a timeline
// (claims, duplicates, divergent attempts, fenced reports, expiry,
// approvals, token use).

import { get, intentPath, Problem } from "../api.js";
import { h, clear, notice, badge, statusBadge, facts, when, short } from "../dom.js";
import { raw, pretty } from "../json.js";
import { Card as ApprovalCard } from "./approvals.js";
import { Card as InDoubtCard } from "./indoubt.js";
import { follow } from "../live.js";

export const title = "Intent";

// kindOf colours a timeline entry: ok, warn or bad.
function kindOf(ev) {
  switch (ev.status) {
    case "granted": case "ok": case "duplicate": return ev.op === "expire" ? "bad" : "ok";
    case "pending_approval": case "in_flight": case "already_approved": return "warn";
    default: return "bad";
  }
}

// describe says what one audit event means, in words.
function describe(ev, it) {
  const who = ev.actor ? `by ${ev.actor}` : ev.owner ? `owner ${ev.owner}` : "";
  const fp = ev.fingerprint && ev.fingerprint !== it.fingerprint ? ` with another payload (fingerprint ${ev.fingerprint.slice(0, 12)}…)` : "";
  switch (`${ev.op}/${ev.status}`) {
    case "claim/granted": return `Claim granted to ${ev.owner}` + (ev.fencing_token ? `, fencing token ${ev.fencing_token}` : "");
    case "claim/duplicate": return `Duplicate claim by ${ev.owner}: answered with the recorded result, nothing ran again`;
    case "claim/in_flight": return `Claim by ${ev.owner} refused: another owner held the lease`;
    case "claim/divergent": return `Divergent claim by ${ev.owner}${fp}: refused`;
    case "claim/pending_approval": return `Claim by ${ev.owner}: waits for approval`;
    case "claim/in_doubt": return `Claim by ${ev.owner} refused: the intent is in doubt`;
    case "complete/ok": return `Reported ${ev.outcome || ""} by ${ev.owner}`;
    case "complete/fenced": return `Fenced report by ${ev.owner} (token ${ev.fencing_token || "?"}): a stale holder, refused`;
    case "renew/ok": return `Lease renewed by ${ev.owner}`;
    case "commit/ok": return `Result acknowledged (committed) by ${ev.owner}`;
    case "expire/ok": case "expire/lease_expired": return "The lease passed without a report: in doubt";
    case "approve/ok": return `Approved ${who}`;
    case "approve/divergent": return `Approval ${who} refused: it was for another payload${fp}`;
    case "reject/ok": return `Rejected ${who}`;
    case "resolve/ok": return `Resolved as ${ev.outcome} ${who}`;
    case "token.use/ok": return `Execution token spent by the tool (fencing token ${ev.fencing_token})`;
    default: return `${ev.op}: ${ev.status.replaceAll("_", " ")}${fp} ${who}`.trim();
  }
}

export async function render({ me, main, params, can }) {
  const key = params.get("key") || "";
  if (!key) {
    clear(main, h("h1", {}, title), notice("info", "Which intent?", "Open an intent from the Intents page."));
    return;
  }
  if (!can("reader")) {
    clear(main, h("h1", {}, key), notice("bad", "This key may not read intents", `Key ${me.name} has roles ${me.roles.join(", ")}.`));
    return;
  }
  document.title = `${key} · intentd console`;
  let it;
  let trail;
  try {
    [it, trail] = await Promise.all([get(intentPath(key)), get(intentPath(key, "audit"))]);
  } catch (e) {
    if (e instanceof Problem && e.status === 404) {
      clear(main, h("h1", {}, key), notice("info", "No such intent", `Namespace ${me.namespace} holds no intent ${key} (finished intents are purged after their dedupe window).`));
      return;
    }
    throw e;
  }
  // A page linked to from elsewhere (the MCP gate sends an approver here)
  // is where the decision is made: the same card as the queues show.
  let decide = null;
  let card = null;
  if (it.state === "pending_approval") {
    const pols = await get("/v1/policies").catch(() => null);
    card = new ApprovalCard(it, new Map(((pols && pols.policies) || []).map((p) => [p.name, p])), me, can("approver"));
    card.loadOwner();
    decide = [h("h2", {}, can("approver") ? "Decide" : "Waiting for approval"), h("div", { class: "cards", id: "decide" }, card.el)];
  } else if (it.state === "in_doubt") {
    card = new InDoubtCard(it, me, can("resolve"));
    card.loadEvents();
    decide = [h("h2", {}, can("resolve") ? "Resolve" : "In doubt"), h("div", { class: "cards", id: "decide" }, card.el)];
  }
  const links = [];
  if (it.state === "pending_approval") links.push(h("a", { href: "/ui/approvals" }, "The approvals queue"));
  if (it.state === "in_doubt") links.push(h("a", { href: "/ui/in-doubt" }, "The in_doubt queue"));
  const payload = raw(it, "payload");
  const result = raw(it, "result");
  const events = trail.events || [];
  const stateBadge = h("span", { class: "state" }, badge(it.state));
  const live = card ? h("p", { class: "live", id: "live-status" }, "Loading…") : null;
  clear(main,
    h("h1", { class: "key" }, key, " ", stateBadge),
    live,
    links.length ? h("p", {}, links) : null,
    decide,
    h("h2", {}, "Record"),
    card ? h("p", { class: "muted small" }, "As it stood when the page loaded; the card above follows the intent live. Reload for the latest record and timeline.") : null,
    facts([
      ["Namespace", it.namespace],
      ["Tool", it.tool],
      ["State", it.state],
      ["Owner", it.owner],
      ["Claimed by key", it.principal],
      ["Fencing token", String(it.fencing_token)],
      ["Generation", String(it.generation)],
      ["Policy", it.policy ? `${it.policy} (version ${it.policy_version})` : ""],
      ["Approvals", it.approvals_required ? `${(it.approvals || []).length} of ${it.approvals_required}` +
        ((it.approvals || []).length ? ": " + it.approvals.map((a) => a.actor).join(", ") : "") : ""],
      ["Lease", it.lease_deadline ? h("span", {}, `${it.lease_ms} ms, until `, when(it.lease_deadline)) : ""],
      ["Execution token spent", it.token_used ? "yes" : ""],
      ["Duplicates / divergent", `${it.duplicates} / ${it.divergent}`],
      ["Created", when(it.created_at)],
      ["Updated", when(it.updated_at)],
      ["Version", String(it.version)],
      ["Fingerprint", h("code", { class: "fp" }, it.fingerprint)],
    ]),
    h("h2", {}, "Payload"),
    h("pre", { class: "json", tabindex: 0, "aria-label": "Payload" }, payload === undefined ? "(none)" : pretty(payload)),
    result === undefined ? null : [h("h2", {}, "Result"), h("pre", { class: "json", tabindex: 0, "aria-label": "Result" }, pretty(result))],
    h("h2", {}, "Timeline"),
    trail.dropped ? h("p", { class: "muted" }, `${trail.dropped} older events were dropped from this intent's trail.`) : null,
    h("ol", { class: "timeline", id: "timeline" }, events.map((ev) => h("li", { class: kindOf(ev), "data-op": ev.op, "data-status": ev.status },
      h("div", {}, h("span", { class: "when" }, when(ev.at)), " ", statusBadge(ev.status, kindOf(ev))),
      h("div", {}, describe(ev, it)),
      ev.reason ? h("div", { class: "muted small" }, ev.reason) : null,
      ev.fingerprint ? h("div", { class: "muted small" }, "fingerprint ", short(ev.fingerprint, 16)) : null))));

  // The decision card follows the intent (a decision or a resolve made
  // elsewhere re-renders it, without its controls); the record and the
  // timeline below are as of the page's load (reload for the latest).
  if (card) {
    follow(async () => {
      await card.reload();
      clear(stateBadge, badge(card.final ? "purged" : card.it.state));
    }, live);
  }
}
