"""The measuring half of egress_bench.py: runs in a jail box (through the box's egress proxy,
found in $HTTP_PROXY) or on the host (direct), with the same code both ways, and prints one
JSON object. Configured by environment: BENCH_HOST (a name), BENCH_BYTES (download size),
BENCH_RUNS (downloads per path), BENCH_CONNECTIONS (set-ups per path).

Paths: "direct" (no proxy: the host's baseline), "plain" (GET with an absolute URI to the
proxy), "connect" (CONNECT host:80, then the GET through the tunnel: the way TLS goes).
"""
import json
import os
import socket
import time
import urllib.parse

HOST = os.environ["BENCH_HOST"]
SIZE = int(os.environ.get("BENCH_BYTES", str(100 * 1000 * 1000)))
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
CONNECTIONS = int(os.environ.get("BENCH_CONNECTIONS", "50"))
TIMEOUT = 60
PROXY = os.environ.get("HTTP_PROXY", "")


def proxy_address():
    parts = urllib.parse.urlsplit(PROXY)
    return parts.hostname, parts.port or 80


def read_head(sock, buf):
    """Reads up to the end of an HTTP head; returns (status, content_length, rest)."""
    data = b""
    while b"\r\n\r\n" not in data:
        n = sock.recv_into(buf)
        if n == 0:
            raise RuntimeError(f"connection closed in the head: {data[:200]!r}")
        data += bytes(buf[:n])
        if b"\r\n\r\n" not in data and len(data) > 65536:
            raise RuntimeError("head too long")
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = None
    for line in lines[1:]:
        k, _, v = line.partition(":")
        if k.strip().lower() == "content-length":
            length = int(v.strip())
    return status, length, rest


def open_path(path):
    """A connected socket on which a GET of a path on HOST can be sent, and the request line's
    target for it. For "connect", the tunnel is established first."""
    if path == "direct":
        sock = socket.create_connection((HOST, 80), timeout=TIMEOUT)
        return sock, ""
    sock = socket.create_connection(proxy_address(), timeout=TIMEOUT)
    if path == "plain":
        return sock, f"http://{HOST}"
    sock.sendall(f"CONNECT {HOST}:80 HTTP/1.1\r\nHost: {HOST}:80\r\n\r\n".encode())
    status, _, rest = read_head(sock, bytearray(4096))
    if status != 200 or rest:
        raise RuntimeError(f"CONNECT answered {status}")
    return sock, ""


def get(path, target, buf):
    """One fresh connection, GET target; returns (bytes of body, seconds to the last byte,
    seconds to the first byte of the answer)."""
    start = time.perf_counter()
    sock, prefix = open_path(path)
    with sock:
        sock.sendall(f"GET {prefix}{target} HTTP/1.1\r\nHost: {HOST}\r\n"
                     "Connection: close\r\n\r\n".encode())
        status, length, rest = read_head(sock, buf)
        first = time.perf_counter() - start
        if status != 200:
            raise RuntimeError(f"GET {target} over {path}: status {status}")
        got = len(rest)
        while got < length:
            n = sock.recv_into(buf)
            if n == 0:
                break
            got += n
    return got, time.perf_counter() - start, first


def main():
    paths = ["plain", "connect"] if PROXY else ["direct"]
    buf = bytearray(1 << 20)
    out = {path: {"setup_ms": [], "download_s": []} for path in paths}
    for path in paths:  # warm-up, not counted: the first connection's one-time costs
        get(path, "/hello", buf)
    for _ in range(CONNECTIONS):  # the paths interleaved, so a busy moment hits both
        for path in paths:
            got, total, _ = get(path, "/hello", buf)
            if got == 0:
                raise RuntimeError("empty /hello")
            out[path]["setup_ms"].append(total * 1000)
    for _ in range(RUNS):
        for path in paths:
            got, total, _ = get(path, f"/bytes/{SIZE}", buf)
            if got != SIZE:
                raise RuntimeError(f"{path}: {got} of {SIZE} bytes")
            out[path]["download_s"].append(total)
    print(json.dumps(out))


main()
