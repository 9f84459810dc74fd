#!/usr/bin/env python3
"""A box's way out against the host's own, in one run (issue 14's benchmark).

usage: egress_bench.py [--codebox PATH] [--mb 100] [--runs 3] [--connections 50] [--rounds 3]

Moves itself into a network + mount namespace of its own (as tests/net does: root; nothing
leaves it), serves HTTP on an address there under a test name, then measures with the same
client code (egress_client.py):
  * direct on the host: a new connection + GET /hello (set-up), and a download of --mb MB;
  * from a jail box, through its egress proxy (`codebox run --allow-host NAME`): the same,
    as a plain-HTTP proxy request and through a CONNECT tunnel (the way TLS goes).
Rounds alternate the two (a box run, then a host run), as this machine's load drifts. Prints
medians and the ratios proxy/direct. Every loop is bounded in count and time.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests" / "net"))

import netns  # noqa: E402
from servers import Servers  # noqa: E402

CLIENT = HERE / "egress_client.py"


def median(xs):
    return statistics.median(xs)


def client_env(host, args):
    return {"BENCH_HOST": host, "BENCH_BYTES": str(args.mb * 1000 * 1000),
            "BENCH_RUNS": str(args.runs), "BENCH_CONNECTIONS": str(args.connections)}


def run_direct(host, args):
    env = {"PATH": "/usr/bin:/bin", **client_env(host, args)}
    r = subprocess.run([sys.executable, str(CLIENT)], capture_output=True, text=True,
                       env=env, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"the direct client failed: {r.stderr.strip()}")
    return json.loads(r.stdout)


def run_box(host, args):
    command = [args.codebox, "run", "--local", "--driver", "jail", "--allow-host", host,
               "--timeout", "600", "--memory", "256M", "--file", str(CLIENT),
               # the box's byte budget (1 GiB by default) must not cut the runs short
               "--network-max-bytes", str(3 * args.runs * args.mb * 1000 * 1000 + (64 << 20))]
    for k, v in client_env(host, args).items():
        command += ["--env", f"{k}={v}"]
    env = {k: v for k, v in os.environ.items() if k not in ("CODEBOX_SERVER", "CODEBOX_TOKEN")}
    r = subprocess.run(command, capture_output=True, text=True, env=env, timeout=700)
    if r.returncode != 0:
        raise SystemExit(f"the box client failed (exit {r.returncode}): {r.stderr.strip()}")
    return json.loads(r.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--codebox", default=str(REPO / "build" / "release" / "bin" / "codebox"))
    parser.add_argument("--mb", type=int, default=100, help="download size, MB (10^6 bytes)")
    parser.add_argument("--runs", type=int, default=3, help="downloads per path (at most 20)")
    parser.add_argument("--connections", type=int, default=50,
                        help="connection set-ups per path and round (at most 1000)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="box runs, each followed by a host run (at most 10)")
    args = parser.parse_args()
    args.rounds = max(1, min(args.rounds, 10))
    args.runs = max(1, min(args.runs, 20))
    args.connections = max(1, min(args.connections, 1000))
    args.mb = max(1, min(args.mb, 1000))
    problem = netns.why_not_possible()
    if problem:
        raise SystemExit(f"egress_bench: {problem}")
    if not os.path.isfile(args.codebox):
        raise SystemExit(f"egress_bench: no codebox at {args.codebox} "
                         "(ninja -C build/release codebox, or --codebox PATH)")
    netns.enter()
    host = netns.name("bench")
    netns.hosts({host: netns.NAMED})
    servers = Servers(cert=None)
    started = time.time()
    # Rounds alternate the host and a box (this machine's load drifts): direct, then box and
    # direct again per round; each path's figure is the median of all its samples.
    samples = {p: {"setup_ms": [], "download_s": []} for p in ("direct", "plain", "connect")}

    def add(result):
        for path, figures in result.items():
            for k, v in figures.items():
                samples[path][k] += v
    try:
        add(run_direct(host, args))
        for _ in range(args.rounds):
            add(run_box(host, args))
            add(run_direct(host, args))
    finally:
        servers.close()

    direct = samples["direct"]
    box = samples
    setup_direct = median(direct["setup_ms"])
    down_direct = median(direct["download_s"])
    mb = args.mb
    print(f"egress_bench: {args.rounds} rounds of {args.connections} set-ups and {args.runs} "
          f"downloads of {mb} MB per path (the host's: one round more), loopback in a network "
          f"namespace ({time.time() - started:.0f} s)")
    print(f"{'path':<34}{'set-up median':>15}{'ratio':>8}{'download':>12}{'ratio':>8}")
    print(f"{'direct on the host (baseline)':<34}{setup_direct:>12.2f} ms{1:>7.2f}x"
          f"{mb / down_direct:>8.0f} MB/s{1:>7.2f}x")
    for path, what in (("plain", "jail box, proxy, plain HTTP"),
                       ("connect", "jail box, proxy, CONNECT tunnel")):
        s = median(box[path]["setup_ms"])
        d = median(box[path]["download_s"])
        print(f"{what:<34}{s:>12.2f} ms{s / setup_direct:>7.2f}x"
              f"{mb / d:>8.0f} MB/s{(mb / d) / (mb / down_direct):>7.2f}x")
    print("(set-up: a new connection and GET /hello answered; download: one connection, "
          "first byte to last; medians)")


if __name__ == "__main__":
    main()
