"""Replicas of `codebox serve` on 127.0.0.2-4 for the cluster tests and bench/cluster: start,
readiness, requests (plain HTTP, SSE), stop; no pytest in here. Every wait has a deadline; a
replica that does not come up raises ClusterError with the tail of its log."""
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dns_responder

ADDRESSES = {"n2": "127.0.0.2", "n3": "127.0.0.3", "n4": "127.0.0.4"}
DNS_ADDRESS = "127.0.0.5"
DNS_NAME = "codebox-peers.cluster.test"
START_DEADLINE_S = 30
PORT_ATTEMPTS = 3  # starts of a cluster on fresh ports when another test took the port first
PEERS_DEADLINE_S = 30
STOP_DEADLINE_S = 20
# Every box request of the tests: a jail box of the python recipe image.
BOX = {"image": "python", "driver": "jail"}


class ClusterError(AssertionError):
    """A replica did not start, or the replicas did not find each other in time."""


def replica_env():
    """The environment of a replica (and of the CLI runs): the system store, nothing of a
    codebox server, nothing that would make a replica think it runs in Kubernetes."""
    drop = ("CODEBOX_HOME", "CODEBOX_SERVER", "CODEBOX_TOKEN", "KUBERNETES_SERVICE_HOST",
            "POD_IP")
    return {k: v for k, v in os.environ.items() if k not in drop}


def free_port():
    """A TCP port free on 127.0.0.2 (and, on loopback, in practice on .3 and .4 too)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((ADDRESSES["n2"], 0))
        return s.getsockname()[1]


# HTTP ------------------------------------------------------------------------------------------

class Answer:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # lower-case name -> value
        self.body = body

    @property
    def json(self):
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            raise AssertionError(f"{self.status}: not JSON: {self.body[:500]!r}")

    @property
    def node(self):
        return self.headers.get("x-codebox-node")

    @property
    def error_code(self):
        j = self.json
        return j.get("error", {}).get("code") if isinstance(j, dict) else None

    def __repr__(self):
        return f"<{self.status} node={self.node} {self.body[:400]!r}>"


def call(address, port, method, path, body=None, *, token=None, headers=None, timeout=120,
         raw_body=None):
    """One request on a fresh connection; `body` is sent as JSON, `raw_body` as bytes."""
    h = {"Connection": "close"}
    if token:
        h["Authorization"] = f"Bearer {token}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    elif raw_body is not None:
        data = raw_body
        h["Content-Type"] = "application/octet-stream"
    h.update(headers or {})
    conn = http.client.HTTPConnection(address, port, timeout=timeout)
    try:
        conn.request(method, path, body=data, headers=h)
        resp = conn.getresponse()
        payload = resp.read()
        return Answer(resp.status, {k.lower(): v for k, v in resp.getheaders()}, payload)
    finally:
        conn.close()


def stream(address, port, path, body, *, token=None, timeout=120):
    """POSTs `body` with Accept: text/event-stream; returns (status, headers, events), events
    as (seconds since the request was sent, event name, parsed data) in arrival order."""
    h = {"Connection": "close", "Content-Type": "application/json",
         "Accept": "text/event-stream"}
    if token:
        h["Authorization"] = f"Bearer {token}"
    conn = http.client.HTTPConnection(address, port, timeout=timeout)
    deadline = time.monotonic() + timeout
    try:
        start = time.monotonic()
        conn.request("POST", path, body=json.dumps(body).encode(), headers=h)
        resp = conn.getresponse()
        headers = {k.lower(): v for k, v in resp.getheaders()}
        if resp.status != 200:
            return resp.status, headers, [(time.monotonic() - start, "body", resp.read())]
        events = []
        name, data = None, []
        while time.monotonic() < deadline:
            line = resp.readline()
            if not line:
                break
            line = line.rstrip(b"\r\n").decode()
            if line == "":
                if name is not None or data:
                    text = "\n".join(data)
                    try:
                        parsed = json.loads(text)
                    except ValueError:
                        parsed = text
                    events.append((time.monotonic() - start, name or "message", parsed))
                    if name in ("done", "error"):
                        break
                name, data = None, []
            elif line.startswith(":"):
                continue
            elif line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" ") if line[5:6] == " " else line[5:])
        return resp.status, headers, events
    finally:
        conn.close()


# Replicas --------------------------------------------------------------------------------------

def _polling_line(line):
    """A log line of a polling request that went well (text or JSON log format)."""
    for route in ("/healthz", "/v1/status", "/v1/load"):
        if f"GET {route} 200 " in line or \
                (f'"route":"{route}"' in line and '"status":200' in line):
            return True
    return False


def stop_process(proc):
    """SIGTERM, then SIGKILL after STOP_DEADLINE_S; waits for it either way (bounded)."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_DEADLINE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=STOP_DEADLINE_S)


