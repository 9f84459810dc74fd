#!/usr/bin/env python3
"""A scripted OpenAI-compatible Chat Completions server for codebox's tests.

Usage: fake_openai_server.py (--script SCENARIO.json | --scenarios DIR) [--log REQUESTS.jsonl]
                             [--max-seconds N]

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

A completion entry may also say how a server other than OpenAI's would send it:

  {"shape": "hermes"|"mistral"|"mistral_args"|"bare_json"|"python_tag"|"object_args", ...}
      the tool calls written into the content (<tool_call>{..}</tool_call>, [TOOL_CALLS][..],
      [TOOL_CALLS]name[ARGS]{..}, a bare JSON call, <|python_tag|>SOURCE), or, for
      object_args, in tool_calls with the arguments as an object and no id
  {"thinking": "...", "thinking_as": "tags"|"field"}   <think>..</think> before the content,
      or a reasoning_content field (streamed as reasoning_content deltas)
  {"finish_reason": "stop"|null}  overrides it (null leaves it out)
  {"ignore_stream": true}         one JSON body even when "stream": true was asked
  {"expect_in_last_result": "NameError"}   the reply's content says EXPECTATION FAILED unless
      the last tool result (or user message) of the request holds that text
In any content, {tool_stdout} becomes the "stdout" of the request's last tool result.

With --scenarios DIR instead of --script the server is stateless, for clients that ask many
times (codebox serve, a test looping over shapes): the first user message names the scenario
("[scenario:NAME]", the file DIR/NAME.json), and the reply is the entry whose index is the
number of assistant messages in the request. An entry {"status": 503, "times": 1, "then":
{...}} answers with the status the first `times` times that turn is asked, then with "then".

It stops by itself: when stdin closes (the test process ended) or after --max-seconds.
"""
import argparse
import http.server
import json
import os
import re
import sys
import threading
import time


def last_result(request):
    """The content of the request's last tool result, or of its last user message."""
    for m in reversed(request.get("messages", [])):
        if m.get("role") in ("tool", "user"):
            return m.get("content") or ""
    return ""


def tool_stdout(request):
    """The stdout of the last tool result that has one (not an error for a call never run)."""
    for m in reversed(request.get("messages", [])):
        if m.get("role") == "tool":
            try:
                result = json.loads(m.get("content") or "{}")
            except ValueError:
                continue
            if "stdout" in result:
                return str(result["stdout"]).strip()
    return ""


def arguments_object(call):
    args = call["arguments"]
    try:
        return json.loads(args) if isinstance(args, str) else args
    except ValueError:
        return args  # a malformed-arguments scenario: sent as written


def shaped(entry, request):
    """(message, finish_reason) as the server that entry["shape"] stands for sends it."""
    message = entry["message"]
    shape = entry.get("shape", "openai")
    content = (message.get("content") or "").replace("{tool_stdout}", tool_stdout(request))
    expect = entry.get("expect_in_last_result")
    if expect and expect not in last_result(request):
        content = "EXPECTATION FAILED: the last result lacks %r" % expect
    calls = [] if expect and content.startswith("EXPECTATION") else message.get("tool_calls", [])
    native = []
    written = [{"name": c["name"], "arguments": arguments_object(c)} for c in calls]
    if not calls:
        pass
    elif shape == "hermes":
        content += "".join("\n<tool_call>\n%s\n</tool_call>" % json.dumps(w) for w in written)
    elif shape == "mistral":
        content += "[TOOL_CALLS]" + json.dumps(written)
    elif shape == "mistral_args":
        content += "".join("[TOOL_CALLS]%s[ARGS]%s" % (w["name"], json.dumps(w["arguments"]))
                           for w in written)
    elif shape == "bare_json":
        content = json.dumps(written[0] if len(written) == 1 else written)
    elif shape == "python_tag":
        content += "<|python_tag|>" + "\n".join(w["arguments"]["code"] for w in written) + "<|eom_id|>"
    elif shape == "object_args":
        native = [{"type": "function", "function": {"name": c["name"], "arguments": arguments_object(c)}}
                  for c in calls]
    else:
        native = [{"id": c.get("id", "call_%d" % i), "type": "function",
                   "function": {"name": c["name"], "arguments": c["arguments"]}}
                  for i, c in enumerate(calls)]
    msg = {"role": "assistant", "content": content if content or not native else None}
    if native:
        msg["tool_calls"] = native
    thinking = entry.get("thinking")
    if thinking and entry.get("thinking_as", "tags") == "tags":
        msg["content"] = "<think>" + thinking + "</think>\n\n" + (msg["content"] or "")
    elif thinking:
        msg["reasoning_content"] = thinking
    finish = entry.get("finish_reason", "tool_calls" if native else "stop")
    return msg, finish


