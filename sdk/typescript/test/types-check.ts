// Compiled with tsc --noEmit by test.sh (never run): the public API as a
// TypeScript user sees it through dist/*.d.ts.
import {
  Client,
  DivergentError,
  EffectUnknown,
  InFlightError,
  OutcomeUnknownError,
  ProblemError,
  TokenToolForbiddenError,
  TokenWrongToolError,
  key,
  keyOf,
  once,
} from "../dist/index.js";
import type { EffectResult, Grant, Intent, Policy } from "../dist/index.js";

async function example(): Promise<void> {
  const ledger = new Client({ addrs: ["http://127.0.0.1:8101"], apiKey: "ik_x", timeoutMs: 10_000 });
  const viaFetch: Client = new Client({ addrs: "127.0.0.1:8101", transport: "fetch" });
  await viaFetch.health();
  // @ts-expect-error: not a transport
  new Client({ addrs: "127.0.0.1:8101", transport: "xhr" });
  const ac = new AbortController();
  const res: EffectResult<{ chargeId: string }> = await ledger.do(
    { key: key("stripe.charge", "order-91"), tool: "stripe.charge", payload: { amount: 1299 }, leaseMs: 10_000 },
    async (grant: Grant, signal: AbortSignal) => {
      if (signal.aborted) throw new EffectUnknown("stopped", { cause: signal.reason });
      return { chargeId: `ch_${grant.fencingToken}` };
    },
    { signal: ac.signal },
  );
  const status: "executed" | "duplicate" | "failed" | undefined = res.status;
  const id: string | undefined = res.value?.chargeId;
  void status;
  void id;

  const charge = ledger.once(
    { tool: "stripe.charge", key: (a: { order: string; amount: number }) => [a.order] },
    async (a, { grant }) => ({ order: a.order, token: grant.fencingToken }),
  );
  const out: { order: string; token: number } = await charge({ order: "o", amount: 1 });
  void out;
  const f2 = once(ledger, { tool: "t", key: (a: string) => keyOf("t", a) }, (a) => a.length);
  const n: number = await f2("x", { abortSignal: ac.signal });
  void n;

  try {
    const it: Intent = await ledger.get("k", { waitMs: 1000, afterVersion: 3 });
    const v: number = it.version;
    void v;
  } catch (err) {
    if (err instanceof InFlightError || err instanceof DivergentError) {
      const ms: number = err.retryAfterMs;
      const code: string = err.code;
      const st: number = err.status;
      void ms, code, st;
    } else if (err instanceof OutcomeUnknownError) {
      // retry the same call
    } else if (err instanceof ProblemError) {
      const i: Intent | undefined = err.intent;
      void i;
    }
  }
  try {
    const tv = await ledger.verifyToken("gex_x", { payload: { amount: 1299 }, tool: "stripe.charge" });
    const aud: string = tv.claims.tool;
    void aud;
  } catch (err) {
    if (err instanceof TokenWrongToolError || err instanceof TokenToolForbiddenError) {
      // not this tool's token: do not act (it was not spent)
    }
  }
  const p: Policy = await ledger.putPolicy({ name: "p", tools: ["x.*"], requireApproval: true, approvalsRequired: 1 });
  void p;
}
void example;
