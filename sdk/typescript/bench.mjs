#!/usr/bin/env node
// Benchmarks the TypeScript SDK against a running cluster: N concurrent
// callers, each looping claim + complete(executed) on fresh keys for a
// duration; prints one line: claims/s and the p50/p99 of claim+complete.
//
//   node sdk/typescript/bench.mjs --addrs http://127.0.0.1:8101,http://127.0.0.1:8102 \
//     [--api-key ik_...] [--concurrency 16] [--duration 10] [--tool bench.noop] [--do]
//     [--transport auto|fetch|node]
//
// --do measures client.do() (claim, complete, commit) instead. --transport
// picks the client's transport (default auto: node:net on Node). Addresses
// and key also come from INTENTD_ADDRS / INTENTD_API_KEY.

import { Client } from "./dist/index.js";

function args(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith("--")) continue;
    const [name, inline] = a.slice(2).split("=", 2);
    if (inline !== undefined) out[name] = inline;
    else if (i + 1 < argv.length && !argv[i + 1].startsWith("--")) out[name] = argv[++i];
    else out[name] = true;
  }
  return out;
}

const opt = args(process.argv.slice(2));
const addrs = String(opt.addrs ?? process.env.INTENTD_ADDRS ?? "").split(",").filter(Boolean);
if (addrs.length === 0) {
  console.error("bench: --addrs (or INTENTD_ADDRS) is required");
  process.exit(2);
}
const concurrency = Number(opt.concurrency ?? 16);
const durationMs = Number(opt.duration ?? 10) * 1000;
const tool = String(opt.tool ?? "bench.noop");
const useDo = opt.do === true;
const apiKey = opt["api-key"] ?? process.env.INTENTD_API_KEY;
const transport = opt.transport === undefined ? undefined : String(opt.transport);

const client = new Client({ addrs, apiKey, transport, ownerPrefix: `bench/${process.pid}` });
await client.discover().catch(() => {});
const prefix = `bench-ts:${Date.now().toString(36)}:${process.pid}`;
const latencies = [];
let claims = 0;
let errors = 0;
let firstError;
const end = Date.now() + durationMs;

async function worker(w) {
  for (let i = 0; Date.now() < end; i++) {
    const key = `${prefix}:${w}:${i}`;
    const t0 = performance.now();
    try {
      if (useDo) {
        await client.do({ key, tool, payload: { w, i } }, () => ({ ok: true }));
      } else {
        const g = await client.claim({ key, tool, payload: { w, i } });
        await client.complete({ key, owner: g.owner, fencingToken: g.fencingToken, outcome: "executed", result: { ok: true } });
      }
      latencies.push(performance.now() - t0);
      claims++;
    } catch (e) {
      errors++;
      firstError ??= e;
    }
  }
}

const start = Date.now();
await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
const secs = (Date.now() - start) / 1000;
latencies.sort((a, b) => a - b);
const pct = (p) => (latencies.length ? latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] : NaN);
console.log(
  `intentd-ts bench: ${useDo ? "do" : "claim+complete"} transport=${transport ?? "auto"} concurrency=${concurrency} duration=${secs.toFixed(1)}s ` +
    `claims=${claims} claims/s=${(claims / secs).toFixed(1)} p50=${pct(50).toFixed(2)}ms p99=${pct(99).toFixed(2)}ms errors=${errors}`,
);
if (firstError) console.error("first error:", String(firstError));
process.exit(errors > 0 && claims === 0 ? 1 : 0);
