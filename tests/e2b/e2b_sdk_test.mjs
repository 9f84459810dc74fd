// codebox's E2B-compatible face driven by E2B's own JavaScript SDK: the npm package `e2b`
// (installed into tests/e2b/node_modules by scripts/setup, version pinned by package-lock.json),
// pointed at `codebox serve --listen 127.0.0.1:0 --token-file F` the way a user would point it,
// by E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY. It covers the control plane (create with
// metadata, envs and a timeout; isRunning, getInfo, list with a metadata filter, setTimeout,
// connect, getMetrics of the jail's cgroup, pause refused as unsupported, kill; a warm pool
// serving a plain create) and commands over envd's Connect protocol (output and its
// callbacks, exit codes, cwd and home, the user `user` and root on request, sandbox and
// per-call envs, a command's timeout, background commands with stdin, list, disconnect and
// reconnect, kill), terminals, files (gzip uploads and pre-signed URLs too), the code interpreter, the SDK's error
// classes for a wrong key and unknown sandboxes, two sandboxes used at once that see only
// their own files, and a sandbox whose lifetime ends under a running command.
//
//   node tests/e2b/e2b_sdk_test.mjs CODEBOX
//
// Prints "ok: CHECK" for each check that passed. Exits 0 when every check passed, 1 with a
// message naming the failed check, and 77 (CTest's skip) with the reason when the SDK is not
// installed or this host cannot run a jail box of the python image (what E2B's template "base"
// gets), unless CODEBOX_TESTS_REQUIRE_BOX=1 (CI) makes those failures too. Every wait is
// bounded.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const SKIP = 77;
const IMAGE = 'python'; // what the template "base", the SDK's default, is served by
const CREATE_MS = 180_000; // one Sandbox.create (a box starts)
const CALL_MS = 90_000; // any other SDK call (the SDK's own request timeout is 60 s)
const WHOLE_MS = 840_000; // the whole script, inside CTest's 900 s
const requireBox = process.env.CODEBOX_TESTS_REQUIRE_BOX === '1';

// The server this script started: killed however the script exits, so that it does not outlive
// the test (and hold the test runner's output pipe open).
let server = null;
let workDir = null;
process.on('exit', () => {
  if (server && server.exitCode === null && server.signalCode === null) server.kill('SIGKILL');
  if (workDir) rmSync(workDir, { recursive: true, force: true });
});

function fail(message) {
  console.error(`FAIL: ${message}`);
  process.exit(1);
}

function skip(reason) {
  if (requireBox) fail(`${reason} (CODEBOX_TESTS_REQUIRE_BOX=1: this must not be skipped)`);
  console.log(`SKIP: ${reason}`);
  process.exit(SKIP);
}

setTimeout(() => fail(`the test took longer than ${WHOLE_MS / 1000} s`), WHOLE_MS).unref();
process.on('unhandledRejection', (e) => fail(`an unhandled rejection: ${e?.stack ?? e}`));

// A failed condition inside a check: the check's runner names the check in the message.
class CheckFailed extends Error {}

function check(condition, what, detail) {
  if (!condition) {
    throw new CheckFailed(detail === undefined ? what : `${what}: ${JSON.stringify(detail)}`);
  }
}

// `promise`, or a rejection naming `what` when it has not settled in `ms`.
function within(ms, what, promise) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new CheckFailed(`${what}: no answer in ${ms / 1000} s`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

// The error `promise` rejects with (in `ms`); a check failure when it resolves instead.
async function rejection(ms, what, promise) {
  let value;
  try {
    value = await within(ms, what, promise);
  } catch (e) {
    if (e instanceof CheckFailed) throw e;
    return e;
  }
  throw new CheckFailed(`${what} resolved instead of rejecting: ${describe(value)}`);
}

function describe(value) {
  if (value instanceof Error) return `${value.name}: ${value.message}`;
  try {
    return JSON.stringify(value);
  } catch {
    return String(value);
  }
}

function sameRecord(a, b) {
  const sorted = (r) => JSON.stringify(Object.entries(r ?? {}).sort());
  return sorted(a) === sorted(b);
}

let passed = 0;

// Runs one named check; its failure (a CheckFailed or anything the SDK threw) ends the test with
// the check's name, after the server is stopped.
async function step(name, body) {
  let note;
  try {
    note = await body();
  } catch (e) {
    const why = e instanceof CheckFailed ? e.message : `${e?.stack ?? e}`;
    console.error(`FAIL: ${name}: ${why}`);
    await stopServe();
    process.exit(1);
  }
  passed++;
  console.log(`ok: ${name}${note ? ` (${note})` : ''}`);
}

const codebox = process.argv[2];
if (!codebox) fail('usage: e2b_sdk_test.mjs CODEBOX');

// E2B's SDKs need Node.js 20.18 or newer: an older one is a missing tool, not a failure
// (scripts/setup says what to install).
{
  const [major, minor] = process.versions.node.split('.').map(Number);
  if (major < 20 || (major === 20 && minor < 18)) {
    console.log(`SKIP: E2B's SDKs need Node.js 20.18 or newer; this is ${process.versions.node}`);
    process.exit(SKIP);
  }
}

// The SDK is looked for before anything starts, but imported only once the environment that
// points it at codebox is set, as a user's program would have it.
try {
  import.meta.resolve('e2b');
} catch (e) {
  skip(`E2B's SDK (npm package e2b) is not installed (run scripts/setup, or npm ci --prefix ` +
       `tests/e2b): ${e.message}`);
}

function requireBoxHost() {
  if (process.geteuid && process.geteuid() !== 0) skip('jail boxes need root here');
  const probe = spawnSync(codebox, ['run', '--driver', 'jail', '--image', IMAGE, 'print(6 * 7)'],
                          { encoding: 'utf8', timeout: 180_000, env: process.env });
  if (probe.status === 0 && probe.stdout.includes('42')) return;
  const why = `${probe.stderr ?? ''}${probe.error ? probe.error.message : ''}`.trim();
  if (/codebox image build|no recipe|not built/.test(why)) {
    skip(`a jail box of the ${IMAGE} image cannot run: ${why}`);
  }
  fail(`a ${IMAGE} box does not run: ${why || probe.stdout}`);
}

// `codebox serve` on a free loopback port with one token; resolves to its base URL.
function startServe(tokenFile) {
  return new Promise((resolve, reject) => {
    const child = spawn(codebox, ['serve', '--listen', '127.0.0.1:0', '--token-file', tokenFile,
                                  '--log-format', 'text', '--driver', 'jail', '--image', IMAGE,
                                  // E2B's options for the base template (docs/e2b.md): a plain
                                  // create takes this pool's box.
                                  '--pool', `${IMAGE}=1,user=user,workdir=/home/user,` +
                                            'env=HOME=/home/user,box_timeout=none'],
                        { stdio: ['ignore', 'pipe', 'inherit'], env: process.env });
    server = child;
    const timer = setTimeout(() => reject(new Error('codebox serve did not start in 60 s')),
                             60_000);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`codebox serve exited (${code ?? signal}) at start`));
    });
    const lines = createInterface({ input: child.stdout });
    lines.once('line', (line) => {
      clearTimeout(timer);
      const m = /listening on (127\.0\.0\.1:\d+)/.exec(line);
      if (!m) return reject(new Error(`unexpected first line of codebox serve: ${line}`));
      resolve(`http://${m[1]}`);
    });
    // Later lines are passed on, and reading them keeps the pipe from filling.
    lines.on('line', (line) => console.log(`[serve] ${line}`));
  });
}

