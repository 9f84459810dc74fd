#!/usr/bin/env python3
"""A bounded soak of `codebox serve` (issue 32's benchmark): several tenants' clients for some
minutes of mixed create / exec / python / files / run_code / stream / destroy and one-shot runs,
with faults injected at the same time, then what the server served, refused, kept and left.

After a warm-up (one of everything, then --warm-up seconds of the whole mix, faults included,
not counted: the server's threads and heap reach their working size), one run of --seconds.
One server on 127.0.0.1:<port 0> and a unix socket, a token file of three tenants (a, b, c) and
an admin, `--max-boxes 24 --tenant-max-boxes 8 --pool python=2`, jail boxes of the python image.
For --seconds (and at most --max-requests requests) two client threads per tenant (one over TCP,
one over the unix socket) run a random mix; now and then each tries another tenant's live box
id on some route (it must answer exactly as an unknown id: 404 not_found, same message) and
lists its boxes (only its own may appear), and bursts creates past its quota (429 with
Retry-After, never more than 8 boxes). At the same time:
  * every ~10 s one box's processes are killed with SIGKILL: the box is one that a client has
    an exec running in (found by the exec's CODEBOX_REQUEST=<box>/<request> environment), and
    the kill takes either the box's whole process tree under its codebox-jail supervisor or the
    supervisor itself, in turn; a 5xx (or 404) on that box afterwards is the fault's;
  * every ~4 s a client goes away mid-stream (exec, run_code or /v1/run with Accept:
    text/event-stream, closed after its first event); then the work must have stopped (the
    exec's processes gone from the box; the cell interrupted, the next cell answering at once);
  * every ~30 s a connection flood: --flood-connections idle TCP connections from 127.0.0.2
    (more addresses with --flood-addresses), held ~10 s, while the clients go on.

It prints requests by status (served, refused, the faults', failures), p50/p99 latency per
kind, the server's RSS (VmRSS) after warm-up, at its peak and at the end, its open fds at start
and end, and, after a SIGTERM, the jail supervisors, box cgroups, staging directories and temp
files the server left. Exit status 1 when anything was lost or left behind: a tenant reached
another's box (or saw it listed), a 5xx or a wrong answer that no injected fault explains, a
client error, work that went on after its client left, the server died or did not exit 0 on
SIGTERM, a leftover, fds not back to where they started, or RSS at the end more than
--rss-growth (50%) over the start.

All traffic stays on 127.0.0.0/8 and the unix socket; every loop is bounded in count and time;
the server is stopped (SIGTERM, SIGKILL after a deadline) whatever happens.

usage (root; the python image in /var/lib/codebox; Python 3 stdlib only):
  sudo python3 bench/serve/soak.py [--codebox BIN] [--seconds 120] [--warm-up 20]
         [--max-requests 40000]
         [--flood-connections 300] [--flood-addresses 1] [--seed 1] [--keep]
"""
import argparse
import collections
import http.client
import json
import os
import random
import re
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TENANTS = ("a", "b", "c")
TOKENS = {"a": "tokA", "b": "tokB", "c": "tokC"}
ADMIN = "tokAdmin"
MAX_BOXES, TENANT_MAX_BOXES, POOL = 24, 8, 2
START_DEADLINE_S = 180     # the server up and its pool full (a cold image cache is slow)
STOP_DEADLINE_S = 40       # SIGTERM to exit (its --drain is 30 s)
REQUEST_TIMEOUT_S = 90     # any one request of the soak
KILL_EVERY_S, LEAVE_EVERY_S, FLOOD_EVERY_S, FLOOD_HOLD_S = 10, 4, 30, 10
BOX = {"image": "python"}  # the pool's options: such a create takes a pool box


def now():
    return time.monotonic()


def percentile(samples, q):
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))] if s else float("nan")


# HTTP ------------------------------------------------------------------------------------------

class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


class Answer:
    def __init__(self, status, headers=None, body=b"", events=None, error=None):
        self.status = status      # an int, or None when the request got no answer (error)
        self.headers = headers or {}
        self.body = body
        self.events = events      # a stream's [(name, data)], else None
        self.error = error        # "ConnectionResetError: ..." when no answer

    @property
    def json(self):
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None

    @property
    def error_code(self):
        j = self.json
        return j.get("error", {}).get("code") if isinstance(j, dict) else None

    @property
    def message(self):
        j = self.json
        return j.get("error", {}).get("message") if isinstance(j, dict) else None

    @property
    def label(self):
        """The status as tabulated: 200, 404, "200+error:box_crashed" (a stream that ended in an
        error event), "200+cut" (a stream that ended without done), "conn:ExcName"."""
        if self.status is None:
            return f"conn:{self.error.split(':')[0]}"
        if self.events is not None and self.status == 200:
            last = self.events[-1] if self.events else None
            if last is None or last[0] not in ("done", "error"):
                return "200+cut"
            if last[0] == "error":
                code = (last[1] or {}).get("error", {}).get("code") if isinstance(
                    last[1], dict) else None
                return f"200+error:{code}"
        return self.status

    def __repr__(self):
        tail = self.events[-1:] if self.events is not None else self.body[:300]
        return f"<{self.label} {self.error or ''}{tail!r}>"


class Client:
    """Requests to the server as one token, over TCP (127.0.0.1) or the unix socket, each on a
    fresh connection (Connection: close)."""

    def __init__(self, server, token, transport):
        self.server, self.token, self.transport = server, token, transport

    def _connection(self, timeout):
        if self.transport == "unix":
            return UnixConnection(self.server.socket_path, timeout)
        return http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=timeout)

    def _headers(self, extra):
        h = {"Connection": "close"}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        h.update(extra or {})
        return h

    def call(self, method, path, body=None, raw=None, headers=None, timeout=REQUEST_TIMEOUT_S):
        h = self._headers(headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        elif raw is not None:
            data = raw
            h["Content-Type"] = "application/octet-stream"
        conn = self._connection(timeout)
        try:
            conn.request(method, path, body=data, headers=h)
            resp = conn.getresponse()
            payload = resp.read()
            return Answer(resp.status, {k.lower(): v for k, v in resp.getheaders()}, payload)
        except (OSError, http.client.HTTPException) as e:
            return Answer(None, error=f"{type(e).__name__}: {e}")
        finally:
            conn.close()

    def stream(self, path, body, timeout=REQUEST_TIMEOUT_S, leave_after=None):
        """POST with Accept: text/event-stream; reads events until done/error. With
        `leave_after=n` the client shuts its socket after n events (a client gone mid-stream)
        and the answer's headers hold the request id."""
        h = self._headers({"Accept": "text/event-stream", "Content-Type": "application/json"})
        conn = self._connection(timeout)
        deadline = now() + timeout
        sock = None
        try:
            conn.request("POST", path, body=json.dumps(body).encode(), headers=h)
            sock = conn.sock
            resp = conn.getresponse()
            headers = {k.lower(): v for k, v in resp.getheaders()}
            if resp.status != 200:
                return Answer(resp.status, headers, resp.read())
            events, name, data = [], None, []
            while now() < deadline:
                if leave_after is not None and len(events) >= leave_after:
                    sock.shutdown(socket.SHUT_RDWR)
                    break
                line = resp.readline()
                if not line:
                    break
                line = line.rstrip(b"\r\n").decode(errors="replace")
                if line == "":
                    if name is not None or data:
                        text = "\n".join(data)
                        try:
                            parsed = json.loads(text)
                        except ValueError:
                            parsed = text
                        events.append((name or "message", parsed))
                        if name in ("done", "error"):
                            break
                    name, data = None, []
                elif line.startswith(":"):
                    continue
                elif line.startswith("event:"):
                    name = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[6:] if line[5:6] == " " else line[5:])
            return Answer(200, headers, b"", events)
        except (OSError, http.client.HTTPException) as e:
            return Answer(None, error=f"{type(e).__name__}: {e}")
        finally:
            if sock is not None:
                try:
                    sock.close()
                except OSError:
                    pass
            conn.close()


