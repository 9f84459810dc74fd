// Every call of CodeBox and SimpleBox against real boxes of the private server.
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  BoxClosedError, BoxTimeoutError, CodeBox, FailedPreconditionError, NotFoundError, OutOfMemoryError, SimpleBox,
} from "../dist/index.js";
import { skipReason, tempDir } from "./helpers.mjs";

const skip = skipReason() ?? false;

describe("CodeBox", { skip }, () => {
  let box;
  before(async () => {
    box = new CodeBox({ memoryMib: 256, env: { GREETING: "hello" } });
    await box.start();
  });
  after(async () => box?.stop());

  test("run answers stdout", async () => {
    assert.equal(await box.run("print(6 * 7)"), "42\n");
    assert.equal(await box.run("import os; print(os.environ['GREETING'])"), "hello\n");
    assert.equal(await box.run("print('out'); raise SystemExit(3)"), "out\n", "a failing program still answers its stdout");
  });

  test("exec answers exit code, stdout and stderr, with stdin, env, cwd and callbacks", async () => {
    const r = await box.exec("sh", "-c", "echo out; echo err >&2; exit 3");
    assert.equal(r.exitCode, 3);
    assert.equal(r.stdout, "out\n");
    assert.equal(r.stderr, "err\n");
    assert.equal(r.timedOut, false);
    assert.equal(r.driver, "jail");
    const chunks = [];
    const s = await box.exec("sh", "-c", "cat; echo $X; pwd", { stdin: "in\n", env: { X: "x" }, cwd: "/tmp", onStdout: (t) => chunks.push(t) });
    assert.equal(s.stdout, "in\nx\n/tmp\n");
    assert.equal(chunks.join(""), s.stdout);
    const slow = await box.exec("sleep", "10", { timeout: 0.5 });
    assert.equal(slow.timedOut, true);
    assert.ok(slow.durationMs < 5000, `${slow.durationMs} ms`);
  });

  test("run past its timeout throws BoxTimeoutError", async () => {
    await assert.rejects(box.run("import time; time.sleep(10)", { timeout: 0.5 }), BoxTimeoutError);
  });

  test("runCode keeps state and answers an Execution", async () => {
    const first = await box.runCode("x = 21\nprint('half')\nx * 2");
    assert.equal(first.text, "42");
    assert.deepEqual(first.logs.stdout, ["half\n"]);
    assert.equal(first.error, null);
    assert.ok(first.results[0].isMainResult);
    const seen = [];
    const second = await box.runCode("display(x)\nprint('p')\n1/0", { onResult: (r) => seen.push(r.text), onStdout: (t) => seen.push(t) });
    assert.equal(second.error.name, "ZeroDivisionError");
    assert.equal(second.error.value, "division by zero");
    assert.match(second.error.traceback, /ZeroDivisionError/);
    assert.deepEqual(seen, ["21", "p\n"], "callbacks in the order the box produced");
    assert.ok(second.executionCount > first.executionCount);
    const html = await box.runCode("from IPython.display import HTML\nHTML('<b>x</b>')");
    assert.equal(html.results[0].html, "<b>x</b>");
    assert.deepEqual(html.results[0].formats(), ["text", "html"]);
  });

  test("interrupt stops a running cell and keeps the state; restart drops it", async () => {
    await box.runCode("kept = 1");
    const cell = box.runCode("import time\nwhile True: time.sleep(0.05)");
    await new Promise((r) => setTimeout(r, 700));
    await box.interrupt();
    const stopped = await cell;
    assert.equal(stopped.error?.name, "KeyboardInterrupt");
    assert.equal((await box.runCode("kept")).text, "1");
    const timed = await box.runCode("import time\ntime.sleep(10)", { timeout: 0.5 });
    assert.equal(timed.timedOut, true);
    await box.restart();
    const gone = await box.runCode("kept");
    assert.equal(gone.error?.name, "NameError");
  });

  test("an aborted call stops its work in the box: the cell is interrupted, the command killed", async () => {
    await box.runCode("survivor = 7");
    const controller = new AbortController();
    const cell = box.runCode("import time\nwhile True: time.sleep(0.05)", { signal: controller.signal });
    setTimeout(() => controller.abort(), 500);
    await assert.rejects(cell, { name: "AbortError" });
    assert.equal((await box.runCode("survivor")).text, "7", "the session kept its state");

    const command = new AbortController();
    const started = Date.now();
    const sleeping = box.exec("sh", "-c", "sleep 37", { signal: command.signal, timeout: 60 });
    setTimeout(() => command.abort(), 300);
    await assert.rejects(sleeping, { name: "AbortError" });
    assert.ok(Date.now() - started < 5000);
    const stillThere = "import os\nprint(sum(b'sleep\\x0037' in open(f'/proc/{p}/cmdline', 'rb').read() for p in os.listdir('/proc') if p.isdigit()))";
    let left = "";
    for (const end = Date.now() + 10_000; Date.now() < end && (left = await box.run(stillThere)) !== "0\n";) await new Promise((r) => setTimeout(r, 100));
    assert.equal(left, "0\n", "the aborted command's process was killed");
    await assert.rejects(box.spawn("true", { signal: command.signal }), /spawn takes no signal/);
  });

  test("files: write, read, list, remove", async () => {
    await box.files.write("data/a.txt", "hello");
    await box.files.write("data/run.sh", "echo ran", { mode: 0o755 });
    await box.files.write("data/bin", new Uint8Array([0, 255, 1]));
    assert.equal(await box.files.readText("data/a.txt"), "hello");
    assert.deepEqual([...(await box.files.read("data/bin"))], [0, 255, 1]);
    const names = (await box.files.list("data")).map((e) => `${e.name}:${e.type}:${e.size}`).sort();
    assert.deepEqual(names, ["a.txt:file:5", "bin:file:3", "run.sh:file:8"]);
    assert.equal((await box.exec("sh", "data/run.sh")).stdout, "ran\n");
    await box.files.remove("data/a.txt");
    await assert.rejects(box.files.read("data/a.txt"), NotFoundError);
    await assert.rejects(box.files.remove("data/a.txt"), NotFoundError);
    await assert.rejects(box.files.read("data/bin", { maxBytes: 2 }), /over 2 bytes/);
  });

  test("copyIn and copyOut, a file and a directory", async () => {
    const dir = tempDir();
    mkdirSync(join(dir, "in", "sub"), { recursive: true });
    writeFileSync(join(dir, "in", "top.txt"), "top");
    writeFileSync(join(dir, "in", "sub", "deep.py"), "print('deep')", { mode: 0o700 });
    await box.copyIn(join(dir, "in"), "tree");
    assert.equal(await box.run("print(open('tree/sub/deep.py').read())"), "print('deep')\n");
    await box.copyIn(join(dir, "in", "top.txt"), "/data/one.txt");
    assert.equal(await box.files.readText("/data/one.txt"), "top");
    await box.copyOut("tree", join(dir, "out"));
    assert.equal(readFileSync(join(dir, "out", "sub", "deep.py"), "utf8"), "print('deep')");
    assert.equal(statSync(join(dir, "out", "sub", "deep.py")).mode & 0o777, 0o700);
    await box.copyOut("/data/one.txt", join(dir, "one.txt"));
    assert.equal(readFileSync(join(dir, "one.txt"), "utf8"), "top");
    await assert.rejects(box.copyIn(join(dir, "absent"), "x"), NotFoundError);
  });

  test("processes: spawn, list, attach, stdin, signal, kill", async () => {
    const pid = await box.spawn("sh", "-c", "echo started; read line; echo got $line; sleep 60");
    await box.sendStdin(pid, "hi\n");
    const listed = (await box.processes()).find((p) => p.pid === pid);
    assert.ok(listed?.running, JSON.stringify(listed));
    assert.deepEqual(listed.argv.slice(0, 2), ["sh", "-c"]);
    const seen = [];
    const attached = box.attach(pid, { onStdout: (t) => seen.push(t), timeout: 30 });
    const gotLine = async () => seen.join("").includes("got hi");
    for (const end = Date.now() + 10_000; !(await gotLine()) && Date.now() < end;) await new Promise((r) => setTimeout(r, 50));
    await box.kill(pid, "SIGTERM");
    const end = await attached;
    assert.equal(end.stdout, "started\ngot hi\n");
    assert.equal(end.signal, 15);
    assert.equal((await box.processes()).find((p) => p.pid === pid)?.running, false);
    await assert.rejects(box.kill(pid), NotFoundError);
    const quick = await box.spawn("sh", "-c", "echo bye", { ringBytes: 4096 });
    assert.equal((await box.attach(quick)).stdout, "bye\n");
  });

  test("info names the driver, the image and the limits", async () => {
    const info = await box.info();
    assert.equal(info.image, "python");
    assert.equal(info.driver, "jail");
    assert.equal(info.id, box.id);
    assert.ok(info.limits.some((l) => /memory 256 MiB/.test(l)), info.limits.join("; "));
    assert.equal(info.network, "none");
    assert.deepEqual(info.egress, [], "a box without a network made no connection");
  });

  test("installPackages without a network says how to get one", async () => {
    await assert.rejects(box.installPackages(["tabulate"]), (err) => {
      assert.ok(err instanceof FailedPreconditionError, err.name);
      assert.match(err.message, /allow_hosts|network/);
      return true;
    });
  });
});

