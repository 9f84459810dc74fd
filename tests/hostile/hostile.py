"""A `codebox serve` of the hostile-client tests' own, and the ways an attacker talks to it:
plain requests on fresh connections (TCP from any 127.0.0.0/8 address, or the unix socket),
raw bytes on a socket, pipelined answers read in order, the server's RSS. No pytest in here.

Every wait has a deadline. All traffic stays on 127.0.0.0/8 and the server's unix socket."""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

START_DEADLINE_S = 30
STOP_DEADLINE_S = 20
SYSTEM_STORE = "/var/lib/codebox"
# The box of every request that makes one: a jail box of the python recipe image.
BOX = {"image": "python", "driver": "jail"}

LIVE_SERVERS = []


def server_env():
    """The server's environment: nothing of a codebox client, nothing of Kubernetes."""
    drop = ("CODEBOX_HOME", "CODEBOX_SERVER", "CODEBOX_TOKEN", "KUBERNETES_SERVICE_HOST",
            "POD_IP", "OPENAI_API_KEY")
    return {k: v for k, v in os.environ.items() if k not in drop}


def raise_fd_limit(want=65536):
    """Raises this process's RLIMIT_NOFILE (and so a server started after it) toward `want`;
    returns the soft limit it has now."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


# Answers ---------------------------------------------------------------------------------------

class Answer:
    def __init__(self, status, headers, body, seconds=0.0):
        self.status = status
        self.headers = headers  # lower-case name -> value
        self.body = body
        self.seconds = seconds  # from the last byte sent to the whole answer read

    @property
    def json(self):
        try:
            return json.loads(self.body.decode("utf-8")) if self.body else None
        except (ValueError, UnicodeDecodeError):
            raise AssertionError(f"{self.status}: not UTF-8 JSON: {self.body[:300]!r}")

    @property
    def error(self):
        """(code, message) of an error body {"error": {"code", "message"}}, else (None, None)."""
        j = self.json
        if isinstance(j, dict) and isinstance(j.get("error"), dict):
            return j["error"].get("code"), j["error"].get("message")
        return None, None

    def __repr__(self):
        body = self.body if len(self.body) <= 400 else self.body[:400] + b"..."
        return f"<{self.status} {len(self.body)} bytes {body!r}>"


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def _response_headers(resp):
    return {k.lower(): v for k, v in resp.getheaders()}


# The server ------------------------------------------------------------------------------------

class ServerError(AssertionError):
    """The server did not start, or stopped when it should not have."""


class Server:
    """One `codebox serve --listen 127.0.0.1:0 --listen unix:DIR/s.sock` (plus `extra`), jail
    boxes by default; its stderr in DIR/serve.log."""

    def __init__(self, binary, extra=(), *, name="serve", token_lines=None):
        self.binary = binary
        self.extra = list(extra)
        self.name = name
        # A short directory: a unix socket's path must fit in 108 bytes.
        self.work = tempfile.mkdtemp(prefix="cbh.", dir="/tmp")
        os.chmod(self.work, 0o755)
        self.socket_path = os.path.join(self.work, "s.sock")
        self.log_path = os.path.join(self.work, "serve.log")
        self.token_file = None
        if token_lines is not None:
            self.token_file = os.path.join(self.work, "tokens")
            with open(self.token_file, "w") as f:
                f.write("\n".join(token_lines) + "\n")
            os.chmod(self.token_file, 0o600)
        self.proc = None
        self.port = None
        self.first_line = None
        self.token = None  # sent by default with every request when set
        self._stdout_rest = []

    def argv(self):
        args = [self.binary, "serve", "--listen", "127.0.0.1:0",
                "--listen", f"unix:{self.socket_path}", "--driver", "jail",
                "--log-format", "text", "--drain", "5"]
        if self.token_file:
            args += ["--token-file", self.token_file]
        return args + self.extra

    def start(self):
        LIVE_SERVERS.append(self)
        with open(self.log_path, "a") as log:
            log.write(f"==== {' '.join(self.argv())}\n")
            log.flush()
            self.proc = subprocess.Popen(self.argv(), stdout=subprocess.PIPE, stderr=log,
                                         stdin=subprocess.DEVNULL, env=server_env(),
                                         start_new_session=True)
        line = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(START_DEADLINE_S)
        if not line or not line[0]:
            exited = self.proc.poll()
            self.kill()
            why = (f"exited {exited} before its 'listening' line" if exited is not None else
                   f"no 'listening' line within {START_DEADLINE_S} s")
            raise ServerError(f"{self.name}: {why}:\n{self.log_tail()}")
        self.first_line = line[0].decode(errors="replace").strip()
        m = re.search(r"127\.0\.0\.1:(\d+)", self.first_line)
        if not m:
            self.kill()
            raise ServerError(f"{self.name}: no TCP port in {self.first_line!r}")
        self.port = int(m.group(1))
        # Whatever else the server prints on stdout is drained, so that it never blocks on it.
        threading.Thread(target=self._drain_stdout, daemon=True).start()
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            try:
                if request(self, "GET", "/healthz", timeout=2).status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        raise ServerError(f"{self.name}: /healthz did not answer 200:\n{self.log_tail()}")

    def _drain_stdout(self):
        try:
            for chunk in iter(lambda: self.proc.stdout.read1(65536), b""):
                self._stdout_rest.append(chunk[:1000])
        except (OSError, ValueError):
            pass

    @property
    def pid(self):
        return self.proc.pid

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def rss_kib(self):
        """The server process's VmRSS in KiB."""
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise ServerError("no VmRSS")

    def stop(self):
        """SIGTERM, then SIGKILL after a bound; returns the exit code (None if it was not
        started)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.kill()
        if self in LIVE_SERVERS:
            LIVE_SERVERS.remove(self)
        return self.proc.returncode

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=STOP_DEADLINE_S)

    def cleanup(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def log_tail(self, limit=6000):
        lines = [l for l in self.log().splitlines() if " GET /healthz 200 " not in l]
        text = "\n".join(lines)
        if len(text) <= limit + 1500:
            return text or "(empty log)"
        return text[:1500] + "\n[...]\n" + text[-limit:]


# Requests --------------------------------------------------------------------------------------

def request(server, method, path, body=None, *, raw=None, token=None, headers=None, via="tcp",
            source=None, timeout=60, content_type=None):
    """One request on a fresh connection, `Connection: close`: `body` is sent as JSON, `raw`
    as bytes (as is: a JSON text, a file). `via` is "tcp" (from `source`, an address of
    127.0.0.0/8, default 127.0.0.1) or "unix". `token` defaults to the server's."""
    h = {"Connection": "close"}
    token = server.token if token is None else token
    if token:
        h["Authorization"] = f"Bearer {token}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    elif raw is not None:
        data = raw
        h["Content-Type"] = content_type or "application/json"
    h.update(headers or {})
    if via == "unix":
        conn = UnixHTTPConnection(server.socket_path, timeout)
    else:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout,
                                          source_address=(source, 0) if source else None)
    try:
        conn.request(method, path, body=data, headers=h)
        sent = time.monotonic()
        resp = conn.getresponse()
        payload = resp.read()
        return Answer(resp.status, _response_headers(resp), payload, time.monotonic() - sent)
    finally:
        conn.close()