# /proc -----------------------------------------------------------------------------------------

def read_text(path, binary=False):
    try:
        with open(path, "rb") as f:
            data = f.read()
        return data if binary else data.decode(errors="replace")
    except OSError:
        return b"" if binary else ""


def vm_rss_kib(pid):
    m = re.search(r"^VmRSS:\s+(\d+) kB", read_text(f"/proc/{pid}/status"), re.M)
    return int(m.group(1)) if m else None


def threads_of(pid):
    m = re.search(r"^Threads:\s+(\d+)", read_text(f"/proc/{pid}/status"), re.M)
    return int(m.group(1)) if m else 0


def fd_targets(pid):
    out = []
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for n in names:
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{n}"))
        except OSError:
            pass
    return out


def fd_kind(target):
    """socket:[123] -> socket, anon_inode:[pidfd] -> anon_inode:[pidfd], /x/y -> /x/y."""
    return re.sub(r":\[\d+\]$", "", target)


def process_table():
    """pid -> (ppid, argv) of every process now."""
    table = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        stat = read_text(f"/proc/{d}/stat")
        if not stat:
            continue
        try:
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (IndexError, ValueError):
            continue
        argv = read_text(f"/proc/{d}/cmdline", binary=True).split(b"\0")
        table[int(d)] = (ppid, [a.decode(errors="replace") for a in argv if a])
    return table


def supervisors_of(server_pid, table=None):
    """The codebox-jail supervisors the server started (`codebox-jail --parent PID`)."""
    table = table if table is not None else process_table()
    want = str(server_pid)
    out = []
    for pid, (_, argv) in table.items():
        if argv and os.path.basename(argv[0]) == "codebox-jail":
            if any(argv[i] == "--parent" and i + 1 < len(argv) and argv[i + 1] == want
                   for i in range(len(argv))):
                out.append(pid)
    return out


def descendants(root, table):
    children = collections.defaultdict(list)
    for pid, (ppid, _) in table.items():
        children[ppid].append(pid)
    out, todo = [], [root]
    while todo and len(out) < 10000:
        p = todo.pop()
        for c in children.get(p, ()):
            out.append(c)
            todo.append(c)
    return out


def cgroup_dirs(prefix, max_dirs=100000):
    """Directories named `prefix`* in every cgroup hierarchy (a box's are not walked into)."""
    found, budget = [], [max_dirs]
    mounts = set()
    for line in read_text("/proc/self/mountinfo").splitlines():
        left, _, right = line.partition(" - ")
        fields = left.split()
        if len(fields) > 4 and right.split()[:1] and right.split()[0] in ("cgroup", "cgroup2"):
            mounts.add(fields[4])

    def walk(d, depth):
        try:
            entries = list(os.scandir(d))
        except OSError:
            return
        for e in entries:
            if budget[0] <= 0:
                return
            if not e.is_dir(follow_symlinks=False):
                continue
            budget[0] -= 1
            if e.name.startswith(prefix):
                found.append(e.path)
            elif not e.name.startswith("codebox-") and depth < 8:
                walk(e.path, depth + 1)

    for m in sorted(mounts):
        walk(m, 0)
    return sorted(set(found))


# The server ------------------------------------------------------------------------------------

