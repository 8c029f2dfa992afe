// Intents: search the namespace by key prefix and state, a page at a
// time. The form is an ordinary GET form, so every search is a URL.

import { get } from "../api.js";
import { h, clear, field, notice, badge, table, when, intentLink } from "../dom.js";

export const title = "Intents";

const states = ["", "pending_approval", "approved", "rejected", "declared", "executed", "committed", "failed", "in_doubt"];
const pageSizes = ["25", "50", "100", "200"];

export async function render({ me, main, params, can }) {
  if (!can("reader")) {
    clear(main, h("h1", {}, title), notice("bad", "This key may not read intents",
      `Key ${me.name} has roles ${me.roles.join(", ")}; this page needs reader.`));
    return;
  }
  const prefix = params.get("prefix") || "";
  const state = states.includes(params.get("state") || "") ? params.get("state") || "" : "";
  const limit = pageSizes.includes(params.get("limit")) ? params.get("limit") : "50";
  const cursor = params.get("cursor") || "";

  const form = h("form", { method: "get", action: "/ui/intents", class: "row", role: "search", "aria-label": "Search intents" },
    field("Key prefix", h("input", { type: "search", name: "prefix", value: prefix, autocomplete: "off", spellcheck: "false" })),
    field("State", h("select", { name: "state" }, states.map((s) => h("option", { value: s, selected: s === state }, s === "" ? "any state" : s.replaceAll("_", " "))))),
    field("Per page", h("select", { name: "limit" }, pageSizes.map((n) => h("option", { value: n, selected: n === limit }, n)))),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Search")));
  const out = h("div", { id: "results" }, h("p", { class: "muted" }, "Loading…"));
  clear(main, h("h1", {}, "Intents"), form, out);

  const q = new URLSearchParams({ limit });
  if (prefix) q.set("prefix", prefix);
  if (state) q.set("state", state);
  if (cursor) q.set("cursor", cursor);
  const page = await get("/v1/intents?" + q.toString());
  const rows = (page.intents || []).map((it) => h("tr", {},
    h("td", {}, intentLink(it.key)),
    h("td", {}, badge(it.state)),
    h("td", {}, it.tool),
    h("td", {}, it.owner || ""),
    h("td", { class: "mono" }, String(it.fencing_token || "")),
    h("td", {}, when(it.updated_at))));
  const here = new URLSearchParams(params);
  here.delete("cursor");
  const next = new URLSearchParams(here);
  if (page.next_cursor) next.set("cursor", page.next_cursor);
  clear(out,
    rows.length === 0 ? h("p", {}, "No intent matches.") :
      table(`Intents of namespace ${me.namespace}` + (prefix ? ` whose key starts with ${prefix}` : "") + (state ? ` in state ${state}` : ""),
        ["Key", "State", "Tool", "Owner", "Fencing token", "Updated"], rows),
    h("nav", { class: "pager", "aria-label": "Pages of results" },
      cursor ? h("a", { href: "/ui/intents?" + here.toString() }, "First page") : null,
      page.next_cursor ? h("a", { href: "/ui/intents?" + next.toString(), rel: "next" }, "Next page") : null));
}
