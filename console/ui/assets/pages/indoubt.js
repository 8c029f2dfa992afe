// In doubt: every in_doubt intent of the namespace (its lease passed
// without a report: the effect may or may not have happened), with what is
// known, and a Resolve form for whoever checked the tool's side.

import { get, post, listAll, intentPath, explain, Problem } from "../api.js";
import { h, clear, field, notice, badge, facts, when, age, intentLink, announce, uid } from "../dom.js";
import { raw, pretty, parse } from "../json.js";
import { follow } from "../live.js";

export const title = "In doubt";

const byLatest = (a, b) => new Date(b.updated_at) - new Date(a.updated_at);

export async function render(ctx) {
  const { me, main, can } = ctx;
  if (!can("reader")) {
    clear(main, h("h1", {}, title), notice("bad", "This key may not read intents",
      `Key ${me.name} has roles ${me.roles.join(", ")}; this page needs reader (or agent, approver, reconciler, admin).`));
    return;
  }
  const resolve = can("resolve");
  const status = h("p", { class: "live", id: "live-status" }, "Loading…");
  const count = h("p", { id: "in-doubt-count", role: "status" });
  const list = h("div", { class: "cards two", id: "in-doubt" });
  clear(main,
    h("h1", {}, "In doubt"),
    h("p", { class: "muted" }, "The lease of each of these passed without a report, so the effect may or may not have happened. " +
      "The ledger never grants them again by itself: check the tool's side (the provider's dashboard or log), then resolve."),
    h("div", { class: "toolbar" }, count, status),
    resolve ? null : notice("info", "You may look, not resolve",
      `Key ${me.name} (roles ${me.roles.join(", ")}) may not resolve: that needs approver or reconciler.`),
    list);

  const cards = new Map();
  async function refresh() {
    const page = await listAll("in_doubt");
    const intents = page.intents.slice().sort(byLatest);
    const seen = new Set(intents.map((it) => it.key));
    const fresh = [];
    for (const it of intents) {
      if (!cards.has(it.key)) {
        const c = new Card(it, me, resolve);
        cards.set(it.key, c);
        fresh.push(c);
      } else cards.get(it.key).update(it);
    }
    // A card whose intent left the queue (resolved here or elsewhere, its
    // holder's late report, purged) is re-rendered from the intent as it
    // now stands.
    await Promise.all([...cards.values()].filter((c) => !seen.has(c.key)).map((c) => c.reload()));
    list.prepend(...fresh.map((c) => c.el));
    const settled = cards.size - intents.length;
    clear(count, intents.length === 0 ? `Nothing is in doubt in namespace ${me.namespace}` +
      (settled ? ` (the ${settled === 1 ? "card below was" : `${settled} cards below were`} settled since this page opened).` : ".")
      : `${intents.length} in doubt in namespace ${me.namespace}` + (page.more ? " (the oldest are not shown)" : "") + ".");
    await Promise.all(fresh.map((c) => c.loadEvents()));
  }
  follow(refresh, status);
}

// Card is one in_doubt intent with its resolve form (the intent's own
// page shows one too).
export class Card {
  constructor(it, me, resolve) {
    this.key = it.key;
    this.me = me;
    this.it = it;
    this.final = false;
    this.canResolve = resolve;
    this.resultVersion = -1;
    const hid = uid("card");
    this.badge = h("span", { class: "state" }, badge(it.state));
    this.events = h("ol", { class: "timeline small" }, h("li", { class: "muted" }, "Loading the last events…"));
    this.note = h("div", { class: "state-note", role: "status" });
    this.result = h("div", { class: "result", role: "status", "aria-live": "polite" });
    const payload = raw(it, "payload");
    const text = payload === undefined ? "(none)" : pretty(payload);
    this.controls = h("div", { class: "controls" });
    this.el = h("article", { class: "card", "aria-labelledby": hid, "data-key": it.key, "data-state": it.state },
      h("header", {}, h("h3", { id: hid }, intentLink(it.key)), this.badge),
      facts([
        ["Tool", it.tool],
        ["Holder (owner)", it.owner],
        ["Claimed by key", it.principal],
        ["Fencing token", String(it.fencing_token)],
        ["Lease passed at", it.lease_deadline ? h("span", {}, when(it.lease_deadline), ` (${age(it.lease_deadline)})`) : ""],
        ["Generation", String(it.generation)],
        ["Policy", it.policy],
      ]),
      h("h4", { class: "small" }, "Payload"),
      h("pre", { class: "json payload", tabindex: 0, "aria-label": `Payload of ${it.key}` }, text),
      h("p", { class: "small" }, "Fingerprint of the tool and the payload ", h("code", { class: "fp" }, it.fingerprint)),
      h("h4", { class: "small" }, "Last events"),
      this.events,
      this.note,
      this.controls,
      this.result);
    this.el.classList.toggle("wide", text.split("\n").some((l) => l.length > 56));
    if (resolve) clear(this.controls, this.form());
  }

  async loadEvents() {
    try {
      const trail = await get(intentPath(this.key, "audit"));
      const last = (trail.events || []).slice(-5).reverse();
      clear(this.events, last.map((ev) => h("li", {},
        h("span", { class: "when" }, when(ev.at)), " ",
        `${ev.op} → ${ev.status}`,
        ev.owner ? ` · owner ${ev.owner}` : "", ev.actor ? ` · by ${ev.actor}` : "",
        ev.fencing_token ? ` · token ${ev.fencing_token}` : "", ev.reason ? ` · ${ev.reason}` : "")));
    } catch (e) {
      clear(this.events, h("li", {}, explain(e, false).title));
    }
  }

