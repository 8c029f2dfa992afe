// Approvals: every pending_approval intent of the namespace, newest
// first, kept live. Approve and Reject send the fingerprint of the payload
// this page showed: if the intent's payload is another one by then, the
// ledger refuses (422 divergent) and the card says so.

import { get, post, listAll, intentPath, explain } from "../api.js";
import { h, clear, field, notice, badge, facts, when, age, intentLink, announce, uid } from "../dom.js";
import { raw, pretty } from "../json.js";
import { follow } from "../live.js";

export const title = "Approvals";

const byNewest = (a, b) => new Date(b.created_at) - new Date(a.created_at);

export async function render(ctx) {
  const { me, main, can } = ctx;
  if (!can("reader")) {
    clear(main, h("h1", {}, title), notice("bad", "This key may not read intents",
      `Key ${me.name} has roles ${me.roles.join(", ")}; the approvals queue needs reader (or agent, approver, reconciler, admin).`));
    return;
  }
  const decide = can("approver");
  const status = h("p", { class: "live", id: "live-status" }, "Loading…");
  const count = h("p", { id: "approvals-count", role: "status" });
  const list = h("div", { class: "cards two", id: "approvals" });
  clear(main,
    h("h1", {}, "Approvals"),
    h("div", { class: "toolbar" }, count, status),
    decide ? null : notice("info", "You may look, not decide",
      `Key ${me.name} (roles ${me.roles.join(", ")}) may not approve or reject: that needs the approver role, and the API refuses it to this key.`),
    list);

  const cards = new Map();
  let policies = new Map();

  async function refresh() {
    const [pending, pols] = await Promise.all([listAll("pending_approval"), get("/v1/policies").catch(() => null)]);
    if (pols) policies = new Map((pols.policies || []).map((p) => [p.name, p]));
    const intents = pending.intents.slice().sort(byNewest);
    const seen = new Set(intents.map((it) => it.key));
    const fresh = [];
    for (const it of intents) {
      const c = cards.get(it.key);
      if (c) c.update(it);
      else {
        const card = new Card(it, policies, me, decide);
        cards.set(it.key, card);
        fresh.push(card);
      }
    }
    for (const [key, c] of cards) if (!seen.has(key)) c.gone();
    for (const c of fresh) c.loadOwner();
    // New cards go on top (newest first); cards already shown stay where
    // they are, so nothing moves under the person's keyboard or pointer.
    list.prepend(...fresh.map((c) => c.el));
    clear(count, intents.length === 0
      ? `Nothing waits for approval in namespace ${me.namespace}.`
      : `${intents.length} waiting for approval in namespace ${me.namespace}` + (pending.more ? " (the oldest are not shown)" : "") + ".");
    if (fresh.length && cards.size > fresh.length) announce(`${fresh.length} new intent(s) waiting for approval`);
  }
  follow(refresh, status);
}

// approvalsText says "1 of 2: alice (reason)".
function approvalsText(it) {
  const got = it.approvals || [];
  const need = Math.max(it.approvals_required || 1, 1);
  const who = got.map((a) => a.actor + (a.reason ? ` (${a.reason})` : "")).join(", ");
  return `${got.length} of ${need}` + (who ? `: ${who}` : "");
}

// Card is one pending intent as this page first showed it (the intent's
// own page shows one too).
export class Card {
  constructor(it, policies, me, decide) {
    this.key = it.key;
    this.fingerprint = it.fingerprint; // what the person reviews, and what a decision carries
    this.me = me;
    const hid = uid("card");
    this.approvals = h("dd", { class: "approvals" }, approvalsText(it));
    this.owner = h("span", { class: "owner" }, it.owner || "…");
    this.change = h("div", { class: "change", role: "status" });
    this.result = h("div", { class: "result", role: "status", "aria-live": "polite" });
    const pol = policies.get(it.policy);
    const approvers = pol && pol.approvers && pol.approvers.length ? pol.approvers.join(", ") : "";
    const payload = raw(it, "payload");
    this.el = h("article", { class: "card", "aria-labelledby": hid, "data-key": it.key, "data-fingerprint": it.fingerprint },
      h("header", {},
        h("h3", { id: hid }, intentLink(it.key)),
        badge(it.state)),
      facts([
        ["Tool", it.tool],
        ["Owner", this.owner],
        ["Claimed by key", it.principal],
        ["Policy", it.policy ? `${it.policy} (version ${it.policy_version})` : ""],
        ["Approvers", approvers],
        ["Waiting since", it.created_at ? h("span", {}, when(it.created_at), ` (${age(it.created_at)})`) : ""],
      ]),
      h("dl", { class: "facts" }, h("dt", {}, "Approvals"), this.approvals),
      h("h4", { class: "small" }, "Payload"),
      h("pre", { class: "json payload", tabindex: 0, "aria-label": `Payload of ${it.key}` }, payload === undefined ? "(none)" : pretty(payload)),
      h("p", { class: "small" }, "Fingerprint ", h("code", { class: "fp" }, it.fingerprint)),
      this.change,
      decide ? this.form() : null,
      this.result);
  }

