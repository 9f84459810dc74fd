#!/usr/bin/python3
# A hostile codebox-agent: runs as PID 1 of a real jail box in place of the agent (as box code
# that took the agent over would) and attacks the host through the protocol. What it does
# for an exec is chosen by argv[0]:
#   flood         50 MiB of stdout frames, then an exit that claims nothing was truncated
#   mistyped      an exit whose exit_code is the string "zero"
#   second-exit   two exits on the same stream
#   foreign-exit  an exit on a stream the host never opened
#   huge-file     (read_file) a file event claiming 4 EiB, then data
# mkdir, kill and shutdown are answered like the real agent.
import json
import os
import struct
import sys

FD = 3


def read_exact(n):
    buf = b""
    while len(buf) < n:
        chunk = os.read(FD, n - len(buf))
        if not chunk:
            sys.exit(0)
        buf += chunk
    return buf


def read_frame():
    length, stream, ftype = struct.unpack("<IIB3x", read_exact(12))
    return stream, ftype, read_exact(length)


def send(stream, ftype, payload):
    data = struct.pack("<IIB3x", len(payload), stream, ftype) + payload
    view = memoryview(data)
    while view:
        try:
            n = os.write(FD, view)
        except (BrokenPipeError, ConnectionResetError):
            sys.exit(0)
        view = view[n:]


def event(stream, obj):
    send(stream, 2, json.dumps(obj).encode())


def exit_event(code=0):
    return {"event": "exit", "exit_code": code, "signal": 0, "timed_out": False,
            "output_truncated": False, "duration_ms": 1, "out_of_memory": False}


read_frame()  # the host's hello
send(0, 1, json.dumps({"protocol": 1, "agent": "hostile", "pid": os.getpid()}).encode())
while True:
    stream, ftype, payload = read_frame()
    if ftype != 2:
        continue  # stdin, data
    req = json.loads(payload)
    op = req.get("op")
    if op in ("mkdir", "kill"):
        event(stream, {"event": "done"})
    elif op == "shutdown":
        event(stream, {"event": "done"})
        sys.exit(0)
    elif op == "read_file":
        event(stream, {"event": "file", "size": 1 << 62, "mode": 420})
        for _ in range(64):
            send(stream, 6, b"h" * (256 << 10))
        send(stream, 6, b"")
    elif op == "exec":
        attack = os.path.basename(req["argv"][0])
        if attack == "flood":
            chunk = b"x" * (256 << 10)
            for _ in range(200):  # 50 MiB
                send(stream, 4, chunk)
            event(stream, exit_event(0))
        elif attack == "mistyped":
            bad = exit_event(0)
            bad["exit_code"] = "zero"
            event(stream, bad)
        elif attack == "second-exit":
            event(stream, exit_event(0))
            event(stream, exit_event(1))
        elif attack == "foreign-exit":
            event(stream + 1000, exit_event(0))
        else:
            event(stream, exit_event(0))
    else:
        event(stream, {"event": "error", "code": "invalid_argument", "message": "no"})
