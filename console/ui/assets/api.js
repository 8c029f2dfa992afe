// The console's only way to the cluster: the node's JSON API, from the
// browser, with the signed-in API key as a bearer token. The console has
// no other power: what the key may not do, the API refuses.

import { parse } from "./json.js";

const storageKey = "intentd.apiKey";

// apiKey is the key the person signed in with in this tab ("" if none).
// sessionStorage: it lives as long as the tab and is never sent anywhere
// but in the Authorization header of this origin's API calls.
export function apiKey() {
  return sessionStorage.getItem(storageKey) || "";
}

export function setAPIKey(key) {
  sessionStorage.setItem(storageKey, key);
}

export function signOut() {
  sessionStorage.removeItem(storageKey);
}

// Problem is an error answer of the API (an RFC 9457 problem document).
export class Problem extends Error {
  constructor(status, body, method, path) {
    const b = body && typeof body === "object" ? body : {};
    super(b.detail || b.title || `${method} ${path}: HTTP ${status}`);
    this.status = status;
    this.code = b.code || `http_${status}`;
    this.title = b.title || `HTTP ${status}`;
    this.body = b;
    this.method = method;
  }

  // unknown: a write may or may not have been applied.
  get unknown() {
    return this.code === "outcome_unknown";
  }
}

// Unreachable is a request that got no answer (the network, or the node
// went away). For a write the outcome is unknown.
export class Unreachable extends Error {
  constructor(method, path, cause) {
    super(`${method} ${path}: no answer from the node (${cause && cause.message ? cause.message : cause})`);
    this.method = method;
  }

  get unknown() {
    return this.method !== "GET";
  }
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

// call sends one API request and returns { data, text, status }: data is
// the JSON answer parsed with json.js (so json.raw finds the exact source
// of any member), text the answer as received (rawText: not parsed, for
// a JSON-lines export). An error answer throws a Problem, no answer an
// Unreachable. body is sent as JSON.
//
// A call that gets no answer within timeoutMs (20 s; 0: no bound, for a
// long-poll or an export) is an Unreachable, so a page never waits for
// ever on a node that went away.
export async function call(method, path, { body, key, signal, rawText, timeoutMs = 20000 } = {}) {
  const headers = { Accept: "application/json" };
  const k = key === undefined ? apiKey() : key;
  if (k) headers.Authorization = "Bearer " + k;
  const signals = [signal, timeoutMs > 0 ? AbortSignal.timeout(timeoutMs) : null].filter(Boolean);
  const init = { method, headers, signal: signals.length ? AbortSignal.any(signals) : undefined, cache: "no-store", credentials: "omit", redirect: "error" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = typeof body === "string" ? body : JSON.stringify(body);
  }
  let resp;
  let bytes;
  try {
    resp = await fetch(path, init);
    bytes = new Uint8Array(await resp.arrayBuffer());
  } catch (e) {
    if (signal && signal.aborted) throw e; // the caller stopped it
    if (e && e.name === "TimeoutError") throw new Unreachable(method, path, new Error(`no answer within ${timeoutMs / 1000} s`));
    throw new Unreachable(method, path, e);
  }
  let text = "";
  let data = null;
  try {
    text = utf8.decode(bytes);
    if (!rawText || !resp.ok) data = text.trim() === "" ? null : parse(text);
  } catch (e) {
    if (resp.ok) throw new Problem(resp.status, { title: "The answer is not JSON", detail: String(e.message || e) }, method, path);
  }
  if (!resp.ok) throw new Problem(resp.status, data, method, path);
  return { data, text, status: resp.status };
}

// get is call("GET", path) returning the parsed answer.
export async function get(path, opts) {
  return (await call("GET", path, opts)).data;
}

// post is call("POST", path, {body}) returning the parsed answer.
export async function post(path, body, opts = {}) {
  return (await call("POST", path, { ...opts, body })).data;
}

// intentPath is the API path of an intent (and an action).
export function intentPath(key, action) {
  return "/v1/intents/" + encodeURIComponent(key) + (action ? "/" + action : "");
}

// whoami asks who the key is: { auth, name, namespace, roles, acts }. With
// key "" it asks without one: auth off answers, auth on is a 401 Problem.
export function whoami(key) {
  return get("/v1/whoami", { key });
}

// listAll reads every intent in a state (page by page, up to max) and
// says whether there were more.
export async function listAll(state, max = 2000) {
  const out = [];
  let cursor = "";
  for (;;) {
    const q = new URLSearchParams({ state, limit: "500" });
    if (cursor) q.set("cursor", cursor);
    const page = await get("/v1/intents?" + q.toString());
    out.push(...(page.intents || []));
    cursor = page.next_cursor || "";
    if (!cursor) return { intents: out, more: false };
    if (out.length >= max) return { intents: out, more: true };
  }
}

// explain turns a failed call into words for a person: { kind, title,
// text }. write says the call could change the ledger: then an answer
// lost on the way means the outcome is unknown (the same request is safe
// to send again: every write is idempotent), which is never shown as a
// plain failure.
export function explain(err, write) {
  if (err instanceof Unreachable || (err instanceof Problem && err.unknown)) {
    if (write) {
      return {
        kind: "warn",
        title: "Outcome unknown: the request may or may not have been applied",
        text: `${err.message}. Reload to see the intent as it stands; sending the same decision again is safe (it is never applied twice).`,
      };
    }
    return { kind: "bad", title: "The node did not answer", text: err.message };
  }
  if (err instanceof Problem) {
    const b = err.body;
    if (err.status === 503 || err.status === 429) {
      return { kind: "warn", title: `Not applied: ${err.title} (${err.code})`, text: `${err.message}. Nothing was written; try again.` };
    }
    if (err.code === "divergent" && b.request_fingerprint) {
      // A decision's divergent: request_fingerprint is the one the person
      // saw and sent, fingerprint the intent's own.
      const now = b.fingerprint || (b.intent && b.intent.fingerprint);
      return {
        kind: "bad",
        title: "Refused: the payload changed after this page showed it",
        text: `You reviewed the payload with fingerprint ${b.request_fingerprint}` +
          (now ? `; the intent now has fingerprint ${now}` : "") +
          ". Nothing was recorded for you. Reload the page and review the new payload before deciding.",
      };
    }
    return { kind: "bad", title: `Refused: ${err.title} (${err.status} ${err.code})`, text: err.message };
  }
  return { kind: "bad", title: "Something went wrong", text: String(err && err.message ? err.message : err) };
}
