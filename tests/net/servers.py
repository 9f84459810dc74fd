"""The test's servers: plain HTTP and HTTPS (a certificate of the test's own CA), both serving

  /hello          "hello from HOST over SCHEME token=TOKEN" (TOKEN: random per run, so an
                  answer cannot come from anywhere but this server); any query is ignored
  /bytes/N        N bytes of a fixed pattern (pattern(N) gives the same bytes), N <= 1 GiB
  /simple/..., /files/...   the package index directory (PEP 503 simple layout), if given
  /redirect?to=URL  a 302 to URL
  POST /anything  "posted N bytes" (the body, at most 1 MiB, is recorded)

and recording every request (scheme, Host header, path), so a test can check that a refused
connection never reached a server. Each connection is handled on a thread of its own, with a
timeout; TLS handshakes happen on that thread too, never on the accepting one.
"""
import http.server
import os
import posixpath
import re
import secrets
import socketserver
import ssl
import threading
import urllib.parse

_BLOCK = bytes(range(256)) * 256  # 64 KiB
MAX_BYTES = 1 << 30


def pattern(n):
    """The first n bytes that /bytes/N sends."""
    whole, rest = divmod(n, len(_BLOCK))
    return _BLOCK * whole + _BLOCK[:rest]


class Request:
    def __init__(self, scheme, host, path, client, head_bytes, raw=b""):
        self.scheme, self.host, self.path, self.client = scheme, host, path, client
        self.head_bytes = head_bytes  # the request line and the headers, as received
        self.raw = raw  # the request line, headers and (POST) body, as received

    def __repr__(self):
        return f"{self.scheme}://{self.host}{self.path} from {self.client}"


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address, handler, scheme, owner, tls):
        self.scheme, self.owner, self.tls = scheme, owner, tls
        super().__init__(address, handler)

    def finish_request(self, request, client_address):
        if self.tls is not None:
            request.settimeout(30)
            try:
                request = self.tls.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                return  # a client that gave up or does not trust the CA
        super().finish_request(request, client_address)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30

    def log_message(self, *args):  # quiet; the owner records requests instead
        pass

    def _record(self, body=b""):
        server = self.server
        head = self.raw_requestline + self.headers.as_bytes()
        server.owner.record(Request(server.scheme, self.headers.get("Host", ""),
                                    urllib.parse.urlsplit(self.path).path,
                                    self.client_address[0], len(head), head + body))

    def do_POST(self):  # noqa: N802
        n = min(int(self.headers.get("Content-Length") or 0), 1 << 20)
        body = self.rfile.read(n)
        self._record(body)
        self._send(200, f"posted {len(body)} bytes\n".encode())

    def do_GET(self):  # noqa: N802 (http.server's name)
        server = self.server
        host = self.headers.get("Host", "")
        split = urllib.parse.urlsplit(self.path)
        path = split.path
        self._record()
        if path == "/redirect":
            self.send_response(302)
            self.send_header("Location", urllib.parse.parse_qs(split.query)["to"][0])
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif path == "/hello":
            self._send(200, f"hello from {host} over {server.scheme} "
                            f"token={server.owner.token}\n".encode())
        elif m := re.fullmatch(r"/bytes/(\d+)", path):
            self._send_pattern(int(m.group(1)))
        elif server.owner.index_dir and (path.startswith("/simple") or
                                         path.startswith("/files/")):
            self._send_file(path)
        else:
            self._send(404, b"not found\n")

    def _send(self, status, body, content_type="text/plain; charset=utf-8"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _send_pattern(self, n):
        if n > MAX_BYTES:
            return self._send(400, b"too many bytes\n")
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(n))
        self.end_headers()
        try:
            while n > 0:
                chunk = _BLOCK[:min(n, len(_BLOCK))]
                self.wfile.write(chunk)
                n -= len(chunk)
        except OSError:
            pass  # the client (or a byte cap between) cut the connection

    def _send_file(self, path):
        root = self.server.owner.index_dir
        relative = posixpath.normpath(path).lstrip("/")
        if relative.startswith("..") or "\0" in relative:
            return self._send(404, b"not found\n")
        full = os.path.join(root, relative)
        if os.path.isdir(full):
            if not path.endswith("/"):
                self.send_response(301)
                self.send_header("Location", path + "/")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            full = os.path.join(full, "index.html")
        if not os.path.isfile(full):
            return self._send(404, b"not found\n")
        with open(full, "rb") as f:
            body = f.read()
        kind = "text/html" if full.endswith(".html") else "application/octet-stream"
        return self._send(200, body, kind)


class Servers:
    """An HTTP and (with a certificate) an HTTPS server on every address of the namespace."""

    def __init__(self, http_port=80, https_port=443, cert=None, key=None, index_dir=None,
                 bind="0.0.0.0"):
        self.token = secrets.token_hex(8)
        self.index_dir = index_dir
        self._lock = threading.Lock()
        self._requests = []
        self._servers = [_Server((bind, http_port), _Handler, "http", self, None)]
        if cert:
            tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            tls.load_cert_chain(cert, key)
            self._servers.append(_Server((bind, https_port), _Handler, "https", self, tls))
        self._threads = [threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.1},
                                          daemon=True) for s in self._servers]
        for t in self._threads:
            t.start()

    @property
    def http_port(self):
        return self._servers[0].server_address[1]

    @property
    def https_port(self):
        return self._servers[1].server_address[1]

    def record(self, request):
        with self._lock:
            self._requests.append(request)

    def requests(self, host=None):
        """Requests so far; with `host`, those whose Host header (without a port) is it."""
        with self._lock:
            found = list(self._requests)
        if host is None:
            return found
        return [r for r in found if r.host.rsplit(":", 1)[0] == host]

    def close(self):
        for s in self._servers:
            s.shutdown()
            s.server_close()
