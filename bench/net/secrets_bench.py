#!/usr/bin/env python3
"""HTTPS with a secret put in (the proxy ends the box's TLS and makes its own) against the same
HTTPS relayed untouched, in one run (issue 37's benchmark).

usage: secrets_bench.py [--mb 100] [--connections 30] [--rounds 3]

Moves itself into a network + mount namespace of its own (as tests/net does: root; nothing
leaves it), serves HTTPS (a throwaway CA's certificate) under two test names, and runs one
client in one jail box (the Python module, in this process: the proxy checks the upstream
against the throwaway CA through $CODEBOX_UPSTREAM_CA_FILE):
  * intercepted: the name a secret is for; each request carries the placeholder in a header,
    which the proxy replaces;
  * tunnel: the other name, no secret; the proxy relays the box's own TLS.
Per path and round: --connections set-ups (a new TLS connection through the proxy, GET /hello
answered) and one download of --mb MB. Rounds alternate the paths in the box. Prints medians
and the ratios intercepted/tunnel. Every loop is bounded in count and time.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests" / "net"))
sys.path.insert(0, str(REPO / "tests" / "common"))
for path in (REPO / "build" / "release" / "python", REPO / "python"):
    sys.path.insert(0, str(path))

import netns  # noqa: E402
import pki  # noqa: E402
import servers as test_servers  # noqa: E402
from servers import Servers  # noqa: E402

# http.server writes a reply's head and body apart; with Nagle on, the second write waits for
# the client's delayed ACK (40 ms), which would swamp the set-up figures of both paths.
test_servers._Handler.disable_nagle_algorithm = True

# Runs in the box: json in argv[1], one JSON line out.
CLIENT = r'''
import http.client, json, os, ssl, sys, time
a = json.loads(sys.argv[1])
context = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])  # the box's CA
context.load_verify_locations(cafile=a["test_ca"])                       # the server's own
def connect(host):
    c = http.client.HTTPSConnection("127.0.0.1", 3128, context=context, timeout=60)
    c.set_tunnel(host, 443)
    return c
def get(host, path, headers):
    c = connect(host)
    c.request("GET", path, headers=headers)
    r = c.getresponse()
    n = 0
    while chunk := r.read(1 << 20):
        n += len(chunk)
    c.close()
    if r.status != 200:
        raise SystemExit(f"{host}{path}: {r.status}")
    return n
out = {}
for path, host, headers in (("intercepted", a["secret_host"], {"X-Api-Key": os.environ["BENCH_KEY"]}),
                            ("tunnel", a["plain_host"], {})):
    setups = []
    for _ in range(a["connections"]):
        t = time.perf_counter()
        get(host, "/hello", headers)
        setups.append((time.perf_counter() - t) * 1000)
    t = time.perf_counter()
    n = get(host, "/bytes/" + str(a["bytes"]), headers)
    out[path] = {"setup_ms": setups, "download_s": [time.perf_counter() - t], "bytes": n}
print(json.dumps(out))
'''


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--mb", type=int, default=100, help="download size, MB (10^6 bytes)")
    parser.add_argument("--connections", type=int, default=30,
                        help="set-ups per path and round (at most 500)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (at most 10)")
    args = parser.parse_args()
    args.rounds = max(1, min(args.rounds, 10))
    args.connections = max(1, min(args.connections, 500))
    args.mb = max(1, min(args.mb, 1000))
    problem = netns.why_not_possible() or pki.why_not_possible()
    if problem:
        raise SystemExit(f"secrets_bench: {problem}")
    netns.enter()
    import codebox  # after entering: its boxes and proxy live in the namespace

    secret_host, plain_host = netns.name("secret"), netns.name("plain")
    netns.hosts({secret_host: netns.NAMED, plain_host: netns.NAMED})
    work = tempfile.mkdtemp(prefix="codebox-secrets-bench.")
    ca, cert, key = pki.make(os.path.join(work, "pki"), [secret_host, plain_host])
    os.environ["CODEBOX_UPSTREAM_CA_FILE"] = ca
    servers = Servers(cert=cert, key=key)
    samples = {p: {"setup_ms": [], "download_s": []} for p in ("intercepted", "tunnel")}
    total = args.mb * 1000 * 1000
    started = time.time()
    try:
        secret = {"name": "BENCH_KEY", "value": "bench-key-" + os.urandom(8).hex(),
                  "hosts": [secret_host]}
        with codebox.SyncCodeBox(local=True, driver="jail", allow_hosts=[plain_host],
                                 secrets=[secret], memory_mib=512, timeout=900,
                                 network_max_bytes=4 * args.rounds * total + (256 << 20)) as box:
            with open(ca, "rb") as f:
                box.files.write("/tmp/test-ca.pem", f.read())
            request = json.dumps({"test_ca": "/tmp/test-ca.pem", "secret_host": secret_host,
                                  "plain_host": plain_host, "connections": args.connections,
                                  "bytes": total})
            for _ in range(args.rounds):
                r = box.exec("python3", "-c", CLIENT, request)
                if r.exit_code != 0:
                    raise SystemExit(f"the box's client failed: {r.stderr.strip()}")
                result = json.loads(r.stdout.strip().splitlines()[-1])
                for path, figures in result.items():
                    if figures["bytes"] != total:
                        raise SystemExit(f"{path}: {figures['bytes']} bytes, not {total}")
                    samples[path]["setup_ms"] += figures["setup_ms"]
                    samples[path]["download_s"] += figures["download_s"]
            injected = [r for r in box.egress_log() if r["secrets"] == ["BENCH_KEY"]]
    finally:
        servers.close()
    got = [q for q in servers.requests() if q.host == secret_host and secret["value"] in
           q.raw.decode("latin-1")]
    print(f"secrets_bench: {args.rounds} rounds of {args.connections} HTTPS set-ups and one "
          f"{args.mb} MB download per path, one jail box, loopback in a network namespace "
          f"({time.time() - started:.0f} s); the key reached the server in {len(got)} requests, "
          f"{len(injected)} connections recorded it")
    print(f"{'path':<40}{'set-up median':>15}{'ratio':>8}{'download':>12}{'ratio':>8}")
    base_setup = statistics.median(samples["tunnel"]["setup_ms"])
    base_down = args.mb / statistics.median(samples["tunnel"]["download_s"])
    for path, what in (("tunnel", "HTTPS relayed untouched (baseline)"),
                       ("intercepted", "HTTPS intercepted, secret put in")):
        s = statistics.median(samples[path]["setup_ms"])
        d = args.mb / statistics.median(samples[path]["download_s"])
        print(f"{what:<40}{s:>12.2f} ms{s / base_setup:>7.2f}x{d:>8.0f} MB/s{d / base_down:>7.2f}x")
    print("(set-up: a new TLS connection through the box's proxy and GET /hello answered; "
          "download: one connection, first byte to last; medians)")


if __name__ == "__main__":
    main()
