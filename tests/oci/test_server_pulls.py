"""The pulls `codebox serve` makes for its clients (issue 32; docs/images.md, "Pulls for a
server's clients"): a registry the operator did not allow is refused before any connection, with
the same answer whether nothing listens at its address, a TLS server or an HTTP server; a
registry at a loopback address is refused even when allowed unless the operator names the
address; with both allowed, a pull from the test registry (docker-registry with TLS on
127.0.0.1) works through the pull's confined network; and a pull that fails says "not found" or
"could not be pulled", never what the network answered."""
import http.server
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

import registry
from conftest import new_home

IMAGE = "served/bb"


class Listener:
    """A TCP listener on 127.0.0.1 that counts the connections it accepts: `kind` "closed" (it
    listens, then closes its socket before the test: a port nothing listens on), "tls" (a
    TLS handshake with the test certificate, then nothing) or "http" (an HTTP server that
    answers 404 to everything)."""

    def __init__(self, kind, tls_pki=None):
        self.kind = kind
        self.accepted = 0
        self._stop = False
        if kind == "http":
            outer = self

            class Handler(http.server.BaseHTTPRequestHandler):
                def do_GET(self):  # noqa: N802
                    outer.accepted += 1
                    self.send_error(404)

                do_HEAD = do_GET  # noqa: N815

                def log_message(self, *args):
                    pass

            self._http = http.server.HTTPServer(("127.0.0.1", 0), Handler)
            self.port = self._http.server_address[1]
            self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
            self._thread.start()
            return
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        if kind == "closed":
            self._sock.close()
            self._thread = None
            return
        self._sock.listen(16)
        self._sock.settimeout(0.2)
        ca, cert, key = tls_pki
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._context.load_cert_chain(cert, key)
        self._thread = threading.Thread(target=self._serve_tls, daemon=True)
        self._thread.start()

    def _serve_tls(self):
        while not self._stop:
            try:
                conn, _ = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.accepted += 1
            conn.settimeout(5)
            try:
                with self._context.wrap_socket(conn, server_side=True) as tls:
                    tls.recv(1)  # a request comes, or the client gives up
            except (OSError, ssl.SSLError):
                pass
            finally:
                conn.close()

    def close(self):
        self._stop = True
        if self.kind == "http":
            self._http.shutdown()
            self._http.server_close()
        elif self.kind == "tls":
            self._sock.close()
        if self._thread is not None:
            self._thread.join(timeout=5)


@pytest.fixture(scope="module")
def listeners(tls_pki, prerequisites):
    made = {kind: Listener(kind, tls_pki) for kind in ("closed", "tls", "http")}
    yield made
    for listener in made.values():
        listener.close()


class Served:
    """`codebox serve` on 127.0.0.1 with `flags`, its own CODEBOX_HOME, its log in a file."""

    def __init__(self, binary, flags, env=None):
        self.home = new_home("codebox-serve-pulls.")
        self.port = registry.free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        e = {k: v for k, v in os.environ.items()
             if k not in ("CODEBOX_SERVER", "CODEBOX_TOKEN", "SSL_CERT_FILE", "SSL_CERT_DIR")}
        e["CODEBOX_HOME"] = self.home
        e.update(env or {})
        self.log_path = os.path.join(self.home, "serve.log")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [binary, "serve", "--listen", f"127.0.0.1:{self.port}", *flags], env=e,
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(self.base + "/healthz", timeout=2).read()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    pytest.fail(f"codebox serve did not come up: {self.log()}")
                time.sleep(0.1)

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def call(self, method, path, body=None, timeout=300):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                text = resp.read()
                return resp.status, json.loads(text) if text else None
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def create(self, image):
        return self.call("POST", "/v1/boxes", {"image": image, "driver": "jail"})

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()
        subprocess.run(["rm", "-rf", self.home], check=False)


def without_port(text, port):
    return text.replace(f":{port}", ":PORT")


@pytest.fixture(scope="module")
def strict_server(codebox_bin):
    """A serve with no --allow-registry: the default."""
    s = Served(codebox_bin, [])
    yield s
    s.close()


def test_a_registry_not_allowed_is_refused_alike_whatever_listens_there(strict_server,
                                                                         listeners):
    answers = {}
    for kind, listener in listeners.items():
        ref = f"127.0.0.1:{listener.port}/x:1"
        status, error = strict_server.create(ref)
        assert status == 403, (kind, error)
        assert error["error"]["code"] == "permission_denied", (kind, error)
        message = error["error"]["message"]
        assert "not allowed" in message, message
        assert "--allow-registry" in message and "codebox image pull" in message, message
        run_status, run_error = strict_server.call("POST", "/v1/run",
                                                   {"image": ref, "code": "print(1)"})
        assert run_status == 403, (kind, run_error)
        answers[kind] = (without_port(message, listener.port),
                         without_port(run_error["error"]["message"], listener.port))
    assert len(set(answers.values())) == 1, answers
    time.sleep(0.5)  # a connection (there should be none) would have come by now
    assert {k: l.accepted for k, l in listeners.items()} == {"closed": 0, "tls": 0, "http": 0}
    assert "image pull connection" not in strict_server.log()


