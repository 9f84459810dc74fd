"""`codebox mcp` over real pipes, as an MCP client starts it: the handshake, state kept from
call to call, garbage and an oversized line answered with errors (and the server goes on),
cancellation, and the box gone after EOF or SIGTERM. Every wait is bounded.

usage: mcp_stdio_test.py CODEBOX
"""
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

from cli_test_util import alive, jails_of, require_box

WAIT = 60  # seconds any one answer may take (a box starts on the first call)


class Server:
    def __init__(self, codebox, *flags):
        self.proc = subprocess.Popen(
            [codebox, "mcp", "--driver", "jail", "--local", *flags],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines = queue.Queue()
        self.stderr = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send(self, message):
        data = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def next(self, timeout=WAIT):
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            fail(f"no answer within {timeout} s; stderr: {b''.join(self.stderr)!r}")
        if line is None:
            fail(f"the server closed stdout; stderr: {b''.join(self.stderr)!r}")
        try:
            return json.loads(line)
        except ValueError:
            fail(f"stdout carried a line that is not JSON: {line[:200]!r}")

    def call(self, id, name, arguments):
        self.send({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": name, "arguments": arguments}})

    def initialize(self):
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                   "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                              "clientInfo": {"name": "mcp_stdio_test", "version": "1"}}})
        answer = self.next()
        check(answer["result"]["protocolVersion"] == "2025-11-25", f"initialize: {answer}")
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def exit_code(self, timeout=30):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            fail(f"codebox mcp did not exit within {timeout} s")


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def text_of(answer):
    return "".join(c["text"] for c in answer["result"]["content"] if c["type"] == "text")


def wait_gone(pids, what):
    deadline = time.monotonic() + 30
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    check(not alive(pids), f"the box outlived {what}: jail supervisors {alive(pids)} still run")


def protocol_and_eof(codebox):
    s = Server(codebox)
    s.initialize()

    s.send(b"this is not json")
    answer = s.next()
    check(answer["id"] is None and answer["error"]["code"] == -32700, f"garbage: {answer}")
    s.send(b'{"jsonrpc":"2.0","id":5,"method":"ping","params":"' + b"x" * (17 << 20) + b'"}')
    answer = s.next()
    check(answer["id"] is None and answer["error"]["code"] in (-32600, -32700),
          f"a 17 MiB line: {answer}")

    # Back to back: answered in order, state kept.
    s.call(1, "run_python", {"code": "x = 41"})
    s.call(2, "run_python", {"code": "print(x + 1)"})
    first, second = s.next(), s.next()
    check(first["id"] == 1 and second["id"] == 2, f"out of order: {first} {second}")
    check(text_of(second) == "42\n", f"state was not kept: {second}")
    jails = jails_of(s.proc.pid)
    check(jails, "no jail supervisor of codebox mcp found while its box should run")

    s.call(3, "no_such_tool", {})
    answer = s.next()
    check(answer["id"] == 3 and answer["error"]["code"] == -32602, f"unknown tool: {answer}")

    # A running cell and a queued call, both cancelled: neither is answered; the state stays.
    s.call("slow", "run_python", {"code": "import time\ntime.sleep(60)"})
    s.call("queued", "run_python", {"code": "x = 0"})
    time.sleep(2)
    for id in ("queued", "slow"):
        s.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": id, "reason": "test"}})
    started = time.monotonic()
    s.call("after", "run_python", {"code": "print(x)"})
    answer = s.next()
    check(answer["id"] == "after", f"a cancelled request was answered: {answer}")
    check(text_of(answer) == "41\n", f"after the cancels: {answer}")
    check(time.monotonic() - started < 30, "the cancelled cell was not interrupted")

    s.proc.stdin.close()  # EOF ends the session
    check(s.exit_code() == 0, f"exit status {s.proc.returncode} after EOF")
    wait_gone(jails, "EOF")


def sigterm(codebox):
    s = Server(codebox)
    s.initialize()
    s.call(1, "run_python", {"code": "print('up')"})
    check(text_of(s.next()) == "up\n", "first cell")
    jails = jails_of(s.proc.pid)
    s.call(2, "run_python", {"code": "import time\ntime.sleep(120)"})
    time.sleep(1)
    s.proc.send_signal(signal.SIGTERM)
    check(s.exit_code(20) == 0, f"exit status {s.proc.returncode} after SIGTERM")
    wait_gone(jails, "SIGTERM")


def main():
    codebox = sys.argv[1]
    require_box(codebox, "python")
    protocol_and_eof(codebox)
    sigterm(codebox)
    print("PASS")


if __name__ == "__main__":
    main()