class Server:
    def __init__(self, binary, work, extra):
        self.binary, self.work = binary, work
        self.socket_path = os.path.join(work, "s.sock")
        self.token_file = os.path.join(work, "tokens")
        self.tmpdir = os.path.join(work, "tmp")   # the server's TMPDIR: its temp files land here
        self.log_path = os.path.join(work, "serve.log")
        os.makedirs(self.tmpdir)
        with open(self.token_file, "w") as f:
            f.write("# TOKEN [tenant=NAME] [admin] [max-boxes=N] [max-requests=N]\n")
            for t in TENANTS:
                f.write(f"{TOKENS[t]} tenant={t}\n")
            f.write(f"{ADMIN} admin\n")
        os.chmod(self.token_file, 0o600)
        self.argv = [binary, "serve", "--listen", "127.0.0.1:0", "--listen",
                     f"unix:{self.socket_path}", "--token-file", self.token_file,
                     "--max-boxes", str(MAX_BOXES), "--tenant-max-boxes", str(TENANT_MAX_BOXES),
                     "--pool", f"python={POOL}", *extra]
        self.proc = None
        self.port = None
        self.first_line = None
        self.returncode = None
        self.stop_s = None

    def start(self):
        drop = ("CODEBOX_HOME", "CODEBOX_SERVER", "CODEBOX_TOKEN", "KUBERNETES_SERVICE_HOST",
                "POD_IP")
        env = {k: v for k, v in os.environ.items() if k not in drop}
        env["TMPDIR"] = self.tmpdir
        log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=log,
                                     stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        log.close()
        deadline = now() + 30
        buf = b""
        while now() < deadline and b"\n" not in buf:
            if self.proc.poll() is not None:
                break
            r, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if r:
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                if not chunk:
                    break
                buf += chunk
        self.first_line = buf.split(b"\n")[0].decode(errors="replace")
        m = re.search(r"127\.0\.0\.1:(\d+)", self.first_line)
        if not m:
            raise RuntimeError(f"no port in the server's first line {self.first_line!r} "
                               f"(exit {self.proc.poll()}):\n{self.log_tail()}")
        self.port = int(m.group(1))
        # The rest of stdout, if any, is drained so that the server never blocks on it.
        threading.Thread(target=lambda: self.proc.stdout.read(), daemon=True).start()

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        """SIGTERM, SIGKILL after STOP_DEADLINE_S; the exit status (negative: a signal)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            t0 = now()
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_DEADLINE_S)
                self.returncode = "SIGKILLed after no exit within %d s of SIGTERM" % \
                    STOP_DEADLINE_S
                return self.returncode
            self.stop_s = now() - t0
        if self.returncode is None:
            self.returncode = self.proc.returncode
        return self.returncode

    def log_tail(self, limit=4000):
        text = read_text(self.log_path)
        return text[-limit:] if text else "(empty log)"


# The run's record ------------------------------------------------------------------------------

class Record:
    __slots__ = ("kind", "tenant", "transport", "label", "ms", "t0", "t1", "box", "expect",
                 "retry_after")

    def __init__(self, kind, tenant, transport, answer, t0, t1, box, expect):
        self.kind, self.tenant, self.transport = kind, tenant, transport
        self.label = answer.label
        self.ms = (t1 - t0) * 1000.0
        self.t0, self.t1, self.box, self.expect = t0, t1, box, expect
        self.retry_after = answer.headers.get("retry-after")


class Soak:
    def __init__(self, args, server):
        self.args, self.server = args, server
        self.lock = threading.Lock()
        self.records = []
        self.failures = []        # (what, detail): wrong answers and broken promises
        self.violations = []      # a tenant reached (or saw) another's box
        self.live = {t: set() for t in TENANTS}     # a tenant's boxes now
        self.created = {t: set() for t in TENANTS}  # every box a tenant ever made
        self.killed = {}          # box id -> monotonic time of the SIGKILL
        self.kills = []           # (box, mode, pids killed)
        self.floods = []          # per flood: dict of figures
        self.flood_windows = []   # (start, end)
        self.leaves = collections.Counter()
        self.unknown = {}         # probe route -> (status, code, message with <ID>) of a fake id
        self.requests = 0
        self.stop_at = None
        self.stopping = threading.Event()
        self.rss_peak = 0
        self.fds_peak = 0
        self.threads_peak = 0
        self.rss_series = []      # (monotonic time, VmRSS KiB) every 0.5 s
        self.checks = collections.Counter()   # the leaver's checks that ran
        self.server_died = None
        self.template_id = None

    # bookkeeping
    def budget_left(self):
        with self.lock:
            return (not self.stopping.is_set() and now() < self.stop_at and
                    self.requests < self.args.max_requests and self.server.alive())

    def record(self, kind, tenant, transport, answer, t0, box=None, expect=(200,)):
        r = Record(kind, tenant, transport, answer, t0, now(), box, tuple(expect))
        with self.lock:
            self.records.append(r)
            self.requests += 1
        return r

    def fail(self, what, detail):
        with self.lock:
            self.failures.append((what, str(detail)[:400]))

    def timed(self, client, tenant, kind, method, path, box=None, expect=(200,), **kw):
        t0 = now()
        a = client.call(method, path, **kw)
        self.record(kind, tenant, client.transport, a, t0, box, expect)
        return a

    def timed_stream(self, client, tenant, kind, path, body, box=None, **kw):
        t0 = now()
        a = client.stream(path, body, **kw)
        self.record(kind, tenant, client.transport, a, t0, box, (200,))
        return a

    def hit_by_fault(self, box):
        with self.lock:
            return box in self.killed

    # warm-up: one of everything, the 404 of an unknown id on each probed route
    def probe_routes(self, box):
        return {
            "GET box": ("GET", f"/v1/boxes/{box}", {}),
            "POST exec": ("POST", f"/v1/boxes/{box}/exec", {"body": {"argv": ["true"]}}),
            "POST run_code": ("POST", f"/v1/boxes/{box}/run_code", {"body": {"code": "1"}}),
            "GET files": ("GET", f"/v1/boxes/{box}/files?path=/etc/hostname", {}),
            "PUT files": ("PUT", f"/v1/boxes/{box}/files?path=/tmp/x", {"raw": b"x"}),
            "DELETE box": ("DELETE", f"/v1/boxes/{box}", {}),
        }

    def fake_id(self, rng):
        """An id this server never gave: a real one's incarnation (its first 4 hex digits) and
        node, 12 other random digits (another incarnation's id would be box_lost)."""
        return re.sub(r"(?<=^b-[0-9a-f]{4})[0-9a-f]{12}",
                      "".join(rng.choice("0123456789abcdef") for _ in range(12)),
                      self.template_id)

    def warm_up(self):
        rng = random.Random(self.args.seed)
        for t in TENANTS:
            c = Client(self.server, TOKENS[t], "tcp" if t != "b" else "unix")
            if not self.box_cycle(c, t, rng, ops=["exec", "exec~stream", "python", "files",
                                                   "run_code", "run_code~stream"]):
                raise RuntimeError(f"warm-up box cycle of tenant {t} failed: {self.failures}")
            self.oneshot(c, t, rng, stream=False)
            self.oneshot(c, t, rng, stream=True)
        c = Client(self.server, TOKENS["a"], "tcp")
        for route, (method, path, kw) in self.probe_routes("@@ID@@").items():
            fake = self.fake_id(rng)
            a = c.call(method, path.replace("@@ID@@", fake), **kw)
            self.unknown[route] = (a.status, a.error_code, (a.message or "").replace(fake, "<ID>"))
            if a.status != 404:
                raise RuntimeError(f"{route} of an unknown id answered {a!r}, not 404")
        if self.failures:
            raise RuntimeError(f"warm-up failed: {self.failures}")

    # the operations -----------------------------------------------------------------------------
    def create(self, c, t, body=None):
        a = self.timed(c, t, "create", "POST", "/v1/boxes", body=dict(body or BOX),
                       expect=(201,))
        if a.status == 201:
            box = a.json["id"]
            if self.template_id is None:
                self.template_id = box
            if a.json.get("tenant") not in (None, t):
                self.violation(t, box, "create", f"box JSON says tenant {a.json.get('tenant')}")
            with self.lock:
                self.live[t].add(box)
                self.created[t].add(box)
            return box
        if a.status == 429:
            if not a.headers.get("retry-after"):
                self.fail("429 without Retry-After", a)
            time.sleep(0.3)
        return None

    def delete(self, c, t, box):
        with self.lock:
            self.live[t].discard(box)
        self.timed(c, t, "delete", "DELETE", f"/v1/boxes/{box}", box=box, expect=(204,))

    def violation(self, tenant, box, route, detail):
        with self.lock:
            self.violations.append((tenant, box, route, str(detail)[:300]))

    def box_cycle(self, c, t, rng, ops=None, body=None):
        """Create, some operations (each checked), delete. False when an operation went wrong
        in a way that no fault explains (already recorded)."""
        box = self.create(c, t, body)
        if box is None:
            return True
        if ops is None:
            ops = rng.choices(["exec", "exec~stream", "exec~long", "python", "python~stream",
                               "files", "run_code", "run_code~stream"],
                              weights=[3, 2, 2, 2, 1, 3, 2, 1], k=rng.randint(2, 6))
        ok = True
        base = f"/v1/boxes/{box}"
        for op in ops:
            if not ok or not self.budget_left():
                break
            if self.hit_by_fault(box):
                break
            n = rng.randint(1, 10 ** 6)
            if op == "exec":
                a = self.timed(c, t, "exec", "POST", f"{base}/exec", box=box,
                               body={"argv": ["sh", "-c", f"echo {n}; echo e >&2"],
                                     "timeout": 30})
                ok = self.check(a, box, lambda j: j["stdout"] == f"{n}\n" and j["exit_code"] == 0)
            elif op == "exec~long":  # a running exec for the killer to find
                s = rng.choice(["0.5", "1", "2"])
                a = self.timed(c, t, "exec (sleep)", "POST", f"{base}/exec", box=box,
                               body={"argv": ["sh", "-c", f"sleep {s}; echo {n}"], "timeout": 30})
                ok = self.check(a, box, lambda j: j["stdout"] == f"{n}\n")
            elif op == "exec~stream":
                a = self.timed_stream(c, t, "exec~stream", f"{base}/exec", box=box,
                                      body={"argv": ["sh", "-c",
                                                     f"for i in 1 2 3; do echo {n}$i; sleep 0.05;"
                                                     " done"], "timeout": 30})
                ok = self.check_stream(a, box, "".join(f"{n}{i}\n" for i in (1, 2, 3)))
            elif op == "python":
                a = self.timed(c, t, "python", "POST", f"{base}/python", box=box,
                               body={"code": f"print({n} * 2)"})
                ok = self.check(a, box, lambda j: j["stdout"] == f"{n * 2}\n")
            elif op == "python~stream":
                a = self.timed_stream(c, t, "python~stream", f"{base}/python", box=box,
                                      body={"code": f"print({n} + 1)"})
                ok = self.check_stream(a, box, f"{n + 1}\n")
            elif op == "files":
                data = rng.randbytes(rng.randint(1, 64 * 1024))
                path = f"{base}/files?path=/tmp/soak/f{n}.bin"
                a = self.timed(c, t, "put file", "PUT", path, box=box, raw=data, expect=(204,))
                ok = self.check(a, box, None, want=204)
                if ok:
                    a = self.timed(c, t, "get file", "GET", path, box=box)
                    ok = self.check(a, box, None)
                    if ok and a.body != data:
                        self.fail("file read back differs", f"{box}: {len(a.body)} bytes, "
                                                            f"wrote {len(data)}")
                        ok = False
            elif op in ("run_code", "run_code~stream"):
                code = f"v = {n}\nv + 1"
                if op == "run_code":
                    a = self.timed(c, t, "run_code", "POST", f"{base}/run_code", box=box,
                                   body={"code": code})
                    ok = self.check(a, box, lambda j: j["error"] is None and any(
                        r.get("data", {}).get("text/plain") == str(n + 1) for r in j["results"]))
                else:
                    a = self.timed_stream(c, t, "run_code~stream", f"{base}/run_code", box=box,
                                          body={"code": code})
                    ok = self.check_stream(a, box, None, result=str(n + 1))
        self.delete(c, t, box)
        return ok

    def check(self, a, box, pred, want=200):
        if a.status != want:
            return False  # the status is tabulated
        if pred is None:
            return True
        try:
            good = pred(a.json)
        except (KeyError, TypeError, IndexError):
            good = False
        if not good:
            if not (box and self.hit_by_fault(box)):
                self.fail("wrong answer", f"{box}: {a.body[:300]!r}")
            return False
        return True

    def check_stream(self, a, box, stdout, result=None):
        if a.label != 200:
            return False  # the status is tabulated
        text = "".join(d.get("text", "") for n, d in a.events
                       if n == "stdout" and isinstance(d, dict))
        good = stdout is None or text == stdout
        if result is not None:
            good = any(n == "result" and isinstance(d, dict) and
                       d.get("data", {}).get("text/plain") == result for n, d in a.events)
        if not good:
            if not (box and self.hit_by_fault(box)):
                self.fail("wrong stream", f"{box}: {a.events[-4:]!r}")
            return False
        return True

    def oneshot(self, c, t, rng, stream):
        n = rng.randint(1, 10 ** 6)
        body = {"code": f"print({n} - 1)", "image": "python"}
        if rng.random() < 0.3:
            body["memory"] = 256   # not the pool's options: a cold box
        if stream:
            a = self.timed_stream(c, t, "run~stream", "/v1/run", body)
            if a.label == 200:
                self.check_stream(a, None, f"{n - 1}\n")
        else:
            a = self.timed(c, t, "run", "POST", "/v1/run", body=body)
            if a.status == 200:
                self.check(a, None, lambda j: j["stdout"] == f"{n - 1}\n")

    def cross_tenant(self, c, t, rng):
        """Another tenant's live box id on some route: exactly an unknown id's 404."""
        others = [o for o in TENANTS if o != t]
        with self.lock:
            pool = [(o, b) for o in others for b in self.live[o]]
            if not pool:
                pool = [(o, b) for o in others for b in self.created[o]]
        if not pool:
            return
        owner, box = rng.choice(pool)
        route = rng.choice(list(self.unknown))
        method, path, kw = self.probe_routes(box)[route]
        a = self.timed(c, t, "cross-tenant", method, path, box=None, expect=(404,), **kw)
        status, code, message = self.unknown[route]
        got = (a.status, a.error_code, (a.message or "").replace(box, "<ID>"))
        if got != (status, code, message):
            self.violation(t, box, route, f"owner {owner}: {a!r}; an unknown id answers "
                                          f"{status} {code} {message!r}")

    def list_own(self, c, t):
        a = self.timed(c, t, "list", "GET", "/v1/boxes")
        if a.status != 200:
            return
        with self.lock:
            theirs = set().union(*(self.created[o] for o in TENANTS if o != t))
        for b in (a.json or {}).get("boxes", []):
            if b.get("id") in theirs or b.get("tenant") not in (None, t):
                self.violation(t, b.get("id"), "GET /v1/boxes",
                               f"listed to tenant {t}: tenant {b.get('tenant')}")

    def burst(self, c, t):
        """Creates past the tenant's quota: 429 with Retry-After, never more than its quota."""
        mine = []
        refused = False
        for _ in range(TENANT_MAX_BOXES + 2):
            t0 = now()
            a = c.call("POST", "/v1/boxes", body=dict(BOX))
            self.record("create (burst)", t, c.transport, a, t0, expect=(201, 429))
            if a.status == 201:
                box = a.json["id"]
                mine.append(box)
                with self.lock:
                    self.created[t].add(box)
                    self.live[t].add(box)
            elif a.status == 429:
                refused = True
                if not a.headers.get("retry-after"):
                    self.fail("429 without Retry-After", a)
                break
            else:
                break
        if len(mine) > TENANT_MAX_BOXES:
            self.fail("tenant quota not held", f"tenant {t} holds {len(mine)} boxes at once")
        for box in mine:
            self.delete(c, t, box)
        return refused

    # the threads --------------------------------------------------------------------------------
    def client_thread(self, t, transport, seed):
        rng = random.Random(seed)
        c = Client(self.server, TOKENS[t], transport)
        for _ in range(100000):
            if not self.budget_left():
                return
            try:
                r = rng.random()
                if r < 0.10:
                    self.oneshot(c, t, rng, stream=False)
                elif r < 0.16:
                    self.oneshot(c, t, rng, stream=True)
                elif r < 0.26:
                    self.cross_tenant(c, t, rng)
                elif r < 0.30:
                    self.list_own(c, t)
                elif r < 0.31:
                    self.burst(c, t)
                else:
                    body = dict(BOX) if rng.random() < 0.8 else dict(BOX, memory=256)
                    self.box_cycle(c, t, rng, body=body)
            except Exception as e:  # noqa: BLE001 - the soak's own bug: a failure, go on
                self.fail("client exception", f"{type(e).__name__}: {e}")
                time.sleep(0.5)

    def leaver_thread(self, seed):
        """A client that goes away mid-stream, every ~LEAVE_EVERY_S; then checks the work
        stopped."""
        rng = random.Random(seed)
        for i in range(10000):
            if not self.sleep_until_next(LEAVE_EVERY_S * rng.uniform(0.7, 1.3)):
                return
            t = TENANTS[i % len(TENANTS)]
            c = Client(self.server, TOKENS[t], "tcp" if i % 2 == 0 else "unix")
            kind = ("exec", "run_code", "run")[i % 3]
            try:
                self.leave_once(c, t, kind)
            except Exception as e:  # noqa: BLE001
                self.fail("leaver exception", f"{type(e).__name__}: {e}")

    def leave_once(self, c, t, kind):
        slow = "for i in $(seq 1 100); do echo $i; sleep 0.1; done"
        if kind == "run":
            t0 = now()
            a = c.stream("/v1/run", {"code": "import time\nfor i in range(100):\n"
                                     "    print(i, flush=True); time.sleep(0.1)",
                                     "image": "python"}, leave_after=1)
            self.record("left mid-stream", t, c.transport, a, t0, expect=("200+cut",))
            self.leaves["run"] += 1
            return
        box = self.create(c, t)
        if box is None:
            return
        try:
            t0 = now()
            if kind == "exec":
                a = c.stream(f"/v1/boxes/{box}/exec", {"argv": ["sh", "-c", slow],
                                                       "timeout": 60}, leave_after=1)
            else:
                a = c.stream(f"/v1/boxes/{box}/run_code",
                             {"code": "import time\nfor i in range(100):\n"
                                      "    print(i, flush=True); time.sleep(0.1)"},
                             leave_after=1)
            self.record("left mid-stream", t, c.transport, a, t0, box=box, expect=("200+cut",))
            if a.status != 200 or self.hit_by_fault(box):
                return
            self.leaves[kind] += 1
            time.sleep(1.5)
            if kind == "exec":
                marker = f"CODEBOX_REQUEST={box}/{a.headers.get('x-request-id', '?')}"
                code = ("import os\nn = 0\nfor d in os.listdir('/proc'):\n"
                        "    try:\n        e = open(f'/proc/{d}/environ', 'rb').read()\n"
                        "    except OSError:\n        continue\n"
                        f"    n += {marker.encode()!r} in e.split(b'\\0')\nprint(n)")
                b = self.timed(c, t, "python", "POST", f"/v1/boxes/{box}/python", box=box,
                               body={"code": code})
                self.checks["exec swept"] += b.status == 200
                if b.status == 200 and (b.json or {}).get("stdout", "").strip() != "0":
                    self.fail("work went on after its client left",
                              f"{box}: {b.json.get('stdout').strip()} processes still carry "
                              f"{marker}")
            else:
                t1 = now()
                b = self.timed(c, t, "run_code", "POST", f"/v1/boxes/{box}/run_code", box=box,
                               body={"code": "40 + 2"})
                self.checks["cell interrupted"] += b.status == 200
                if b.status == 200 and now() - t1 > 5:
                    self.fail("cell not interrupted after its client left",
                              f"{box}: the next cell took {now() - t1:.1f} s")
        finally:
            self.delete(c, t, box)

    def killer_thread(self, seed):
        """Every ~KILL_EVERY_S: SIGKILL one client box's processes (its tree under the
        supervisor, or the supervisor itself, in turn)."""
        rng = random.Random(seed)
        for i in range(10000):
            if not self.sleep_until_next(KILL_EVERY_S * rng.uniform(0.8, 1.2)):
                return
            mode = ("tree", "supervisor")[i % 2]
            found = None
            search_end = now() + 4
            while found is None and now() < search_end and not self.stopping.is_set():
                found = self.find_victim(rng)
                if found is None:
                    time.sleep(0.1)
            if found is None:
                with self.lock:
                    self.kills.append((None, mode, 0))
                continue
            box, supervisor, table = found
            pids = [supervisor] if mode == "supervisor" else descendants(supervisor, table)
            with self.lock:
                self.killed.setdefault(box, now())
            killed = 0
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                    killed += 1
                except OSError:
                    pass
            with self.lock:
                self.kills.append((box, mode, killed))

    def find_victim(self, rng):
        table = process_table()
        with self.lock:
            ours = set().union(*self.created.values())
            killed = set(self.killed)
        sups = supervisors_of(self.server.pid, table)
        rng.shuffle(sups)
        for sup in sups:
            for p in descendants(sup, table):
                env = read_text(f"/proc/{p}/environ", binary=True).split(b"\0")
                for e in env:
                    if e.startswith(b"CODEBOX_REQUEST="):
                        box = e[16:].decode(errors="replace").split("/")[0]
                        if box in ours and box not in killed:
                            return box, sup, table
        return None

    def flood_thread(self, seed):
        rng = random.Random(seed)
        first = True
        for _ in range(1000):
            wait = 5 if first else FLOOD_EVERY_S * rng.uniform(0.8, 1.2) - FLOOD_HOLD_S
            first = False
            if not self.sleep_until_next(wait):
                return
            self.flood_once()

    def flood_once(self):
        n, naddr = self.args.flood_connections, self.args.flood_addresses
        socks, refused = [], 0
        start = now()
        for i in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind((f"127.0.0.{2 + i % naddr}", 0))
                s.settimeout(2)
                s.connect(("127.0.0.1", self.server.port))
                s.setblocking(False)
                socks.append(s)
            except OSError:
                refused += 1
                s.close()
        opened = now()
        closed_at = {}
        by_fd = {s.fileno(): s for s in socks}
        poller = select.poll()   # not select(): fds past 1024
        for fd in by_fd:
            poller.register(fd, select.POLLIN)
        while now() - opened < FLOOD_HOLD_S and not self.stopping.is_set():
            if len(closed_at) == len(by_fd):
                time.sleep(0.2)
                continue
            for fd, _ in poller.poll(200):
                try:
                    data = by_fd[fd].recv(1, socket.MSG_PEEK)
                except OSError:
                    data = b""
                if not data:
                    closed_at[fd] = now() - opened
                    poller.unregister(fd)
        end = now()
        for s in socks:
            s.close()
        times = sorted(closed_at.values())
        with self.lock:
            self.flood_windows.append((start, end))
            self.floods.append({"opened": len(socks), "refused": refused,
                                "closed_by_server": len(times),
                                "closed_1s": sum(1 for x in times if x < 1),
                                "last_close_s": times[-1] if times else None,
                                "held_s": end - opened})

    def monitor_thread(self):
        for _ in range(10 ** 6):
            if self.stopping.wait(0.5):
                return
            if not self.server.alive():
                with self.lock:
                    self.server_died = f"exit {self.server.proc.returncode} during the run"
                self.stopping.set()
                return
            rss = vm_rss_kib(self.server.pid) or 0
            fds = len(fd_targets(self.server.pid) or [])
            with self.lock:
                self.rss_peak = max(self.rss_peak, rss)
                self.fds_peak = max(self.fds_peak, fds)
                self.threads_peak = max(self.threads_peak, threads_of(self.server.pid))
                self.rss_series.append((now(), rss))

    def guarded(self, body, seed):
        """A fault thread whose own failure fails the soak (a fault not injected is no test)."""
        try:
            body(seed)
        except Exception as e:  # noqa: BLE001
            self.fail(f"{body.__name__} stopped", f"{type(e).__name__}: {e}")

    def sleep_until_next(self, seconds):
        """Sleeps `seconds` unless the run ends first; True when there is time for more."""
        end = min(now() + max(0.0, seconds), self.stop_at)
        self.stopping.wait(max(0.0, end - now()))
        return self.budget_left()

    # the run ------------------------------------------------------------------------------------
    def run(self, seconds, seed):
        """The mix and the faults for `seconds`; returns when every thread is done."""
        self.stopping.clear()
        self.stop_at = now() + seconds
        threads = []
        for t in TENANTS:
            for transport in ("tcp", "unix"):
                seed += 1
                threads.append(threading.Thread(target=self.client_thread, daemon=True,
                                                args=(t, transport, seed), name=f"{t}-{transport}"))
        threads += [threading.Thread(target=self.guarded, args=(f, seed + i), name=f.__name__,
                                     daemon=True)
                    for i, f in enumerate((self.leaver_thread, self.killer_thread,
                                           self.flood_thread), 1)]
        mon = threading.Thread(target=self.monitor_thread, name="monitor", daemon=True)
        mon.start()
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=max(1.0, self.stop_at - now()) + 2 * REQUEST_TIMEOUT_S)
            if th.is_alive():
                self.fail("client thread hung", f"{th.name} still in a request "
                                                f"{2 * REQUEST_TIMEOUT_S} s after the end")
        self.stopping.set()
        mon.join(timeout=5)
        return self.stop_at - seconds

    def forget_figures(self):
        """After the warm-up: its requests and faults are not the soak's figures (its failures
        and violations stay)."""
        with self.lock:
            self.records.clear()
            self.requests = 0
            self.kills.clear()
            self.floods.clear()
            self.flood_windows.clear()
            self.leaves.clear()
            self.checks.clear()
            self.rss_series.clear()