// SIGTERM (the server destroys its boxes), SIGKILL after 30 s.
async function stopServe() {
  const child = server;
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  await new Promise((res) => {
    const t = setTimeout(() => {
      child.kill('SIGKILL');
      res();
    }, 30_000);
    child.on('exit', () => {
      clearTimeout(t);
      res();
    });
    child.kill('SIGTERM');
  });
}

requireBoxHost();

workDir = mkdtempSync(join(tmpdir(), 'codebox-e2b-test-'));
const token = randomBytes(24).toString('hex');
const tokenFile = join(workDir, 'tokens');
writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
let url;
try {
  url = await startServe(tokenFile);
} catch (e) {
  fail(`codebox serve: ${e.message}`);
}

// What a user sets to use codebox instead of E2B's cloud. E2B_DEBUG=true would make the SDK skip
// the control plane altogether; E2B_DOMAIN does not matter once both URLs are given.
process.env.E2B_API_URL = url;
process.env.E2B_SANDBOX_URL = url;
process.env.E2B_API_KEY = token;
delete process.env.E2B_DEBUG;
delete process.env.E2B_ACCESS_TOKEN;

let e2b;
try {
  e2b = await import('e2b');
} catch (e) {
  await stopServe();
  skip(`E2B's SDK (npm package e2b) cannot be imported: ${e.message}`);
}
const {
  Sandbox, SandboxError, TimeoutError, NotFoundError, SandboxNotFoundError, AuthenticationError,
  CommandExitError,
} = e2b;

// Sandboxes this script made and has not killed: killed at the end, whatever passed.
const made = new Set();
async function create(opts) {
  const sandbox = await within(CREATE_MS, 'Sandbox.create', Sandbox.create(opts));
  made.add(sandbox.sandboxId);
  return sandbox;
}

const metadata = { suite: 'e2b', 'a b': 'c&d' };
let sandbox;

await step('Sandbox.create with metadata, envs and a timeout', async () => {
  sandbox = await create({ timeoutMs: 120_000, metadata, envs: { FROM_CREATE: 'yes' } });
  check(typeof sandbox.sandboxId === 'string' && sandbox.sandboxId.length > 0,
        'the sandbox has an id', sandbox.sandboxId);
  return sandbox.sandboxId;
});

await step('isRunning is true', async () => {
  const running = await within(CALL_MS, 'isRunning', sandbox.isRunning());
  check(running === true, 'isRunning() of a new sandbox', running);
});

await step('getInfo: id, metadata, startedAt and endAt 120 s later', async () => {
  const info = await within(CALL_MS, 'getInfo', sandbox.getInfo());
  check(info.sandboxId === sandbox.sandboxId, 'getInfo().sandboxId', info.sandboxId);
  check(sameRecord(info.metadata, metadata), 'getInfo().metadata is what create was given',
        info.metadata);
  check(info.startedAt instanceof Date && !Number.isNaN(info.startedAt.getTime()),
        'getInfo().startedAt is a date', String(info.startedAt));
  check(info.endAt instanceof Date && !Number.isNaN(info.endAt.getTime()),
        'getInfo().endAt is a date', String(info.endAt));
  const lifetime = (info.endAt - info.startedAt) / 1000;
  check(Math.abs(lifetime - 120) <= 10, 'endAt - startedAt is about 120 s', lifetime);
  const skew = Math.abs(info.startedAt.getTime() - Date.now()) / 1000;
  check(skew < 120, 'startedAt is about now', info.startedAt.toISOString());
});

// Every page of Sandbox.list(opts), at most 20.
async function listAll(opts) {
  const paginator = Sandbox.list(opts);
  const items = [];
  for (let page = 0; paginator.hasNext; page++) {
    check(page < 20, 'Sandbox.list ends within 20 pages');
    items.push(...await within(CALL_MS, 'Sandbox.list nextItems', paginator.nextItems()));
  }
  return items;
}

await step('Sandbox.list with a metadata filter', async () => {
  const found = await listAll({ query: { metadata } });
  const mine = found.find((s) => s.sandboxId === sandbox.sandboxId);
  check(mine !== undefined, 'the filter {suite: e2b, "a b": "c&d"} lists the sandbox',
        found.map((s) => s.sandboxId));
  check(sameRecord(mine.metadata, metadata), 'the listed sandbox\'s metadata', mine.metadata);
  check(mine.state === 'running', 'the listed sandbox is running', mine.state);
  const none = await listAll({ query: { metadata: { suite: 'nope' } } });
  check(none.length === 0, 'the filter {suite: nope} lists nothing', none.map((s) => s.sandboxId));
  const all = await listAll();
  check(all.some((s) => s.sandboxId === sandbox.sandboxId), 'an unfiltered list has it',
        all.map((s) => s.sandboxId));
});

