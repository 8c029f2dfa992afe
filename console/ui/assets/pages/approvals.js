// Approvals: every pending_approval intent of the namespace, newest
// first, kept live. Approve and Reject send the fingerprint of the payload
// this page showed: if the intent's payload is another one by then, the
// ledger refuses (422 divergent) and the card says so.
//
// A card always shows its intent as it now stands (pending, approved,
// granted, rejected, resolved, purged): every live update re-renders it
// from the intent, and its controls are only the ones the signed-in key
// may use now. The ledger stays the authority: a control the page offers
// may still be refused, and the card then says why.

import { get, post, listAll, intentPath, explain, Problem } from "../api.js";
import { h, clear, field, notice, badge, facts, when, age, intentLink, announce, uid, diffView } from "../dom.js";
import { raw, pretty } from "../json.js";
import { follow } from "../live.js";

export const title = "Approvals";

const byNewest = (a, b) => new Date(b.created_at) - new Date(a.created_at);

// payloadText is an intent's payload as the card shows it: the canonical
// JSON the ledger stores, indented.
const payloadText = (it) => {
  const payload = raw(it, "payload");
  return payload === undefined ? "(none)" : pretty(payload);
};

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
  const policies = new Map();

  async function refresh() {
    const [pending, pols] = await Promise.all([listAll("pending_approval"), get("/v1/policies").catch(() => null)]);
    if (pols) {
      policies.clear();
      for (const p of pols.policies || []) policies.set(p.name, p);
    }
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
    // A card whose intent left the queue (decided here or elsewhere,
    // granted, resolved, purged) is re-rendered from the intent as it now
    // stands, so it never shows a state or a control that is over.
    await Promise.all([...cards.values()].filter((c) => !seen.has(c.key)).map((c) => c.reload()));
    for (const c of fresh) c.loadOwner();
    // New cards go on top (newest first); cards already shown stay where
    // they are, so nothing moves under the person's keyboard or pointer.
    list.prepend(...fresh.map((c) => c.el));
    const over = cards.size - intents.length;
    clear(count, intents.length === 0
      ? `Nothing waits for approval in namespace ${me.namespace}` +
        (over ? ` (the ${over === 1 ? "card below was" : `${over} cards below were`} decided since this page opened).` : ".")
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

// approversOf is the policy's approvers ([] when any approver may decide,
// or the policy is not known to the page).
function approversOf(pol) {
  return pol && Array.isArray(pol.approvers) ? pol.approvers : [];
}

// stateNote says where an intent that no longer waits for approval stands:
// [kind, title, text], or null while it waits.
function stateNote(it) {
  const a = approvalsText(it);
  switch (it.state) {
    case "pending_approval": return null;
    case "approved": return ["ok", "Approved", `${a}. The agent's next claim is granted; nothing is left to decide.`];
    case "rejected": return ["bad", "Rejected", `The agent's claims of ${it.key} are refused from now on; nothing is left to decide.`];
    case "declared": return ["ok", "Approved and granted", `The agent's claim was granted (owner ${it.owner || "?"}, fencing token ${it.fencing_token}); nothing is left to decide.`];
    case "executed": case "committed": return ["ok", `Approved, granted and ${it.state}`, `The tool reported it executed${it.state === "committed" ? " and the agent acknowledged the result" : ""}; nothing is left to decide.`];
    case "failed": return ["warn", "Approved and granted; the tool reported it failed", "Nothing is left to decide on this claim."];
    case "in_doubt": return ["warn", "Approved and granted; now in doubt", "Its lease passed without a report: it waits on the in_doubt queue, not here."];
    default: return ["info", `Now ${String(it.state).replaceAll("_", " ")}`, "Nothing is left to decide here."];
  }
}

// Card is one pending intent (the intent's own page shows one too). The
// payload it shows is the one the person reviews: it never changes under
// them (a new payload is pointed out, and shown only when they ask).
export class Card {
  constructor(it, policies, me, decide) {
    this.key = it.key;
    this.me = me;
    this.policies = policies; // a live map: the page refreshes it
    this.canDecide = decide;
    this.it = it;
    this.final = false; // purged: nothing more can happen to this card
    this.resultVersion = -1; // the intent version the result notice was about
    const hid = uid("card");
    this.badge = h("span", { class: "state" });
    this.approvals = h("dd", { class: "approvals" });
    this.approversFact = h("span", { class: "approvers" });
    this.owner = h("span", { class: "owner" }, it.owner || "…");
    this.payloadBox = h("pre", { class: "json payload", tabindex: 0, "aria-label": `Payload of ${it.key}` });
    this.diffBox = h("div", { class: "payload-diff" });
    this.fp = h("code", { class: "fp" });
    this.covers = h("p", { class: "muted small covers" });
    this.stateBox = h("div", { class: "state-note", role: "status" });
    this.change = h("div", { class: "change", role: "status" });
    this.controls = h("div", { class: "controls" });
    this.result = h("div", { class: "result", role: "status", "aria-live": "polite" });
    this.el = h("article", { class: "card", "aria-labelledby": hid, "data-key": it.key },
      h("header", {}, h("h3", { id: hid }, intentLink(it.key)), this.badge),
      facts([
        ["Tool", it.tool],
        ["Owner", this.owner],
        ["Claimed by key", it.principal],
        ["Policy", it.policy ? `${it.policy} (version ${it.policy_version})` : ""],
        ["Approvers", this.approversFact],
        ["Waiting since", it.created_at ? h("span", {}, when(it.created_at), ` (${age(it.created_at)})`) : ""],
      ]),
      h("dl", { class: "facts" }, h("dt", {}, "Approvals"), this.approvals),
      this.stateBox,
      h("h4", { class: "small" }, "Payload"),
      this.covers,
      this.payloadBox,
      this.diffBox,
      h("p", { class: "small" }, "Fingerprint of the tool and the payload ", this.fp),
      this.change,
      this.controls,
      this.result);
    if (decide) this.buildForm();
    this.show(it);
    this.update(it);
  }

  // show puts a payload on the card: the one the person reviews, and the
  // fingerprint a decision carries.
  show(it) {
    this.fingerprint = it.fingerprint;
    this.el.dataset.fingerprint = it.fingerprint;
    const text = payloadText(it);
    // Shown after "Show the new payload": what changed from the payload
    // the person reviewed before.
    const before = this.shownText;
    this.shownText = text;
    clear(this.payloadBox, text);
    if (this.diffBox) {
      clear(this.diffBox, before !== undefined && before !== text ?
        [h("p", { class: "diff-title" }, "Changes from the payload you reviewed before:"), diffView(before, text)] : null);
    }
    clear(this.fp, it.fingerprint);
    clear(this.covers, `The fingerprint covers the tool (${it.tool}) and this payload as the ledger stores them: ` +
      "canonical JSON (RFC 8785: keys sorted, numbers in their shortest form), indented here, never re-encoded.");
    // A payload with long lines takes the card the whole width of the
    // queue, so the approver reads it whole; it wraps on a narrow screen.
    this.el.classList.toggle("wide", text.split("\n").some((l) => l.length > 56));
  }

  // loadOwner shows who asked: a pending intent has no owner yet (it gets
  // one with its grant), its trail's claims name it.
  async loadOwner() {
    if (this.it.owner) return;
    try {
      const trail = await get(intentPath(this.key, "audit"));
      const asked = (trail.events || []).filter((ev) => ev.op === "claim" && ev.owner).pop();
      if (!this.it.owner) clear(this.owner, asked ? asked.owner : "(not recorded)");
    } catch (e) {
      clear(this.owner, "(unknown: " + explain(e, false).title + ")");
    }
  }

  // reload reads the intent as it now stands and re-renders the card (a
  // 404 means the ledger purged it).
  async reload() {
    if (this.final) return;
    try {
      this.update(await get(intentPath(this.key)));
    } catch (e) {
      if (e instanceof Problem && e.status === 404) this.purged();
      // Anything else: the next live update tries again.
    }
  }

  // mayAct says which decisions the signed-in key may make on it now, and
  // why not the others (the checks the ledger makes, in its words).
  mayAct(it) {
    const none = { approve: false, reject: false, why: [] };
    if (!this.canDecide || it.state !== "pending_approval" || it.fingerprint !== this.fingerprint) return none;
    if (this.me.auth === "off") return { approve: true, reject: true, why: [] }; // the actor is typed
    const pol = this.policies.get(it.policy);
    const approvers = approversOf(pol);
    const me = this.me.name;
    if (approvers.length && !approvers.includes(me)) {
      return { approve: false, reject: false, why: [`You are not an approver of policy ${it.policy} (its approvers: ${approvers.join(", ")}): ` +
        "the ledger refuses your approval or rejection (not_an_approver)."] };
    }
    if ((it.approvals || []).some((a) => a.actor === me)) {
      return { approve: false, reject: true, why: ["You already approved this intent; you may still reject it."] };
    }
    if (it.principal && it.principal === me && !(pol && pol.allow_self_approval)) {
      return { approve: false, reject: true, why: [`You claimed this intent: policy ${it.policy} does not set allow_self_approval, ` +
        "so the ledger refuses your approval (self_approval). You may reject it."] };
    }
    return { approve: true, reject: true, why: [] };
  }

  // buildForm makes the decision form once (a reason and, with auth off,
  // who decides); drawControls puts the buttons the key may use in it.
  buildForm() {
    this.reason = h("input", { type: "text", name: "reason", autocomplete: "off", class: "reason" });
    const who = this.me.auth === "off" ? "" : ` as ${this.me.name}`;
    const parts = [field("Reason", this.reason, `Recorded in the audit log with your decision${who}; required to reject.`)];
    this.actor = null;
    if (this.me.auth === "off") {
      this.actor = h("input", { type: "text", name: "actor", autocomplete: "name", required: true, value: sessionStorage.getItem("intentd.actor") || "" });
      parts.unshift(field("Your name (actor)", this.actor, "Auth is off, so the console cannot tell who you are."));
    }
    this.actions = h("div", { class: "actions" });
    this.form = h("form", { class: "decide", "aria-label": `Decide on ${this.key}` }, ...parts, this.actions);
    this.form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const buttons = [...this.actions.querySelectorAll("button")];
      if (!buttons.length || buttons.some((b) => b.disabled)) return;
      const which = ev.submitter ? ev.submitter.value : buttons[0].value;
      this.decide(which === "approve");
    });
    this.drawn = "";
  }

  drawControls(it) {
    if (!this.form) return;
    const may = this.mayAct(it);
    const sig = `${may.approve}/${may.reject}/${may.why.join("|")}`;
    if (sig === this.drawn) return; // unchanged: leave what the person is typing alone
    this.drawn = sig;
    const focused = this.el.contains(document.activeElement) ? document.activeElement : null;
    const buttons = [];
    if (may.approve) buttons.push(h("button", { type: "submit", class: "primary approve", value: "approve" }, "Approve"));
    if (may.reject) buttons.push(h("button", { type: "submit", class: "danger reject", value: "reject" }, "Reject"));
    clear(this.actions, buttons);
    const why = may.why.length ? h("p", { class: "why-not small" }, may.why.join(" ")) : null;
    if (buttons.length) clear(this.controls, why, this.form);
    else clear(this.controls, why);
    if (focused && !this.el.contains(focused)) this.el.querySelector("h3 a").focus();
  }

  async decide(approve) {
    const reasonInput = this.reason;
    const actorInput = this.actor;
    const reason = reasonInput.value.trim();
    const actor = actorInput ? actorInput.value.trim() : this.me.name;
    if (!approve && !reason) {
      this.say(notice("bad", "A rejection needs a reason", "Say why, for the agent's owner and the audit log."));
      reasonInput.focus();
      return;
    }
    if (!actor) {
      this.say(notice("bad", "Say who you are", "With auth off the actor is the name you type."));
      actorInput.focus();
      return;
    }
    if (actorInput) sessionStorage.setItem("intentd.actor", actor);
    const buttons = [...this.actions.querySelectorAll("button")];
    for (const b of buttons) b.disabled = true;
    this.say(h("p", { class: "muted" }, approve ? "Approving…" : "Rejecting…"));
    try {
      const answer = await post(intentPath(this.key, approve ? "approve" : "reject"),
        { actor, reason, fingerprint: this.fingerprint });
      const it = answer.intent;
      if (it.state === "approved") {
        this.say(notice("ok", "Approved", `${approvalsText(it)}. The agent's next claim is granted.`), it);
      } else if (it.state === "rejected") {
        this.say(notice("ok", "Rejected", `The agent's claims of ${this.key} are refused from now on.`), it);
      } else {
        this.say(notice("ok", "Your approval is recorded", `${approvalsText(it)}; the intent waits for the others.`), it);
      }
      reasonInput.value = "";
      this.update(it);
      for (const b of this.actions.querySelectorAll("button")) b.disabled = false; // still offered (auth off)
      announce(approve ? `Approval of ${this.key} recorded` : `${this.key} rejected`);
    } catch (e) {
      const x = explain(e, true);
      const now = e instanceof Problem && e.body && e.body.intent && typeof e.body.intent === "object" ? e.body.intent : null;
      this.say(notice(x.kind, x.title, x.text), now);
      for (const b of buttons) b.disabled = false;
      // A refusal carries the intent as it stands: the card follows it
      // (a decision made elsewhere, a new payload) and drops what is over.
      if (now && now.key === this.key) this.update(now);
      announce(x.title);
    }
  }

  // say shows the answer to the person's own decision; it stays until the
  // intent changes after it (it is about that version).
  say(content, it) {
    clear(this.result, content);
    this.resultVersion = it ? it.version : (this.it ? this.it.version : -1);
  }

  // update re-renders the card from the intent as it now stands. The
  // payload shown never changes under the person: a new fingerprint is
  // pointed out instead.
  update(it) {
    if (this.final && it.version !== undefined) this.final = false; // claimed again after a purge
    this.it = it;
    this.el.dataset.state = it.state;
    this.el.classList.remove("gone");
    clear(this.badge, badge(it.state));
    clear(this.approvals, approvalsText(it));
    const pol = this.policies.get(it.policy);
    clear(this.approversFact, !pol ? "" : approversOf(pol).length ? approversOf(pol).join(", ") : "any key with the approver role");
    if (it.owner) clear(this.owner, it.owner);
    if (this.resultVersion >= 0 && it.version > this.resultVersion) clear(this.result); // about an older version
    const note = stateNote(it);
    clear(this.stateBox, note ? notice(note[0], note[1], note[2]) : null);
    this.el.classList.toggle("done", it.state !== "pending_approval");
    if (it.fingerprint !== this.fingerprint) {
      // Warned once per new fingerprint (a live update does not redraw
      // the button under the person's pointer or keyboard).
      if (this.warned !== it.fingerprint) {
        this.warned = it.fingerprint;
        this.el.classList.add("stale");
        const look = h("button", { type: "button", class: "show-new" }, "Show the new payload");
        look.addEventListener("click", () => {
          this.show(this.it);
          this.update(this.it);
          this.payloadBox.focus();
        });
        clear(this.change, notice("warn", "The payload changed after this page showed it",
          `The intent now has fingerprint ${it.fingerprint}: its state and approvals above are that payload's. The payload below ` +
          "is the one you reviewed, and the ledger refuses a decision on it. Review the new payload before deciding. What changed:",
          diffView(this.shownText, payloadText(it)), h("p", {}, look)));
      }
    } else {
      this.warned = "";
      this.el.classList.remove("stale");
      clear(this.change);
    }
    this.drawControls(it);
  }

  // purged: the ledger dropped the intent (decided, and its dedupe window
  // passed). The card stays, so nothing vanishes while someone reads it.
  purged() {
    this.final = true;
    this.el.dataset.state = "purged";
    this.el.classList.add("done", "gone");
    this.el.classList.remove("stale");
    this.warned = "";
    clear(this.badge, badge("purged"));
    clear(this.stateBox, notice("info", "Purged: the intent is gone",
      "It was decided and the ledger dropped it when its dedupe window passed; nothing is left to decide. A new claim of the key is a new intent."));
    clear(this.change);
    clear(this.result);
    clear(this.controls);
    this.drawn = "purged";
  }
}
