// The start page: who the key is, what it may do here, what its
// namespace holds against its quota (GET /v1/namespaces/{ns}/usage), and
// the pages.

import { get, explain } from "../api.js";
import { h, clear, facts, notice } from "../dom.js";

export const title = "Overview";

export async function render({ me, main, can }) {
  const may = [
    [can("reader"), "read intents, their audit trails and the namespace's audit log"],
    [can("approver"), "approve and reject intents waiting for approval"],
    [can("resolve"), "resolve in_doubt intents (executed or failed)"],
    [can("admin"), "edit policies"],
  ];
  const pages = [
    ["/ui/approvals", "Approvals", "intents waiting for a person's decision, live"],
    ["/ui/in-doubt", "In doubt", "intents whose lease passed without a report: check the tool, then resolve"],
    ["/ui/intents", "Intents", "search by key prefix and state; each intent's timeline"],
    ["/ui/audit", "Audit log", "the namespace's hash-chained log, verified in this browser, and its export"],
    ["/ui/cluster", "Cluster", "nodes, leader, indexes, and the policies"],
  ];
  clear(main,
    h("h1", {}, "intentd console"),
    h("p", {}, me.auth === "off"
      ? `Auth is off: you act in namespace ${me.namespace} with every role.`
      : `Signed in as ${me.name}, in namespace ${me.namespace}, with roles ${me.roles.join(", ")}.`),
    h("h2", {}, "What this key may do"),
    h("ul", { id: "may" }, may.map(([yes, what]) => h("li", { class: yes ? "" : "muted" }, (yes ? "May " : "May not ") + what))),
    h("h2", {}, "Usage"),
    h("div", { id: "usage" }, h("p", { class: "muted" }, can("reader") ? "Loading…" : "Reading the namespace's usage needs the reader role.")),
    h("h2", {}, "Pages"),
    h("ul", {}, pages.map(([href, name, what]) => h("li", {}, h("a", { href }, name), ": ", what))));
  if (can("reader")) await drawUsage(main.querySelector("#usage"), me.namespace);
}

// drawUsage shows what namespace ns holds, next to its quota if it has
// one.
async function drawUsage(el, ns) {
  let u;
  try {
    u = await get(`/v1/namespaces/${encodeURIComponent(ns)}/usage`);
  } catch (e) {
    const x = explain(e, false);
    clear(el, notice(x.kind, x.title, x.text));
    return;
  }
  const q = u.quota || {};
  const st = u.by_state || {};
  const of = (n, max) => (max ? `${n} of ${max} (${Math.floor((100 * n) / max)}%)` : String(n));
  clear(el, facts([
    ["Namespace", u.namespace],
    ["Intents", of(u.intents, q.max_intents)],
    ["Stored bytes (keys, payloads, results)", String(u.bytes)],
    ["In doubt", String(st.in_doubt || 0)],
    ["Pending approval", String(st.pending_approval || 0)],
    ["Claims per second", q.claims_per_second ? `${q.claims_per_second}, burst ${q.burst || 1}` : "no quota"],
  ]));
}