  // loadOwner shows who asked: a pending intent has no owner yet (it gets
  // one with its grant), its trail's claims name it.
  async loadOwner() {
    try {
      const trail = await get(intentPath(this.key, "audit"));
      const asked = (trail.events || []).filter((ev) => ev.op === "claim" && ev.owner).pop();
      clear(this.owner, asked ? asked.owner : "(not recorded)");
    } catch (e) {
      clear(this.owner, "(unknown: " + explain(e, false).title + ")");
    }
  }

  // form is the decision: a reason (and, with auth off, who decides) and
  // the two buttons.
  form() {
    const reason = h("input", { type: "text", name: "reason", autocomplete: "off", class: "reason" });
    const who = this.me.auth === "off" ? "" : ` as ${this.me.name}`;
    const parts = [field("Reason", reason, `Recorded in the audit log with your decision${who}; required to reject.`)];
    let actor = null;
    if (this.me.auth === "off") {
      actor = h("input", { type: "text", name: "actor", autocomplete: "name", required: true, value: sessionStorage.getItem("intentd.actor") || "" });
      parts.unshift(field("Your name (actor)", actor, "Auth is off, so the console cannot tell who you are."));
    }
    const approve = h("button", { type: "submit", class: "primary approve", value: "approve" }, "Approve");
    const reject = h("button", { type: "submit", class: "danger reject", value: "reject" }, "Reject");
    const form = h("form", { class: "decide", "aria-label": `Decide on ${this.key}` }, ...parts, h("div", { class: "actions" }, approve, reject));
    this.buttons = [approve, reject];
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const which = ev.submitter ? ev.submitter.value : "approve";
      this.decide(which === "approve", reason, actor);
    });
    return form;
  }

  async decide(approve, reasonInput, actorInput) {
    const reason = reasonInput.value.trim();
    const actor = actorInput ? actorInput.value.trim() : this.me.name;
    if (!approve && !reason) {
      clear(this.result, notice("bad", "A rejection needs a reason", "Say why, for the agent's owner and the audit log."));
      reasonInput.focus();
      return;
    }
    if (!actor) {
      clear(this.result, notice("bad", "Say who you are", "With auth off the actor is the name you type."));
      actorInput.focus();
      return;
    }
    if (actorInput) sessionStorage.setItem("intentd.actor", actor);
    for (const b of this.buttons) b.disabled = true;
    clear(this.result, h("p", { class: "muted" }, approve ? "Approving…" : "Rejecting…"));
    try {
      const answer = await post(intentPath(this.key, approve ? "approve" : "reject"),
        { actor, reason, fingerprint: this.fingerprint });
      const it = answer.intent;
      clear(this.approvals, approvalsText(it));
      if (it.state === "approved") {
        clear(this.result, notice("ok", "Approved", `${approvalsText(it)}. The agent's next claim is granted.`));
      } else if (it.state === "rejected") {
        clear(this.result, notice("ok", "Rejected", `The agent's claims of ${this.key} are refused from now on.`));
      } else {
        clear(this.result, notice("ok", "Your approval is recorded", `${approvalsText(it)}; the intent waits for the others.`));
      }
      this.decided = true;
      this.el.classList.add("done");
      announce(approve ? `Approval of ${this.key} recorded` : `${this.key} rejected`);
    } catch (e) {
      const x = explain(e, true);
      clear(this.result, notice(x.kind, x.title, x.text));
      for (const b of this.buttons) b.disabled = false;
      announce(x.title);
    }
  }

  // update takes the intent as it now stands. The payload shown never
  // changes under the person: a new fingerprint is pointed out instead.
  update(it) {
    this.el.classList.remove("gone");
    if (!this.decided) {
      this.el.classList.remove("done");
      clear(this.approvals, approvalsText(it));
    }
    if (it.fingerprint !== this.fingerprint) {
      this.el.classList.add("stale");
      clear(this.change, notice("warn", "The payload changed after this page showed it",
        `The intent now has fingerprint ${it.fingerprint}. A decision on this card carries the fingerprint you reviewed above, so the ledger will refuse it. Reload the page to review the new payload.`));
    } else {
      this.el.classList.remove("stale");
      clear(this.change);
    }
  }

  // gone: the intent no longer waits for approval (decided elsewhere,
  // purged). The card stays, so nothing vanishes while someone reads it.
  gone() {
    if (this.decided || this.el.classList.contains("gone")) return;
    this.el.classList.add("gone", "done");
    clear(this.change, notice("info", "No longer waiting for approval",
      "Someone decided, or the intent is gone. Reload to see the queue as it stands."));
  }
}
