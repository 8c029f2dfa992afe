// DOM helpers. Every text reaches the page through textContent or an
// attribute, never as markup, so nothing an agent put in a payload, key or
// reason can run in the console.

let ids = 0;

// uid returns a fresh element id with the given prefix (for label/for and
// aria-describedby pairs).
export function uid(prefix = "c") {
  ids += 1;
  return `${prefix}-${ids}`;
}

// h makes an element: h("p", {class: "muted"}, "text", child, ...). An
// attribute whose value is false, null or undefined is left out; "on*"
// attributes with a function value become event listeners; children may be
// strings, numbers, nodes, arrays of them, or null (skipped).
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith("on") && typeof v === "function") {
      el.addEventListener(k.slice(2), v);
    } else if (k === "value" && "value" in el) {
      el.value = v;
    } else if (v === true) {
      el.setAttribute(k, "");
    } else {
      el.setAttribute(k, String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

// clear empties el and fills it with children.
export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// field is a labelled control: the label, an optional hint tied to the
// control with aria-describedby, and the control itself.
export function field(labelText, control, hint) {
  const id = control.id || uid("f");
  control.id = id;
  const parts = [h("label", { for: id }, labelText)];
  if (hint) {
    const hid = uid("hint");
    control.setAttribute("aria-describedby", hid);
    parts.push(h("span", { class: "hint", id: hid }, hint));
  }
  parts.push(control);
  return h("div", { class: "field" }, ...parts);
}

// notice is a status box: kind is ok, warn, bad or info.
export function notice(kind, title, ...body) {
  return h("div", { class: `notice ${kind}` }, h("strong", {}, title), ...body.map((b) => (typeof b === "string" ? h("p", {}, b) : b)));
}

// badge shows a state or status word.
export function badge(word, kind) {
  return h("span", { class: `badge ${kind || word}` }, String(word).replaceAll("_", " "));
}

// refusals are the audit statuses that say the ledger refused the attempt
// (nothing but the note of it was recorded).
export const refusals = new Set([
  "self_approval", "not_an_approver", "not_grant_holder", "already_approved", "not_pending_approval",
  "blocked", "divergent", "fenced", "rejected", "in_flight", "in_doubt", "invalid_state",
  "too_large", "unknown_policy", "policy_mismatch", "key_reserved", "version_mismatch", "malformed_command",
  "not_found",
]);

// isRefusal reports whether an audit event's status is a refusal
// (token_* refusals included).
export function isRefusal(status) {
  return refusals.has(status) || String(status || "").startsWith("token_");
}

// statusBadge shows an audit event's status: a refusal reads as one
// ("refused: self approval", in the refusal colour), whatever its word.
export function statusBadge(status, kind) {
  if (!status) return "";
  if (isRefusal(status)) {
    return h("span", { class: "badge refusal", "data-status": status, title: `The ledger refused this attempt (${status})` },
      "refused: " + String(status).replaceAll("_", " "));
  }
  return h("span", { class: `badge ${kind || status}`, "data-status": status }, String(status).replaceAll("_", " "));
}

// facts is a definition list of [term, value] pairs (rows whose value is
// empty are left out).
export function facts(rows) {
  const dl = h("dl", { class: "facts" });
  for (const [term, value] of rows) {
    if (value === "" || value === null || value === undefined) continue;
    dl.append(h("dt", {}, term), h("dd", {}, value));
  }
  return dl;
}

// table builds a table inside a focusable, labelled scrolling region (so
// a keyboard can scroll it sideways on a phone).
export function table(caption, headers, rows) {
  const t = h("table", {},
    h("caption", { class: "muted small" }, caption),
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, rows));
  return h("div", { class: "scroll", tabindex: 0, role: "region", "aria-label": caption }, t);
}

// when renders an RFC 3339 time as local time, with the UTC value in a
// title; "" for none.
export function when(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return h("time", { datetime: iso, title: iso }, d.toLocaleString());
}

// age says how long ago an RFC 3339 time was ("4 min ago").
export function age(iso, now = Date.now()) {
  const t = new Date(iso).getTime();
  if (!iso || Number.isNaN(t)) return "";
  let s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 60) return `${s} s ago`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ago`;
  const hr = Math.floor(m / 60);
  if (hr < 48) return `${hr} h ${m % 60} min ago`;
  return `${Math.floor(hr / 24)} days ago`;
}

// short abbreviates a hash for tables (the whole value stays in a title).
export function short(hash, n = 12) {
  if (!hash) return "";
  return hash.length > n ? h("span", { class: "mono", title: hash }, hash.slice(0, n) + "…") : h("span", { class: "mono" }, hash);
}

// intentLink links to an intent's detail page.
export function intentLink(key) {
  return h("a", { href: "/ui/intent?key=" + encodeURIComponent(key) }, key);
}

// announce puts a message into the page's polite live region, for screen
// readers, without moving focus.
export function announce(text) {
  let region = document.getElementById("announce");
  if (!region) {
    region = h("div", { id: "announce", class: "skip", "aria-live": "polite", role: "status" });
    document.body.append(region);
  }
  region.textContent = text;
}

// lineDiff compares two texts line by line (a longest common subsequence)
// and returns [op, line] pairs in order: " " kept, "-" only in a, "+"
// only in b. Texts over maxDiffLines lines each are not compared (null):
// the page then shows both whole instead.
export const maxDiffLines = 2000;
export function lineDiff(a, b) {
  const x = a.split("\n"), y = b.split("\n");
  if (x.length > maxDiffLines || y.length > maxDiffLines) return null;
  const n = x.length, m = y.length;
  const lcs = Array.from({ length: n + 1 }, () => new Uint16Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i][j] = x[i] === y[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const out = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) { out.push([" ", x[i]]); i++; j++; }
    else if (lcs[i + 1][j] >= lcs[i][j + 1]) out.push(["-", x[i++]]);
    else out.push(["+", y[j++]]);
  }
  while (i < n) out.push(["-", x[i++]]);
  while (j < m) out.push(["+", y[j++]]);
  return out;
}

// diffView shows lineDiff(a, b): removed lines marked "-", added "+",
// kept ones plain; or a note that the payloads are too large to compare.
export function diffView(a, b) {
  const d = lineDiff(a, b);
  if (!d) return h("p", {}, `The payloads have over ${maxDiffLines} lines: compare them whole.`);
  const kind = { " ": "keep", "-": "del", "+": "add" };
  return h("pre", { class: "diff", "aria-label": "Changes from the payload you reviewed to the new one" },
    ...d.map(([op, line]) => h("span", { class: kind[op] }, `${op} ${line}\n`)));
}
