// The model loop against a scripted OpenAI-compatible server on loopback
// (tests/llm/fake_openai_server.py): the package's Interpreter, and examples/interpreter.mjs
// written with the official `openai` package.
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { createServer } from "node:http";
import { promisify } from "node:util";
import { Interpreter, ModelError, ProtocolError } from "../dist/index.js";
import { ROOT, skipReason, tempDir } from "./helpers.mjs";

const skip = skipReason() ?? false;
const KEY = "sk-test-secret-0123456789";

// Starts the fake server with `replies`; answers {baseUrl, requests(), stop()}.
async function fakeModel(replies) {
  const dir = tempDir("codebox-js-model-");
  const script = join(dir, "scenario.json");
  const log = join(dir, "requests.jsonl");
  writeFileSync(script, JSON.stringify({ replies }));
  const proc = spawn("python3", [join(ROOT, "tests", "llm", "fake_openai_server.py"), "--script", script, "--log", log, "--max-seconds", "120"], { stdio: ["pipe", "pipe", "inherit"] });
  const port = await new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error("the fake model server did not start")), 10_000);
    proc.stdout.on("data", (c) => {
      const m = /PORT (\d+)/.exec((out += c));
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
  });
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests: () => (existsSync(log) ? readFileSync(log, "utf8").trim().split("\n").filter(Boolean).map((l) => JSON.parse(l)) : []),
    stop: () => proc.kill(),
  };
}

const toolCall = (code) => ({ message: { content: "", tool_calls: [{ name: "run_python", arguments: JSON.stringify({ code }) }] } });
const lastToolResult = (request) => request.body.messages.filter((m) => m.role === "tool").at(-1)?.content ?? "";

