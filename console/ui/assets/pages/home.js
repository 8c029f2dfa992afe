// The start page: who the key is, what it may do here, and the pages.

import { h, clear } from "../dom.js";

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
    h("h2", {}, "Pages"),
    h("ul", {}, pages.map(([href, name, what]) => h("li", {}, h("a", { href }, name), ": ", what))));
}
