// The Node transport: HTTP/1.1 straight over node:net / node:tls sockets,
// kept alive and reused (one request at a time per connection, LIFO).
//
// Why not fetch: on Node, fetch (undici's WHATWG layer: web streams, a
// Request clone, AbortSignals, header lists) spends about 1 ms of CPU per
// claim+complete, node:http with a keep-alive Agent about 0.25 ms, a plain
// socket about 0.1 ms; on a small machine the client's CPU is taken from
// the cluster, so it decides throughput. The SDK's requests are simple (a
// small JSON body with Content-Length, a JSON answer), so the client side
// of HTTP/1.1 it needs is small: this file. What it does not handle (an
// upgrade, a malformed answer) fails the attempt like a network error.
//
// This module imports nothing at load time: node:net, node:tls and
// node:buffer are imported dynamically, and only when the client runs on
// Node (not Bun or Deno, whose fetch is native), so the package still loads
// on any fetch runtime and bundlers for the edge leave them out. The client
// falls back to fetch when they cannot be loaded.

import type { HttpAnswer, HttpCall, Sender } from "./transport.js";
import { markTimeout } from "./transport.js";
import { timeoutError } from "./util.js";

// The few Node shapes used here (the package does not depend on @types/node).
interface NodeError extends Error {
  code?: string;
}
interface Buf extends Uint8Array {
  indexOf(value: Buf | number, byteOffset?: number): number;
  toString(encoding?: string, start?: number, end?: number): string;
  subarray(start?: number, end?: number): Buf;
}
interface BufferStatic {
  from(s: string, encoding: string): Buf;
  concat(list: readonly Buf[], totalLength?: number): Buf;
  byteLength(s: string, encoding: string): number;
}
interface Socket {
  destroyed: boolean;
  writable: boolean;
  on(event: "data", listener: (chunk: Buf) => void): unknown;
  on(event: "error", listener: (err: NodeError) => void): unknown;
  on(event: "close" | "timeout", listener: () => void): unknown;
  write(data: string, encoding: string): boolean;
  setTimeout(ms: number): unknown;
  setNoDelay(noDelay: boolean): unknown;
  ref(): unknown;
  unref(): unknown;
  destroy(err?: Error): unknown;
}
interface NetModule {
  connect(options: Record<string, unknown>): Socket;
  isIP(s: string): number;
}

/** How long an idle connection is kept for reuse (undici's default: fetch did the same). */
const IDLE_MS = 4_000;
/** The largest response head accepted. */
const MAX_HEAD_BYTES = 64 * 1024;

/** Whether this is Node itself: Bun and Deno (and Workers' compatibility layers) say node too, but their fetch is native. */
export function onNode(): boolean {
  const g = globalThis as {
    process?: { versions?: Record<string, string | undefined>; release?: { name?: string } };
    Deno?: unknown;
    Bun?: unknown;
    navigator?: { userAgent?: unknown };
  };
  const v = g.process?.versions;
  if (!v || typeof v.node !== "string" || v.bun !== undefined || v.deno !== undefined) return false;
  if (g.Deno !== undefined || g.Bun !== undefined) return false;
  if (g.process?.release?.name !== "node") return false;
  return g.navigator?.userAgent !== "Cloudflare-Workers";
}

/**
 * Imports a module by a name bundlers cannot see, so a bundle for the edge
 * does not try to include node:net. (Only called on Node.)
 */
function importDynamic(specifier: string): Promise<unknown> {
  return import(/* webpackIgnore: true */ /* @vite-ignore */ specifier);
}

interface Runtime {
  net: NetModule;
  Buffer: BufferStatic;
  CRLF: Buf;
  CRLFCRLF: Buf;
  tls(): Promise<NetModule>;
}

let runtime: Promise<Runtime> | undefined;

function loadRuntime(): Promise<Runtime> {
  if (!runtime) {
    runtime = (async () => {
      const net = (await importDynamic("node:net")) as NetModule;
      const buffer = ((await importDynamic("node:buffer")) as { Buffer: BufferStatic }).Buffer;
      let tls: Promise<NetModule> | undefined;
      return {
        net,
        Buffer: buffer,
        CRLF: buffer.from("\r\n", "latin1"),
        CRLFCRLF: buffer.from("\r\n\r\n", "latin1"),
        tls: () => (tls ??= importDynamic("node:tls") as Promise<NetModule>),
      };
    })();
    // A failed load is tried again by the next client (each falls back to fetch meanwhile).
    runtime.catch(() => {
      runtime = undefined;
    });
  }
  return runtime;
}

/** The idle connections to one node, and how to open another. */
interface Pool {
  rt: Runtime;
  /** The Host header and the start of every path. */
  host: string;
  prefix: string;
  idle: Conn[];
  connect(): Socket;
}

