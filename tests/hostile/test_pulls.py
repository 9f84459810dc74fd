"""The server's image pulls as a port scanner (issue 32, attack 4 and "Pulls"):
`{"image": "127.0.0.1:PORT/x"}` made the server connect to that host and port, and its error
told a closed port from a TLS port from an HTTP server. Here the test holds three ports of its
own on 127.0.0.1: one closed (bound, not listening), one TLS listener, one plain HTTP listener
that answers like a registry. The server pulls only from registries the operator allows, and
its pulls follow the box egress address policy (no loopback), so no connection arrives at the
test's listeners, and all three errors read the same but for the reference.

The server has no token file: its client is the `local` tenant, an admin, and still may not
make the server reach loopback."""
import json
import re
import socket
import ssl
import tempfile
import threading
import time

import pytest

import hostile
import pki
from hostile import assert_alive, assert_no_boxes, request

ACCEPT_WAIT_S = 1.0  # after each answer, how long a late connection is waited for


class Listener(threading.Thread):
    """A TCP port of the test's own on 127.0.0.1: `closed` is bound and not listening (a
    connect is reset), `tls` completes TLS handshakes, `http` answers like a registry that
    lacks every image. Counts every connection accepted."""

    def __init__(self, kind, tls_files=None):
        super().__init__(daemon=True, name=f"listener-{kind}")
        self.kind = kind
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = []  # (time, peer)
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.ctx = None
        if kind == "tls":
            self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.ctx.load_cert_chain(tls_files[1], tls_files[2])
        if kind != "closed":
            self.sock.listen(64)
            self.sock.settimeout(0.2)

    def run(self):
        if self.kind == "closed":
            return
        while not self.done.is_set():
            try:
                conn, peer = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self.lock:
                self.accepted.append((time.monotonic(), peer))
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        conn.settimeout(5)
        try:
            if self.ctx:
                conn = self.ctx.wrap_socket(conn, server_side=True)
            data = b""
            while b"\r\n\r\n" not in data and len(data) < 65536:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                data += chunk
            path = data.split(b" ", 2)[1] if data.count(b" ") >= 2 else b"/"
            if path.rstrip(b"/") == b"/v2":
                body, status = b"{}", b"200 OK"
            else:
                body = b'{"errors":[{"code":"NAME_UNKNOWN","message":"no such repository"}]}'
                status = b"404 Not Found"
            conn.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\n"
                         b"Docker-Distribution-Api-Version: registry/2.0\r\n"
                         b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
        except (OSError, ssl.SSLError):
            pass
        finally:
            try:
                conn.close()
            except OSError:
                pass

    def count(self):
        with self.lock:
            return len(self.accepted)

    def close(self):
        self.done.set()
        self.sock.close()
        self.join(5)


@pytest.fixture(scope="module")
def listeners():
    problem = pki.why_not_possible()
    if problem:
        pytest.skip(f"the TLS listener needs a certificate: {problem}")
    work = tempfile.mkdtemp(prefix="cbh-pki.", dir="/tmp")
    files = pki.make(work, ["127.0.0.1"])
    out = {kind: Listener(kind, files) for kind in ("closed", "tls", "http")}
    for listener in out.values():
        listener.start()
    yield out
    for listener in out.values():
        listener.close()
    import shutil
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def server(serve):
    s = serve(name="pulls")
    yield s
    hostile.finish(s)


def masked(message, port):
    """The message with the reference (any form of 127.0.0.1:PORT/...) made one placeholder."""
    text = re.sub(r"127\.0\.0\.1:" + str(port) + r"[\w./:@-]*", "<ref>", message)
    return re.sub(r"(?<!\d)" + str(port) + r"(?!\d)", "<port>", text)


def pull_answers(server, listeners, ref_of, route):
    out = {}
    for kind, listener in listeners.items():
        before = listener.count()
        body = {"image": ref_of(listener.port), "driver": "jail"}
        if route == "/v1/run":
            body["code"] = "print(1)"
        t0 = time.monotonic()
        a = request(server, "POST", route, body, timeout=120)
        seconds = time.monotonic() - t0
        time.sleep(ACCEPT_WAIT_S)
        out[kind] = (a, listener.count() - before, seconds)
    return out


REFS = {
    "plain": lambda port: f"127.0.0.1:{port}/x",
    "tagged": lambda port: f"127.0.0.1:{port}/library/x:1.0",
    "digest": lambda port: f"127.0.0.1:{port}/x@sha256:" + "ab" * 32,
}


@pytest.mark.parametrize("route,ref", [("/v1/boxes", "plain"), ("/v1/boxes", "digest"),
                                       ("/v1/run", "tagged")])
def test_pull_from_loopback_reaches_nothing_and_tells_nothing(server, listeners, route, ref):
    answers = pull_answers(server, listeners, REFS[ref], route)
    reached = {kind: n for kind, (_, n, _) in answers.items() if n}
    assert not reached, \
        f"{route} image {REFS[ref]('PORT')}: the server connected to the test's listeners " \
        f"{reached}: {[repr(a) for a, _, _ in answers.values()]}"
    for kind, (a, _, _) in answers.items():
        assert 400 <= a.status < 500, f"{kind}: a pull from loopback answered {a!r}"
        message = hostile.assert_short_error(a)
        assert "not allowed" in message or "not found" in message, f"{kind}: {message!r}"
    shapes = {kind: (a.status, a.error[0], masked(a.error[1], listeners[kind].port))
              for kind, (a, _, _) in answers.items()}
    assert len(set(shapes.values())) == 1, \
        f"the errors tell the ports apart: {json.dumps(shapes, indent=1)}"
    assert_alive(server)
    assert_no_boxes(server)


def test_server_still_runs_code(server, python_image):
    assert_alive(server, run=True)
    assert_no_boxes(server)


def test_an_allowed_registry_on_loopback_is_still_not_reached(serve, listeners):
    """--allow-registry names a registry the server may pull from; the address policy (no
    loopback unless --allow-registry-address names it) still holds for its connections."""
    http_port = listeners["http"].port
    s = serve(["--allow-registry", f"127.0.0.1:{http_port}"],
                     name="pulls-allowed")
    try:
        before = listeners["http"].count()
        a = request(s, "POST", "/v1/boxes", {"image": f"127.0.0.1:{http_port}/x"}, timeout=120)
        time.sleep(ACCEPT_WAIT_S)
        assert listeners["http"].count() == before, \
            f"the server connected to loopback for an allowed registry: {a!r}"
        assert 400 <= a.status < 500, f"{a!r}"
        message = hostile.assert_short_error(a)
        assert "not allowed" in message, f"{message!r}"
        assert_alive(s)
        assert_no_boxes(s)
    finally:
        hostile.finish(s)
