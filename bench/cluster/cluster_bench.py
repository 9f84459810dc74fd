#!/usr/bin/env python3
"""Scale-out of `codebox serve` on one machine (issue 18's benchmark), in one run:

1. exec latency of argv ["true"] in one jail box on n2: direct (the request to n2, the box's
   own node: the baseline) against forwarded (the same request to n3, which relays it to n2),
   alternating so that the machine's noise falls on both; p50, p99 and the ratios;
2. placement spread: a bounded load run whose every create goes to n2 (one entry point, as
   when a client pins one replica), replicas at --max-boxes M: how many boxes each node took,
   how many creates were refused (429), against the same run with the entry point picked at
   random (the baseline spread).

Three replicas on 127.0.0.2, .3 and .4, one port, static peers, a shared token; loopback only.
Every loop is bounded in count and in time; the replicas are stopped at the end.

usage (root; the python image in /var/lib/codebox):
  sudo python3 bench/cluster/cluster_bench.py [--codebox BIN] [--runs 200] [--boxes 60]
         [--threads 6] [--max-boxes 4] [--time-cap 120]
"""
import argparse
import os
import random
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "cluster"))
from replicas import Cluster, node_of  # noqa: E402

NODES = ("n2", "n3", "n4")


def percentile(samples, q):
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def timed_exec(replica, box):
    start = time.perf_counter()
    a = replica.exec(box, ["true"], timeout=60)
    ms = (time.perf_counter() - start) * 1000.0
    if a.status != 200 or a.json["exit_code"] != 0:
        raise RuntimeError(f"exec through {replica.node}: {a}")
    return ms


def latency(cluster, runs, time_cap):
    made = cluster["n2"].create()
    if made.status != 201:
        raise RuntimeError(f"create on n2: {made}")
    box = made.json["id"]
    direct, forwarded = [], []
    try:
        for _ in range(5):  # warm-up: connections, the box's first execs
            timed_exec(cluster["n2"], box)
            timed_exec(cluster["n3"], box)
        deadline = time.monotonic() + time_cap
        for i in range(runs):
            if time.monotonic() > deadline:
                print(f"    (time cap {time_cap} s reached after {i} rounds)")
                break
            direct.append(timed_exec(cluster["n2"], box))
            forwarded.append(timed_exec(cluster["n3"], box))
    finally:
        cluster["n2"].call("DELETE", f"/v1/boxes/{box}")
    print(f"exec argv [\"true\"] in a jail box on n2, {len(direct)} alternating rounds (ms):"
          f"      p50      p99")
    print(f"  {'direct (to n2, the box own node)':<44} {percentile(direct, .5):8.2f} "
          f"{percentile(direct, .99):8.2f}")
    print(f"  {'forwarded (to n3, relayed to n2)':<44} {percentile(forwarded, .5):8.2f} "
          f"{percentile(forwarded, .99):8.2f}")
    print(f"  ratio forwarded/direct: p50 {percentile(forwarded, .5) / percentile(direct, .5):.2f}x"
          f", p99 {percentile(forwarded, .99) / percentile(direct, .99):.2f}x; "
          f"forwarding adds {percentile(forwarded, .5) - percentile(direct, .5):.2f} ms at p50")


def load_run(cluster, boxes, threads, time_cap, entry):
    """`boxes` create/exec/delete rounds by `threads` clients; `entry(rng)` picks the replica
    each create goes to. Returns (counts per node, refused, failures, seconds)."""
    todo = list(range(boxes))
    lock = threading.Lock()
    counts = {n: 0 for n in NODES}
    refused, failures = [0], []
    deadline = time.monotonic() + time_cap

    def client(seed):
        rng = random.Random(seed)
        while time.monotonic() < deadline:
            with lock:
                if not todo:
                    return
                todo.pop()
            try:
                a = cluster[entry(rng)].create(timeout=60)
                if a.status == 429:
                    with lock:
                        refused[0] += 1
                    continue
                if a.status != 201:
                    failures.append(f"create: {a}")
                    continue
                box = a.json["id"]
                with lock:
                    counts[node_of(box)] += 1
                e = cluster[rng.choice(NODES)].exec(box, ["sh", "-c", "sleep 0.2"], timeout=60)
                if e.status != 200:
                    failures.append(f"exec: {e}")
                cluster[rng.choice(NODES)].call("DELETE", f"/v1/boxes/{box}", timeout=60)
            except Exception as e:  # noqa: BLE001
                failures.append(repr(e))

    start = time.monotonic()
    workers = [threading.Thread(target=client, args=(7000 + i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=max(1, deadline - time.monotonic()) + 30)
    return counts, refused[0], failures, time.monotonic() - start


def spread(cluster, boxes, threads, max_boxes, time_cap):
    print(f"\nplacement spread: {boxes} boxes (create, exec sleep 0.2, delete) by {threads} "
          f"threads, --max-boxes {max_boxes} per node:")
    print(f"  {'entry point':<30} {'n2':>4} {'n3':>4} {'n4':>4} {'429':>5} {'failed':>7} "
          f"{'boxes/s':>8}")
    rows = [("random replica (baseline)", lambda rng: rng.choice(NODES)),
            ("n2 only (placement spreads)", lambda rng: "n2")]
    for name, entry in rows:
        counts, refused, failures, took = load_run(cluster, boxes, threads, time_cap, entry)
        made = sum(counts.values())
        print(f"  {name:<30} {counts['n2']:>4} {counts['n3']:>4} {counts['n4']:>4} "
              f"{refused:>5} {len(failures):>7} {made / took:>8.1f}")
        for f in failures[:3]:
            print(f"    failure: {f}")
        away = (counts["n3"] + counts["n4"]) / made if made else 0.0
        print(f"    boxes not on n2: {away:.0%}; 429: creates refused although at most "
              f"{threads} boxes lived at once (capacity {3 * max_boxes})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--codebox", default=str(REPO / "build" / "release" / "bin" / "codebox"))
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--boxes", type=int, default=60)
    ap.add_argument("--threads", type=int, default=6)
    ap.add_argument("--max-boxes", type=int, default=4)
    ap.add_argument("--time-cap", type=float, default=120)
    ap.add_argument("--only", choices=("latency", "spread"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root (jail boxes)")
    if not (1 <= args.runs <= 10000 and 1 <= args.boxes <= 1000 and 1 <= args.threads <= 64):
        ap.error("--runs 1..10000, --boxes 1..1000, --threads 1..64")
    extra = ["--max-boxes", str(args.max_boxes)]
    cluster = Cluster(args.codebox, extra={n: extra for n in NODES})
    try:
        cluster.start()
        cluster.wait_peers()
        print(f"three replicas n2, n3, n4 on 127.0.0.2-4:{cluster.port}, static peers, "
              f"jail boxes of the python image")
        if args.only in (None, "latency"):
            latency(cluster, args.runs, args.time_cap)
        if args.only in (None, "spread"):
            spread(cluster, args.boxes, args.threads, args.max_boxes, args.time_cap)
    except Exception:
        print(cluster.logs(), file=sys.stderr)
        raise
    finally:
        cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