/** Pools by base URL, shared by every client (as fetch shares its dispatcher). */
const pools = new Map<string, Pool | Promise<Pool>>();

function pool(rt: Runtime, base: string): Pool | Promise<Pool> {
  let p = pools.get(base);
  if (p) return p;
  const u = new URL(base);
  const hostname = u.hostname.startsWith("[") ? u.hostname.slice(1, -1) : u.hostname;
  const secure = u.protocol === "https:";
  const port = u.port ? Number(u.port) : secure ? 443 : 80;
  const prefix = u.pathname === "/" ? "" : u.pathname.replace(/\/+$/, "");
  const make = (mod: NetModule): Pool => {
    const opts: Record<string, unknown> = { host: hostname, port, noDelay: true };
    if (secure) {
      opts.ALPNProtocols = ["http/1.1"];
      if (!rt.net.isIP(hostname)) opts.servername = hostname;
    }
    const made: Pool = { rt, host: u.host, prefix, idle: [], connect: () => mod.connect(opts) };
    pools.set(base, made);
    return made;
  };
  if (secure) {
    p = rt.tls().then(make);
    pools.set(base, p);
    p.catch(() => pools.delete(base));
    return p;
  }
  return make(rt.net);
}

/** nodeSender returns a Sender over node:net/node:tls, or rejects when they cannot be loaded (then use fetch). */
export async function nodeSender(): Promise<Sender> {
  const rt = await loadRuntime();
  return (c: HttpCall): Promise<HttpAnswer> => {
    const p = pool(rt, c.base);
    return p instanceof Promise ? p.then((pp) => send(pp, c)) : send(p, c);
  };
}

/** The header lines of a header object, checked once per object (the client's are shared and frozen). */
const headerBlocks = new WeakMap<object, string>();

function headerBlock(headers: Readonly<Record<string, string>>): string {
  let block = headerBlocks.get(headers);
  if (block === undefined) {
    block = "";
    for (const [name, value] of Object.entries(headers)) {
      if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) throw headerError(`invalid header name ${JSON.stringify(name)}`);
      // ASCII only: the request is written as UTF-8.
      if (/[^\t\x20-\x7e]/.test(value)) throw headerError(`invalid character in the ${name} header`);
      block += `${name}: ${value}\r\n`;
    }
    headerBlocks.set(headers, block);
  }
  return block;
}

function headerError(msg: string): NodeError {
  return Object.assign(new TypeError(`intentd: ${msg}`), { code: "ERR_INVALID_CHAR" });
}

function closedError(): NodeError {
  return Object.assign(new Error("the connection closed before the answer ended"), { code: "ECONNRESET" });
}

function protocolError(msg: string): NodeError {
  return Object.assign(new Error(`malformed HTTP answer: ${msg}`), { code: "HPE_INVALID" });
}

/** The exchange a connection serves: its callbacks, and whether any byte of the answer came. */
interface Exchange {
  done(answer: HttpAnswer): void;
  fail(err: NodeError): void;
  /** A byte of the answer arrived (a stale connection fails before any). */
  answered: boolean;
}

// Where the parser is in an answer.
const HEAD = 0;
const BODY = 1;
const CHUNK_SIZE = 2;
const CHUNK_DATA = 3;
const CHUNK_END = 4;
const TRAILERS = 5;
const UNTIL_CLOSE = 6;

/** One kept-alive connection: writes a request, parses its answer. */
class Conn {
  ex: Exchange | undefined;
  reused = false;
  private buf: Buf | undefined;
  private pos = 0;
  private phase = HEAD;
  private status = 0;
  private retryAfter: string | null = null;
  private close = false;
  private remaining = 0;
  private body: Buf[] = [];
  private bodyBytes = 0;

  constructor(readonly pool: Pool, readonly socket: Socket) {
    socket.setNoDelay(true);
    socket.on("data", (chunk) => this.onData(chunk));
    socket.on("error", (err) => this.onGone(err));
    socket.on("close", () => this.onGone(undefined));
    // An idle connection is closed after IDLE_MS (the timer runs on
    // inactivity; while an exchange waits, its own timeout governs).
    socket.setTimeout(IDLE_MS);
    socket.on("timeout", () => {
      if (!this.ex) socket.destroy();
    });
  }

  start(ex: Exchange, request: string): void {
    this.ex = ex;
    this.phase = HEAD;
    this.status = 0;
    this.retryAfter = null;
    this.close = false;
    this.bodyBytes = 0;
    this.socket.write(request, "utf8");
  }

  /** Ends the connection (a timeout, an abort, a broken answer); it is never reused. */
  destroy(): void {
    this.ex = undefined;
    this.socket.destroy();
  }