class Replica:
    def __init__(self, cluster, node, extra):
        self.cluster = cluster
        self.node = node
        self.address = ADDRESSES[node]
        self.extra = list(extra)
        self.proc = None
        self.log_path = os.path.join(cluster.work, f"{node}.log")
        self.starts = 0

    def argv(self):
        c = self.cluster
        args = [c.binary, "serve", "--listen", f"{self.address}:{c.port}", "--node", self.node,
                "--driver", "jail", "--log-format", c.log_format, "--token-file", c.token_file]
        if c.peers_mode == "static":
            args += ["--peers", ",".join(f"{ADDRESSES[n]}:{c.port}" for n in c.peer_nodes)]
        else:
            args += ["--peers-dns", f"{DNS_NAME}:{c.port}", "--peer-refresh", "1"]
        args += self.extra
        if c.peers_mode == "dns":
            # A private mount namespace whose resolver is the test's responder, and whose
            # /etc/hosts does not know the name; `exec` keeps the serve's pid the child's pid.
            script = ('r=$1; h=$2; shift 2; mount --bind "$r" /etc/resolv.conf && '
                      'mount --bind "$h" /etc/hosts && exec "$@"')
            args = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
                    c.resolv_conf, c.hosts_file, *args]
        return args

    def start(self):
        self.starts += 1
        with open(self.log_path, "a") as log:
            log.write(f"==== start {self.starts}: {' '.join(self.argv())}\n")
            log.flush()
            self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=log,
                                         stdin=subprocess.DEVNULL, env=replica_env(),
                                         start_new_session=True)
        return self

    @property
    def pid(self):
        return self.proc.pid

    def wait_ready(self, deadline_s=START_DEADLINE_S):
        deadline = time.monotonic() + deadline_s
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ClusterError(f"replica {self.node} exited {self.proc.returncode} before "
                                   f"it was ready:\n{self.log_tail()}")
            try:
                a = call(self.address, self.cluster.port, "GET", "/healthz", timeout=2)
                if a.status == 200:
                    return
                last = a
            except OSError as e:
                last = e
            time.sleep(0.1)
        raise ClusterError(f"replica {self.node} not ready within {deadline_s} s ({last}):\n"
                           f"{self.log_tail()}")

    def stop(self):
        if self.proc is not None:
            stop_process(self.proc)

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=STOP_DEADLINE_S)

    def log_tail(self, limit=6000):
        """The start of the log and its last `limit` characters, without the request lines
        of the polling (GET /healthz, /v1/status, /v1/load answered 200)."""
        lines = [line for line in self.log().splitlines() if not _polling_line(line)]
        text = "\n".join(lines)
        if len(text) <= limit + 2000:
            return text or "(empty log)"
        return text[:2000] + "\n[...]\n" + text[-limit:]

    def log(self):
        try:
            return Path(self.log_path).read_text(errors="replace")
        except OSError:
            return ""

    def log_of_this_start(self):
        """The log from this replica's latest "==== start" line on."""
        text = self.log()
        return text[text.rfind(f"==== start {self.starts}:"):]

    # Requests to this replica.
    def call(self, method, path, body=None, **kw):
        kw.setdefault("token", self.cluster.token)
        return call(self.address, self.cluster.port, method, path, body, **kw)

    def stream(self, path, body, **kw):
        kw.setdefault("token", self.cluster.token)
        return stream(self.address, self.cluster.port, path, body, **kw)

    def create(self, body=None, **kw):
        return self.call("POST", "/v1/boxes", dict(BOX) if body is None else body, **kw)

    def exec(self, box_id, argv, **kw):
        return self.call("POST", f"/v1/boxes/{box_id}/exec", {"argv": argv}, **kw)

    def status(self):
        a = self.call("GET", "/v1/status", timeout=10)
        assert a.status == 200, a
        return a.json

    def load(self):
        a = self.call("GET", "/v1/load", timeout=10)
        assert a.status == 200, a
        return a.json


LIVE_CLUSTERS = []