describe("Interpreter", { skip }, () => {
  test("runs the model's code in a box and answers; the key never enters the box", async () => {
    const model = await fakeModel([
      toolCall("import os\nx = 6 * 7\nprint(x, os.environ.get('OPENAI_API_KEY'))"),
      toolCall("x + 1"),
      { message: { content: "The answer is 42." } },
    ]);
    try {
      const codes = [];
      const words = [];
      // The key from the environment, as a user sets it: it reaches the model, not the box.
      process.env.OPENAI_API_KEY = KEY;
      let interp;
      try {
        interp = new Interpreter({ baseUrl: model.baseUrl, model: "fake-model", onCode: (step) => codes.push(step), onText: (t) => words.push(t) });
      } finally {
        delete process.env.OPENAI_API_KEY;
      }
      assert.equal(await interp.ask("What is 6 * 7?"), "The answer is 42.");
      assert.equal(interp.transcript.stopReason, "answer");
      assert.deepEqual(codes, [1, 2]);
      assert.ok(words.length > 1, "the answer came as a stream of pieces");
      assert.equal(words.join(""), "The answer is 42.");
      const requests = model.requests();
      assert.equal(requests.length, 3);
      assert.equal(requests[0].body.model, "fake-model");
      assert.equal(requests[0].body.stream, true);
      assert.equal(requests[0].headers.Authorization ?? requests[0].headers.authorization, `Bearer ${KEY}`);
      assert.match(lastToolResult(requests[1]), /42 None/, "the key is not in the box's environment");
      assert.match(lastToolResult(requests[2]), /"result":"43"/, "the session kept x");
    } finally {
      model.stop();
    }
  });

  test("falls back to a code block where tools are refused; a refused key is a ModelError", async () => {
    const model = await fakeModel([
      { reject_tools: true, message: { content: "```python\nprint(2 ** 10)\n```" } },
      { message: { content: "```python\nprint(2 ** 10)\n```" } },
    ]);
    try {
      const interp = new Interpreter({ baseUrl: model.baseUrl, apiKey: KEY, stream: false });
      assert.equal(await interp.ask("2 ** 10?"), "1024\n");
      assert.equal(model.requests().at(-1).body.stream, undefined);
      assert.equal(interp.transcript.mode, "oneshot");
    } finally {
      model.stop();
    }
    const refusing = await fakeModel([{ status: 401, body: { error: { message: "bad key" } } }]);
    try {
      await assert.rejects(new Interpreter({ baseUrl: refusing.baseUrl, apiKey: "wrong" }).ask("x"), (err) => {
        assert.ok(err instanceof ModelError);
        assert.equal(err.status, 401);
        assert.match(err.message, /bad key/);
        return true;
      });
    } finally {
      refusing.stop();
    }
  });

  // An example as a user runs it: in a project of its own, next to node_modules with codebox
  // and openai; answers its stdout.
  async function runExample(name, args, model) {
    const project = tempDir("codebox-js-example-");
    mkdirSync(join(project, "node_modules"));
    mkdirSync(join(project, "data"));
    symlinkSync(join(ROOT, "js"), join(project, "node_modules", "codebox"));
    symlinkSync(join(ROOT, "js", "node_modules", "openai"), join(project, "node_modules", "openai"));
    copyFileSync(join(ROOT, "examples", name), join(project, name));
    copyFileSync(join(ROOT, "examples", "data", "sales.csv"), join(project, "data", "sales.csv"));
    const { stdout } = await promisify(execFile)(process.execPath, [join(project, name), ...args], {
      env: { ...process.env, OPENAI_BASE_URL: model.baseUrl, OPENAI_API_KEY: KEY, CODEBOX_MODEL: "fake-model" },
      timeout: 90_000,
    });
    return { stdout, project };
  }

  test("examples/interpreter.mjs with the openai package", async () => {
    const model = await fakeModel([toolCall("print(sum(range(10)))"), { message: { content: "It is {tool_stdout}" } }]);
    try {
      const { stdout } = await runExample("interpreter.mjs", ["Sum 0..9"], model);
      assert.equal(stdout.trim(), "It is 45");
      assert.match(lastToolResult(model.requests()[1]), /"stdout":"45\\n"/);
    } finally {
      model.stop();
    }
  });

  test("examples/data_analysis.mjs: a CSV in, pandas in the box, a chart out", async () => {
    const model = await fakeModel([
      toolCall("import pandas as pd\ndf = pd.read_csv('/data/sales.csv')\nlen(df)"),
      toolCall("import matplotlib.pyplot as plt\ndf.plot(x='month', y='revenue')\nplt.show()\ndf.loc[df['revenue'].idxmax(), 'month']"),
      { message: { content: "The best month is {tool_stdout}." } },
    ]);
    try {
      const out = tempDir("codebox-js-charts-");
      const csv = join(ROOT, "examples", "data", "sales.csv");
      const { stdout } = await runExample("data_analysis.mjs", [csv, "Which month was best?", out], model);
      const csvRows = readFileSync(csv, "utf8").trim().split("\n").length - 1;
      assert.match(lastToolResult(model.requests()[1]), new RegExp(`"result":"${csvRows}"`), "the CSV was in the box");
      const chart = JSON.parse(lastToolResult(model.requests()[2]));
      assert.equal(chart.error, null);
      assert.equal(chart.images, 1);
      assert.match(stdout, /^The best month is /);
      const png = readFileSync(join(out, "chart-1.png"));
      assert.deepEqual([...png.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47], "the chart was saved as a PNG");
    } finally {
      model.stop();
    }
  });
  test("a model reply past 8 MiB, streamed or whole, is a ProtocolError and is not read on", async () => {
    // A model server on loopback that answers without end: it stops at 64 MiB, or when the
    // client hangs up, and counts what it sent.
    let sent = 0;
    let reply = { type: "", piece: Buffer.alloc(0) };
    const flood = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(200, { "content-type": reply.type });
        const pump = () => {
          while (sent < (64 << 20) && !res.destroyed) {
            sent += reply.piece.length;
            if (!res.write(reply.piece)) return res.once("drain", pump);
          }
          res.end();
        };
        pump();
      });
    });
    await new Promise((resolve) => flood.listen(0, "127.0.0.1", resolve));
    const baseUrl = `http://127.0.0.1:${flood.address().port}/v1`;
    try {
      for (const stream of [true, false]) {
        sent = 0;
        // One line that never ends: nothing in it can be parsed, so only the cap stops it.
        reply = { type: stream ? "text/event-stream" : "application/json", piece: Buffer.alloc(65536, "x") };
        const interp = new Interpreter({ baseUrl, apiKey: KEY, model: "fake-model", stream, mode: "tools" });
        await assert.rejects(interp.ask("flood"),
          (err) => err instanceof ProtocolError && /over 8388608 bytes/.test(err.message));
        assert.ok(sent < (32 << 20), `${stream ? "streamed" : "whole"}: the client read on past its cap (${sent} bytes sent)`);
      }
    } finally {
      flood.closeAllConnections();
      flood.close();
    }
  });
});