  private onGone(err: NodeError | undefined): void {
    const i = this.pool.idle.indexOf(this);
    if (i >= 0) this.pool.idle.splice(i, 1);
    const ex = this.ex;
    if (!ex) return;
    if (!err && this.phase === UNTIL_CLOSE) {
      // An answer delimited by the end of the connection.
      this.ex = undefined;
      ex.done(this.answer());
      return;
    }
    this.ex = undefined;
    this.socket.destroy();
    ex.fail(err ?? closedError());
  }

  private onData(chunk: Buf): void {
    const ex = this.ex;
    if (!ex) {
      // Nothing was asked: the connection is out of step.
      this.socket.destroy();
      return;
    }
    ex.answered = true;
    if (this.buf && this.pos < this.buf.length) {
      this.buf = this.pool.rt.Buffer.concat([this.buf.subarray(this.pos), chunk]);
    } else {
      this.buf = chunk;
    }
    this.pos = 0;
    let complete: boolean;
    try {
      complete = this.parse();
    } catch (e) {
      this.destroy();
      ex.fail(e as NodeError);
      return;
    }
    if (!complete) return;
    const answer = this.answer();
    const leftover = this.buf !== undefined && this.pos < this.buf.length;
    this.buf = undefined;
    this.pos = 0;
    this.ex = undefined;
    if (this.close || leftover || this.socket.destroyed || !this.socket.writable) {
      this.socket.destroy();
    } else {
      this.reused = true;
      this.socket.unref();
      this.pool.idle.push(this);
    }
    ex.done(answer);
  }

  private answer(): HttpAnswer {
    let text = "";
    if (this.body.length === 1) text = this.body[0].toString("utf8");
    else if (this.body.length > 1) text = this.pool.rt.Buffer.concat(this.body, this.bodyBytes).toString("utf8");
    if (text.charCodeAt(0) === 0xfeff) text = text.slice(1); // as fetch's text()
    this.body = [];
    return { status: this.status, retryAfter: this.retryAfter, text };
  }

  private take(n: number): number {
    const buf = this.buf as Buf;
    const k = Math.min(n, buf.length - this.pos);
    if (k > 0) {
      this.body.push(buf.subarray(this.pos, this.pos + k));
      this.bodyBytes += k;
      this.pos += k;
    }
    return k;
  }

  /** parse consumes what has arrived; true when the answer is complete. */
  private parse(): boolean {
    const rt = this.pool.rt;
    const buf = this.buf as Buf;
    for (;;) {
      switch (this.phase) {
        case HEAD: {
          const end = buf.indexOf(rt.CRLFCRLF, this.pos);
          if (end < 0) {
            if (buf.length - this.pos > MAX_HEAD_BYTES) throw protocolError("head too large");
            return false;
          }
          const head = buf.toString("latin1", this.pos, end);
          this.pos = end + 4;
          if (!this.head(head)) continue; // an interim (1xx) answer: the real one follows
          if (this.phase === HEAD) return true; // no body
          continue;
        }
        case BODY:
          this.remaining -= this.take(this.remaining);
          if (this.remaining > 0) return false;
          return true;
        case CHUNK_SIZE: {
          const eol = buf.indexOf(rt.CRLF, this.pos);
          if (eol < 0) {
            if (buf.length - this.pos > 1024) throw protocolError("chunk size line too long");
            return false;
          }
          const line = buf.toString("latin1", this.pos, eol);
          this.pos = eol + 2;
          const m = /^\s*([0-9a-fA-F]{1,12})\s*(?:;.*)?$/.exec(line);
          if (!m) throw protocolError("bad chunk size");
          this.remaining = parseInt(m[1], 16);
          this.phase = this.remaining === 0 ? TRAILERS : CHUNK_DATA;
          continue;
        }
        case CHUNK_DATA:
          this.remaining -= this.take(this.remaining);
          if (this.remaining > 0) return false;
          this.phase = CHUNK_END;
          continue;
        case CHUNK_END:
          if (buf.length - this.pos < 2) return false;
          if (buf[this.pos] !== 13 || buf[this.pos + 1] !== 10) throw protocolError("bad chunk end");
          this.pos += 2;
          this.phase = CHUNK_SIZE;
          continue;
        case TRAILERS: {
          const eol = buf.indexOf(rt.CRLF, this.pos);
          if (eol < 0) {
            if (buf.length - this.pos > MAX_HEAD_BYTES) throw protocolError("trailers too large");
            return false;
          }
          const empty = eol === this.pos;
          this.pos = eol + 2;
          if (empty) return true;
          continue;
        }
        case UNTIL_CLOSE:
          this.take(buf.length - this.pos);
          return false;
      }
    }
  }

