"""A registry on 127.0.0.1 that lies, in a thread of the test process: just enough of the
registry API (GET /v2/; GET and HEAD of manifests and blobs) for skopeo, with a behaviour per
repository name (see HostileRegistry.ROUTES). Plain HTTP: pulled with --insecure."""
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"


class HostileRegistry:
    """Serves the image of an OCI layout (`image`: write_image's result, `blobs`: its
    blobs/sha256 dir) under these repositories:
      garbage    every manifest is garbage bytes;
      liar       the image's manifest, whatever digest was asked for (no digest header);
      liar-hdr   the same, with a Docker-Content-Digest header that repeats the digest asked;
      badblob    the image's manifest, but its first layer's bytes changed (same size);
      huge       a manifest whose one layer claims 100 GiB.
    `requests` lists (method, path) of every request."""

    ROUTES = ("garbage", "liar", "liar-hdr", "badblob", "huge")

    def __init__(self, image, blobs):
        self.manifest = image["manifest"]
        self.digest = image["manifest_digest"]
        self.blobs = blobs
        self.layer = image["layers"][0]["digest"]
        huge = json.loads(self.manifest)
        huge["layers"] = [dict(huge["layers"][0], size=100 << 30)]
        self.huge_manifest = json.dumps(huge).encode()
        self.requests = []
        self._lock = threading.Lock()
        registry = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 30

            def log_message(self, *args):
                pass

            def do_HEAD(self):
                self._answer(head=True)

            def do_GET(self):
                self._answer(head=False)

            def _send(self, status, body, content_type="application/json", headers=None,
                      head=False):
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Docker-Distribution-API-Version", "registry/2.0")
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def _answer(self, head):
                with registry._lock:
                    registry.requests.append((self.command, self.path))
                try:
                    status, body, ctype, headers = registry.route(self.path)
                except Exception as e:  # a bug here must not hang skopeo
                    status, body, ctype, headers = 500, str(e).encode(), "text/plain", {}
                self._send(status, body, ctype, headers, head)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.addr = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    def _blob(self, digest):
        hexdigest = digest.split(":", 1)[1]
        if not re.fullmatch(r"[0-9a-f]{64}", hexdigest):
            return None
        try:
            with open(f"{self.blobs}/{hexdigest}", "rb") as f:
                return f.read()
        except OSError:
            return None

    def route(self, path):
        """(status, body, content type, headers) for GET `path`."""
        not_found = (404, json.dumps({"errors": [{"code": "NAME_UNKNOWN", "message": "no"}]})
                     .encode(), "application/json", {})
        if path == "/v2/" or path == "/v2":
            return 200, b"{}", "application/json", {}
        m = re.fullmatch(r"/v2/([a-z-]+)/(manifests|blobs)/([^/?]+)", path.split("?")[0])
        if not m or m.group(1) not in self.ROUTES:
            return not_found
        name, kind, ref = m.groups()
        if kind == "manifests":
            if name == "garbage":
                return 200, b"this is not a manifest\x00\xff{{{", MANIFEST_TYPE, {}
            if name == "huge":
                return 200, self.huge_manifest, MANIFEST_TYPE, {}
            headers = {}
            if name == "liar-hdr":
                headers["Docker-Content-Digest"] = ref if ref.startswith("sha256:") else self.digest
            return 200, self.manifest, MANIFEST_TYPE, headers
        blob = self._blob(ref)
        if blob is None:
            return not_found
        if name == "badblob" and ref == self.layer:
            blob = bytes([blob[0] ^ 0xFF]) + blob[1:]
        return 200, blob, "application/octet-stream", {"Docker-Content-Digest": ref}

    def blob_requests(self):
        with self._lock:
            return [p for _, p in self.requests if "/blobs/" in p]

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def other_digest(digest):
    """A well-formed digest that is not `digest`."""
    return "sha256:" + hashlib.sha256(digest.encode()).hexdigest()
