// Where boxes run: the private server (started once, gone with the process, also after
// kill -9), a given server with a token, and the errors of servers and floods.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import {
  BoxStartError, CodeBox, ImageNotFoundError, ServerFullError, ServerUnavailableError, TokenRefusedError,
} from "../dist/index.js";
import { processAlive, skipReason, startTcpServer, waitFor } from "./helpers.mjs";

const skip = skipReason() ?? false;
const DIST = join(import.meta.dirname, "..", "dist", "index.js");

// A child Node process that makes three boxes, prints its private server's pid and directory
// and how many servers it started, as JSON, then ends as `ending` says: "exit", "hang" (for a
// signal from here) or "throw".
function child(ending) {
  const script = `
    import { readdirSync, readFileSync } from "node:fs";
    import { CodeBox, SimpleBox, privateServerInfo } from ${JSON.stringify(DIST)};
    const a = new CodeBox(), b = new CodeBox();
    const outs = await Promise.all([a.run("print('a')"), b.run("print('b')")]);
    outs.push((await new SimpleBox().exec("echo", "c")).stdout);
    const server = await privateServerInfo();
    // This process's children: /proc/PID/stat's fourth field is the parent.
    const servers = readdirSync("/proc").filter((pid) => {
      try { return readFileSync("/proc/" + pid + "/stat", "utf8").split(") ")[1].split(" ")[1] === String(process.pid); } catch { return false; }
    }).length;
    console.log(JSON.stringify({ outs, servers, ...server }));
    if (${JSON.stringify(ending)} === "hang") setInterval(() => {}, 1000);
    if (${JSON.stringify(ending)} === "throw") throw new Error("ended by an exception");
  `;
  const proc = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, CODEBOX_SERVER: "", CODEBOX_TOKEN: "" } });
  let out = "";
  let err = "";
  proc.stderr.on("data", (c) => { err += c; });
  const info = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("the child printed nothing in 60 s: " + err)), 60_000);
    proc.stdout.on("data", (c) => {
      out += c;
      if (out.includes("\n")) {
        clearTimeout(timer);
        resolve(JSON.parse(out));
      }
    });
    proc.once("exit", (code) => { if (!out.includes("\n")) { clearTimeout(timer); reject(new Error(`child exited ${code}: ${err}`)); } });
  });
  return { proc, info, stderr: () => err, exited: new Promise((r) => proc.once("exit", (code, signal) => r({ code, signal }))) };
}

async function assertGone(server) {
  assert.ok(await waitFor(() => !processAlive(server.pid) && !existsSync(server.dir), 20_000),
    `the private server ${server.pid} (${server.dir}) is still there: alive=${processAlive(server.pid)} dir=${existsSync(server.dir)}`);
}

