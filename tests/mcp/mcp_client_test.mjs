// codebox's MCP server driven by a real client: the official MCP TypeScript SDK
// (@modelcontextprotocol/sdk, installed into tests/mcp/node_modules by scripts/setup) talks to
// `codebox mcp` over stdio and to `codebox serve --listen 127.0.0.1:0` over Streamable HTTP at
// /mcp, and on each transport: lists the tools, runs Python with state kept from call to call,
// gets a matplotlib chart as an image, writes and reads a file, runs a command, sees bad calls
// answered as the MCP specification says, cancels a running cell, and ends the session with its
// box gone.
//
//   node tests/mcp/mcp_client_test.mjs CODEBOX [--transport stdio|http|both]
//
// Exits 0 when every check passed, 1 with a message naming the failed check, and 77 (CTest's
// skip) with the reason when the SDK is missing or this host cannot run a jail box of the
// python-data image, unless CODEBOX_TESTS_REQUIRE_BOX=1 (CI) makes those failures too.
// Every wait is bounded.
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { createInterface } from 'node:readline';

const SKIP = 77;
const IMAGE = 'python-data'; // matplotlib for the chart
const REQUEST_MS = 180_000; // one MCP request (the first starts the box and its kernel)
const WHOLE_MS = 900_000; // the whole script
const requireBox = process.env.CODEBOX_TESTS_REQUIRE_BOX === '1';

// Servers this script started: killed however it exits, so that no server outlives the test
// (and holds the test runner's output pipe open).
const children = new Set();
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
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

function check(condition, what, detail) {
  if (!condition) fail(detail === undefined ? what : `${what}: ${JSON.stringify(detail)}`);
}

setTimeout(() => fail(`the test took longer than ${WHOLE_MS / 1000} s`), WHOLE_MS).unref();

const args = process.argv.slice(2);
const codebox = args[0];
if (!codebox) fail('usage: mcp_client_test.mjs CODEBOX [--transport stdio|http|both]');
const transportArg = args.indexOf('--transport');
const transports = transportArg >= 0 ? args[transportArg + 1] : 'both';

let sdk;
try {
  sdk = {
    ...(await import('@modelcontextprotocol/sdk/client/index.js')),
    ...(await import('@modelcontextprotocol/sdk/client/stdio.js')),
    ...(await import('@modelcontextprotocol/sdk/client/streamableHttp.js')),
    ...(await import('@modelcontextprotocol/sdk/types.js')),
  };
} catch (e) {
  skip(`the MCP TypeScript SDK is not installed (run scripts/setup, or npm ci --prefix ` +
       `tests/mcp): ${e.message}`);
}

// The environment codebox's processes get: the SDK's stdio transport passes only a few
// variables unless told, and codebox reads CODEBOX_* (home, helpers) from it.
function codeboxEnv() {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith('CODEBOX_') || k.startsWith('ASAN_') || k.startsWith('UBSAN_')) env[k] = v;
  }
  return env;
}

function requireBoxHost() {
  if (process.geteuid && process.geteuid() !== 0) skip('jail boxes need root here');
  const probe = spawnSync(codebox, ['run', '--driver', 'jail', '--image', IMAGE,
                                    'import IPython, matplotlib'],
                          { encoding: 'utf8', timeout: 180_000, env: process.env });
  if (probe.status === 0) return;
  const why = `${probe.stderr ?? ''}${probe.error ? probe.error.message : ''}`.trim();
  if (/codebox image build|no recipe|not built|ModuleNotFoundError/.test(why)) {
    skip(`a jail box of the ${IMAGE} image with IPython and matplotlib cannot run: ${why}`);
  }
  fail(`a ${IMAGE} box does not run: ${why}`);
}

const opts = { timeout: REQUEST_MS };

