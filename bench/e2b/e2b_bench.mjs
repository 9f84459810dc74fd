#!/usr/bin/env node
// E2B's face against codebox's own API and a bare host python3, in one run
// (docs/SPECIFICATION.md, "E2B face").
//
// Times, per round, from nothing to the first result of `1+1`:
//   e2b:     the E2B SDK (@e2b/code-interpreter, as installed in tests/e2b by scripts/setup):
//            Sandbox.create() + runCode('1+1'), then kill();
//   codebox: the same work through codebox's own HTTP API from the same Node process:
//            POST /v1/boxes {image} + POST /v1/boxes/{id}/run_code {"code": "1+1"}, then DELETE;
//   python3: `/usr/bin/python3 -c 'print(1+1)'` on the host (the floor: no box at all).
// Both servers' boxes are python-data jail boxes of one `codebox serve` on loopback; rounds
// alternate so that the machine's noise falls on both. Prints p50 and p99 of each and the
// ratio e2b / codebox (the target: at most 1.5).
//
//   node bench/e2b/e2b_bench.mjs [--codebox build/release/bin/codebox] [--runs 30]
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const codebox = flag('--codebox', join(ROOT, 'build/release/bin/codebox'));
const runs = Number(flag('--runs', '30'));
const CALL_MS = 120_000;
// The system's python3 itself (a version manager's shim on PATH adds its own start-up).
const PYTHON3 = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
setTimeout(() => { console.error('the benchmark took longer than 30 min'); process.exit(1); },
           1_800_000).unref();

const dir = mkdtempSync(join(tmpdir(), 'codebox-e2b-bench-'));
const token = randomBytes(24).toString('hex');
writeFileSync(join(dir, 'tokens'), `${token}\n`, { mode: 0o600 });
const server = spawn(codebox, ['serve', '--listen', '127.0.0.1:0', '--token-file',
                               join(dir, 'tokens'), '--log-format', 'text', '--driver', 'jail'],
                     { stdio: ['ignore', 'pipe', 'ignore'] });
process.on('exit', () => { server.kill('SIGKILL'); rmSync(dir, { recursive: true, force: true }); });
const url = await new Promise((res, rej) => {
  const timer = setTimeout(() => rej(new Error('codebox serve did not start')), 60_000);
  createInterface({ input: server.stdout }).once('line', (line) => {
    clearTimeout(timer);
    const m = /listening on (127\.0\.0\.1:\d+)/.exec(line);
    m ? res(`http://${m[1]}`) : rej(new Error(line));
  });
});
process.env.E2B_API_URL = url;
process.env.E2B_SANDBOX_URL = url;
process.env.E2B_API_KEY = token;
delete process.env.E2B_DEBUG;
const sdkPath = createRequire(join(ROOT, 'tests/e2b/package.json')).resolve('@e2b/code-interpreter');
const { Sandbox } = await import(pathToFileURL(sdkPath));

async function api(method, path, body) {
  const r = await fetch(url + path, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(CALL_MS),
  });
  const text = await r.text();
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

const paths = {
  async e2b() {
    const t0 = performance.now();
    const sandbox = await Sandbox.create();
    const e = await sandbox.runCode('1+1');
    const ms = performance.now() - t0;
    if (e.text !== '2') throw new Error(`e2b: 1+1 gave ${JSON.stringify(e.text)}`);
    await sandbox.kill();
    return ms;
  },
  async codebox() {
    const t0 = performance.now();
    const box = await api('POST', '/v1/boxes', { image: 'python-data', workdir: '/home/user' });
    const e = await api('POST', `/v1/boxes/${box.id}/run_code`, { code: '1+1' });
    const ms = performance.now() - t0;
    const text = e.results?.find((r) => r.is_main_result)?.data?.['text/plain'];
    if (text !== '2') throw new Error(`codebox: 1+1 gave ${JSON.stringify(e)}`);
    await api('DELETE', `/v1/boxes/${box.id}`);
    return ms;
  },
  async python3() {
    const t0 = performance.now();
    const r = spawnSync(PYTHON3, ['-c', 'print(1+1)'], { encoding: 'utf8' });
    const ms = performance.now() - t0;
    if (r.stdout !== '2\n') throw new Error(`python3: ${r.stdout}${r.stderr}`);
    return ms;
  },
};

const times = { e2b: [], codebox: [], python3: [] };
for (const name of Object.keys(paths)) await paths[name]();  // warm-up: images, caches
for (let i = 0; i < runs; i++) {
  const order = i % 2 ? ['codebox', 'e2b', 'python3'] : ['e2b', 'codebox', 'python3'];
  for (const name of order) times[name].push(await paths[name]());
}
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
console.log(`e2b_bench: ${runs} rounds, create + first runCode('1+1') result, ms`);
for (const name of Object.keys(times)) {
  console.log(`  ${name.padEnd(8)} p50 ${pct(times[name], 50).toFixed(1).padStart(8)}` +
              `   p99 ${pct(times[name], 99).toFixed(1).padStart(8)}`);
}
const ratio50 = pct(times.e2b, 50) / pct(times.codebox, 50);
const ratio99 = pct(times.e2b, 99) / pct(times.codebox, 99);
console.log(`  e2b / codebox: p50 ${ratio50.toFixed(2)}x, p99 ${ratio99.toFixed(2)}x (target: <= 1.5x)`);
server.kill('SIGTERM');
process.exit(0);
