// Cluster: the answering node's view of the cluster (nodes, roles, the
// leader, term, indexes, readiness, the log entry version each node
// decodes) and the policies; an admin edits a policy with compare-and-set
// on its version.

import { get, call, explain } from "../api.js";
import { h, clear, field, notice, facts, table, badge } from "../dom.js";
import { parse, pretty, raw } from "../json.js";

export const title = "Cluster";

export async function render({ main, can }) {
  const status = h("div", { id: "cluster-status" }, h("p", { class: "muted" }, "Loading…"));
  const pol = h("div", { id: "policies" });
  clear(main, h("h1", {}, "Cluster"), status, h("h2", {}, "Policies"), pol);

  const st = await get("/v1/cluster");
  const rows = (st.nodes || []).map((n) => h("tr", {},
    h("td", {}, n.id),
    h("td", {}, n.leader ? badge("leader", "ok") : n.suffrage || "not a member"),
    h("td", {}, [n.region, n.role].filter(Boolean).join(", ")),
    h("td", {}, badge(n.gossip || "unknown", n.gossip === "alive" ? "ok" : "bad")),
    h("td", { class: "mono" }, n.http_addr || ""),
    h("td", { class: "mono" }, n.raft_addr || ""),
    h("td", {}, n.decodes ? `v${n.decodes}` : "")));
  clear(status,
    facts([
      ["Answering node", `${st.node_id} (${st.state})`],
      ["Ready", st.ready ? "yes: it knows a leader and has caught up" : "no"],
      ["Leader", st.leader_id ? `${st.leader_id} (${st.leader_http || "address unknown"})` + (st.leader_region ? `, region ${st.leader_region}` : "") : "none"],
      ["This node", [st.region && `region ${st.region}`, st.role, st.network && `${st.network} timings`].filter(Boolean).join(", ")],
      ["Term", String(st.term)],
      ["Commit / applied / last index", `${st.commit_index} / ${st.applied_index} / ${st.last_index}`],
    ]),
    table("Nodes as the answering node sees them", ["Node", "Raft role", "Region, role", "Gossip", "HTTP", "Raft", "Log encoding it decodes"], rows));

  if (!can("reader")) {
    clear(pol, h("p", { class: "muted" }, "Reading policies needs the reader role."));
    return;
  }
  await drawPolicies(pol, can("admin"));
}

async function drawPolicies(el, admin) {
  const list = await get("/v1/policies");
  const policies = list.policies || [];
  const rows = policies.map((p) => h("tr", {},
    h("td", {}, p.name),
    h("td", { class: "mono" }, String(p.version)),
    h("td", {}, (p.tools || []).join(", ") || (p.name === "default" ? "(everything else)" : "")),
    h("td", {}, p.blocked ? badge("blocked", "bad") : p.require_approval ? `${p.approvals_required || 1}` + (p.approvers && p.approvers.length ? ` of ${p.approvers.join(", ")}` : "") : "no"),
    h("td", {}, p.lease_ms ? `${p.lease_ms} ms` : ""),
    h("td", {}, p.dedupe_window_ms ? `${p.dedupe_window_ms} ms` : ""),
    admin ? h("td", {}, h("button", { type: "button", class: "edit", "aria-label": `Edit policy ${p.name}`, onclick: () => edit(el, p) }, "Edit")) : null));
  const headers = ["Name", "Version", "Tools", "Approval", "Lease", "Dedupe window"];
  if (admin) headers.push("Edit");
  clear(el,
    table("Policies, in matching order", headers, rows),
    admin ? h("div", { class: "actions" }, h("button", { type: "button", id: "new-policy", onclick: () => edit(el, null) }, "New policy")) : h("p", { class: "muted small" }, "Only an admin key edits policies."),
    h("div", { id: "policy-editor" }));
}

// edit opens the editor for p (null: a new policy). The save is a
// compare-and-set: it carries the version the editor was opened at, and
// the ledger refuses it if someone changed the policy meanwhile.
function edit(el, p) {
  const editor = el.querySelector("#policy-editor");
  const name = h("input", { type: "text", name: "name", value: p ? p.name : "", readonly: !!p, autocomplete: "off", spellcheck: "false" });
  let body = "{\n  \"tools\": [\"payments.*\"],\n  \"require_approval\": true,\n  \"approvals_required\": 2\n}";
  if (p) {
    // The policy as stored, without the fields the ledger sets.
    const fields = Object.keys(p).filter((k) => k !== "name" && k !== "version");
    const kept = fields.map((k) => JSON.stringify(k) + ":" + raw(p, k)).join(",");
    body = pretty("{" + kept + "}");
  }
  const text = h("textarea", { name: "policy", rows: 12, spellcheck: "false", value: body });
  const result = h("div", { role: "status", "aria-live": "polite" });
  const form = h("form", { "aria-label": p ? `Edit policy ${p.name}` : "New policy" },
    h("h3", {}, p ? `Edit policy ${p.name} (version ${p.version})` : "New policy"),
    field("Name", name),
    field("Policy (JSON)", text, "tools, priority, require_approval, approvals_required, approvers, allow_self_approval, blocked, lease_ms, dedupe_window_ms, token_ttl_ms, max_payload_bytes. Saving replaces the whole policy."),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Save"), h("button", { type: "button", onclick: () => clear(editor) }, "Cancel")),
    result);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const n = name.value.trim();
    if (!n) {
      clear(result, notice("bad", "A policy needs a name", ""));
      name.focus();
      return;
    }
    let doc;
    try {
      doc = parse(text.value);
    } catch (e) {
      clear(result, notice("bad", "The policy is not JSON", e.message));
      text.focus();
      return;
    }
    if (!doc || typeof doc !== "object" || Array.isArray(doc)) {
      clear(result, notice("bad", "The policy must be a JSON object", ""));
      text.focus();
      return;
    }
    const expect = p ? p.version : 0;
    const json = text.value.trim().replace(/\}\s*$/, "") + (Object.keys(doc).length ? "," : "") + `"expect_version":${expect}}`;
    try {
      const r = await call("PUT", "/v1/policies/" + encodeURIComponent(n), { body: json });
      clear(result, notice("ok", `Saved: ${n} is now version ${r.data.policy.version}`, ""));
      await drawPolicies(el, true);
      el.querySelector("#policy-editor").append(notice("ok", `Saved: ${n} is now version ${r.data.policy.version}`, ""));
    } catch (e) {
      const x = explain(e, true);
      if (e.code === "version_mismatch") {
        x.title = "Not saved: someone changed the policy since you opened it";
        x.text = `${e.message}. Cancel, read it again and redo your change.`;
      }
      clear(result, notice(x.kind, x.title, x.text));
    }
  });
  clear(editor, form);
  (p ? text : name).focus();
}