def test_a_recipe_or_an_image_in_the_store_needs_no_registry(strict_server, bb_layout,
                                                            codebox_bin):
    # A recipe's name is no pull: whatever the box start says, it is not the pull refusal.
    status, error = strict_server.create("python")
    assert "not allowed on this server" not in json.dumps(error), error
    # An image in the store works whatever its registry (here one no server may pull from).
    env = {k: v for k, v in os.environ.items() if k not in ("CODEBOX_SERVER", "CODEBOX_TOKEN")}
    env["CODEBOX_HOME"] = strict_server.home
    ref = "127.0.0.1:1/imported:1"
    r = subprocess.run([codebox_bin, "image", "import", "--name", ref, bb_layout[0]],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    status, box = strict_server.create(ref)
    if status == 201:
        strict_server.call("DELETE", f"/v1/boxes/{box['id']}")
    else:  # a host where jail boxes do not start: the box start says so, not the pull policy
        assert status != 403 and "not allowed" not in json.dumps(box), box


@pytest.fixture(scope="module")
def pushed(tls_registry, bb_layout):
    registry.push(bb_layout[0], "1", tls_registry, IMAGE)
    return f"{tls_registry.addr}/{IMAGE}:1"


def test_an_allowed_registry_at_loopback_needs_its_address_named(codebox_bin, tls_registry,
                                                                  pushed):
    s = Served(codebox_bin, ["--allow-registry", tls_registry.addr])
    try:
        before = tls_registry.requests_logged()
        status, error = s.create(pushed)
        assert status == 403, error
        message = error["error"]["message"]
        assert "not allowed" in message and "--allow-registry-address" in message, message
        assert "loopback" in message, message
        assert tls_registry.requests_logged() == before, "no request reached the registry"
    finally:
        s.close()


@pytest.fixture(scope="module")
def open_server(codebox_bin, tls_registry, ca_env, listeners):
    """A serve that allows the TLS registry, the three listeners and 127.0.0.0/8."""
    flags = ["--allow-registry", tls_registry.addr, "--allow-registry-address", "127.0.0.0/8"]
    for listener in listeners.values():
        flags += ["--allow-registry", f"127.0.0.1:{listener.port}"]
    s = Served(codebox_bin, flags, env=ca_env)
    yield s
    s.close()


def test_an_allowed_registry_is_pulled_through_the_confined_network(open_server, pushed,
                                                                    codebox_bin):
    status, box = open_server.create(pushed)
    if status == 201:
        open_server.call("DELETE", f"/v1/boxes/{box['id']}")
    else:  # a host where jail boxes do not start: the pull is what this test is about
        assert "not allowed" not in json.dumps(box) and "pulled" not in json.dumps(box), box
    env = {k: v for k, v in os.environ.items() if k not in ("CODEBOX_SERVER", "CODEBOX_TOKEN")}
    env["CODEBOX_HOME"] = open_server.home
    listed = subprocess.run([codebox_bin, "image", "ls"], capture_output=True, text=True,
                            env=env, timeout=60)
    assert IMAGE in listed.stdout, (listed.stdout, listed.stderr, open_server.log()[-4000:])
    # Every connection went through the pull's proxy or its forward, each one logged.
    lines = [json.loads(line) for line in open_server.log().splitlines()
             if line.startswith("{") and '"image pull connection"' in line]
    assert lines, open_server.log()[-4000:]
    assert all(line["allowed"] for line in lines), lines
    assert all(line["host"] == "127.0.0.1" for line in lines), lines


def test_the_pulled_image_runs_in_a_box(open_server, pushed, jail_works):
    status, box = open_server.create(pushed)  # in the store now, or pulled again
    assert status == 201, (box, open_server.log()[-4000:])
    try:
        status, result = open_server.call("POST", f"/v1/boxes/{box['id']}/exec",
                                          {"argv": ["sh", "-c", "echo pulled"]})
        assert status == 200, result
        assert result["stdout"] == "pulled\n", result
    finally:
        open_server.call("DELETE", f"/v1/boxes/{box['id']}")


def test_a_missing_image_at_an_allowed_registry_is_not_found(open_server, tls_registry, pushed):
    status, error = open_server.create(f"{tls_registry.addr}/{IMAGE}:no-such-tag")
    assert status == 404, error
    message = error["error"]["message"]
    assert "not found" in message, message
    assert "manifest unknown" not in message, "skopeo's words stay in the server's log"


def test_a_failed_pull_does_not_say_what_the_network_answered(open_server, listeners):
    answers = {}
    for kind, listener in listeners.items():
        status, error = open_server.create(f"127.0.0.1:{listener.port}/x:1")
        assert status == 503, (kind, error)
        message = error["error"]["message"]
        assert "could not be pulled" in message, message
        for detail in ("refused", "tls", "TLS", "HTTP", "x509", "EOF", "connection", "http:"):
            assert detail not in message.replace("a connection the pull", ""), (detail, message)
        answers[kind] = without_port(message, listener.port)
    assert len(set(answers.values())) == 1, answers
    log = open_server.log()
    assert "image pull failed" in log
    assert re.search(r"refused|HTTP response|EOF|tls|x509", log), "the log keeps the details"


class RedirectingRegistry:
    """Just enough of a registry for skopeo, with TLS (the test CA's certificate for
    127.0.0.1): the bb image's manifest for any repository, and its blobs answered with a 307
    to `redirects[repository]` (a registry sending the layers to blob storage elsewhere)."""

    def __init__(self, image, tls_pki, redirects):
        self.manifest = image["manifest"]
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_HEAD(self):  # noqa: N802
                self._answer(head=True)

            def do_GET(self):  # noqa: N802
                self._answer(head=False)

            def _answer(self, head):
                m = re.fullmatch(r"/v2/([a-z]+)/(manifests|blobs)/[^/?]+", self.path)
                headers = {"Docker-Distribution-API-Version": "registry/2.0"}
                if self.path in ("/v2/", "/v2"):
                    status, body = 200, b"{}"
                elif m and m.group(2) == "manifests":
                    status, body = 200, outer.manifest
                    headers["Content-Type"] = "application/vnd.oci.image.manifest.v1+json"
                elif m and m.group(1) in redirects:
                    status, body = 307, b""
                    headers["Location"] = redirects[m.group(1)]
                else:
                    status, body = 404, b"{}"
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tls_pki[1], tls_pki[2])
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.addr = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


