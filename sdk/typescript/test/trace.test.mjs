// The W3C trace context the client sends: what the traceInject hook
// writes (OpenTelemetry: (carrier) => propagation.inject(context.active(), carrier)),
// a well-formed traceparent and its tracestate only.

import { test } from "node:test";
import assert from "node:assert/strict";

import * as sdk from "../dist/index.js";
import { startCluster } from "./fake.mjs";

const { Client } = sdk;
const transport = process.env.INTENTD_TEST_TRANSPORT || undefined;

const TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const BAD = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

function hook(tp) {
  return (carrier) => {
    carrier.traceparent = tp;
    carrier.tracestate = "vendor=x";
    carrier.authorization = "Bearer stolen";
  };
}

const cases = [
  { name: "no hook", inject: undefined, tp: undefined, ts: undefined },
  { name: "from the hook", inject: hook(TP), tp: TP, ts: "vendor=x" },
  { name: "a malformed traceparent", inject: hook(BAD), tp: undefined, ts: undefined },
  { name: "a hook that throws", inject: () => { throw new Error("broken"); }, tp: undefined, ts: undefined },
];

for (const [i, tc] of cases.entries()) {
  test(`trace context: ${tc.name}`, async (t) => {
    const fc = await startCluster({ ids: ["a"], leader: "a" });
    t.after(() => fc.close());
    const c = new Client({ addrs: fc.urls(), transport, discovery: false, traceInject: tc.inject });
    assert.equal((await c.claim({ key: `k${i}`, tool: "t", payload: 1 })).status, "granted");
    const claims = fc.requests.filter((r) => r.op === "claim");
    assert.equal(claims.length, 1);
    const h = claims[0].headers;
    assert.equal(h.traceparent, tc.tp);
    assert.equal(h.tracestate, tc.ts);
    assert.equal(h.authorization, undefined);
  });
}

test("validTraceparent", () => {
  for (const [tp, want] of [
    [TP, true],
    ["00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true],
    ["00-00000000000000000000000000000000-00f067aa0ba902b7-01", false],
    ["00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false],
    [TP.toUpperCase(), false],
    [BAD, false],
    ["", false],
  ]) {
    assert.equal(sdk.validTraceparent(tp), want, tp);
  }
});