class Cluster:
    """Replicas of one `codebox serve` cluster on 127.0.0.2-4, one port, one token file."""

    def __init__(self, binary, *, peers_mode="static", nodes=("n2", "n3", "n4"),
                 peer_nodes=None, extra=None, log_format="text"):
        self.binary = binary
        self.peers_mode = peers_mode
        self.log_format = log_format
        self.peer_nodes = list(peer_nodes or nodes)
        self.work = tempfile.mkdtemp(prefix="codebox-cluster-test.", dir="/var/tmp")
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.token_file = os.path.join(self.work, "tokens")
        with open(self.token_file, "w") as f:
            f.write(f"# the cluster's token\n{self.token}\n")
        os.chmod(self.token_file, 0o600)
        self.dns = None
        if peers_mode == "dns":
            self.resolv_conf = os.path.join(self.work, "resolv.conf")
            with open(self.resolv_conf, "w") as f:
                f.write(f"nameserver {DNS_ADDRESS}\noptions timeout:1 attempts:2\n")
            self.hosts_file = os.path.join(self.work, "hosts")
            with open(self.hosts_file, "w") as f:
                f.write("127.0.0.1 localhost\n::1 localhost ip6-localhost\n")
            self.dns = dns_responder.Responder(DNS_ADDRESS, 53, DNS_NAME,
                                               [ADDRESSES[n] for n in self.peer_nodes])
        extra = extra or {}
        self.replicas = {n: Replica(self, n, extra.get(n, ())) for n in nodes}
        LIVE_CLUSTERS.append(self)

    def __getitem__(self, node):
        return self.replicas[node]

    def start(self):
        # free_port() only knows the port was free on 127.0.0.2 a moment ago: a test running
        # beside this one may take it on .3 or .4 first. A replica that lost that race exits
        # with "Address already in use"; the cluster then starts over on a fresh port.
        for attempt in range(PORT_ATTEMPTS):
            for r in self.replicas.values():
                r.start()
            try:
                for r in self.replicas.values():
                    r.wait_ready()
                return self
            except ClusterError:
                lost_port = any("Address already in use" in r.log_of_this_start()
                                for r in self.replicas.values())
                if not lost_port or attempt + 1 == PORT_ATTEMPTS:
                    raise
            self.stop()
            self.port = free_port()
        return self

    def wait_peers(self, deadline_s=PEERS_DEADLINE_S, nodes=None):
        """Until every replica's /v1/status lists every other started replica as up."""
        nodes = nodes or list(self.replicas)
        deadline = time.monotonic() + deadline_s
        seen = {}
        while time.monotonic() < deadline:
            ok = True
            for n in nodes:
                try:
                    st = self.replicas[n].status()
                except (OSError, AssertionError) as e:
                    seen[n] = repr(e)
                    ok = False
                    continue
                up = {p.get("node") for p in st.get("peers", []) if p.get("state") == "up"}
                seen[n] = st.get("peers")
                ok = ok and set(nodes) - {n} <= up
            if ok:
                return
            time.sleep(0.3)
        raise ClusterError(f"the replicas do not see each other as up within {deadline_s} s: "
                           f"{seen}")

    def stop(self):
        for r in self.replicas.values():
            r.stop()

    def close(self):
        """Stops the replicas and removes the work dir; called while an exception is on its
        way (a `finally` of a failed test), prints every replica's log first."""
        if sys.exc_info()[0] is not None:
            print(self.logs())
        self.stop()
        if self.dns:
            self.dns.close()
        if self in LIVE_CLUSTERS:
            LIVE_CLUSTERS.remove(self)
        shutil.rmtree(self.work, ignore_errors=True)

    def logs(self):
        return "\n".join(f"---- {n} ({r.log_path}) ----\n{r.log_tail()}"
                         for n, r in self.replicas.items())

    def __enter__(self):
        """`with Cluster(...) as c:` starts every replica and waits until they see each other;
        the block's end (or a failed start) closes them."""
        try:
            self.start()
            self.wait_peers()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()
        return False


# Helpers of the tests ------------------------------------------------------------------------

def node_of(box_id):
    """The node an id names (`b-<16 hex>.<node>`)."""
    assert box_id.startswith("b-") and "." in box_id, box_id
    return box_id.split(".", 1)[1]


def incarnation_of(box_id):
    return box_id[2:6]


def descendants(pid):
    """Every process whose parent chain leads to `pid`, as {pid: start time}, now."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        st = proc_stat(int(entry))
        if st:
            children.setdefault(st[0], []).append(int(entry))
    found, todo = {}, [pid]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            st = proc_stat(c)
            if st and c not in found:
                found[c] = st[1]
                todo.append(c)
    return found


def proc_stat(pid):
    """(ppid, start time in ticks) of a live process, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = text[text.rfind(")") + 2:].split()
    return int(rest[1]), int(rest[19])


def still_alive(processes):
    """Those of {pid: start time} that still run (same pid and same start time)."""
    return {p: s for p, s in processes.items() if (proc_stat(p) or (None, None))[1] == s}


def wait_until(predicate, deadline_s, interval=0.2):
    deadline = time.monotonic() + deadline_s
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)
