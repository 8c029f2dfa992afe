// The audit chain, verified in the browser with WebCrypto.
//
// Each event of a namespace's audit log is JSON whose "prev" is the hash of
// the event before it (the log's anchor for the first retained one), and
// whose recorded hash is the SHA-256 of its own bytes. The check is the
// Go SDK's (client.ChainVerifier, which `intentctl audit verify` runs), in
// the same order, so both name the same first break: seqs contiguous from
// the head's first retained event, prev equal to the previous hash, the
// SHA-256 of the event's bytes as the server sent them equal to its hash.
// The bytes come from json.raw: the exact source text of the event in the
// answer, never a re-encoding.

import { get } from "./api.js";
import { raw } from "./json.js";

const utf8 = new TextEncoder();

// hasWebCrypto reports whether SHA-256 is available: browsers offer
// crypto.subtle only in a secure context (HTTPS, or localhost).
export function hasWebCrypto() {
  return !!(globalThis.crypto && globalThis.crypto.subtle && globalThis.isSecureContext);
}

export async function sha256hex(text) {
  const sum = new Uint8Array(await crypto.subtle.digest("SHA-256", utf8.encode(text)));
  return Array.from(sum, (b) => b.toString(16).padStart(2, "0")).join("");
}

// ChainBroken names the first broken link.
export class ChainBroken extends Error {
  constructor(seq, reason) {
    super(seq === null ? `audit chain broken: ${reason}` : `audit chain broken at seq ${seq}: ${reason}`);
    this.seq = seq;
    this.reason = reason;
  }
}

// ChainVerifier checks events one by one, in order, from a head's first
// retained event and anchor.
export class ChainVerifier {
  constructor(head) {
    this.prev = head.anchor;
    this.next = head.first_seq;
    this.count = 0;
    this.first = 0;
    this.last = 0;
  }

  // add checks the next record of a parsed audit page ({seq, hash, event});
  // it throws ChainBroken at the first break.
  async add(record) {
    const text = raw(record, "event");
    if (text === undefined || !record.event || typeof record.event !== "object") {
      throw new ChainBroken(record.seq, "the event is not JSON");
    }
    const sum = await sha256hex(text);
    const ev = record.event;
    if (record.seq !== this.next || ev.seq !== record.seq) {
      throw new ChainBroken(record.seq, `expected seq ${this.next} (event says ${ev.seq}): an event is missing or reordered`);
    }
    if (ev.prev !== this.prev) {
      throw new ChainBroken(record.seq, `prev is ${ev.prev}, the previous event hashes to ${this.prev}`);
    }
    if (sum !== record.hash) {
      throw new ChainBroken(record.seq, `the event's bytes hash to ${sum}, not the recorded ${record.hash}: it was altered`);
    }
    if (this.count === 0) this.first = record.seq;
    this.prev = record.hash;
    this.next = record.seq + 1;
    this.last = record.seq;
    this.count++;
  }

  // finish checks the chain against a head read at or after its last
  // event (events appended since are not an error).
  finish(head) {
    if (this.count === 0) return;
    if (this.last > head.last_seq) {
      throw new ChainBroken(null, `the chain goes to seq ${this.last} beyond the head's last seq ${head.last_seq}`);
    }
    if (this.last === head.last_seq && this.prev !== head.last_hash) {
      throw new ChainBroken(null, `the chain ends at seq ${this.last} with hash ${this.prev}, the head says ${head.last_hash}`);
    }
  }
}

// verifyLog pages through the namespace's whole retained audit log and
// verifies it. progress(done, total) is called after each page. It
// returns { head, count, first, last } or throws ChainBroken (or an API
// error).
export async function verifyLog(progress = () => {}, signal) {
  let since = 0;
  let v = null;
  let head = null;
  for (;;) {
    const page = await get(`/v1/audit?since=${since}&limit=1000`, { signal, timeoutMs: 60000 });
    head = page.head;
    if (!v) v = new ChainVerifier(head);
    for (const r of page.events || []) await v.add(r);
    progress(v.count, head.last_seq - head.first_seq + 1);
    if (!page.next) break;
    if (page.next <= since) throw new Error(`the server's next page (${page.next}) does not advance past ${since}`);
    since = page.next;
  }
  v.finish(head);
  return { head, count: v.count, first: v.first, last: v.last };
}