class Counter:
    """A TCP listener at `host` that counts the connections it gets."""

    def __init__(self, host):
        self.accepted = 0
        self._sock = socket.socket()
        self._sock.bind((host, 0))
        self._sock.listen(16)
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop:
            try:
                conn, _ = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self):
        self._stop = True
        self._thread.join(timeout=5)
        self._sock.close()


def test_redirects_of_an_allowed_registry_are_held_to_the_address_policy(codebox_bin, bb_layout,
                                                                         tls_pki, ca_env):
    """An allowed registry (at 127.0.0.1, named) sends the blobs to the cloud metadata address
    (which Go reaches through the pull's proxy: refused there), to another loopback address
    (which Go dials itself: nothing in the pull's namespace), and to 0.0.0.0 (the kernel's
    loopback: refused as unspecified). None is reached, and the client's error says none of it."""
    other_loopback = Counter("127.0.0.2")
    any_address = Counter("127.0.0.1")
    redirects = {
        "meta": "http://169.254.169.254/latest/meta-data/",
        "loop": f"https://127.0.0.2:{other_loopback.port}/blob",
        "any": f"https://0.0.0.0:{any_address.port}/blob",
    }
    reg = RedirectingRegistry(bb_layout[1], tls_pki, redirects)
    s = Served(codebox_bin, ["--allow-registry", reg.addr,
                             "--allow-registry-address", "127.0.0.1"], env=ca_env)
    try:
        answers = set()
        for name in redirects:
            status, error = s.create(f"{reg.addr}/{name}:1")
            assert status == 503, (name, error, s.log()[-3000:])
            answers.add(error["error"]["message"].replace(f"/{name}:", "/NAME:"))
            assert "169.254" not in error["error"]["message"], error
        assert len(answers) == 1, answers
        assert other_loopback.accepted == 0 and any_address.accepted == 0
        connections = [json.loads(line) for line in s.log().splitlines()
                       if line.startswith("{") and '"image pull connection"' in line]
        refused = {(c["host"], c["allowed"]) for c in connections if not c["allowed"]}
        assert ("169.254.169.254", False) in refused, connections
        assert ("0.0.0.0", False) in refused, connections
        assert all(c["host"] in ("127.0.0.1", "169.254.169.254", "0.0.0.0")
                   for c in connections), connections
        meta = [c for c in connections if c["host"] == "169.254.169.254"]
        assert all("link-local" in c["reason"] and c["address"] == "" for c in meta), meta
    finally:
        s.close()
        reg.close()
        other_loopback.close()
        any_address.close()
