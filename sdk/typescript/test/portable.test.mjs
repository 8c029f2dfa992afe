// The package itself must run on any fetch runtime (Node >= 18, Bun, Deno):
// no node: import, no Node global, no dependency. The one exception is
// node.js, the Node transport: it imports node:net, node:tls and
// node:buffer dynamically, only when the client runs on Node, and reads
// globalThis.process only to tell that it does.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const dist = fileURLToPath(new URL("../dist/", import.meta.url));

// code only: comments may mention anything
const code = (f) => readFileSync(dist + f, "utf8").replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");

test("dist/ imports nothing but itself and uses no Node-only global", () => {
  const files = readdirSync(dist).filter((f) => f.endsWith(".js"));
  assert.ok(files.length >= 8);
  assert.ok(files.includes("node.js"));
  for (const f of files) {
    const src = code(f);
    for (const m of src.matchAll(/\b(?:import|export)\b[^;]*?\bfrom\s+["']([^"']+)["']/g)) {
      assert.match(m[1], /^\.\/[a-z0-9]+\.js$/, `${f} imports ${m[1]}`);
    }
    assert.doesNotMatch(src, /\brequire\s*\(/, `${f}: require`);
    if (f === "node.js") continue;
    assert.doesNotMatch(src, /\bimport\s*\(/, `${f}: dynamic import`);
    assert.doesNotMatch(src, /\b(process|Buffer|__dirname|setImmediate)\b/, `${f}: a Node-only global`);
  }
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
  assert.equal(pkg.type, "module");
  assert.equal(pkg.dependencies, undefined);
});

test("node.js: the node: modules are imported on demand, and no Node global is used", () => {
  const src = code("node.js");
  // One dynamic import, of a name bundlers cannot follow ...
  assert.equal([...src.matchAll(/\bimport\s*\(/g)].length, 1);
  assert.match(src, /\bimport\s*\(\s*specifier\s*\)/);
  // ... called with these modules only.
  const specs = [...src.matchAll(/importDynamic\(\s*["']([^"']+)["']\s*\)/g)].map((m) => m[1]).sort();
  assert.deepEqual([...new Set(specs)], ["node:buffer", "node:net", "node:tls"]);
  // process only as globalThis's property; Buffer only as the imported module's.
  assert.doesNotMatch(src, /(?<![.\w$])(process|Buffer|__dirname|setImmediate)\b(?!\s*:)/);
});

test("the Node transport is never loaded off Node", async () => {
  // Bun and Deno set process.versions.node too; they keep fetch.
  const { onNode } = await import("../dist/node.js");
  assert.equal(onNode(), true);
  const saved = globalThis.Bun;
  globalThis.Bun = {};
  try {
    assert.equal(onNode(), false);
  } finally {
    if (saved === undefined) delete globalThis.Bun;
    else globalThis.Bun = saved;
  }
});
