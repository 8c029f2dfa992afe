// The package itself must run on any fetch runtime (Node >= 18, Bun, Deno):
// no node: import, no Node global, no dependency.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const dist = fileURLToPath(new URL("../dist/", import.meta.url));

test("dist/ imports nothing but itself and uses no Node-only global", () => {
  const files = readdirSync(dist).filter((f) => f.endsWith(".js"));
  assert.ok(files.length >= 7);
  for (const f of files) {
    // code only: comments may mention anything
    const src = readFileSync(dist + f, "utf8").replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
    for (const m of src.matchAll(/\b(?:import|export)\b[^;]*?\bfrom\s+["']([^"']+)["']/g)) {
      assert.match(m[1], /^\.\/[a-z0-9]+\.js$/, `${f} imports ${m[1]}`);
    }
    assert.doesNotMatch(src, /\bimport\s*\(/, `${f}: dynamic import`);
    assert.doesNotMatch(src, /\brequire\s*\(/, `${f}: require`);
    assert.doesNotMatch(src, /\b(process|Buffer|__dirname|setImmediate)\b/, `${f}: a Node-only global`);
  }
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
  assert.equal(pkg.type, "module");
  assert.equal(pkg.dependencies, undefined);
});