def completion(msg, finish, model, created):
    choice = {"index": 0, "message": msg}
    if finish is not None:
        choice["finish_reason"] = finish
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": created, "model": model,
            "choices": [choice]}


def chunks(msg, finish, model, created):
    """The stream OpenAI sends: role, content in small pieces, tool calls in fragments."""
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": created,
            "model": model}

    def chunk(delta, finish=None):
        choice = {"index": 0, "delta": delta}
        if finish is not None:
            choice["finish_reason"] = finish
        return dict(base, choices=[choice])

    yield chunk({"role": "assistant", "content": ""})
    reasoning = msg.get("reasoning_content") or ""
    for i in range(0, len(reasoning), 5):
        yield chunk({"reasoning_content": reasoning[i:i + 5]})
    content = msg.get("content") or ""
    for i in range(0, len(content), 7):
        yield chunk({"content": content[i:i + 7]})
    for index, c in enumerate(msg.get("tool_calls", [])):
        args = c["function"]["arguments"]
        head = {"index": index, "type": "function", "function": {"name": c["function"]["name"]}}
        if "id" in c:
            head["id"] = c["id"]
        if not isinstance(args, str):  # whole, as an object, in the first fragment
            head["function"]["arguments"] = args
            yield chunk({"tool_calls": [head]})
            continue
        head["function"]["arguments"] = ""
        yield chunk({"tool_calls": [head]})
        for i in range(0, len(args), 11):
            yield chunk({"tool_calls": [{"index": index,
                                         "function": {"arguments": args[i:i + 11]}}]})
    yield chunk({}, finish)


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
            entry = server.next_entry(request)
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
        msg, finish = shaped(entry, request)
        if request.get("stream") and not entry.get("ignore_stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for c in chunks(msg, finish, model, created):
                self.wfile.write(b"data: " + json.dumps(c).encode() + b"\n\n")
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True
        else:
            self.send_json(200, completion(msg, finish, model, created))

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


class Script:
    """--script: the replies in order, one per request."""

    def __init__(self, path):
        with open(path) as f:
            self.replies = list(json.load(f)["replies"])

    def __call__(self, request):
        return self.replies.pop(0) if self.replies else None


class Scenarios:
    """--scenarios DIR: the scenario the task names, the reply its turn is at."""

    def __init__(self, directory):
        self.directory = directory
        self.asked = {}  # (scenario, turn) -> times a status entry answered

    def __call__(self, request):
        messages = request.get("messages", [])
        first_user = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
        match = re.search(r"\[scenario:([A-Za-z0-9_-]+)\]", first_user)
        if not match:
            return {"status": 400, "body": {"error": {"message": "no [scenario:NAME] in the task"}}}
        name = match.group(1)
        try:
            with open(os.path.join(self.directory, name + ".json")) as f:
                replies = json.load(f)["replies"]
        except OSError:
            return {"status": 404, "body": {"error": {"message": "no scenario " + name}}}
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        if turn >= len(replies):
            return None
        entry = replies[turn]
        if "then" in entry:
            times = self.asked.get((name, turn), 0)
            self.asked[(name, turn)] = times + 1
            if times >= entry.get("times", 1):
                return entry["then"]
        return entry


def main():
    parser = argparse.ArgumentParser()
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--script")
    source.add_argument("--scenarios")
    parser.add_argument("--log", default=os.devnull)
    parser.add_argument("--max-seconds", type=float, default=120)
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.next_entry = Script(args.script) if args.script else Scenarios(args.scenarios)
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
