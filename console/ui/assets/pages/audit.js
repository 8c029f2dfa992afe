// Audit log: the namespace's hash-chained log, a page at a time, verified
// in this browser from the anchor to the last event (WebCrypto SHA-256 over
// each event's bytes as received, and the prev links), and exported as
// JSON lines that `intentctl audit verify FILE` checks offline.

import { call, get, explain } from "../api.js";
import { h, clear, notice, statusBadge, isRefusal, table, short, intentLink, announce } from "../dom.js";
import { raw } from "../json.js";
import { verifyLog, hasWebCrypto, ChainBroken } from "../chain.js";

export const title = "Audit log";

const pageSize = 100;

// atOf renders an event's time (Unix nanoseconds) as local time.
function atOf(ev) {
  const ns = Number(raw(ev, "at") || 0);
  if (!ns) return "";
  const d = new Date(ns / 1e6);
  return h("time", { datetime: d.toISOString(), title: d.toISOString() }, d.toLocaleString());
}

export async function render({ me, main, params, can }) {
  if (!can("reader")) {
    clear(main, h("h1", {}, title), notice("bad", "This key may not read the audit log",
      `Key ${me.name} has roles ${me.roles.join(", ")}; the audit log needs reader.`));
    return;
  }
  const verdict = h("div", { id: "chain-verdict", role: "status", "aria-live": "polite" });
  const verifyButton = h("button", { type: "button", id: "verify" }, "Verify again");
  const exportButton = h("button", { type: "button", id: "export" }, "Export JSON lines");
  const exportStatus = h("span", { class: "muted small", role: "status" });
  const headLine = h("p", { id: "audit-head" });
  const out = h("div", { id: "audit-page" }, h("p", { class: "muted" }, "Loading…"));
  clear(main,
    h("h1", {}, "Audit log"),
    h("p", { class: "muted" }, "Every attempt on every key of the namespace, in order. Each event carries the SHA-256 of the one " +
      "before it, so no event can be changed, removed or reordered without breaking the chain. This page checks the whole " +
      "retained chain in your browser; an auditor checks an export offline with intentctl audit verify FILE."),
    headLine,
    verdict,
    h("div", { class: "actions" }, verifyButton, exportButton, exportStatus),
    out);

  async function verify() {
    verifyButton.disabled = true;
    if (!hasWebCrypto()) {
      clear(verdict, notice("warn", "This browser cannot verify here",
        "WebCrypto (SHA-256) is offered only to pages loaded over HTTPS or from localhost. Serve the API with TLS, or export the log and run intentctl audit verify FILE."));
      verifyButton.disabled = false;
      return;
    }
    clear(verdict, notice("info", "Verifying the chain…", "Reading the log from its first retained event."));
    try {
      const r = await verifyLog((done, total) => {
        clear(verdict, notice("info", "Verifying the chain…", `${done} of about ${total} events checked.`));
      });
      if (r.count === 0) {
        clear(verdict, notice("ok", "Nothing to verify yet", `Namespace ${r.head.namespace} has no events.`));
      } else {
        const anchored = /^0+$/.test(r.head.anchor) ? "from the start of the log" : `from the anchor ${r.head.anchor} (${r.head.dropped} older events were dropped by retention)`;
        clear(verdict, notice("ok", `Chain intact from seq ${r.first} to ${r.last}`,
          `${r.count} events verified ${anchored}: each event's SHA-256 matches its recorded hash and each links to the one before. Head hash ${r.head.last_hash}.`));
      }
      announce(`Chain intact from seq ${r.first} to ${r.last}`);
    } catch (e) {
      if (e instanceof ChainBroken) {
        clear(verdict, notice("bad", e.seq === null ? "Chain broken" : `Chain broken at seq ${e.seq}`,
          `The first broken link: ${e.reason}. Events before it verified; nothing from this point on can be trusted. Export the log and keep it as evidence.`));
        announce(e.seq === null ? "Chain broken" : `Chain broken at seq ${e.seq}`);
      } else {
        const x = explain(e, false);
        clear(verdict, notice(x.kind, `Could not verify: ${x.title}`, x.text));
      }
    }
    verifyButton.disabled = false;
  }
  verifyButton.addEventListener("click", verify);

  exportButton.addEventListener("click", async () => {
    exportButton.disabled = true;
    exportStatus.textContent = "Exporting…";
    try {
      // The server's export: {"head":...} then one event per line, each
      // event's bytes exactly as hashed (a plain link could not send the
      // API key, so the page fetches it and saves it).
      const r = await call("GET", "/v1/audit?format=jsonl", { rawText: true, timeoutMs: 0 });
      const lines = r.text.split("\n").filter((l) => l !== "").length - 1;
      const blob = new Blob([r.text], { type: "application/jsonl" });
      const a = h("a", { href: URL.createObjectURL(blob), download: `audit-${me.namespace}.jsonl`, id: "export-link" }, `audit-${me.namespace}.jsonl`);
      clear(exportStatus, `${lines} events: `, a, " (verify it offline with intentctl audit verify FILE)");
      a.click();
    } catch (e) {
      exportStatus.textContent = `Could not export: ${explain(e, false).text}`;
    }
    exportButton.disabled = false;
  });

  const since = params.get("since") || "0";
  const page = await get(`/v1/audit?since=${encodeURIComponent(since)}&limit=${pageSize}`);
  const head = page.head;
  clear(headLine, `Namespace ${head.namespace}: events ${head.first_seq || 0} to ${head.last_seq}`,
    head.dropped ? ` (${head.dropped} older dropped by retention)` : "", ". Head hash ", short(head.last_hash, 16), ".");
  const rows = (page.events || []).map((r) => {
    const ev = r.event;
    return h("tr", { "data-seq": r.seq, "data-status": ev.status || "", class: isRefusal(ev.status) ? "refused" : null },
      h("td", { class: "mono" }, String(r.seq)),
      h("td", {}, short(r.hash)),
      h("td", {}, atOf(ev)),
      h("td", {}, ev.op),
      h("td", {}, statusBadge(ev.status || "")),
      h("td", {}, ev.key ? intentLink(ev.key) : ""),
      h("td", {}, ev.actor || ev.owner || ""),
      h("td", {}, ev.reason || ""));
  });
  const nav = h("nav", { class: "pager", "aria-label": "Pages of the audit log" });
  if (Number(since) > head.first_seq) nav.append(h("a", { href: "/ui/audit" }, "First page"));
  if (page.next) nav.append(h("a", { href: `/ui/audit?since=${page.next}`, rel: "next" }, "Next page"));
  if (head.last_seq > pageSize) nav.append(h("a", { href: `/ui/audit?since=${head.last_seq - pageSize + 1}` }, "Latest events"));
  clear(out, rows.length ? table(`Audit events of namespace ${head.namespace}`, ["Seq", "Hash", "At", "Op", "Status", "Key", "Actor or owner", "Reason"], rows)
    : h("p", {}, "No events here."), nav);
  await verify();
}
