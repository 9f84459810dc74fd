// What a server sends is hostile input: a scripted server on a unix socket answers wrong
// shapes, floods and silence, and every one is a CodeboxError with a deadline, never a hang,
// a wrong value or an unbounded buffer. Needs no boxes.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { BoxTimeoutError, CodeBox, ProtocolError, ServerUnavailableError } from "../dist/index.js";
import { tempDir } from "./helpers.mjs";

const GOOD_ID = "b-0123456789abcdef";
let server;
let address;
let createAnswer = { id: GOOD_ID };

// Each route answers as its test needs.
const routes = {
  "GET /v1/boxes/b-0123456789abcdef": (req, res) => res.end("this is not json"),
  "POST /v1/boxes/b-0123456789abcdef/exec": (req, res) => {
    res.writeHead(200, { "Content-Type": "text/event-stream" });
    // One event that never ends: 8 MiB of data on one line.
    const chunk = "x".repeat(64 * 1024);
    res.write("event: stdout\ndata: ");
    let sent = 0;
    const more = () => {
      while (sent < 128 && res.write(chunk)) sent++;
      if (sent < 128) res.once("drain", more);
      else res.end();
    };
    more();
  },
  "POST /v1/boxes/b-0123456789abcdef/python": (req, res) => {
    res.writeHead(200, { "Content-Type": "text/event-stream" });
    res.end('event: done\ndata: {"exit_code": "zero", "stdout": "", "stderr": ""}\n\n');
  },
  "POST /v1/boxes/b-0123456789abcdef/run_code": (req, res) => {
    res.writeHead(200, { "Content-Type": "text/event-stream" });
    res.write('event: stdout\ndata: {"text": "partial"}\n\n'); // then the server goes away
    setTimeout(() => res.destroy(), 50);
  },
};

before(async () => {
  address = join(tempDir(), "fake.sock");
  server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      if (req.method === "POST" && req.url === "/v1/boxes") {
        if (createAnswer === null) return; // silence
        res.writeHead(201, { "Content-Type": "application/json" });
        return res.end(JSON.stringify(createAnswer));
      }
      const route = routes[`${req.method} ${req.url.split("?")[0]}`];
      if (route) return route(req, res);
      res.writeHead(404);
      res.end('{"error": {"code": "not_found", "message": "no route"}}');
    });
  });
  await new Promise((r) => server.listen(address, r));
});
after(() => {
  server.closeAllConnections();
  server.close();
});

const box = (options = {}) => new CodeBox({ server: `unix:${address}`, outputLimitBytes: 1024, ...options });

test("an answer that is not JSON, or of the wrong types, is a ProtocolError", async () => {
  await assert.rejects(box().info(), (err) => err instanceof ProtocolError && /not JSON/.test(err.message));
  await assert.rejects(box().run("print(1)"), (err) => err instanceof ProtocolError && /exit_code of type string/.test(err.message));
});

test("an event over its bound ends the call instead of filling the heap", async () => {
  const before = process.memoryUsage().heapUsed;
  await assert.rejects(box().exec("true"), (err) => err instanceof ProtocolError && /event over/.test(err.message));
  assert.ok(process.memoryUsage().heapUsed - before < 32 << 20);
});

test("a box id that is not an id is refused", async () => {
  createAnswer = { id: "../../v1/status" };
  try {
    await assert.rejects(box().start(), ProtocolError);
  } finally {
    createAnswer = { id: GOOD_ID };
  }
});

test("a stream that breaks off is ServerUnavailableError; silence meets its deadline", async () => {
  await assert.rejects(box().runCode("1"), ServerUnavailableError);
  createAnswer = null;
  try {
    const started = Date.now();
    await assert.rejects(box({ startTimeoutMs: 300 }).start(), BoxTimeoutError);
    assert.ok(Date.now() - started < 5000);
  } finally {
    createAnswer = { id: GOOD_ID };
  }
});