// Before the commands: 60 s from now (a shortening), then 600 s (an extension), so that the
// checks below do not race the 120 s the sandbox was created with.
await step('setTimeout moves endAt', async () => {
  for (const seconds of [60, 600]) {
    const asked = Date.now();
    await within(CALL_MS, `setTimeout(${seconds * 1000})`, sandbox.setTimeout(seconds * 1000));
    const info = await within(CALL_MS, 'getInfo', sandbox.getInfo());
    const left = (info.endAt.getTime() - asked) / 1000;
    check(Math.abs(left - seconds) <= 10, `after setTimeout(${seconds * 1000}) endAt is about ` +
          `${seconds} s from then`, left);
  }
});

await step('commands.run: exit 0, stdout, stderr and their callbacks', async () => {
  let out = '';
  let err = '';
  const r = await within(CALL_MS, 'commands.run', sandbox.commands.run(
      'echo hello; echo oops >&2',
      { onStdout: (d) => { out += d; }, onStderr: (d) => { err += d; } }));
  check(r.exitCode === 0, 'exitCode', r.exitCode);
  check(r.stdout === 'hello\n', 'stdout', r.stdout);
  check(r.stderr === 'oops\n', 'stderr', r.stderr);
  check(out === 'hello\n', 'what onStdout got', out);
  check(err === 'oops\n', 'what onStderr got', err);
});

await step('commands.run of exit 3 throws CommandExitError', async () => {
  const e = await rejection(CALL_MS, 'commands.run(exit 3)',
                            sandbox.commands.run('echo before; exit 3'));
  check(e instanceof CommandExitError, 'the error is a CommandExitError', describe(e));
  check(e instanceof SandboxError, 'a CommandExitError is a SandboxError', describe(e));
  check(e.exitCode === 3, 'its exitCode', e.exitCode);
  check(e.stdout === 'before\n', 'its stdout', e.stdout);
});

await step('commands.run: cwd, and the home directory by default', async () => {
  const tmp = await within(CALL_MS, 'run pwd in /tmp',
                          sandbox.commands.run('pwd', { cwd: '/tmp' }));
  check(tmp.stdout === '/tmp\n', 'pwd with cwd /tmp', tmp.stdout);
  const home = await within(CALL_MS, 'run pwd', sandbox.commands.run('pwd'));
  check(home.stdout === '/home/user\n', 'pwd without cwd', home.stdout);
});

await step('commands run as E2B\'s user, and as root when a call asks', async () => {
  // The server maps a second id into a jail only as host root; otherwise all is root.
  const asRoot = process.getuid() !== 0;
  const probe = 'whoami; id -u; echo $HOME';
  const plain = await within(CALL_MS, 'run whoami', sandbox.commands.run(probe));
  check(plain.stdout === (asRoot ? 'root\n0\n/home/user\n' : 'user\n1000\n/home/user\n'),
        'whoami, id -u and $HOME of a call without user', plain.stdout);
  const root = await within(CALL_MS, 'run whoami as root',
                            sandbox.commands.run(probe, { user: 'root' }));
  check(root.stdout === 'root\n0\n/root\n', 'the same with user root', root.stdout);
  const named = await within(CALL_MS, 'run whoami as user',
                             sandbox.commands.run('whoami', { user: 'user' }));
  check(named.stdout === (asRoot ? 'root\n' : 'user\n'), 'the same with user user', named.stdout);
  await within(CALL_MS, 'files.write', sandbox.files.write('/home/user/owned.txt', 'mine\n'));
  const owner = await within(CALL_MS, 'stat the written file',
                             sandbox.commands.run('stat -c %U /home/user/owned.txt; cat owned.txt'));
  check(owner.stdout === (asRoot ? 'root\nmine\n' : 'user\nmine\n'),
        'a written file is the user\'s', owner.stdout);
  const e = await rejection(CALL_MS, 'commands.run as nobody',
                            sandbox.commands.run('id', { user: 'nobody' }));
  check(e instanceof SandboxError && /run as that user or as root only/.test(e.message),
        'a third user is refused, saying which there are', describe(e));
});

await step('commands.run: the sandbox\'s envs and the call\'s', async () => {
  const r = await within(CALL_MS, 'commands.run with envs', sandbox.commands.run(
      'echo $FROM_CREATE $PER_CALL', { envs: { PER_CALL: 'x' } }));
  check(r.stdout === 'yes x\n', 'FROM_CREATE (create\'s envs) and PER_CALL (the call\'s)',
        r.stdout);
  const over = await within(CALL_MS, 'commands.run overriding an env', sandbox.commands.run(
      'echo $FROM_CREATE', { envs: { FROM_CREATE: 'over' } }));
  check(over.stdout === 'over\n', 'a call\'s envs override the sandbox\'s', over.stdout);
});

await step('commands.run past its timeoutMs rejects with TimeoutError', async () => {
  const started = Date.now();
  const e = await rejection(30_000, 'commands.run(sleep 30, timeoutMs 1500)',
                            sandbox.commands.run('sleep 30', { timeoutMs: 1500 }));
  const seconds = (Date.now() - started) / 1000;
  check(e instanceof TimeoutError, 'the error is a TimeoutError', describe(e));
  check(seconds < 10, 'it came within 10 s', seconds);
  // The SDK gives up by itself at timeoutMs; the server must also end the command then (it got
  // the timeout as Connect-Timeout-Ms), not leave it running.
  const sleeping = async () => (await within(CALL_MS, 'commands.list', sandbox.commands.list()))
      .filter((p) => p.args.some((a) => a.includes('sleep 30')));
  const until = Date.now() + 10_000;
  let left = await sleeping();
  while (left.length > 0 && Date.now() < until) {
    await new Promise((res) => setTimeout(res, 200));
    left = await sleeping();
  }
  check(left.length === 0, 'the server ended the command at its timeout', left);
  return `${seconds.toFixed(1)} s`;
});