def stream_events(server, path, body, *, token=None, timeout=120, on_bytes=None):
    """POSTs `body` with Accept: text/event-stream and reads the events; returns (status,
    events as (name, data text)). `on_bytes(n)` is called as bytes arrive."""
    h = {"Connection": "close", "Content-Type": "application/json",
         "Accept": "text/event-stream"}
    token = server.token if token is None else token
    if token:
        h["Authorization"] = f"Bearer {token}"
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    deadline = time.monotonic() + timeout
    try:
        conn.request("POST", path, body=json.dumps(body).encode(), headers=h)
        resp = conn.getresponse()
        if resp.status != 200:
            return resp.status, [("body", resp.read().decode(errors="replace"))]
        events, name, data = [], None, []
        while time.monotonic() < deadline:
            line = resp.readline()
            if not line:
                break
            if on_bytes:
                on_bytes(len(line))
            line = line.rstrip(b"\r\n").decode(errors="replace")
            if line == "":
                if name is not None or data:
                    events.append((name or "message", "\n".join(data)))
                    if name in ("done", "error"):
                        break
                name, data = None, []
            elif line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
        return resp.status, events
    finally:
        conn.close()


def tcp_socket(server, source=None, timeout=10, rcvbuf=None):
    """A connected TCP socket to the server, from `source` (an address of 127.0.0.0/8)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    if source:
        s.bind((source, 0))
    s.settimeout(timeout)
    try:
        s.connect(("127.0.0.1", server.port))
    except OSError:
        s.close()
        raise
    return s


class _KeptOpen:
    """A file whose close() does nothing: http.client closes its file after each answer."""

    def __init__(self, f):
        self.f = f

    def __getattr__(self, name):
        return getattr(self.f, name)

    def close(self):
        pass


class _OneFile:
    """What http.client.HTTPResponse wants of a socket: a makefile() that is always the same
    buffered reader, so that answers pipelined on one connection are read one after another."""

    def __init__(self, sock):
        self.file = _KeptOpen(sock.makefile("rb"))

    def makefile(self, *args, **kwargs):
        return self.file


def read_answers(sock, count, method="GET", timeout=20):
    """Reads up to `count` HTTP answers in order from `sock`; returns the list of Answers (fewer
    when the connection ends or the time is up)."""
    sock.settimeout(timeout)
    shared = _OneFile(sock)
    out = []
    deadline = time.monotonic() + timeout
    for _ in range(count):
        if time.monotonic() > deadline:
            break
        resp = http.client.HTTPResponse(shared, method=method)
        try:
            resp.begin()
            body = resp.read()
        except (http.client.HTTPException, OSError):
            break
        out.append(Answer(resp.status, _response_headers(resp), body))
    return out


def raw_exchange(server, data, *, timeout=10, source=None, shut_write=False):
    """Sends `data` on a fresh TCP connection and reads until the server closes it or
    `timeout` passes; returns (bytes read, whether the server closed the connection)."""
    s = tcp_socket(server, source=source, timeout=timeout)
    try:
        try:
            s.sendall(data)
            if shut_write:
                s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        return read_until_close(s, timeout)
    finally:
        s.close()


def read_until_close(s, timeout):
    """Reads from `s` until EOF or a reset (closed: True) or until `timeout` (closed: False)."""
    got = b""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return got, False
        s.settimeout(left)
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            return got, False
        except OSError:
            return got, True
        if not chunk:
            return got, True
        got += chunk


def status_of(raw):
    """The status code of the first HTTP answer in `raw`, or None."""
    m = re.match(rb"HTTP/1\.[01] (\d{3}) ", raw)
    return int(m.group(1)) if m else None


def statuses_of(raw):
    return [int(s) for s in re.findall(rb"(?:^|\r\n)HTTP/1\.[01] (\d{3}) ", raw)]


def peer_closed(s):
    """Whether the peer closed (or reset) a socket we never read from, without blocking."""
    s.settimeout(0)  # a socket with a timeout would poll first, and call that a timeout
    try:
        data = s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return False
    except OSError:
        return True
    return data == b""


# Checks ----------------------------------------------------------------------------------------

MAX_ERROR_BODY = 1024   # bytes of a whole error answer
MAX_ERROR_MESSAGE = 512  # bytes of its message: "a few hundred bytes"


def assert_short_error(a, code=None):
    """An error answer of a few hundred bytes at most, whatever the client sent."""
    assert len(a.body) <= MAX_ERROR_BODY, \
        f"an error answer of {len(a.body)} bytes (at most {MAX_ERROR_BODY}): {a!r}"
    got_code, message = a.error
    assert message is not None, f"not an error body: {a!r}"
    assert len(message.encode()) <= MAX_ERROR_MESSAGE, \
        f"an error message of {len(message.encode())} bytes: {message[:200]!r}..."
    if code is not None:
        assert got_code == code, f"error code {got_code!r}, want {code!r}: {a!r}"
    return message


def assert_alive(server, *, token=None, run=False, timeout=10):
    """The server process is still there and answers another client on a fresh TCP
    connection and on the unix socket; with `run`, a real /v1/run of print(1+1) too."""
    assert server.running(), \
        f"codebox serve is gone (exit {server.proc.returncode}):\n{server.log_tail()}"
    for via in ("tcp", "unix"):
        try:
            a = request(server, "GET", "/healthz", via=via, timeout=timeout)
        except OSError as e:
            raise AssertionError(f"GET /healthz over {via} failed: {e!r}")
        assert a.status == 200, f"GET /healthz over {via}: {a!r}"
    if run:
        assert_runs(server, token=token)


def assert_runs(server, *, token=None):
    a = request(server, "POST", "/v1/run", {**BOX, "code": "print(1+1)"}, token=token,
                timeout=120)
    assert a.status == 200, f"POST /v1/run print(1+1): {a!r}"
    assert a.json.get("stdout") == "2\n", f"POST /v1/run print(1+1): {a!r}"


def box_ids(server, *, token=None):
    a = request(server, "GET", "/v1/boxes", token=token, timeout=20)
    assert a.status == 200, f"GET /v1/boxes: {a!r}"
    return [b["id"] for b in a.json["boxes"]]


def assert_no_boxes(server, *, token=None, wait_s=15):
    """GET /v1/boxes lists nothing (within `wait_s`: a box of a request whose client went away
    is destroyed as the server notices)."""
    deadline = time.monotonic() + wait_s
    while True:
        ids = box_ids(server, token=token)
        if not ids or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert ids == [], f"boxes left behind: {ids}"


def destroy_all(server, *, token=None):
    """Best effort: deletes every box the server lists (a failed test's leftovers)."""
    try:
        for box_id in box_ids(server, token=token):
            request(server, "DELETE", f"/v1/boxes/{box_id}", token=token, timeout=30)
    except (OSError, AssertionError):
        pass


def finish(server, *, token=None):
    """The end of a server: what is left is destroyed, the server stopped, its files gone."""
    destroy_all(server, token=token)
    server.stop()
    server.cleanup()


def python_image_problem():
    """None when the system store has the python recipe image, else what is missing."""
    link = os.path.join(SYSTEM_STORE, "images", "by-name", "python")
    if os.path.exists(link):
        return None
    return (f"the python recipe image is not built in {SYSTEM_STORE} "
            "(codebox image build python)")


class RssSampler(threading.Thread):
    """Samples the server's VmRSS every `every_s` until stop(); `peak_kib` is the largest."""

    def __init__(self, server, every_s=0.05):
        super().__init__(daemon=True, name="rss")
        self.server, self.every_s = server, every_s
        self.peak_kib = server.rss_kib()
        self._halt = threading.Event()

    def run(self):
        while not self._halt.is_set():
            try:
                self.peak_kib = max(self.peak_kib, self.server.rss_kib())
            except (OSError, ServerError):
                return
            self._halt.wait(self.every_s)

    def stop(self):
        self._halt.set()
        self.join(5)
        return self.peak_kib


def open_many(server, sources, per_source, *, opening=b"", deadline_s=30):
    """Opens `per_source` TCP connections from each address of `sources` (127.0.0.0/8), sends
    `opening` on each (nothing: idle); returns the sockets that connected. Bounded: a connect
    that does not complete within a second counts as refused, and the whole at `deadline_s`."""
    socks = []
    end = time.monotonic() + deadline_s
    for source in sources:
        for _ in range(per_source):
            if time.monotonic() > end:
                return socks
            try:
                s = tcp_socket(server, source=source, timeout=1)
            except OSError:
                continue
            if opening:
                try:
                    s.sendall(opening)
                except OSError:
                    pass
            socks.append(s)
    return socks


def close_all(socks):
    for s in socks:
        try:
            s.close()
        except OSError:
            pass


def fd_count(server):
    try:
        return len(os.listdir(f"/proc/{server.pid}/fd"))
    except OSError:
        return -1


def wait_settled(server, max_s=2.0, still_s=0.3):
    """Until the server's open files stop changing for `still_s` (it has taken in what the
    kernel queued for it), at most `max_s`."""
    end = time.monotonic() + max_s
    last, since = fd_count(server), time.monotonic()
    while time.monotonic() < end:
        time.sleep(0.05)
        now = fd_count(server)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= still_s:
            return
