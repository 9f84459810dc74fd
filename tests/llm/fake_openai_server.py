#!/usr/bin/env python3
"""A scripted OpenAI-compatible Chat Completions server for codebox's tests.

Usage: fake_openai_server.py --script SCENARIO.json [--log REQUESTS.jsonl] [--max-seconds N]

Listens on an ephemeral port of 127.0.0.1 and prints "PORT <n>" on stdout. Each POST to
/v1/chat/completions takes the next entry of the scenario's "replies" list:

  {"message": {"content": "...", "tool_calls": [{"name": "run_python", "arguments": "..."}]}}
      a completion; sent as server-sent events when the request asked for "stream": true
  {"status": 429, "headers": {"Retry-After": "1"}, "body": {...}}   an error reply
  {"delay": 3.0, ...}           wait before replying (for timeouts)
  {"reject_tools": true, ...}   a 400 if the request has "tools", else the rest of the entry
  {"raw": "text"}               a 200 with this body as is (malformed replies)

When the list is used up the server answers 500 "script exhausted". Every request (headers
and body) is appended to --log as one JSON line, for the test to inspect.

It stops by itself: when stdin closes (the test process ended) or after --max-seconds.
"""
import argparse
import http.server
import json
import os
import sys
import threading
import time


def completion(message, model, created):
    calls = [
        {"id": c.get("id", "call_%d" % i), "type": "function",
         "function": {"name": c["name"], "arguments": c["arguments"]}}
        for i, c in enumerate(message.get("tool_calls", []))
    ]
    msg = {"role": "assistant", "content": message.get("content")}
    if calls:
        msg["tool_calls"] = calls
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": msg,
                         "finish_reason": "tool_calls" if calls else "stop"}]}


def chunks(message, model, created):
    """The stream OpenAI sends: role, content in small pieces, tool calls in fragments."""
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": created,
            "model": model}

    def chunk(delta, finish=None):
        return dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": finish}])

    yield chunk({"role": "assistant", "content": ""})
    content = message.get("content") or ""
    for i in range(0, len(content), 7):
        yield chunk({"content": content[i:i + 7]})
    calls = message.get("tool_calls", [])
    for index, c in enumerate(calls):
        yield chunk({"tool_calls": [{"index": index, "id": c.get("id", "call_%d" % index),
                                     "type": "function",
                                     "function": {"name": c["name"], "arguments": ""}}]})
        args = c["arguments"]
        for i in range(0, len(args), 11):
            yield chunk({"tool_calls": [{"index": index,
                                         "function": {"arguments": args[i:i + 11]}}]})
    yield chunk({}, "tool_calls" if calls else "stop")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # keep the test output clean
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        try:
            request = json.loads(raw)
        except ValueError:
            request = {"unparsable": raw.decode("utf-8", "replace")}
        server = self.server
        with server.lock:
            server.log.write(json.dumps({"path": self.path, "headers": dict(self.headers),
                                         "body": request}) + "\n")
            server.log.flush()
            entry = server.replies.pop(0) if server.replies else None
        if not self.path.endswith("/chat/completions"):
            return self.send_json(404, {"error": {"message": "no route " + self.path}})
        if entry is None:
            return self.send_json(500, {"error": {"message": "script exhausted"}})
        time.sleep(entry.get("delay", 0))
        if entry.get("reject_tools") and "tools" in request:
            return self.send_json(400, {"error": {"message": "this model does not support tools"}})
        if "status" in entry:
            return self.send_json(entry["status"], entry.get("body", {}), entry.get("headers", {}))
        if "raw" in entry:
            return self.send_bytes(200, "application/json", entry["raw"].encode())
        model = request.get("model", "fake")
        created = int(time.time())
        if request.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for c in chunks(entry["message"], model, created):
                self.wfile.write(b"data: " + json.dumps(c).encode() + b"\n\n")
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True
        else:
            self.send_json(200, completion(entry["message"], model, created))

    def send_json(self, status, body, headers=None):
        self.send_bytes(status, "application/json", json.dumps(body).encode(), headers)

    def send_bytes(self, status, content_type, data, headers=None):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--script", required=True)
    parser.add_argument("--log", default=os.devnull)
    parser.add_argument("--max-seconds", type=float, default=120)
    args = parser.parse_args()
    with open(args.script) as f:
        scenario = json.load(f)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.replies = list(scenario["replies"])
    server.lock = threading.Lock()
    server.log = open(args.log, "a")

    def stop_when_stdin_closes():
        while sys.stdin.buffer.read(4096):
            pass
        os._exit(0)

    threading.Thread(target=stop_when_stdin_closes, daemon=True).start()
    threading.Timer(args.max_seconds, lambda: os._exit(0)).start()
    print("PORT %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