describe("network", { skip }, () => {
  const FETCH = "import sys, urllib.request\n" +
    "try: print(urllib.request.urlopen(sys.argv[1], timeout=20).read().decode(), end='')\n" +
    "except Exception as e: print('failed', e)\n";

  test("a refused connection is a network event of its exec; setNetwork opens and closes", async () => {
    // An answer on the host's loopback, allowed by literal (through the proxy: NO_PROXY cleared).
    const server = createServer((req, res) => res.end("hello\n"));
    await new Promise((r) => server.listen(0, "127.0.0.1", r));
    const host = `127.0.0.1:${server.address().port}`;
    const box = new CodeBox({ network: "allow" });
    try {
      const direct = { env: { NO_PROXY: "", no_proxy: "" } };
      const refused = await box.exec("python3", "-c", FETCH, `http://${host}/`, direct);
      assert.match(refused.stdout, /^failed/);
      assert.equal(refused.networkEvents.length, 1);
      assert.equal(refused.networkEvents[0].rule, "not_allowed");
      assert.match(refused.networkEvents[0].hint, /retrying will not help/);
      assert.equal(await box.setNetwork([host]), `allow: ${host}`);
      const opened = await box.exec("python3", "-c", FETCH, `http://${host}/`, direct);
      assert.equal(opened.stdout, "hello\n");
      assert.deepEqual(opened.networkEvents, []);
      await box.setNetwork([], { network: "none" });
      assert.match((await box.exec("python3", "-c", FETCH, `http://${host}/`, direct)).stdout, /^failed/);
      await assert.rejects(box.setNetwork(["a.org"], { network: "wide" }), /network must be/);
    } finally {
      await box.stop();
      server.close();
    }
    const plain = new CodeBox();
    try {
      await assert.rejects(plain.setNetwork(["example.org"]), (err) => {
        assert.ok(err instanceof FailedPreconditionError, err.name);
        assert.match(err.message, /no proxy channel/);
        return true;
      });
    } finally {
      await plain.stop();
    }
  });
});