await step('a background command: list, sendStdin, closeStdin, wait', async () => {
  const h = await within(CALL_MS, 'commands.run(cat, background)',
                         sandbox.commands.run('cat', { background: true, stdin: true }));
  check(Number.isInteger(h.pid) && h.pid > 0, 'the handle has a pid', h.pid);
  const listed = await within(CALL_MS, 'commands.list', sandbox.commands.list());
  check(listed.some((p) => p.pid === h.pid), 'commands.list() has the pid',
        listed.map((p) => p.pid));
  await within(CALL_MS, 'commands.sendStdin', sandbox.commands.sendStdin(h.pid, 'abc\n'));
  await within(CALL_MS, 'commands.closeStdin', sandbox.commands.closeStdin(h.pid));
  const r = await within(CALL_MS, 'the handle\'s wait()', h.wait());
  check(r.exitCode === 0, 'cat exits 0 at the end of its stdin', r.exitCode);
  check(r.stdout === 'abc\n', 'cat gave back its stdin', r.stdout);
});

await step('disconnect from a background command and connect to it again', async () => {
  const h = await within(CALL_MS, 'commands.run(loop, background)', sandbox.commands.run(
      'for i in 1 2 3; do echo $i; sleep 1; done', { background: true }));
  await within(CALL_MS, 'disconnect', h.disconnect());
  const c = await within(CALL_MS, 'commands.connect', sandbox.commands.connect(h.pid));
  check(c.pid === h.pid, 'the connected handle has the pid', c.pid);
  const r = await within(CALL_MS, 'the connected handle\'s wait()', c.wait());
  check(r.exitCode === 0, 'the loop exits 0', r.exitCode);
  check(r.stdout.includes('3'), 'output after the reconnect reaches the new handle', r.stdout);
});

await step('commands.kill: true for a running command, false for one gone or unknown',
           async () => {
  const h = await within(CALL_MS, 'commands.run(sleep 60, background)',
                         sandbox.commands.run('sleep 60', { background: true }));
  const started = Date.now();
  const killed = await within(CALL_MS, 'commands.kill', sandbox.commands.kill(h.pid));
  check(killed === true, 'kill of a running command', killed);
  const e = await rejection(30_000, 'wait() of the killed command', h.wait());
  check(e instanceof CommandExitError, 'wait() of a killed command is a CommandExitError',
        describe(e));
  check((Date.now() - started) / 1000 < 20, 'the command ended at the kill, not at its end');
  const again = await within(CALL_MS, 'commands.kill again', sandbox.commands.kill(h.pid));
  check(again === false, 'a second kill of the same pid', again);
  const unknown = await within(CALL_MS, 'commands.kill(999999)', sandbox.commands.kill(999999));
  check(unknown === false, 'kill of pid 999999', unknown);
  return `the killed command's exitCode ${e.exitCode}`;
});