function texts(result) {
  return (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

// The checks both transports must pass, on a connected client.
async function exercise(client, name) {
  const step = (what) => console.log(`[${name}] ${what}`);

  step('tools/list');
  const { tools } = await client.listTools(undefined, opts);
  const want = ['run_python', 'run_command', 'write_file', 'read_file', 'list_files', 'reset'];
  check(JSON.stringify(tools.map((t) => t.name).sort()) === JSON.stringify([...want].sort()),
        'tools/list names the six tools', tools.map((t) => t.name));
  for (const tool of tools) {
    const schema = tool.inputSchema;
    check(schema?.type === 'object' && typeof schema.properties === 'object',
          `${tool.name} has an object inputSchema`, schema);
    check(schema.additionalProperties === false, `${tool.name} refuses unknown arguments`, schema);
  }
  const runPython = tools.find((t) => t.name === 'run_python');
  check(runPython.inputSchema.required?.includes('code'), 'run_python requires code',
        runPython.inputSchema);

  step('run_python keeps state');
  let r = await client.callTool({ name: 'run_python', arguments: { code: 'x = 41' } },
                                undefined, opts);
  check(!r.isError, 'x = 41 runs', r);
  r = await client.callTool({ name: 'run_python', arguments: { code: 'print(x + 1)' } },
                            undefined, opts);
  check(!r.isError && /(^|\n)42(\n|$)/.test(texts(r)), 'print(x + 1) prints 42', r);

  step('run_python raises');
  r = await client.callTool({ name: 'run_python', arguments: { code: '1 / 0' } }, undefined,
                            opts);
  check(r.isError === true && texts(r).includes('ZeroDivisionError'),
        'an exception is a result with isError and the traceback', r);

  step('a chart is an image');
  r = await client.callTool({
    name: 'run_python',
    arguments: {
      code: 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()',
    },
  }, undefined, opts);
  const images = (r.content ?? []).filter((c) => c.type === 'image');
  check(!r.isError && images.length >= 1, 'a matplotlib chart comes as image content', r);
  check(images[0].mimeType === 'image/png', 'the image is image/png', images[0].mimeType);
  const png = Buffer.from(images[0].data, 'base64');
  check(png.length > 100 && png.subarray(0, 8).equals(
            Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])),
        'the image data is base64 of a PNG', png.subarray(0, 8).toString('hex'));

  step('write_file, read_file, list_files');
  const content = 'héllo from the MCP client test\nline 2\n';
  r = await client.callTool({ name: 'write_file', arguments: { path: 'notes/a.txt', content } },
                            undefined, opts);
  check(!r.isError, 'write_file', r);
  r = await client.callTool({ name: 'read_file', arguments: { path: 'notes/a.txt' } }, undefined,
                            opts);
  check(!r.isError && texts(r).includes(content), 'read_file gives back what was written', r);
  r = await client.callTool({ name: 'list_files', arguments: { path: 'notes' } }, undefined,
                            opts);
  check(!r.isError && texts(r).includes('a.txt'), 'list_files shows the file', r);
  r = await client.callTool({ name: 'read_file', arguments: { path: 'no/such/file' } },
                            undefined, opts);
  check(r.isError === true, 'read_file of a missing file is isError', r);

  step('run_command');
  r = await client.callTool({ name: 'run_command', arguments: { argv: ['cat', 'notes/a.txt'] } },
                            undefined, opts);
  check(!r.isError && texts(r).includes('line 2'), 'run_command argv sees the file', r);
  r = await client.callTool({ name: 'run_command', arguments: { cmd: 'echo out; exit 3' } },
                            undefined, opts);
  check(r.isError === true && texts(r).includes('out') && texts(r).includes('3'),
        'a non-zero exit is isError with its code and output', r);

  step('bad calls');
  let thrown = null;
  try {
    await client.callTool({ name: 'no_such_tool', arguments: {} }, undefined, opts);
  } catch (e) {
    thrown = e;
  }
  // The spec (tools, "Error Handling"): an unknown tool is a protocol error, -32602.
  check(thrown instanceof sdk.McpError && thrown.code === sdk.ErrorCode.InvalidParams,
        'an unknown tool is a JSON-RPC error -32602', thrown && String(thrown));
  // 2025-11-25: invalid arguments are a tool execution error the model can read (isError).
  r = await client.callTool({ name: 'run_python', arguments: { code: 5 } }, undefined, opts);
  check(r.isError === true && texts(r).includes('code'),
        'run_python with code: 5 is isError naming the argument', r);
  r = await client.callTool({ name: 'run_python', arguments: { code: 'print(x)' } }, undefined,
                            opts);
  check(!r.isError && texts(r).includes('41'), 'the session goes on after bad calls', r);

  step('a cancelled call is interrupted');
  const started = Date.now();
  let aborted = null;
  try {
    await client.callTool(
        { name: 'run_python', arguments: { code: 'import time\ntime.sleep(120)' } }, undefined,
        { ...opts, signal: AbortSignal.timeout(2_000) });
  } catch (e) {
    aborted = e;
  }
  check(aborted !== null, 'a call aborted by the client rejects');
  // The client sent notifications/cancelled: the cell is interrupted, so the next call does not
  // wait for the sleep.
  r = await client.callTool({ name: 'run_python', arguments: { code: 'print(x * 2)' } },
                            undefined, opts);
  check(!r.isError && texts(r).includes('82'), 'the session goes on after a cancel', r);
  check(Date.now() - started < 60_000, 'the cancelled cell was interrupted, not waited for',
        `${(Date.now() - started) / 1000} s`);

  step('reset');
  r = await client.callTool({ name: 'reset', arguments: {} }, undefined, opts);
  check(!r.isError, 'reset', r);
  r = await client.callTool({ name: 'run_python', arguments: { code: 'print(x)' } }, undefined,
                            opts);
  check(r.isError === true && texts(r).includes('NameError'), 'reset forgets variables', r);
}

