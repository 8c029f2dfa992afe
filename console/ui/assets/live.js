// Live pages: follow the namespace's audit log with the API's long-poll
// (GET /v1/audit?since=N&wait=30s answers as soon as event N exists) and
// refresh when anything happens. No polling loop: an idle namespace costs
// one waiting request per open page.

import { get, Problem } from "./api.js";
import { h } from "./dom.js";

const maxSeq = "18446744073709551615"; // since past every event: the head alone

// follow calls refresh() once, then again after every new event of the
// namespace, until the page goes away. It keeps status (an element) up to
// date in words. It returns a function that stops it.
export function follow(refresh, status) {
  let stopped = false;
  const ctl = new AbortController();
  const say = (text, kind = "") => {
    status.replaceChildren(h("span", { class: kind }, text));
  };
  (async () => {
    let since = null;
    let backoff = 1000;
    while (!stopped) {
      try {
        if (since === null) {
          // Head first, then the refresh: whatever happens after the
          // head was read wakes the long-poll below.
          const page = await get(`/v1/audit?since=${maxSeq}&limit=1`, { signal: ctl.signal });
          since = page.head.last_seq + 1;
          await refresh();
          say(`Live: up to date at ${new Date().toLocaleTimeString()}`);
        }
        // The node answers within 30 s; the bound is a guard on top.
        const page = await get(`/v1/audit?since=${since}&limit=1&wait=30s`, { signal: ctl.signal, timeoutMs: 60000 });
        if (page.head.last_seq >= since || page.head.last_seq + 1 < since) {
          since = page.head.last_seq + 1;
          await refresh();
          say(`Live: updated at ${new Date().toLocaleTimeString()}`);
        }
        backoff = 1000;
      } catch (e) {
        if (stopped || (e && e.name === "AbortError")) return;
        if (e instanceof Problem && (e.status === 401 || e.status === 403)) {
          say(`Live updates stopped: ${e.message}`, "bad");
          return;
        }
        say(`Live updates paused: ${e.message}. Retrying in ${Math.round(backoff / 1000)} s.`);
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 30000);
        since = null; // read the head again: something may have been missed
      }
    }
  })();
  const stop = () => {
    stopped = true;
    ctl.abort();
  };
  window.addEventListener("pagehide", stop);
  return stop;
}
