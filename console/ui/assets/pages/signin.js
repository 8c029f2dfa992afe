// Sign-in: the person pastes an API key; the console asks the cluster who
// it is (GET /v1/whoami) and keeps it in this tab's sessionStorage only.

import { setAPIKey, whoami, Problem, explain } from "../api.js";
import { h, clear, field, notice } from "../dom.js";

export const title = "Sign in";

// safeNext is where to go after signing in: a console path only.
function safeNext(params) {
  const next = params.get("next") || "";
  return next.startsWith("/ui/") && !next.startsWith("//") ? next : "/ui/approvals";
}

export async function render({ me, main, params }) {
  if (me && me.auth === "off") {
    clear(main, h("h1", {}, "Sign in"),
      notice("info", "No key needed", "Auth is off on this node: the console acts with every role in namespace default."),
      h("p", {}, h("a", { href: safeNext(params) }, "Continue")));
    return;
  }
  const input = h("input", { type: "password", name: "key", autocomplete: "off", spellcheck: "false", required: true, placeholder: "ik_…" });
  const result = h("div", { role: "status", "aria-live": "polite" });
  const form = h("form", { id: "sign-in-form", novalidate: true },
    field("API key", input, "The key is kept in this browser tab only (sessionStorage) and sent to this node's API as a bearer token. The console can do exactly what the key can."),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Sign in")),
    result);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const key = input.value.trim();
    if (!key) {
      clear(result, notice("bad", "Enter an API key", "An API key starts with ik_; intentctl apikey new makes one."));
      input.focus();
      return;
    }
    clear(result, h("p", { class: "muted" }, "Checking the key…"));
    try {
      const who = await whoami(key);
      setAPIKey(key);
      clear(result, notice("ok", `Signed in as ${who.name}`));
      location.assign(safeNext(params));
    } catch (e) {
      if (e instanceof Problem && e.status === 401) {
        clear(result, notice("bad", "This key is not valid for this cluster", e.message));
      } else {
        const x = explain(e, false);
        clear(result, notice(x.kind, x.title, x.text));
      }
      input.focus();
    }
  });
  clear(main, h("h1", {}, "Sign in"),
    params.get("refused") ? notice("warn", "Signed out", "The cluster refused the key this tab had; sign in again.") : null,
    form);
  input.focus();
}
