// The transports: which one a client uses, and the Node transport's
// HTTP/1.1 (dist/node.js: keep-alive, framing, stale connections, TLS)
// against servers that answer byte by byte as a test needs. The rest of
// the suite runs over both transports (test.sh: INTENTD_TEST_TRANSPORT).

import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import https from "node:https";
import net from "node:net";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import * as sdk from "../dist/index.js";
import { startCluster } from "./fake.mjs";

const { Client } = sdk;

function fastClient(addrs, opts = {}) {
  return new Client({ addrs, discovery: false, backoffBaseMs: 5, backoffMaxMs: 40, timeoutMs: 3000, ...opts });
}

/** Counts the calls of the global fetch while fn runs. */
async function countingFetch(fn) {
  const real = globalThis.fetch;
  let n = 0;
  globalThis.fetch = (...a) => (n++, real(...a));
  try {
    await fn();
  } finally {
    globalThis.fetch = real;
  }
  return n;
}

const INTENT = { key: "k", namespace: "default", tool: "t", state: "executed", fencing_token: 3, generation: 1, version: 9 };

/**
 * A raw TCP server: onRequest(req, conn) for each request it reads (method,
 * path, headers, body), conn.write(...) to answer with exact bytes.
 */
async function rawServer(onRequest) {
  const conns = new Set();
  let connections = 0;
  let closed = 0;
  const requests = [];
  const server = net.createServer((sock) => {
    connections++;
    conns.add(sock);
    sock.on("close", () => {
      conns.delete(sock);
      closed++;
    });
    sock.on("error", () => {});
    let buf = Buffer.alloc(0);
    let served = 0;
    sock.on("data", (d) => {
      buf = Buffer.concat([buf, d]);
      for (;;) {
        const end = buf.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = buf.subarray(0, end).toString("latin1").split("\r\n");
        const [method, path] = head[0].split(" ");
        const headers = {};
        for (const l of head.slice(1)) {
          const i = l.indexOf(":");
          headers[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim();
        }
        const len = Number(headers["content-length"] ?? 0);
        if (buf.length < end + 4 + len) return;
        const body = buf.subarray(end + 4, end + 4 + len).toString("utf8");
        buf = buf.subarray(end + 4 + len);
        const req = { method, path, headers, body, nth: ++served };
        requests.push(req);
        onRequest(req, sock);
      }
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    requests,
    connections: () => connections,
    closed: () => closed,
    close: async () => {
      for (const s of conns) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

/** Writes s in pieces of n bytes, one per timer tick (so the client sees many reads). */
async function dribble(sock, s, n = 1) {
  const b = Buffer.from(s, "utf8");
  for (let i = 0; i < b.length; i += n) {
    sock.write(b.subarray(i, i + n));
    await new Promise((r) => setTimeout(r, 1));
  }
}

const json = (v) => JSON.stringify(v);
const ok = (body, extra = "") =>
  `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;

test("transport: node:net on Node by default, fetch when asked or when a fetch is passed", async (t) => {
  const fc = await startCluster({ ids: ["a"] });
  t.after(() => fc.close());
  const viaAuto = await countingFetch(async () => {
    const c = fastClient([fc.url("a")]);
    assert.equal((await c.claim({ key: "k1", tool: "t", payload: 1 })).status, "granted");
  });
  assert.equal(viaAuto, 0);
  const viaNode = await countingFetch(async () => {
    const c = fastClient([fc.url("a")], { transport: "node" });
    assert.equal((await c.claim({ key: "k2", tool: "t", payload: 1 })).status, "granted");
  });
  assert.equal(viaNode, 0);
  const viaFetch = await countingFetch(async () => {
    const c = fastClient([fc.url("a")], { transport: "fetch" });
    assert.equal((await c.claim({ key: "k3", tool: "t", payload: 1 })).status, "granted");
    assert.equal((await c.get("k3")).key, "k3");
  });
  assert.equal(viaFetch, 2);
  let mine = 0;
  const c = fastClient([fc.url("a")], { fetch: (u, i) => (mine++, fetch(u, i)) });
  await c.claim({ key: "k4", tool: "t", payload: 1 });
  assert.equal(mine, 1);
  // The same answers either way.
  const a = await fastClient([fc.url("a")], { transport: "fetch" }).get("k1");
  const b = await fastClient([fc.url("a")], { transport: "node" }).get("k1");
  assert.deepEqual(a, b);

  assert.throws(() => new Client({ addrs: "h:1", transport: "xhr" }), sdk.IntentdError);
  assert.throws(() => new Client({ addrs: "h:1", transport: "node", fetch }), sdk.IntentdError);
  assert.throws(() => new Client({ addrs: "h:1", apiKey: "ik_a\r\nx-evil: 1" }), /apiKey/);
  assert.throws(() => new Client({ addrs: "h:1", userAgent: "a\nb" }), /userAgent/);
  assert.throws(() => new Client({ addrs: "h:1", userAgent: "café/1" }), /userAgent must be printable ASCII/);
});

test("node transport: one kept-alive connection for calls in sequence, one per concurrent call", async (t) => {
  const s = await rawServer((req, sock) => sock.write(ok(json(INTENT))));
  t.after(() => s.close());
  const c = fastClient([s.url], { transport: "node", apiKey: "ik_k", userAgent: "ua/1" });
  for (let i = 0; i < 20; i++) assert.equal((await c.get("k")).version, 9);
  assert.equal(s.connections(), 1);
  await Promise.all(Array.from({ length: 5 }, () => c.get("k")));
  assert.ok(s.connections() <= 5, `${s.connections()} connections`);
  const r = s.requests[0];
  assert.equal(r.method, "GET");
  assert.equal(r.path, "/v1/intents/k");
  assert.equal(r.headers.host, s.url.slice("http://".length));
  assert.equal(r.headers.authorization, "Bearer ik_k");
  assert.equal(r.headers["user-agent"], "ua/1");
  assert.equal(r.headers["content-length"], undefined);
  await c.complete({ key: "k é/1", owner: "ø", fencingToken: 3, outcome: "executed", result: { note: "€ ✓ 𝄞" } });
  const w = s.requests.at(-1);
  assert.equal(w.method, "POST");
  assert.equal(w.path, "/v1/intents/" + encodeURIComponent("k é/1") + "/complete");
  assert.equal(w.headers["content-type"], "application/json");
  assert.equal(Number(w.headers["content-length"]), Buffer.byteLength(w.body));
  assert.deepEqual(JSON.parse(w.body), { owner: "ø", fencing_token: 3, outcome: "executed", result: { note: "€ ✓ 𝄞" } });
});

test("node transport: answers framed by length, chunks or the end of the connection, in any pieces", async (t) => {
  const body = json({ ...INTENT, result: { text: "é€𝄞 ".repeat(300) } }); // multibyte characters across reads
  const want = JSON.parse(body).result;
  const chunked = (b) => {
    const buf = Buffer.from(b);
    let out = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n";
    const parts = [buf.subarray(0, 7), buf.subarray(7, 500), buf.subarray(500)];
    const bin = [Buffer.from(out, "latin1")];
    parts.forEach((p, i) => bin.push(Buffer.from(p.length.toString(16) + (i === 1 ? ";ext=1" : "") + "\r\n", "latin1"), p, Buffer.from("\r\n")));
    bin.push(Buffer.from("0\r\nx-trailer: 1\r\n\r\n"));
    return Buffer.concat(bin);
  };
  const modes = {
    length: (sock) => sock.write(ok(body)),
    lengthDribbled: (sock) => dribble(sock, ok(body), 7),
    chunked: (sock) => sock.write(chunked(body)),
    chunkedDribbled: async (sock) => {
      const b = chunked(body);
      for (let i = 0; i < b.length; i += 5) {
        sock.write(b.subarray(i, i + 5));
        await new Promise((r) => setTimeout(r, 1));
      }
    },
    untilClose: (sock) => sock.end(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n${body}`),
    http10: (sock) => sock.end(`HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n${body}`),
    bom: (sock) => sock.write(ok("\ufeff" + body)),
    interim: (sock) => sock.write("HTTP/1.1 100 Continue\r\n\r\n" + ok(body)),
    connectionClose: (sock) => sock.write(ok(body, "Connection: close\r\n")),
  };
  for (const [mode, answer] of Object.entries(modes)) {
    const s = await rawServer((req, sock) => answer(sock));
    const c = fastClient([s.url], { transport: "node", retries: 0 });
    try {
      for (let i = 0; i < 3; i++) assert.deepEqual((await c.get("k")).result, want, mode);
    } finally {
      await s.close();
    }
  }
});

test("node transport: status, Retry-After and an empty answer", async (t) => {
  const s = await rawServer((req, sock) => {
    if (req.nth === 1) {
      const p = json({ title: "Slow down", status: 429, code: "rate_limited" });
      return sock.write(`HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/problem+json\r\nretry-after: 2\r\nContent-Length: ${p.length}\r\n\r\n${p}`);
    }
    if (req.nth === 2) return sock.write("HTTP/1.1 204 No Content\r\n\r\n");
    sock.write(ok(json(INTENT)));
  });
  t.after(() => s.close());
  const c = fastClient([s.url], { transport: "node", rateLimitWaitMs: 0 });
  const err = await c.get("k").catch((e) => e);
  assert.ok(err instanceof sdk.RateLimitedError, String(err));
  assert.equal(err.retryAfterMs, 2000);
  await c.deletePolicy("p"); // 204: no body
  assert.equal((await c.get("k")).version, 9);
  assert.equal(s.connections(), 1);
});

test("node transport: a malformed answer fails the attempt like a lost one", async (t) => {
  for (const bad of [
    "HTTP/2 200 OK\r\n\r\n",
    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
    "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    "HTTP/1.1 200 OK\r\nbroken header\r\n\r\n",
  ]) {
    const s = await rawServer((req, sock) => sock.write(bad));
    const c = fastClient([s.url], { transport: "node", retries: 1 });
    try {
      const e1 = await c.get("k").catch((e) => e);
      assert.ok(e1 instanceof sdk.UnavailableError && !(e1 instanceof sdk.OutcomeUnknownError), `${JSON.stringify(bad)}: ${e1}`);
      assert.equal(e1.status, 0);
      const e2 = await c.commit({ key: "k", owner: "o" }).catch((e) => e);
      assert.ok(e2 instanceof sdk.OutcomeUnknownError, `${JSON.stringify(bad)}: ${e2}`);
      assert.equal(s.requests.length, 4); // retried like any lost answer
    } finally {
      await s.close();
    }
  }
});

test("node transport: an answer cut short is lost; a kept-alive connection closed as it is reused is sent again on a new one", async (t) => {
  // Cut short: the write's outcome is unknown; the connection is not reused.
  const s1 = await rawServer((req, sock) => {
    if (s1.requests.length === 1) return sock.end("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"key\":");
    sock.write(ok(json({ status: "ok", intent: INTENT })));
  });
  t.after(() => s1.close());
  const e1 = await fastClient([s1.url], { transport: "node", retries: 0 }).commit({ key: "k", owner: "o" }).catch((e) => e);
  assert.ok(e1 instanceof sdk.OutcomeUnknownError, String(e1));
  assert.match(e1.message, /closed before the answer ended/);
  const r1 = await fastClient([s1.url], { transport: "node", retries: 0 }).commit({ key: "k", owner: "o" });
  assert.equal(r1.intent.version, 9);
  assert.equal(s1.connections(), 2);

  // Closed by the server while idle, as the client reuses it: sent again at
  // once on a new connection, without spending a retry.
  const s2 = await rawServer((req, sock) => {
    if (req.nth === 1) return sock.write(ok(json({ status: "ok", intent: INTENT })));
    sock.destroy(); // the server had closed it: the request is never answered
  });
  t.after(() => s2.close());
  const c2 = fastClient([s2.url], { transport: "node", retries: 0 });
  await c2.commit({ key: "k", owner: "o" });
  await c2.commit({ key: "k", owner: "o" });
  assert.equal(s2.requests.length, 3);
  assert.equal(s2.connections(), 2);
  assert.equal(new Set(s2.requests.map((r) => r.body)).size, 1); // the same request

  // Only once: a connection dropped again is the first error (maybe applied).
  const s3 = await rawServer((req, sock) => {
    if (s3.requests.length === 1) return sock.write(ok(json({ status: "ok", intent: INTENT })));
    sock.destroy();
  });
  t.after(() => s3.close());
  const c3 = fastClient([s3.url], { transport: "node", retries: 0 });
  await c3.commit({ key: "k", owner: "o" });
  const e3 = await c3.commit({ key: "k", owner: "o" }).catch((e) => e);
  assert.ok(e3 instanceof sdk.OutcomeUnknownError, String(e3));
  assert.equal(s3.requests.length, 3);
});

test("node transport: a timeout or an abort ends the connection; the next call gets a new one", async (t) => {
  let hold = true;
  const s = await rawServer((req, sock) => {
    if (!hold) sock.write(ok(json(INTENT)));
  });
  t.after(() => s.close());
  const c = fastClient([s.url], { transport: "node", retries: 0, timeoutMs: 100 });
  const e1 = await c.get("k").catch((e) => e);
  assert.ok(e1 instanceof sdk.UnavailableError, String(e1));
  assert.match(e1.message, /no answer within 100 ms/);
  assert.equal(e1.cause?.name, "TimeoutError");
  const ac = new AbortController();
  setTimeout(() => ac.abort(new Error("stop")), 30);
  const e2 = await c.get("k", { signal: ac.signal }).catch((e) => e);
  assert.equal(e2.message, "stop");
  hold = false;
  assert.equal((await c.get("k")).version, 9);
  assert.equal(s.connections(), 3);
});

test("node transport: a refused connection never sent the write", async () => {
  const server = net.createServer();
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${server.address().port}`;
  await new Promise((r) => server.close(r));
  const c = fastClient([url], { transport: "node", retries: 1 });
  const err = await c.claim({ key: "k", tool: "t", payload: 1 }).catch((e) => e);
  assert.ok(err instanceof sdk.UnavailableError && !(err instanceof sdk.OutcomeUnknownError), String(err));
});

test("node transport: a base URL with a path prefix", async (t) => {
  const s = await rawServer((req, sock) => sock.write(ok(json(INTENT))));
  t.after(() => s.close());
  const c = fastClient([s.url + "/ledger/"], { transport: "node" });
  await c.get("k", { stale: true });
  assert.equal(s.requests[0].path, "/ledger/v1/intents/k?consistency=stale");
});

// A self-signed certificate for localhost and 127.0.0.1 (test only).
const CERT = `-----BEGIN CERTIFICATE-----
MIIBmzCCAUGgAwIBAgIUU22MWj+BLsZwVru6ueQMGFQPeRswCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTIwMjA3MTg1M1oYDzIxMjYxMTA4
MDcxODUzWjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAAR9MlrX6vowMOrlyfJvfSg+z+kb1V1DDJW1HKr5No3vzuSeLEZrlDvj
L22gyHrOLKxh9WFqntYb16IG8bYBqSMYo28wbTAdBgNVHQ4EFgQUyBKSZA8ZxvwY
QjAUtQOyyK7waWcwHwYDVR0jBBgwFoAUyBKSZA8ZxvwYQjAUtQOyyK7waWcwDwYD
VR0TAQH/BAUwAwEB/zAaBgNVHREEEzARgglsb2NhbGhvc3SHBH8AAAEwCgYIKoZI
zj0EAwIDSAAwRQIhANntLGI5qF0pndOFSeLUfNERQHlE3Ei6jE3MHgWcCTn6AiA2
+StHpNJxR+Z4QdCDzV25zjF+r1K9bZkxVsnRjVo8SQ==
-----END CERTIFICATE-----
`;
const KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg00cpP3An0zItf6yr
kW9T+h5W5yBfofBP4DZUKJgOTLGhRANCAAR9MlrX6vowMOrlyfJvfSg+z+kb1V1D
DJW1HKr5No3vzuSeLEZrlDvjL22gyHrOLKxh9WFqntYb16IG8bYBqSMY
-----END PRIVATE KEY-----
`;

test("node transport over TLS: the certificate is verified (NODE_EXTRA_CA_CERTS is honoured)", async (t) => {
  let alpn;
  const server = https.createServer({ cert: CERT, key: KEY }, (req, res) => {
    alpn = req.socket.alpnProtocol;
    res.writeHead(200, { "content-type": "application/json" });
    res.end(json({ ...INTENT, key: req.url }));
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => new Promise((r) => server.close(r)));
  const port = server.address().port;

  // Not trusted here: refused.
  const untrusted = fastClient([`https://localhost:${port}`], { transport: "node", retries: 0 });
  const err = await untrusted.get("k").catch((e) => e);
  assert.ok(err instanceof sdk.UnavailableError, String(err));
  assert.match(err.message, /self.signed|certificate/i);

  // Trusted through NODE_EXTRA_CA_CERTS (read at start-up: a child process).
  const dir = mkdtempSync(join(tmpdir(), "intentd-ts-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, "ca.pem"), CERT);
  const script = `
    import { Client } from ${json(new URL("../dist/index.js", import.meta.url).href)};
    const out = [];
    for (const host of ["localhost", "127.0.0.1"]) {
      const c = new Client({ addrs: "https://" + host + ":${port}", discovery: false, transport: "node", retries: 0 });
      out.push((await c.get("a")).key, (await c.get("b")).key);
    }
    console.log(JSON.stringify(out));`;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
    env: { ...process.env, NODE_EXTRA_CA_CERTS: join(dir, "ca.pem") },
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => (stdout += d));
  child.stderr.on("data", (d) => (stderr += d));
  const code = await new Promise((r) => child.on("close", r));
  assert.equal(code, 0, stderr);
  assert.deepEqual(JSON.parse(stdout), ["/v1/intents/a", "/v1/intents/b", "/v1/intents/a", "/v1/intents/b"]);
  assert.equal(alpn, "http/1.1");
});

test("node transport: a client's idle connections do not keep the process alive", async () => {
  const server = http.createServer((req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(json(INTENT));
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const port = server.address().port;
  try {
    const script = `
      import { Client } from ${json(new URL("../dist/index.js", import.meta.url).href)};
      const c = new Client({ addrs: "127.0.0.1:${port}", discovery: false, transport: "node" });
      await Promise.all([c.get("a"), c.get("b")]);
      console.log("done");`;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script]);
    let stdout = "";
    child.stdout.on("data", (d) => (stdout += d));
    const started = Date.now();
    const code = await new Promise((r) => child.on("close", r));
    assert.equal(code, 0);
    assert.equal(stdout.trim(), "done");
    assert.ok(Date.now() - started < 3000, "exited without waiting for idle connections to time out");
  } finally {
    server.closeAllConnections?.();
    await new Promise((r) => server.close(r));
  }
});

test("node transport: an idle connection is closed after 4 s", async (t) => {
  const s = await rawServer((req, sock) => sock.write(ok(json(INTENT))));
  t.after(() => s.close());
  const c = fastClient([s.url], { transport: "node" });
  await c.get("k");
  await new Promise((r) => setTimeout(r, 2000));
  await c.get("k"); // reused: activity restarts the idle clock
  assert.equal(s.connections(), 1);
  await new Promise((r) => setTimeout(r, 3000));
  assert.equal(s.closed(), 0);
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal(s.closed(), 1);
  await c.get("k");
  assert.equal(s.connections(), 2);
});