// codebox-jail processes started by `pid` (their command line names it as --parent).
function jailsOf(pid) {
  const found = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let argv;
    try {
      argv = readFileSync(`/proc/${entry}/cmdline`, 'latin1').split('\0');
    } catch {
      continue;
    }
    const parent = argv.indexOf('--parent');
    if (argv[0]?.endsWith('codebox-jail') && parent >= 0 && argv[parent + 1] === String(pid)) {
      found.push(Number(entry));
    }
  }
  return found;
}

async function waitFor(what, condition, ms) {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) fail(`${what} (waited ${ms / 1000} s)`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

async function testStdio() {
  const transport = new sdk.StdioClientTransport({
    command: codebox,
    args: ['mcp', '--driver', 'jail', '--image', IMAGE],
    env: codeboxEnv(),
    stderr: 'inherit',
  });
  const client = new sdk.Client({ name: 'codebox-mcp-client-test', version: '1.0.0' });
  await client.connect(transport, opts);
  const pid = transport.pid;
  const killOnExit = () => {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  };
  process.on('exit', killOnExit);
  check(client.getServerVersion()?.name === 'codebox', 'serverInfo names codebox',
        client.getServerVersion());
  await exercise(client, 'stdio');
  check(jailsOf(pid).length >= 1, 'the stdio session has a box while it lives', jailsOf(pid));
  await client.close(); // stdin closed: the session ends, the box goes, the process exits
  await waitFor(`the box of codebox mcp (pid ${pid}) is gone after close`,
                () => jailsOf(pid).length === 0, 30_000);
  process.off('exit', killOnExit);
}

// `codebox serve` on a free loopback port; resolves to { url, child }.
function startServe() {
  return new Promise((resolve, reject) => {
    const child = spawn(codebox, ['serve', '--listen', '127.0.0.1:0', '--log-format', 'text',
                                  '--driver', 'jail', '--image', IMAGE],
                        { stdio: ['ignore', 'pipe', 'inherit'], env: process.env });
    children.add(child);
    child.on('exit', () => children.delete(child));
    const timer = setTimeout(() => reject(new Error('codebox serve did not start in 60 s')),
                             60_000);
    child.on('exit', (code) => reject(new Error(`codebox serve exited (${code}) at start`)));
    createInterface({ input: child.stdout }).once('line', (line) => {
      clearTimeout(timer);
      const m = /listening on (127\.0\.0\.1:\d+)/.exec(line);
      if (!m) return reject(new Error(`unexpected first line of codebox serve: ${line}`));
      resolve({ url: `http://${m[1]}`, child });
    });
  });
}

async function boxesOf(url) {
  const r = await fetch(`${url}/v1/boxes`, { signal: AbortSignal.timeout(30_000) });
  check(r.ok, 'GET /v1/boxes answers', r.status);
  return (await r.json()).boxes;
}

async function testHttp() {
  const { url, child } = await startServe();
  try {
    const transport = new sdk.StreamableHTTPClientTransport(new URL(`${url}/mcp`));
    const client = new sdk.Client({ name: 'codebox-mcp-client-test', version: '1.0.0' });
    await client.connect(transport, opts);
    check(typeof transport.sessionId === 'string' && transport.sessionId.length >= 32,
          'initialize gave an Mcp-Session-Id', transport.sessionId);
    check(client.getServerVersion()?.name === 'codebox', 'serverInfo names codebox',
          client.getServerVersion());
    await exercise(client, 'http');
    let boxes = await boxesOf(url);
    check(boxes.length === 1, 'the session\'s box is listed in /v1/boxes', boxes);

    // Another site's page cannot drive the server (the spec requires Origin validation).
    const evil = await fetch(`${url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json',
                 origin: 'http://evil.example', 'mcp-session-id': transport.sessionId },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
      signal: AbortSignal.timeout(30_000),
    });
    check(evil.status === 403, 'a request with another site\'s Origin is 403', evil.status);

    const sessionId = transport.sessionId;
    await transport.terminateSession(); // DELETE /mcp
    await client.close();
    boxes = await boxesOf(url);
    check(boxes.length === 0, 'DELETE /mcp destroyed the session\'s box', boxes);
    const after = await fetch(`${url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json',
                 'mcp-session-id': sessionId },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' }),
      signal: AbortSignal.timeout(30_000),
    });
    check(after.status === 404, 'a request of the ended session is 404', after.status);
  } finally {
    child.kill('SIGTERM');
  }
  await new Promise((res) => {
    if (child.exitCode !== null) return res();
    const t = setTimeout(() => {
      child.kill('SIGKILL');
      res();
    }, 30_000);
    child.on('exit', () => {
      clearTimeout(t);
      res();
    });
  });
}

requireBoxHost();
try {
  if (transports === 'stdio' || transports === 'both') await testStdio();
  if (transports === 'http' || transports === 'both') await testHttp();
} catch (e) {
  fail(`${e?.stack ?? e}`);
}
console.log('PASS: the MCP SDK client drove ' +
            (transports === 'both' ? 'stdio and Streamable HTTP' : transports));
process.exit(0);
