#!/usr/bin/env python3
"""MCP over stdio against the Python API, in one run (docs/SPECIFICATION.md).

Times a warm `tools/call run_python` of `print(1)` through `codebox mcp` (newline-delimited
JSON-RPC on its stdin/stdout, as an MCP client speaks it) against the same cell through the
Python API (`SyncCodeBox.run_code`), both local jail boxes on this host, alternating rounds so
that the machine's noise falls on both. `ping` gives the protocol's own floor.

usage: bench/mcp/mcp_bench.py [--codebox build/release/bin/codebox] [--runs 50]
"""
from __future__ import annotations

import argparse
import json
import os
import select
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CALL_DEADLINE_S = 60.0


class StdioClient:
    """A minimal MCP client over a child's pipes; every read has a deadline."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.next_id = 1
        self.buffer = b""

    def send(self, message: dict) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def read_line(self) -> dict:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + CALL_DEADLINE_S
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise RuntimeError(f"codebox mcp did not answer within {CALL_DEADLINE_S:.0f} s")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise RuntimeError("codebox mcp closed its stdout")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def request(self, method: str, params: dict | None = None) -> dict:
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.next_id += 1
        self.send(message)
        answer = self.read_line()
        if answer.get("id") != message["id"] or "error" in answer:
            raise RuntimeError(f"{method}: unexpected answer {answer}")
        return answer["result"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()  # EOF ends the session; the box is destroyed
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000.0


def summary(name: str, samples: list[float]) -> str:
    s = sorted(samples)
    p90 = s[min(len(s) - 1, int(len(s) * 0.9))]
    return f"{name:<44} median {statistics.median(s):7.2f} ms   p90 {p90:7.2f} ms   n={len(s)}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--codebox", default=os.path.join(ROOT, "build/release/bin/codebox"))
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    if not 1 <= args.runs <= 10000:
        parser.error("--runs: from 1 to 10000")

    # The package from this tree, its extension from the build that made --codebox (or ours).
    build = os.path.dirname(os.path.dirname(os.path.abspath(args.codebox)))
    sys.path[:0] = [os.path.join(ROOT, "python"), os.path.join(build, "python"),
                    os.path.join(ROOT, "build/release/python")]
    from codebox import SyncCodeBox  # noqa: E402  (after the path is set)

    client = StdioClient([args.codebox, "mcp", "--local"])
    client.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                  "clientInfo": {"name": "mcp_bench", "version": "1"}})
    client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    call = {"name": "run_python", "arguments": {"code": "print(1)"}}

    def mcp_cell() -> None:
        result = client.request("tools/call", call)
        text = "".join(c.get("text", "") for c in result.get("content", []))
        if result.get("isError") or "1" not in text:
            raise RuntimeError(f"run_python gave {result}")

    mcp_samples: list[float] = []
    ping_samples: list[float] = []
    api_samples: list[float] = []
    with SyncCodeBox(local=True) as box:
        def api_cell() -> None:
            execution = box.run_code("print(1)")
            if execution.error or "".join(execution.logs.stdout) != "1\n":
                raise RuntimeError(f"run_code gave {execution}")

        for _ in range(args.warmup):  # the box, the kernel, the first cells
            mcp_cell()
            api_cell()
        for _ in range(args.runs):
            mcp_samples.append(timed(mcp_cell))
            api_samples.append(timed(api_cell))
            ping_samples.append(timed(lambda: client.request("ping")))
    client.close()

    print(f"codebox mcp over stdio vs the Python API; print(1) as a kernel cell, "
          f"{args.runs} rounds after {args.warmup} warm-up")
    print(summary("MCP tools/call run_python (stdio)", mcp_samples))
    print(summary("Python SyncCodeBox.run_code", api_samples))
    print(summary("MCP ping (stdio, the protocol's floor)", ping_samples))
    ratio = statistics.median(mcp_samples) / statistics.median(api_samples)
    print(f"ratio MCP / Python API (medians): {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
