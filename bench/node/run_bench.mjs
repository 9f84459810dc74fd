#!/usr/bin/env node
// run('print(1)') through the Node package, against the same call through the Python module
// and against a bare host `python3 -c`, in one run, on one `codebox serve` (a unix socket in a
// private temporary directory; it ends with this process). Each client times calls on one box
// of its own after a warm-up; the Node path should cost no more than the Python one.
//
// usage: node bench/node/run_bench.mjs [RUNS]      (after `cd js && npm ci`)
// env: CODEBOX_BIN (default build/release/bin/codebox), CODEBOX_PYTHON_BUILD (the directory of
//      the _codebox extension; default build/release/python)
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const runs = Number(process.argv[2] ?? 200);
const codebox = process.env.CODEBOX_BIN ?? join(root, "build", "release", "bin", "codebox");
const pythonBuild = process.env.CODEBOX_PYTHON_BUILD ?? join(root, "build", "release", "python");
const { CodeBox } = await import(join(root, "js", "dist", "index.js"));

function summary(ms) {
  const sorted = [...ms].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return { p50: at(0.5), p90: at(0.9), mean: ms.reduce((a, b) => a + b, 0) / ms.length };
}

const dir = mkdtempSync(join(tmpdir(), "codebox-bench-"));
const address = `unix:${join(dir, "codebox.sock")}`;
const server = spawn(codebox, ["serve", "--listen", address, "--exit-on-stdin-eof", "--private-dir", dir, "--drain", "1"], { stdio: ["pipe", "pipe", "ignore"] });
await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error("codebox serve did not start within 30 s")), 30_000);
  server.stdout.on("data", (c) => { if (String(c).includes("listening on")) { clearTimeout(timer); resolve(); } });
  server.once("exit", (code) => reject(new Error(`codebox serve exited ${code}`)));
});

// Node: one box, a warm-up, then `runs` calls.
const box = new CodeBox({ server: address });
for (let i = 0; i < 5; i++) await box.run("print(1)");
const node = [];
for (let i = 0; i < runs; i++) {
  const t = performance.now();
  if ((await box.run("print(1)")) !== "1\n") throw new Error("node: a wrong answer");
  node.push(performance.now() - t);
}
await box.stop();

// Python: the same, in a python3 of its own, on the same server.
const pythonScript = `
import json, sys, time, codebox
box = codebox.SyncCodeBox(server=sys.argv[1])
box.start()
for _ in range(5): box.run("print(1)")
ms = []
for _ in range(int(sys.argv[2])):
    t = time.perf_counter()
    assert box.run("print(1)") == "1\\n"
    ms.append((time.perf_counter() - t) * 1000)
box.close()
print(json.dumps(ms))
`;
let python = null;
if (existsSync(pythonBuild)) {
  const env = { ...process.env, PYTHONPATH: [join(root, "python"), pythonBuild, process.env.PYTHONPATH].filter(Boolean).join(":") };
  python = JSON.parse(execFileSync("python3", ["-c", pythonScript, address, String(runs)], { env, encoding: "utf8", timeout: 600_000 }));
}

// Bare: python3 -c on the host, no box (the system's, not a version manager's shim script).
const hostPython = existsSync("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
const bare = [];
for (let i = 0; i < Math.min(runs, 100); i++) {
  const t = performance.now();
  execFileSync(hostPython, ["-c", "print(1)"]);
  bare.push(performance.now() - t);
}

const rows = [["node package", summary(node)], ["python module", python && summary(python)], ["bare python3 -c", summary(bare)]];
console.log(`run('print(1)'), ${runs} calls each on one box of one codebox serve (${codebox}):`);
for (const [name, s] of rows) {
  console.log(s ? `  ${name.padEnd(16)} p50 ${s.p50.toFixed(2)} ms  p90 ${s.p90.toFixed(2)} ms  mean ${s.mean.toFixed(2)} ms` : `  ${name.padEnd(16)} skipped: no _codebox extension in ${pythonBuild}`);
}
if (python) {
  const ratio = summary(node).p50 / summary(python).p50;
  console.log(`  node / python (p50): ${ratio.toFixed(2)} ${ratio <= 1.1 ? "(within 1.1)" : "(OVER 1.1)"}`);
}
process.exit(0);