  form() {
    const name = uid("outcome");
    const executed = h("input", { type: "radio", name, value: "executed", id: uid("o") });
    const failed = h("input", { type: "radio", name, value: "failed", id: uid("o") });
    const outcome = h("fieldset", {}, h("legend", {}, "What happened at the tool"),
      h("div", {}, executed, h("label", { for: executed.id }, " Executed: the effect happened")),
      h("div", {}, failed, h("label", { for: failed.id }, " Failed: it did not happen (the key may be claimed again)")));
    const result = h("textarea", { name: "result", rows: 3, spellcheck: "false", placeholder: "{\"charge_id\": \"ch_…\"}" });
    const reason = h("input", { type: "text", name: "reason", autocomplete: "off", class: "reason" });
    const parts = [outcome,
      field("Result (JSON, optional, for executed)", result, "What the tool returned, as found on its side: the agent's retries get it as the recorded result."),
      field("Reason", reason, "What you checked; recorded in the audit log" + (this.me.auth === "off" ? "." : ` as ${this.me.name}.`))];
    let actor = null;
    if (this.me.auth === "off") {
      actor = h("input", { type: "text", name: "actor", autocomplete: "name", value: sessionStorage.getItem("intentd.actor") || "" });
      parts.unshift(field("Your name (actor)", actor, "Auth is off, so the console cannot tell who you are."));
    }
    this.button = h("button", { type: "submit", class: "primary resolve" }, "Resolve");
    const form = h("form", { class: "resolve", "aria-label": `Resolve ${this.key}` }, ...parts, h("div", { class: "actions" }, this.button));
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.resolve(executed.checked ? "executed" : failed.checked ? "failed" : "", result, reason, actor, executed);
    });
    return form;
  }

  async resolve(outcome, resultInput, reasonInput, actorInput, firstRadio) {
    const reason = reasonInput.value.trim();
    const actor = actorInput ? actorInput.value.trim() : this.me.name;
    const fail = (title, text, focus) => {
      clear(this.result, notice("bad", title, text));
      focus.focus();
    };
    if (!outcome) return fail("Choose what happened", "Executed or failed: check the tool's side first.", firstRadio);
    if (!reason) return fail("A resolve needs a reason", "Say what you checked.", reasonInput);
    if (actorInput && !actor) return fail("Say who you are", "With auth off the actor is the name you type.", actorInput);
    const resultText = resultInput.value.trim();
    if (resultText) {
      if (outcome !== "executed") return fail("A result goes with executed only", "Clear it, or choose executed.", resultInput);
      try {
        parse(resultText);
      } catch (e) {
        return fail("The result is not JSON", e.message, resultInput);
      }
    }
    if (actorInput) sessionStorage.setItem("intentd.actor", actor);
    // The result goes as the person typed it: its numbers are not
    // re-encoded by JavaScript.
    let json = JSON.stringify({ outcome, actor, reason });
    if (resultText) json = json.slice(0, -1) + ",\"result\":" + resultText + "}";
    this.button.disabled = true;
    clear(this.result, h("p", { class: "muted" }, "Resolving…"));
    try {
      const answer = await post(intentPath(this.key, "resolve"), json);
      clear(this.result, notice("ok", `Resolved: ${answer.intent.state}`,
        outcome === "executed" ? "Retries of this key now get the recorded result; nothing runs again."
          : "The key may be claimed again (a new generation)."));
      this.resultVersion = answer.intent.version;
      this.resolvedHere = true;
      this.update(answer.intent);
      announce(`${this.key} resolved as ${answer.intent.state}`);
    } catch (e) {
      const x = explain(e, true);
      clear(this.result, notice(x.kind, x.title, x.text));
      this.button.disabled = false;
      const now = e instanceof Problem && e.body && e.body.intent && typeof e.body.intent === "object" ? e.body.intent : null;
      this.resultVersion = now ? now.version : this.it.version;
      if (now && now.key === this.key) this.update(now);
      announce(x.title);
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
    }
  }

  // update re-renders the card from the intent as it now stands: once it
  // is no longer in doubt, the card says how it was settled and offers no
  // Resolve.
  update(it) {
    const was = this.it.state;
    this.it = it;
    this.el.dataset.state = it.state;
    clear(this.badge, badge(it.state));
    if (this.resultVersion >= 0 && it.version > this.resultVersion) {
      clear(this.result); // about an older version
      this.resolvedHere = false;
    }
    if (it.state === "in_doubt") {
      this.el.classList.remove("done");
      clear(this.note);
      if (this.canResolve && !this.controls.firstChild) clear(this.controls, this.form());
      return;
    }
    this.el.classList.add("done");
    clear(this.controls);
    const words = {
      executed: ["ok", "Resolved: executed", "Retries of this key get the recorded result; nothing runs again. Nothing is left to resolve."],
      committed: ["ok", "Resolved: executed (committed)", "Nothing is left to resolve."],
      failed: ["warn", "Resolved: failed", "The effect did not happen; the key may be claimed again. Nothing is left to resolve."],
    }[it.state] || ["info", `No longer in doubt: ${String(it.state).replaceAll("_", " ")}`, "Nothing is left to resolve here."];
    clear(this.note, this.resolvedHere ? null : notice(...words));
    if (was !== it.state) this.loadEvents(); // who settled it, and how
  }

  // purged: the ledger dropped the intent. The card stays, so nothing
  // vanishes while someone reads it.
  purged() {
    this.final = true;
    this.el.dataset.state = "purged";
    this.el.classList.add("done");
    clear(this.badge, badge("purged"));
    clear(this.controls);
    clear(this.note, notice("info", "Purged: the intent is gone", "It was settled and the ledger dropped it when its dedupe window passed; nothing is left to resolve."));
  }
}