# Report ----------------------------------------------------------------------------------------

def classify(soak, r):
    """ok | refused | fault (an injected fault's) | failure"""
    if r.label == 429 or (r.label == 503 and r.retry_after):
        return "refused"
    if r.label in r.expect:
        return "ok"
    if r.box is not None:
        k = soak.killed.get(r.box)
        if k is not None and r.t1 >= k - 0.5:
            return "fault"
    return "failure"


def wait_settled(server, admin, deadline_s=60):
    """Until the server holds only its pool (healthz boxes == POOL, the pool ready)."""
    end = now() + deadline_s
    last = None
    while now() < end:
        a = admin.call("GET", "/healthz", timeout=5)
        last = a
        j = a.json if a.status == 200 else None
        if j and j.get("boxes") == POOL and all(p.get("ready") == p.get("target")
                                                  for p in j.get("pools", [])):
            return True, j
        time.sleep(0.5)
    return False, (last.json if last is not None else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--codebox", default=os.environ.get(
        "CODEBOX_BIN", str(REPO / "build" / "release" / "bin" / "codebox")))
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--max-requests", type=int, default=40000)
    ap.add_argument("--warm-up", type=float, default=20,
                    help="seconds of the same mix before the figures start (not counted)")
    ap.add_argument("--flood-connections", type=int, default=300)
    ap.add_argument("--flood-addresses", type=int, default=1,
                    help="flood from 127.0.0.2 .. 127.0.0.(1+N)")
    ap.add_argument("--rss-growth", type=float, default=0.5)
    ap.add_argument("--fd-slack", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the work directory (the log)")
    ap.add_argument("--serve-arg", action="append", default=[],
                    help="one more argument for `codebox serve` (repeatable)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root (jail boxes)")
    if not (1 <= args.seconds <= 3600 and 0 <= args.warm_up <= 600 and
            1 <= args.max_requests <= 10 ** 6 and 0 <= args.flood_connections <= 5000 and
            1 <= args.flood_addresses <= 200):
        ap.error("--seconds 1..3600, --warm-up 0..600, --max-requests 1..1e6, "
                 "--flood-connections 0..5000, "
                 "--flood-addresses 1..200")
    if not os.access(args.codebox, os.X_OK):
        sys.exit(f"no codebox binary at {args.codebox} (--codebox, $CODEBOX_BIN)")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, args.flood_connections + 512))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))

    def interrupted(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupted)   # the finally below stops the server
    work = tempfile.mkdtemp(prefix="codebox-soak.", dir="/var/tmp")
    server = Server(args.codebox, work, args.serve_arg)
    soak = None
    failed = []
    report = {}
    try:
        server.start()
        admin = Client(server, ADMIN, "unix")
        print(f"codebox serve pid {server.pid}: {server.first_line}")
        print(f"  {' '.join(server.argv[1:])}")
        ok, hz = wait_settled(server, admin, START_DEADLINE_S)
        if not ok:
            raise RuntimeError(f"the pool did not fill within {START_DEADLINE_S} s: {hz}\n"
                               f"{server.log_tail()}")
        soak = Soak(args, server)
        soak.stop_at = now() + 10 ** 6
        soak.warm_up()
        if args.warm_up > 0:   # the whole mix, faults included: the server's threads and heap
            soak.run(args.warm_up, args.seed * 1000 + 500)
        if soak.server_died:
            raise RuntimeError(f"the server died in the warm-up: {soak.server_died}")
        soak.forget_figures()
        ok, hz = wait_settled(server, admin)
        time.sleep(1)
        rss_start, fds_start = vm_rss_kib(server.pid), fd_targets(server.pid)
        threads_start = threads_of(server.pid)
        soak.rss_peak, soak.fds_peak = rss_start, len(fds_start)
        soak.threads_peak = threads_start
        print(f"warm-up ({args.warm_up:g} s of the mix) done; RSS {rss_start / 1024:.1f} MiB, "
              f"{len(fds_start)} fds; running {args.seconds:g} s (at most {args.max_requests} "
              f"requests): 3 tenants x 2 clients (tcp, unix), a leaver, a killer, a flood of "
              f"{args.flood_connections} from {args.flood_addresses} address(es)")
        sys.stdout.flush()
        began = soak.run(args.seconds, args.seed * 1000)
        report.update(ran=now() - began, rss_start=rss_start, fds_start=fds_start,
                      threads_start=threads_start, rss_end=None, fds_end=None, threads_end=None,
                      metrics=None)
        if server.alive():
            # The end: nothing of the tenants left, the pool full, then the figures.
            listed = admin.call("GET", "/v1/boxes", timeout=30)
            left_boxes = [b for b in (listed.json or {}).get("boxes", [])
                          if b.get("tenant") in TENANTS] if listed.status == 200 else []
            for b in left_boxes:
                failed.append(f"box {b.get('id')} of tenant {b.get('tenant')} still listed after "
                              f"its DELETE ({b.get('state')})")
                admin.call("DELETE", f"/v1/boxes/{b.get('id')}", timeout=30)
            report["metrics"] = admin.call("GET", "/metrics", timeout=30)
            settled, hz = wait_settled(server, admin)
            if not settled:
                failed.append(f"the server did not settle to its pool within 60 s: {hz}")
            time.sleep(2)
            report.update(rss_end=vm_rss_kib(server.pid), fds_end=fd_targets(server.pid),
                          threads_end=threads_of(server.pid))
    except (Exception, KeyboardInterrupt) as e:  # noqa: BLE001
        failed.append(f"soak aborted: {type(e).__name__}: {e}")
        if soak is not None:
            soak.stopping.set()
    finally:
        died = server.proc is not None and server.proc.poll() is not None
        code = server.stop()
        if died:
            failed.append(f"the server died during the soak: exit {code}")
        elif code != 0:
            failed.append(f"the server's exit on SIGTERM: {code}, not 0")
    time.sleep(1)
    left = leftovers(server)
    print_report(soak, server, report, left, args, failed)
    if failed:
        print("\nFAILED:")
        for f in failed:
            print(f"  - {f}")
        print(f"\nthe server's log: {server.log_path} (last lines below)\n{server.log_tail(3000)}")
        return 1
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"work directory kept: {work}")
    print("\nPASS: nothing lost, nothing left, memory flat")
    return 0