await step('pty: create, sendInput, resize, kill', async () => {
  let seen = '';
  const terminal = await within(CALL_MS, 'pty.create', sandbox.pty.create({
    cols: 80, rows: 24, timeoutMs: 60_000,
    onData: (data) => { seen += Buffer.from(data).toString('utf8'); },
  }));
  check(terminal.pid > 0, 'the terminal has a pid', terminal.pid);
  await within(CALL_MS, 'pty.sendInput', sandbox.pty.sendInput(
    terminal.pid, new TextEncoder().encode('stty size; echo "typed-$((6*7))"\n')));
  const deadline = Date.now() + 20_000;
  while (!seen.includes('typed-42') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  check(seen.includes('typed-42'), 'what was typed ran in the terminal', seen.slice(-300));
  check(seen.includes('24 80'), 'the terminal is 24 rows by 80 columns', seen.slice(-300));
  await within(CALL_MS, 'pty.resize', sandbox.pty.resize(terminal.pid, { cols: 100, rows: 30 }));
  await within(CALL_MS, 'pty.sendInput', sandbox.pty.sendInput(
    terminal.pid, new TextEncoder().encode('stty size\n')));
  while (!seen.includes('30 100') && Date.now() < deadline + 10_000) {
    await new Promise((r) => setTimeout(r, 100));
  }
  check(seen.includes('30 100'), 'the terminal was resized', seen.slice(-300));
  check(await within(CALL_MS, 'pty.kill', sandbox.pty.kill(terminal.pid)) === true,
        'pty.kill of the terminal');
  const end = await rejection(CALL_MS, 'wait on a killed terminal', terminal.wait());
  check(end instanceof CommandExitError, 'a killed terminal ends with CommandExitError', describe(end));
});

await step('Sandbox.connect by id gives a sandbox whose commands work', async () => {
  await within(CALL_MS, 'write a mark',
               sandbox.commands.run('echo marked > /home/user/mark'));
  const again = await within(CALL_MS, 'Sandbox.connect', Sandbox.connect(sandbox.sandboxId));
  check(again.sandboxId === sandbox.sandboxId, 'the connected sandbox\'s id', again.sandboxId);
  const r = await within(CALL_MS, 'commands.run on the connected sandbox',
                         again.commands.run('cat /home/user/mark'));
  check(r.stdout === 'marked\n', 'the connected sandbox is the same box', r.stdout);
});

await step('a warm pool serves a create whose options are its own', async () => {
  const pooled = await create({ timeoutMs: 60_000 });
  const res = await within(CALL_MS, 'GET /v1/boxes/{id}', fetch(
      `${url}/v1/boxes/${pooled.sandboxId}`, { headers: { Authorization: `Bearer ${token}` } }));
  const box = await res.json();
  check(res.status === 200 && box.from_pool === true, 'the sandbox\'s box came from the pool',
        box);
  const who = await within(CALL_MS, 'whoami in it', pooled.commands.run('whoami; pwd'));
  check(who.stdout === (process.getuid() === 0 ? 'user\n/home/user\n' : 'root\n/home/user\n'),
        'it runs as user in /home/user', who.stdout);
  await within(CALL_MS, 'kill the pooled sandbox', pooled.kill());
});

await step('files.write and files.read: text, bytes, blob, gzip; parents made', async () => {
  const info = await within(CALL_MS, 'files.write one file',
                            sandbox.files.write('/home/user/dir/a/hello.txt', 'hello files\n'));
  check(info.path === '/home/user/dir/a/hello.txt' && info.name === 'hello.txt',
        'the written file\'s info', info);
  const text = await within(CALL_MS, 'files.read text',
                            sandbox.files.read('/home/user/dir/a/hello.txt'));
  check(text === 'hello files\n', 'files.read as text', text);
  const bytes = new Uint8Array([0, 1, 2, 255, 254, 10, 13]);
  await within(CALL_MS, 'files.write bytes', sandbox.files.write('bin.dat', bytes.buffer));
  const back = await within(CALL_MS, 'files.read bytes',
                            sandbox.files.read('/home/user/bin.dat', { format: 'bytes' }));
  check(Buffer.from(back).equals(Buffer.from(bytes)), 'binary bytes round-trip', [...back]);
  const blob = await within(CALL_MS, 'files.read blob',
                            sandbox.files.read('bin.dat', { format: 'blob' }));
  check(blob.size === bytes.length, 'files.read as a blob', blob.size);
  const many = await within(CALL_MS, 'files.write many', sandbox.files.write([
    { path: '/home/user/many/one.txt', data: '1' },
    { path: 'many/two "quoted".txt', data: '22' },
  ]));
  check(Array.isArray(many) && many.length === 2, 'files.write of two files answers two', many);
  const two = await within(CALL_MS, 'list the files written',
                           sandbox.commands.run("cat /home/user/many/one.txt; ls /home/user/many"));
  check(two.stdout === '1one.txt\ntwo "quoted".txt\n', 'the files, one with quotes in its name',
        two.stdout);
  const zipped = 'zipped '.repeat(5000);
  await within(CALL_MS, 'files.write gzip',
               sandbox.files.write('/home/user/gz/z.txt', zipped, { gzip: true }));
  const unzipped = await within(CALL_MS, 'files.read of the gzip upload',
                                sandbox.files.read('/home/user/gz/z.txt'));
  check(unzipped === zipped, 'a gzip upload is written inflated', unzipped.length);
  const e = await rejection(CALL_MS, 'read a missing file',
                            sandbox.files.read('/home/user/nothing-here'));
  check(e.name === 'FileNotFoundError' || e instanceof NotFoundError,
        'a missing file is FileNotFoundError', describe(e));
});

await step('pre-signed URLs: uploadUrl and downloadUrl work with a plain fetch; others do not',
           async () => {
  // A URL carries a signature made with the sandbox's access token and no header: anything
  // (a browser, curl) can fetch it.
  const plain = (url, init) => within(CALL_MS, 'fetch a signed URL', fetch(url, init));
  const form = new FormData();
  form.append('file', new Blob(['signed upload\n']), 'up.txt');
  const up = await sandbox.uploadUrl('/home/user/signed/up.txt');
  check(new URL(up).searchParams.get('signature')?.startsWith('v1_'), 'uploadUrl is signed', up);
  const posted = await plain(up, { method: 'POST', body: form });
  check(posted.status === 200, 'POST to uploadUrl writes the file', posted.status);
  const down = await sandbox.downloadUrl('/home/user/signed/up.txt', { useSignatureExpiration: 60 });
  const got = await plain(down);
  check(got.status === 200 && await got.text() === 'signed upload\n',
        'GET of downloadUrl (expiring in 60 s) reads it back', got.status);
  const other = new URL(down);
  other.searchParams.set('path', '/home/user/.bashrc');
  check((await plain(other)).status === 401, 'the same signature for another path is refused');
  check((await plain(down, { method: 'POST', body: form })).status === 401,
        'a download URL does not upload');
  const expired = await sandbox.downloadUrl('/home/user/signed/up.txt',
                                            { useSignatureExpiration: -5 });
  check((await plain(expired)).status === 401, 'an expired URL is refused');
  const unsigned = new URL(down);
  unsigned.searchParams.set('signature', 'v1_' + 'A'.repeat(43));
  check((await plain(unsigned)).status === 401, 'a made-up signature is refused');
});

await step('files: list with depth, exists, getInfo, makeDir, rename, remove', async () => {
  const top = await within(CALL_MS, 'files.list', sandbox.files.list('/home/user/dir'));
  check(top.length === 1 && top[0].name === 'a' && top[0].type === 'dir',
        'files.list at depth 1', top);
  const deep = await within(CALL_MS, 'files.list depth 3',
                            sandbox.files.list('/home/user/dir', { depth: 3 }));
  const paths = deep.map((entry) => entry.path).sort();
  check(JSON.stringify(paths) === JSON.stringify(['/home/user/dir/a', '/home/user/dir/a/hello.txt']),
        'files.list at depth 3', paths);
  check(await within(CALL_MS, 'exists', sandbox.files.exists('/home/user/dir/a/hello.txt')) === true,
        'exists() of a file');
  check(await within(CALL_MS, 'exists', sandbox.files.exists('/home/user/nope')) === false,
        'exists() of nothing');
  const info = await within(CALL_MS, 'getInfo', sandbox.files.getInfo('dir/a/hello.txt'));
  check(info.type === 'file' && info.size === 12 && info.path === '/home/user/dir/a/hello.txt',
        'files.getInfo of a file', info);
  check(await within(CALL_MS, 'makeDir', sandbox.files.makeDir('/home/user/made/deep')) === true,
        'makeDir of a new directory is true');
  check(await within(CALL_MS, 'makeDir', sandbox.files.makeDir('/home/user/made/deep')) === false,
        'makeDir of an existing directory is false');
  const moved = await within(CALL_MS, 'rename',
                             sandbox.files.rename('/home/user/dir/a/hello.txt', '/home/user/moved.txt'));
  check(moved.path === '/home/user/moved.txt', 'rename answers the new entry', moved);
  check(await within(CALL_MS, 'read moved', sandbox.files.read('moved.txt')) === 'hello files\n',
        'the moved file\'s content');
  await within(CALL_MS, 'remove', sandbox.files.remove('/home/user/made'));
  check(await within(CALL_MS, 'exists', sandbox.files.exists('/home/user/made')) === false,
        'a removed directory is gone');
});

await step('files.watchDir: files appear, change and go', async () => {
  await within(CALL_MS, 'makeDir', sandbox.files.makeDir('/home/user/watched'));
  const events = [];
  const handle = await within(CALL_MS, 'watchDir', sandbox.files.watchDir(
    '/home/user/watched', (e) => events.push(`${e.type}:${e.name}`), { recursive: true, timeoutMs: 60_000 }));
  const waitFor = async (what) => {
    const deadline = Date.now() + 15_000;
    while (!events.includes(what) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    check(events.includes(what), `the watch saw ${what}`, events);
  };
  await within(CALL_MS, 'write', sandbox.files.write('/home/user/watched/a.txt', 'one'));
  await waitFor('create:a.txt');
  await within(CALL_MS, 'rewrite', sandbox.files.write('/home/user/watched/a.txt', 'longer now'));
  await waitFor('write:a.txt');
  await within(CALL_MS, 'nested', sandbox.files.write('/home/user/watched/sub/b.txt', 'b'));
  await waitFor('create:sub/b.txt');
  await within(CALL_MS, 'remove', sandbox.files.remove('/home/user/watched/a.txt'));
  await waitFor('remove:a.txt');
  await handle.stop();
  const missing = await rejection(CALL_MS, 'watchDir of nothing',
                                  sandbox.files.watchDir('/home/user/no-such-dir', () => {}));
  check(missing.name === 'FileNotFoundError' || missing instanceof NotFoundError,
        'watching a missing directory is FileNotFoundError', describe(missing));
  return events.join(' ');
});

let ci;  // a sandbox of @e2b/code-interpreter (its default template: numpy, pandas, matplotlib)

await step('code interpreter: runCode keeps state, streams stdout, gives results', async () => {
  const { Sandbox: CodeSandbox } = await import('@e2b/code-interpreter');
  ci = await within(CREATE_MS, 'code interpreter create', CodeSandbox.create({ timeoutMs: 300_000 }));
  made.add(ci.sandboxId);
  const streamed = [];
  const results = [];
  const a = await within(CALL_MS, 'runCode', ci.runCode('x = 40\nprint("hi")\nx + 2', {
    onStdout: (m) => streamed.push(m.line),
    onResult: (r) => results.push(r),
  }));
  check(a.text === '42', 'the main result\'s text', a.text);
  check(a.logs.stdout.join('') === 'hi\n', 'logs.stdout', a.logs.stdout);
  check(streamed.join('') === 'hi\n', 'onStdout got the output as it came', streamed);
  check(results.length === 1 && results[0].isMainResult, 'onResult got the main result', results);
  check(a.executionCount > 0, 'executionCount', a.executionCount);
  const b = await within(CALL_MS, 'runCode again', ci.runCode('x * 2'));
  check(b.text === '80', 'a variable lives on to the next cell', b.text);
  const s = await within(CALL_MS, 'runCode of a str', ci.runCode('"abc"'));
  check(s.text === 'abc', 'a str\'s text without its quotes, as E2B gives it', s.text);
  const e = await within(CALL_MS, 'runCode of 1/0', ci.runCode('1/0'));
  check(e.error?.name === 'ZeroDivisionError' && /division/.test(e.error.value),
        'an exception is execution.error', e.error);
  const html = await within(CALL_MS, 'runCode display', ci.runCode(
    'from IPython.display import display, HTML\ndisplay(HTML("<b>hi</b>"))'));
  check(html.results.length === 1 && html.results[0].html === '<b>hi</b>' &&
        !html.results[0].isMainResult, 'a displayed HTML result', html.results);
  const chart = await within(CALL_MS, 'runCode of a chart', ci.runCode(
    'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [4, 5, 6])\nplt.title("t")\nplt.show()'));
  check(chart.results.some((r) => typeof r.png === 'string' && r.png.length > 100),
        'a matplotlib figure comes as a png result', chart.results.map((r) => r.formats()));
});

await step('code interpreter: matplotlib figures come with their chart as data', async () => {
  const chartOf = async (what, code) => {
    const e = await within(CALL_MS, what, ci.runCode(
      `import matplotlib\nmatplotlib.use("module://matplotlib_inline.backend_inline")\n` +
      `import matplotlib.pyplot as plt\n${code}\nplt.show()`));
    check(!e.error, `${what} ran`, e.error);
    const charts = e.results.filter((r) => r.chart);
    check(charts.length === 1 && charts[0].png, `${what} gave one result with a chart and a png`,
          e.results.map((r) => r.formats()));
    return charts[0].chart;
  };
  const line = await chartOf('a line chart',
    'plt.plot([1, 2, 3], [4, 5, 6], label="up")\nplt.title("T")\nplt.xlabel("x")\nplt.ylabel("y")');
  check(line.type === 'line' && line.title === 'T' && line.x_label === 'x' && line.y_label === 'y',
        'the line chart\'s type, title and labels', line);
  check(line.elements.length === 1 && line.elements[0].label === 'up' &&
        JSON.stringify(line.elements[0].points) === JSON.stringify([[1, 4], [2, 5], [3, 6]]),
        'the line chart\'s points', line.elements);
  check(line.x_scale === 'linear' && Array.isArray(line.x_ticks), 'its axes', line);
  const scatter = await chartOf('a scatter chart', 'plt.scatter([1, 2], [3, 4], label="pts")');
  check(scatter.type === 'scatter' && scatter.elements[0].points.length === 2, 'a scatter chart',
        scatter);
  const bar = await chartOf('a bar chart', 'plt.bar(["a", "b"], [3, 5], label="g")');
  check(bar.type === 'bar' && JSON.stringify(bar.elements.map((e) => [e.label, e.group, e.value])) ===
        JSON.stringify([['a', 'g', 3], ['b', 'g', 5]]), 'a bar chart', bar);
  const pie = await chartOf('a pie chart', 'plt.pie([1, 3], labels=["one", "three"])');
  check(pie.type === 'pie' && pie.elements.length === 2 && pie.elements[0].label === 'one' &&
        Math.abs(pie.elements[1].angle - 270) < 0.01, 'a pie chart', pie);
  const box = await chartOf('a box plot', 'plt.boxplot([[1, 2, 3, 4, 5, 6, 7, 8, 9, 40]])');
  check(box.type === 'box_and_whisker' && box.elements.length === 1 &&
        box.elements[0].median === 5.5 && box.elements[0].outliers.includes(40), 'a box plot', box);
  const both = await chartOf('two charts in one figure',
    'fig, (a, b) = plt.subplots(1, 2)\nfig.suptitle("S")\na.plot([1, 2])\nb.bar(["x"], [1])');
  check(both.type === 'superchart' && both.title === 'S' && both.elements.length === 2 &&
        both.elements[0].type === 'line' && both.elements[1].type === 'bar', 'a superchart', both);
});

await step('code interpreter: a cell\'s envs last for that cell; a timeout keeps the state',
           async () => {
  const env = await within(CALL_MS, 'runCode with envs',
                           ci.runCode('import os\nos.environ.get("CELL_ENV")', { envs: { CELL_ENV: 'v' } }));
  check(env.text === 'v', 'the cell saw its env', env.text);
  const after = await within(CALL_MS, 'runCode after', ci.runCode('str(os.environ.get("CELL_ENV"))'));
  check(after.text === 'None', 'the next cell does not', after.text);
  const started = Date.now();
  const late = await rejection(CALL_MS, 'runCode past its timeoutMs',
                               ci.runCode('import time\ntime.sleep(30)', { timeoutMs: 2000 }));
  check(late instanceof TimeoutError, 'a cell past its timeoutMs is TimeoutError', describe(late));
  check(Date.now() - started < 15_000, 'it gave up at its timeout', Date.now() - started);
  const keptAt = Date.now();
  const kept = await within(CALL_MS, 'runCode after the timeout', ci.runCode('x'));
  check(kept.text === '40', 'the interrupted session kept its variables', kept.text);
  // Had the server let the abandoned cell sleep on, this cell would have waited for it.
  check(Date.now() - keptAt < 10_000, 'the abandoned cell was interrupted', Date.now() - keptAt);
});

await step('code interpreter: contexts of their own', async () => {
  const ctx = await within(CALL_MS, 'createCodeContext', ci.createCodeContext({ cwd: '/tmp' }));
  check(typeof ctx.id === 'string' && ctx.cwd === '/tmp' && ctx.language === 'python',
        'the context', ctx);
  const cwd = await within(CALL_MS, 'runCode in the context',
                           ci.runCode('import os\nos.getcwd()', { context: ctx }));
  check(cwd.text === '/tmp', 'the context runs in its cwd', cwd.text);
  const own = await within(CALL_MS, 'runCode in the context', ci.runCode('x', { context: ctx }));
  check(own.error?.name === 'NameError', 'the context has variables of its own', own.error);
  const listed = await within(CALL_MS, 'listCodeContexts', ci.listCodeContexts());
  check(listed.some((c) => c.id === ctx.id), 'listCodeContexts lists it', listed);
  await within(CALL_MS, 'restartCodeContext', ci.restartCodeContext(ctx));
  await within(CALL_MS, 'removeCodeContext', ci.removeCodeContext(ctx));
  const gone = await rejection(CALL_MS, 'runCode in a removed context',
                               ci.runCode('1', { context: ctx }));
  check(gone instanceof NotFoundError || gone.name === 'NotFoundError',
        'a removed context is NotFoundError', describe(gone));
  const both = await rejection(CALL_MS, 'an unsupported language',
                               ci.runCode('1', { language: 'r' }));
  check(both instanceof SandboxError, 'an unsupported language is a SandboxError', describe(both));
});

await step('code interpreter: bash keeps its cwd, variables and functions from cell to cell',
           async () => {
  const bash = (code, opts = {}) => within(CALL_MS, `bash cell ${code}`,
                                           ci.runCode(code, { language: 'bash', ...opts }));
  const first = await bash('cd /tmp; X=5; export Y=6; f() { echo "f$1"; }; echo set');
  check(first.logs.stdout.join('') === 'set\n' && !first.error, 'the first cell ran', first);
  const second = await bash('pwd; echo $X $Y; f 1; echo $Z', { envs: { Z: 'cell' } });
  check(second.logs.stdout.join('') === '/tmp\n5 6\nf1\ncell\n',
        'cwd, variables, exports and functions lasted; the cell saw its envs',
        second.logs.stdout);
  const third = await bash('echo "[$Z]"; ls nothing-here');
  check(third.logs.stdout.join('') === '[]\n', 'a cell\'s envs do not last', third.logs.stdout);
  check(third.error && /exit status/.test(third.error.value), 'a failing cell has an error',
        third.error);
  check(third.logs.stderr.join('').includes('nothing-here'), 'its stderr', third.logs.stderr);
  const shadow = await bash('echo $X', { envs: { X: "it's shadowed" } });
  check(shadow.logs.stdout.join('') === "it's shadowed\n", 'a cell env shadows a variable',
        shadow.logs.stdout);
  const back = await bash('echo $X');
  check(back.logs.stdout.join('') === '5\n', 'and the variable is back after the cell',
        back.logs.stdout);
  const own = await within(CALL_MS, 'a bash context',
                           ci.createCodeContext({ language: 'bash', cwd: '/home/user' }));
  const fresh = await within(CALL_MS, 'a cell in it', ci.runCode('pwd; echo "[$X]"', { context: own }));
  check(fresh.logs.stdout.join('') === '/home/user\n[]\n', 'a bash context of its own',
        fresh.logs.stdout);
  await within(CALL_MS, 'removeCodeContext', ci.removeCodeContext(own));
});

await step('getMetrics: one sample of the jail\'s cgroup, the work just done in it', async () => {
  await within(CALL_MS, 'busy work', sandbox.commands.run(
      'head -c 4194304 /dev/zero > /tmp/metrics.bin; ' +
      'python3 -c "import time; t = time.time()\nwhile time.time() - t < 0.8: pass"'));
  const metrics = await within(CALL_MS, 'getMetrics', sandbox.getMetrics());
  check(Array.isArray(metrics) && metrics.length === 1, 'getMetrics() is one sample', metrics);
  const m = metrics[0];
  const info = await within(CALL_MS, 'getInfo', sandbox.getInfo());
  check(m.timestamp instanceof Date && Math.abs(Date.now() - m.timestamp.getTime()) < 60_000,
        'its timestamp is now', m.timestamp);
  check(m.cpuCount === info.cpuCount && m.cpuUsedPct > 0 && m.cpuUsedPct <= 100,
        'cpuCount as getInfo says, and some CPU used', m);
  check(m.diskUsed >= 4 << 20 && m.memUsed >= m.diskUsed, 'the 4 MiB file is counted', m);
  check(m.memTotal === info.memoryMB * 1048576 && m.diskTotal === 256 * 1048576,
        'the totals are the sandbox\'s limits (serve\'s default disk, 256 MiB)', m);
  return `cpu ${m.cpuUsedPct.toFixed(1)}%, mem ${(m.memUsed / 1048576).toFixed(1)} MiB`;
});

await step('pause is refused as not supported (501)', async () => {
  const e = await rejection(CALL_MS, 'pause', sandbox.pause());
  check(e instanceof SandboxError, 'the error is a SandboxError', describe(e));
  check(!(e instanceof NotFoundError), 'it does not say the sandbox is missing', describe(e));
  check(e.statusCode === 501, 'its statusCode', e.statusCode);
  check(/not supported/.test(e.message), 'its message says not supported', e.message);
  const still = await within(CALL_MS, 'isRunning after pause', sandbox.isRunning());
  check(still === true, 'the sandbox still runs after the refused pause', still);
});

await step('a wrong API key is AuthenticationError', async () => {
  const e = await rejection(CREATE_MS, 'Sandbox.create with apiKey "wrong"',
                            Sandbox.create({ apiKey: 'wrong', timeoutMs: 30_000 }).then(
                                async (s) => {
                                  await Sandbox.kill(s.sandboxId).catch(() => {});
                                  return s.sandboxId;
                                }));
  check(e instanceof AuthenticationError, 'the error is an AuthenticationError', describe(e));
  const listed = await rejection(CALL_MS, 'Sandbox.list with apiKey "wrong"',
                                 Sandbox.list({ apiKey: 'wrong' }).nextItems());
  check(listed instanceof AuthenticationError, 'list with a wrong key is an AuthenticationError',
        describe(listed));
});

await step('unknown sandboxes are SandboxNotFoundError', async () => {
  const unknown = 'b-0000000000000000';
  const connected = await rejection(CALL_MS, 'Sandbox.connect of an unknown id',
                                    Sandbox.connect(unknown));
  check(connected instanceof SandboxNotFoundError,
        'Sandbox.connect of an unknown id is a SandboxNotFoundError', describe(connected));
  const info = await rejection(CALL_MS, 'Sandbox.getInfo of an unknown id',
                               Sandbox.getInfo(unknown));
  check(info instanceof SandboxNotFoundError,
        'Sandbox.getInfo of an unknown id is a SandboxNotFoundError', describe(info));
  const killed = await within(CALL_MS, 'Sandbox.kill of an unknown id', Sandbox.kill(unknown));
  check(killed === false, 'Sandbox.kill of an unknown id', killed);
});

await step('two sandboxes at once see only their own files', async () => {
  const [a, b] = await Promise.all([
    create({ timeoutMs: 120_000, metadata: { suite: 'e2b', who: 'a' } }),
    create({ timeoutMs: 120_000, metadata: { suite: 'e2b', who: 'b' } }),
  ]);
  check(a.sandboxId !== b.sandboxId, 'two ids', [a.sandboxId, b.sandboxId]);
  const [ra, rb] = await within(CALL_MS, 'commands in both at once', Promise.all([
    a.commands.run('echo A > /home/user/who; echo A > /home/user/only-a; sleep 1; ' +
                   'cat /home/user/who'),
    b.commands.run('echo B > /home/user/who; sleep 1; cat /home/user/who'),
  ]));
  check(ra.stdout === 'A\n', 'the first sandbox reads its own file', ra.stdout);
  check(rb.stdout === 'B\n', 'the second sandbox reads its own file', rb.stdout);
  const e = await rejection(CALL_MS, 'cat of the other sandbox\'s file',
                            b.commands.run('cat /home/user/only-a'));
  check(e instanceof CommandExitError, 'the second sandbox has no /home/user/only-a',
        describe(e));
  for (const s of [a, b]) {
    check(await within(CALL_MS, 'kill', s.kill()) === true, 'kill of a sandbox of the pair');
    made.delete(s.sandboxId);
  }
});

await step('a sandbox whose timeout passes under a running command', async () => {
  const short = await create({ timeoutMs: 5_000 });
  const started = Date.now();
  const e = await rejection(30_000, 'commands.run(sleep 30) in a sandbox of 5 s',
                            short.commands.run('sleep 30', { timeoutMs: 60_000 }));
  const seconds = (Date.now() - started) / 1000;
  check(e instanceof SandboxError, 'the error is a SandboxError (or a subclass)', describe(e));
  check(seconds < 20, 'it came within 20 s', seconds);
  const running = await within(CALL_MS, 'isRunning', short.isRunning());
  check(running === false, 'isRunning() after the timeout', running);
  made.delete(short.sandboxId);
  return `rejected after ${seconds.toFixed(1)} s with ${describe(e)}`;
});

await step('kill: then not running, and a second kill is false', async () => {
  const killed = await within(CALL_MS, 'sandbox.kill', sandbox.kill());
  check(killed === true, 'kill of a running sandbox', killed);
  made.delete(sandbox.sandboxId);
  const running = await within(CALL_MS, 'isRunning', sandbox.isRunning());
  check(running === false, 'isRunning() after kill', running);
  const again = await within(CALL_MS, 'Sandbox.kill again', Sandbox.kill(sandbox.sandboxId));
  check(again === false, 'Sandbox.kill of a killed sandbox', again);
});

for (const id of made) {
  await within(CALL_MS, `kill ${id}`, Sandbox.kill(id)).catch(() => {});
}
await stopServe();
console.log(`e2b_sdk_test: all ${passed} checks passed`);
process.exit(0);