describe("box lifecycle", { skip }, () => {
  test("stop destroys the box; a stopped box refuses calls", async () => {
    const box = new SimpleBox();
    assert.equal((await box.exec("echo", "simple")).stdout, "simple\n");
    assert.equal("run" in box, false, "a SimpleBox runs commands only");
    await box.stop();
    await box.stop();
    await assert.rejects(box.exec("true"), BoxClosedError);
  });

  // What `await using box = new CodeBox()` calls at its block's end (TypeScript compiles the
  // statement; Node 20's own parser does not take it yet).
  test("Symbol.asyncDispose stops the box", async () => {
    const box = new CodeBox();
    assert.equal(await box.run("print(1)"), "1\n");
    await box[Symbol.asyncDispose]();
    await assert.rejects(box.run("print(1)"), BoxClosedError);
  });

  test("the private server grants what the schema allows, beyond a shared server's defaults", async () => {
    const box = new CodeBox({ memoryMib: 16384, execTimeout: 7200, outputLimitBytes: 128 << 20 });
    try {
      assert.equal(await box.run("print('big')"), "big\n");
      assert.ok((await box.info()).limits.some((l) => /memory 16384 MiB/.test(l)));
    } finally {
      await box.stop();
    }
  });

  test("code that runs out of memory throws OutOfMemoryError", async () => {
    const box = new CodeBox({ memoryMib: 64 });
    try {
      await assert.rejects(box.run("x = bytearray(512 << 20)\nprint(len(x))"), OutOfMemoryError);
    } finally {
      await box.stop();
    }
  });
});