describe("the private server", { skip }, () => {
  for (const ending of ["exit", "throw"]) {
    test(`is shared by the process's boxes and gone after it ends (${ending})`, async () => {
      const { info, exited, stderr } = child(ending);
      const server = await info;
      assert.deepEqual(server.outs, ["a\n", "b\n", "c\n"]);
      assert.equal(server.servers, 1, "one private server for all the process's boxes");
      assert.match(server.address, /^unix:\/.*codebox\.sock$/);
      const { code } = await Promise.race([exited, new Promise((_, j) => setTimeout(() => j(new Error("the child did not end by itself in 20 s: something holds its event loop")), 20_000))]);
      assert.equal(code, ending === "exit" ? 0 : 1, stderr());
      await assertGone(server);
    });
  }

  for (const signal of ["SIGKILL", "SIGTERM"]) {
    test(`is gone after ${signal} of its process`, async () => {
      const { proc, info, exited } = child("hang");
      const server = await info;
      assert.ok(processAlive(server.pid));
      proc.kill(signal);
      assert.equal((await exited).signal, signal);
      await assertGone(server);
    });
  }

  test("a missing codebox program or image says what to do", async () => {
    const saved = [process.env.CODEBOX_BIN, process.env.PATH, process.env.CODEBOX_SERVER];
    process.env.CODEBOX_BIN = "/nonexistent/codebox";
    delete process.env.CODEBOX_SERVER;
    try {
      await assert.rejects(new CodeBox().run("1"), (err) => {
        assert.ok(err instanceof ServerUnavailableError, err.name);
        assert.match(err.message, /CODEBOX_BIN/);
        return true;
      });
    } finally {
      [process.env.CODEBOX_BIN, process.env.PATH] = saved;
      if (saved[2] !== undefined) process.env.CODEBOX_SERVER = saved[2];
    }
    await assert.rejects(new CodeBox({ image: "no-such-image-here" }).run("1"), (err) => {
      assert.ok(err instanceof ImageNotFoundError && err instanceof BoxStartError, `${err.name}: ${err.message}`);
      assert.match(err.message, /image pull|not in this server's store/);
      return true;
    });
  });
});

describe("a given server", { skip }, () => {
  test("with its token, from options or CODEBOX_SERVER / CODEBOX_TOKEN; a wrong token is refused", async () => {
    const server = await startTcpServer(["--max-boxes", "2"]);
    try {
      const box = new CodeBox({ server: server.address, token: server.token });
      assert.equal(await box.run("print('tcp')"), "tcp\n");
      await assert.rejects(new CodeBox({ server: server.address, token: "wrong" }).run("1"), TokenRefusedError);
      Object.assign(process.env, { CODEBOX_SERVER: server.address, CODEBOX_TOKEN: server.token });
      let second;
      try {
        second = new CodeBox();
      } finally {
        delete process.env.CODEBOX_SERVER;
        delete process.env.CODEBOX_TOKEN;
      }
      assert.equal(await second.run("print('env')"), "env\n");
      // Two boxes are the server's --max-boxes: a third is refused as a full server, and
      // starts when it is asked again with room.
      const third = new CodeBox({ server: server.address, token: server.token });
      await assert.rejects(third.start(), (err) => {
        assert.ok(err instanceof ServerFullError, `${err.name}: ${err.message}`);
        assert.ok(err.retryAfter >= 0);
        return true;
      });
      await box.stop();
      assert.equal(await third.run("print(3)"), "3\n");
      await third.stop();
      await second.stop();
    } finally {
      await server.stop();
    }
  });

  test("that stops in the middle of a call ends the call with ServerUnavailableError", async () => {
    const server = await startTcpServer();
    try {
      const box = new CodeBox({ server: server.address, token: server.token });
      await box.start();
      const calls = Promise.all([
        assert.rejects(box.run("import time; time.sleep(30)"), ServerUnavailableError),
        assert.rejects(box.runCode("import time; time.sleep(30)"), ServerUnavailableError),
      ]);
      await new Promise((r) => setTimeout(r, 500));
      server.child.kill("SIGKILL");
      await calls;
      await assert.rejects(box.exec("true"), (err) => {
        assert.ok(err instanceof ServerUnavailableError, err.name);
        assert.match(err.message, /no codebox server answers/);
        return true;
      });
    } finally {
      await server.stop();
    }
  });
});

describe("output", { skip }, () => {
  test("a box that prints without end is cut at its output limit, and the heap stays small", async () => {
    const limit = 1 << 20;
    const box = new CodeBox({ outputLimitBytes: limit });
    try {
      global.gc?.();
      const before = process.memoryUsage().heapUsed;
      let streamed = 0;
      const r = await box.exec("sh", "-c", "yes 0123456789012345678901234567890123456789 | head -c 300000000", { timeout: 60, onStdout: (t) => { streamed += t.length; } });
      assert.equal(r.outputTruncated, true);
      assert.ok(Buffer.byteLength(r.stdout) <= limit, `${r.stdout.length} bytes kept`);
      assert.ok(r.stdout.length > limit / 2);
      const grown = process.memoryUsage().heapUsed - before;
      assert.ok(grown < 64 << 20, `the heap grew by ${grown >> 20} MiB for a 300 MB flood`);
      assert.ok(streamed >= r.stdout.length);
      const cell = await box.runCode("while True: print('x' * 1000)", { timeout: 5 });
      assert.equal(cell.outputTruncated, true);
      assert.ok(cell.logs.stdout.join("").length <= 2 * limit, `${cell.logs.stdout.join("").length} characters of the cell kept`);
    } finally {
      await box.stop();
    }
  });
});