def leftovers(server):
    """What the stopped server left: (what, [items])."""
    if server.proc is None:
        return []
    pid = server.pid
    table = process_table()
    sups = supervisors_of(pid, table)
    procs = []
    for s in sups:
        procs += [s] + descendants(s, table)
    cgroups = cgroup_dirs(f"codebox-{pid}-")
    in_cgroups = []
    for d in cgroups:
        for p in read_text(os.path.join(d, "cgroup.procs")).split():
            in_cgroups.append(f"{p} in {d}")
    staging = []
    parent = "/run/codebox-jail"
    try:
        staging = [os.path.join(parent, n) for n in os.listdir(parent)
                   if n.startswith(f"{pid}-")]
    except OSError:
        pass
    temps = []
    for root, dirs, files in os.walk(server.tmpdir):
        temps += [os.path.join(root, n) for n in dirs + files]
        if len(temps) > 100:
            break
    gc = subprocess.run([server.binary, "gc", "--dry-run"], capture_output=True, text=True,
                        timeout=120)
    tag = re.compile(rf"(?<![0-9]){pid}-")
    gc_lines = [ln for ln in gc.stdout.splitlines() + gc.stderr.splitlines() if tag.search(ln)]
    sock = [server.socket_path] if os.path.exists(server.socket_path) else []
    return [("jail supervisors and box processes alive", [str(p) for p in procs]),
            ("processes in its box cgroups", in_cgroups),
            ("box cgroups (codebox-PID-* in every hierarchy)", cgroups),
            ("jail staging directories (/run/codebox-jail/PID-*)", staging),
            ("temp files (its TMPDIR)", temps),
            ("`codebox gc --dry-run` lines naming its pid", gc_lines),
            ("its unix socket", sock)]