  /**
   * head reads the status line and the headers that matter, and sets how
   * the body is framed (RFC 9112 section 6.3). False for an interim answer.
   */
  private head(head: string): boolean {
    const m = /^HTTP\/1\.([01]) (\d{3})(?: |\r|$)/.exec(head);
    if (!m) throw protocolError("bad status line");
    const http10 = m[1] === "0";
    const status = Number(m[2]);
    let length: string | undefined;
    let encoding: string | undefined;
    let connection = "";
    let retryAfter: string | null = null;
    for (let at = head.indexOf("\r\n"); at >= 0 && at < head.length; ) {
      const next = head.indexOf("\r\n", at + 2);
      const line = head.slice(at + 2, next < 0 ? head.length : next);
      at = next;
      const colon = line.indexOf(":");
      if (colon <= 0) throw protocolError("bad header line");
      const name = line.slice(0, colon).toLowerCase();
      const value = line.slice(colon + 1).trim();
      switch (name) {
        case "content-length":
          if (length !== undefined && length !== value) throw protocolError("conflicting Content-Length");
          length = value;
          break;
        case "transfer-encoding":
          encoding = encoding === undefined ? value : encoding + "," + value;
          break;
        case "connection":
          connection += "," + value.toLowerCase();
          break;
        case "retry-after":
          if (retryAfter === null) retryAfter = value;
          break;
      }
    }
    if (status < 200) {
      if (status === 101) throw protocolError("unexpected protocol switch");
      return false;
    }
    this.status = status;
    this.retryAfter = retryAfter;
    this.close = http10 ? !/(^|,)\s*keep-alive\s*(,|$)/.test(connection) : /(^|,)\s*close\s*(,|$)/.test(connection);
    if (status === 204 || status === 304) {
      this.phase = HEAD;
    } else if (encoding !== undefined) {
      if (/(^|,)\s*chunked\s*$/i.test(encoding)) {
        this.phase = CHUNK_SIZE;
      } else {
        this.phase = UNTIL_CLOSE;
        this.close = true;
      }
    } else if (length !== undefined) {
      if (!/^\d{1,15}$/.test(length)) throw protocolError("bad Content-Length");
      this.remaining = Number(length);
      this.phase = this.remaining === 0 ? HEAD : BODY;
    } else {
      this.phase = UNTIL_CLOSE;
      this.close = true;
    }
    return true;
  }
}

/** A kept-alive connection of p, the most recently used first, or a new one. */
function acquire(p: Pool): Conn {
  for (;;) {
    const conn = p.idle.pop();
    if (!conn) break;
    if (conn.socket.destroyed || !conn.socket.writable) {
      conn.destroy(); // closed by the server: it goes
      continue;
    }
    conn.socket.ref();
    return conn;
  }
  return new Conn(p, p.connect());
}

function send(p: Pool, c: HttpCall): Promise<HttpAnswer> {
  return new Promise<HttpAnswer>((resolve, reject) => {
    const signal = c.signal;
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    let request: string;
    try {
      request = `${c.method} ${p.prefix}${c.path} HTTP/1.1\r\nhost: ${p.host}\r\n${headerBlock(c.headers)}`;
      if (c.body !== undefined) {
        request += `content-length: ${p.rt.Buffer.byteLength(c.body, "utf8")}\r\n\r\n${c.body}`;
      } else {
        request += c.method === "GET" ? "\r\n" : "content-length: 0\r\n\r\n";
      }
    } catch (e) {
      // An invalid header, refused before anything was sent.
      reject(e);
      return;
    }
    let settled = false;
    let conn: Conn | undefined;
    const finish = () => {
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    };
    const onAbort = () => {
      if (settled) return;
      finish();
      conn?.destroy();
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      if (settled) return;
      finish();
      conn?.destroy();
      reject(markTimeout(timeoutError(c.timeoutMs)));
    }, c.timeoutMs);
    signal?.addEventListener("abort", onAbort, { once: true });

    let firstErr: NodeError | undefined;
    const attempt = (fresh: boolean) => {
      let cn: Conn;
      try {
        cn = fresh ? new Conn(p, p.connect()) : acquire(p);
      } catch (e) {
        // Refused by connect() itself (a bad port, say): nothing was sent.
        finish();
        reject(firstErr ?? e);
        return;
      }
      conn = cn;
      const ex: Exchange = {
        answered: false,
        done: (answer) => {
          if (settled) return;
          finish();
          resolve(answer);
        },
        fail: (err) => {
          if (settled) return;
          if (firstErr === undefined && cn.reused && !ex.answered && (err.code === "ECONNRESET" || err.code === "EPIPE")) {
            // The server closed the idle connection as this request went
            // out on it: send it again, once, on a new one. (Every request
            // of the SDK may be repeated; should that fail too, the first
            // error stands, as the request may have been read.)
            firstErr = err;
            attempt(true);
            return;
          }
          finish();
          reject(firstErr ?? err);
        },
      };
      cn.start(ex, request);
    };
    attempt(false);
  });
}
