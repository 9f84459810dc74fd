#!/usr/bin/env python3
"""`codebox run`'s network flags end to end: --allow-host and --network with --json's
"network" and "egress", refused connections on stderr, --pip / --index-url (exit 126 when pip
fails), flag errors, and what `codebox doctor` says. The server the box reaches is a plain HTTP
server on the host's loopback, allowed by literal. (The namespace-isolated cases, HTTPS, pip
from a local index and rebinding, are tests/net's.)

usage: run_network_test.py PATH/TO/codebox   (exit 77 = skipped, with the reason printed)
"""
import http.server
import json
import os
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_test_util import require_box  # noqa: E402

CODEBOX = os.path.abspath(sys.argv[1])

# An allowlist that names 127.0.0.1 as a literal means the host's loopback: the box's
# NO_PROXY leaves it out, so the host's server is reached through the proxy, unasked.


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        body = b"hello\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def fetch_code(*urls):
    return ("import urllib.request\n"
            f"for url in {list(urls)!r}:\n"
            "    try: print(urllib.request.urlopen(url, timeout=20).read().decode(), end='')\n"
            "    except Exception as e: print('failed', e)\n")


def run(*args, timeout=300):
    return subprocess.run([CODEBOX, "run", "--driver", "jail", *args], capture_output=True,
                          text=True, timeout=timeout)


def check(cond, what, r=None):
    if not cond:
        extra = f"\nexit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}" if r else ""
        raise SystemExit(f"FAIL: {what}{extra}")


def main():
    require_box(CODEBOX, "python")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host = f"127.0.0.1:{server.server_address[1]}"
    try:
        # --json: the mode and every connection, allowed and refused.
        r = run("--allow-host", host, "--json",
                fetch_code(f"http://{host}/", "http://blocked.example.org/"))
        check(r.returncode == 0, "run --json with --allow-host", r)
        j = json.loads(r.stdout)
        check(j["result"]["stdout"].startswith("hello\nfailed"),
              "the allowed host answers, the other not", r)
        check(j["network"] == "allow", "--json says network allow", r)
        egress = j["egress"]
        check(len(egress) == 2 and egress[0]["allowed"] and egress[0]["port"] ==
              server.server_address[1] and egress[0]["bytes_down"] > 6, "the allowed record", r)
        check(egress[1]["host"] == "blocked.example.org" and not egress[1]["allowed"] and
              "allowlist" in egress[1]["reason"], "the refused record", r)
        check("install" not in j, "no install without --pip", r)

        # Without --json: the refusal is named on stderr.
        r = run("--allow-host", host, fetch_code("http://blocked.example.org/"))
        check(r.returncode == 0 and "codebox: network: refused blocked.example.org:80" in r.stderr,
              "refusals on stderr", r)
        r = run("--json", "print(1)")
        check(json.loads(r.stdout)["network"] == "none" and json.loads(r.stdout)["egress"] == [],
              "a box without network says none", r)
        r = run("--network", "open", "print(1)")
        check(r.returncode == 0 and "open network (any public address)" in r.stderr,
              "an open network is said", r)

        # --pip: an index that has nothing; pip fails, the code does not run, exit 126.
        index = ["--index-url", f"http://{host}/simple"]
        r = run("--pip", "surely-not-a-package-codebox", *index, "print('ran' + 'x')")
        check(r.returncode == 126, "a failed install exits 126", r)
        check("install failed" in r.stderr and "ranx" not in r.stdout, "says so, runs nothing", r)
        r = run("--json", "--pip", "surely-not-a-package-codebox", *index, "print(1)")
        check(r.returncode == 126, "a failed install exits 126 with --json", r)
        j = json.loads(r.stdout)
        check(j["install"]["exit_code"] != 0 and j["network"] == "allow" and j["result"] is None,
              "--json holds pip's result only", r)

        # Flag errors name the flag; doctor explains the modes and shows the box's.
        r = run("--index-url", "http://x/simple", "print(1)")
        check(r.returncode == 2 and "--index-url goes with --pip" in r.stderr, "--index-url", r)
        r = run("--allow-host", "bad host", "print(1)")
        check(r.returncode == 2 and "--allow-host: allowlist entry 'bad host'" in r.stderr,
              "a bad host", r)
        r = run("--network", "open", "--allow-host", "a.example.org", "print(1)")
        check(r.returncode == 2 and "given with --network open" in r.stderr, "open + hosts", r)
        r = subprocess.run([CODEBOX, "doctor", "--driver", "jail", "--allow-host", "a.example.org"],
                           capture_output=True, text=True, timeout=300)
        check("this request:  allow: a.example.org" in r.stdout and
              "network:       allow: a.example.org" in r.stdout and
              "only when asked for by name" in r.stdout, "doctor", r)
    finally:
        server.shutdown()
    print("ok")


if __name__ == "__main__":
    main()
