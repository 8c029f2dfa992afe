// The console's entry point: find out who the API key is (GET
// /v1/whoami), draw the header, then the page the URL names. Each page is
// a plain URL under /ui/ that can be bookmarked and shared; moving between
// pages is an ordinary link.

import { apiKey, signOut, whoami, Problem, explain } from "./api.js";
import { h, clear, notice } from "./dom.js";
import * as home from "./pages/home.js";
import * as signin from "./pages/signin.js";
import * as approvals from "./pages/approvals.js";
import * as indoubt from "./pages/indoubt.js";
import * as intents from "./pages/intents.js";
import * as intent from "./pages/intent.js";
import * as audit from "./pages/audit.js";
import * as cluster from "./pages/cluster.js";

const pages = {
  "": home,
  "sign-in": signin,
  approvals,
  "in-doubt": indoubt,
  intents,
  intent,
  audit,
  cluster,
};

// navFor is the header link a page belongs to.
const navFor = { intent: "intents" };

async function start() {
  const main = document.getElementById("main");
  const name = location.pathname.replace(/^\/ui\/?/, "").replace(/\/$/, "");
  const page = pages[name] || home;
  const current = navFor[name] || name;
  for (const a of document.querySelectorAll("#nav a")) {
    if (a.getAttribute("href") === "/ui/" + current) a.setAttribute("aria-current", "page");
  }
  document.title = `${page.title} · intentd console`;

  const key = apiKey();
  let me = null;
  try {
    me = await whoami(key);
  } catch (e) {
    if (e instanceof Problem && e.status === 401) {
      if (key) signOut(); // the cluster does not know this key (any more)
      if (page !== signin) {
        const next = location.pathname + location.search;
        location.replace("/ui/sign-in?next=" + encodeURIComponent(next) + (key ? "&refused=1" : ""));
        return;
      }
    } else {
      const x = explain(e, false);
      clear(main, h("h1", {}, page.title), notice(x.kind, x.title, x.text));
      return;
    }
  }
  drawWho(me);
  const ctx = {
    me,
    main,
    params: new URLSearchParams(location.search),
    // can reports whether the key meets a requirement of the API's route
    // table (approver, resolve, reader, admin ...), as the server decides.
    can: (requirement) => !!me && me.acts.includes(requirement),
  };
  try {
    await page.render(ctx);
  } catch (e) {
    const x = explain(e, false);
    main.append(notice(x.kind, x.title, x.text));
  }
}

// drawWho shows who is signed in and, with auth off, says so in a banner.
function drawWho(me) {
  const who = document.getElementById("who");
  const banner = document.getElementById("banner");
  if (!me) {
    clear(who);
    return;
  }
  if (me.auth === "off") {
    clear(banner, notice("warn", "Auth is off (development mode)",
      "This node accepts every call from anyone who reaches its port, in namespace default, with every role. " +
      "Never expose it; start nodes with --auth=required and API keys for real use."));
    clear(who, h("span", {}, `No sign-in needed · namespace ${me.namespace}`));
    return;
  }
  clear(who,
    h("span", { id: "whoami" }, `${me.name} · namespace ${me.namespace} · roles ${me.roles.join(", ")}`),
    h("button", {
      type: "button", id: "sign-out",
      onclick: () => {
        signOut();
        location.assign("/ui/sign-in");
      },
    }, "Sign out"));
}

start();