def print_report(soak, server, report, left, args, failed):
    if soak is None or not report:
        print("\n(no figures: the soak did not reach its end)")
        for what, items in left:
            if items:
                failed.append(f"{what}: {len(items)}: {items[:5]}")
        return
    recs = soak.records
    cls = [classify(soak, r) for r in recs]
    ran = report["ran"]
    print(f"\n== {len(recs)} requests in {ran:.1f} s ({len(recs) / ran:.1f}/s), "
          f"3 tenants x 2 clients + the faults'; load average at the end "
          f"{read_text('/proc/loadavg').split(' ')[0]} ==")

    by_status = collections.defaultdict(collections.Counter)
    for r, c in zip(recs, cls):
        by_status[str(r.label)][c] += 1
    print(f"\n  {'status':<26} {'requests':>9} {'served':>7} {'refused':>8} {'fault':>6} "
          f"{'FAILED':>7}")
    for label in sorted(by_status, key=lambda s: (not s[:1].isdigit(), s)):
        k = by_status[label]
        print(f"  {label:<26} {sum(k.values()):>9} {k['ok']:>7} {k['refused']:>8} "
              f"{k['fault']:>6} {k['failure']:>7}")
    total = collections.Counter(cls)
    print(f"  {'all':<26} {len(recs):>9} {total['ok']:>7} {total['refused']:>8} "
          f"{total['fault']:>6} {total['failure']:>7}")
    print("  (served: the answer asked for, a cross-tenant probe's 404 and a mid-stream leaver's "
          "cut stream included; refused: 429, or 503 with Retry-After; fault: a 5xx, 404 or "
          "stream error on a box after its processes were killed)")

    in_flood = lambda r: any(a <= r.t0 <= b for a, b in soak.flood_windows)  # noqa: E731
    print(f"\n  latency of the served (ms)   {'n':>6} {'p50':>8} {'p99':>8}   "
          f"{'during a flood: n':>17} {'p50':>8} {'p99':>8}")
    kinds = collections.defaultdict(list)
    for r, c in zip(recs, cls):
        if c == "ok":
            kinds[r.kind].append(r)
    for kind in sorted(kinds):
        ms = [r.ms for r in kinds[kind]]
        fl = [r.ms for r in kinds[kind] if in_flood(r)]
        print(f"  {kind:<28} {len(ms):>6} {percentile(ms, .5):>8.1f} {percentile(ms, .99):>8.1f}"
              f"   {len(fl):>17} {percentile(fl, .5):>8.1f} {percentile(fl, .99):>8.1f}")

    rs, rp, re_ = report["rss_start"], soak.rss_peak, report["rss_end"]
    fs, fe = report["fds_start"], report["fds_end"]
    end = f"{re_ / 1024:.1f} MiB ({(re_ - rs) / rs:+.0%})" if re_ else "- (no server)"
    print(f"\n  server RSS (VmRSS): start {rs / 1024:.1f} MiB (after warm-up), peak "
          f"{rp / 1024:.1f} MiB, end {end}")
    series = soak.rss_series
    if series:
        t0, t1 = series[0][0], series[-1][0]
        marks = []
        for q in (0.25, 0.5, 0.75, 1.0):
            at = t0 + q * (t1 - t0)
            marks.append(min(series, key=lambda p: abs(p[0] - at)))
        print("  RSS during the run: " + ", ".join(
            f"{(t - t0):.0f} s {kib / 1024:.1f} MiB" for t, kib in [series[0]] + marks))
    print(f"  server fds: start {len(fs)}, peak {soak.fds_peak}, end "
          f"{len(fe) if fe is not None else '-'}; threads: start "
          f"{report['threads_start']}, peak {soak.threads_peak}, end {report['threads_end']}")
    kills = soak.kills
    hit = [k for k in kills if k[0]]
    print(f"\n  faults: {len(hit)} boxes killed ({sum(1 for k in hit if k[1] == 'tree')} process "
          f"trees, {sum(1 for k in hit if k[1] == 'supervisor')} supervisors; "
          f"{len(kills) - len(hit)} rounds found no exec running), "
          f"{sum(soak.leaves.values())} clients gone mid-stream "
          f"({', '.join(f'{k} {v}' for k, v in sorted(soak.leaves.items()))}), "
          f"{len(soak.floods)} floods")
    print(f"    after a client left: {soak.checks['exec swept']} execs checked swept from their "
          f"box, {soak.checks['cell interrupted']} cells checked interrupted")
    for i, f in enumerate(soak.floods):
        last = f"{f['last_close_s']:.1f} s" if f["last_close_s"] is not None else "-"
        print(f"    flood {i + 1}: {f['opened']} connections opened ({f['refused']} refused at "
              f"connect), {f['closed_by_server']} closed by the server within "
              f"{f['held_s']:.0f} s ({f['closed_1s']} within 1 s, the last at {last})")
    m = report["metrics"]
    if m is not None and m.status == 200:
        text = m.body.decode(errors="replace")
        errors = [ln.replace("codebox_errors_total", "") for ln in text.splitlines()
                  if ln.startswith("codebox_errors_total")]
        per = collections.defaultdict(collections.Counter)
        for labels, n in re.findall(r"^codebox_tenant_requests_total\{([^}]*)\} (\d+)", text,
                                    re.M):
            lab = dict(re.findall(r'(\w+)="([^"]*)"', labels))
            per[lab.get("tenant", "?")][lab.get("status", "?")[:1] + "xx"] += int(n)
        print("  the server's /metrics at the end (admin): errors " + ", ".join(errors))
        print("    requests per tenant: " + "; ".join(
            f"{t} " + " ".join(f"{k} {v}" for k, v in sorted(c.items()))
            for t, c in sorted(per.items())))

    took = f", {server.stop_s:.2f} s after SIGTERM" if server.stop_s is not None else ""
    print(f"\n  after the server stopped (SIGTERM; its exit status {server.returncode}{took}):")
    for what, items in left:
        print(f"    {what:<52} {len(items)}" + (f"  {items[:4]}" if items else ""))

    # verdicts
    bad = [(r, c) for r, c in zip(recs, cls) if c == "failure"]
    if bad:
        ex = collections.Counter(f"{r.kind} -> {r.label}" for r, _ in bad)
        failed.append(f"{len(bad)} requests failed: {dict(ex.most_common(8))}")
    for what, detail in soak.failures[:20]:
        failed.append(f"{what}: {detail}")
    if len(soak.failures) > 20:
        failed.append(f"... and {len(soak.failures) - 20} more")
    if soak.violations:
        failed.append(f"{len(soak.violations)} cross-tenant violations, e.g. "
                      f"{soak.violations[:3]}")
    if re_ and re_ > rs * (1 + args.rss_growth):
        failed.append(f"RSS grew {(re_ - rs) / rs:.0%} from start to end (over "
                      f"{args.rss_growth:.0%})")
    if fe is not None and len(fe) > len(fs) + args.fd_slack:
        diff = collections.Counter(fd_kind(x) for x in fe)
        diff.subtract(collections.Counter(fd_kind(x) for x in fs))
        failed.append(f"fds {len(fs)} -> {len(fe)}: "
                      f"{ {k: v for k, v in diff.items() if v} }")
    for what, items in left:
        if items:
            failed.append(f"left after the server stopped: {what}: {len(items)}: {items[:5]}")
    print(f"\n  cross-tenant probes: "
          f"{sum(1 for r in recs if r.kind == 'cross-tenant')}, violations: "
          f"{len(soak.violations)}; lists checked: {sum(1 for r in recs if r.kind == 'list')}")


if __name__ == "__main__":
    sys.exit(main())
