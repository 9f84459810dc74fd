"""Registries on 127.0.0.1 for the tests: Debian's docker-registry (distribution 2.x) with a
config written here (storage in a temp dir, no auth, plain HTTP or TLS with the test CA's
certificate), and a hostile one written in Python (hostile_registry.py). Every wait is
bounded; the process is killed at the end."""
import http.client
import os
import shutil
import socket
import ssl
import subprocess
import time

DOCKER_REGISTRY = "/usr/bin/docker-registry"


def why_not_possible():
    if not os.path.exists(DOCKER_REGISTRY):
        return f"{DOCKER_REGISTRY} is missing (apt-get install docker-registry)"
    if shutil.which("skopeo") is None:
        return "skopeo is missing (apt-get install skopeo)"
    if shutil.which("openssl") is None:
        return "openssl is missing (apt-get install openssl)"
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Registry:
    """One docker-registry process: `addr` is 127.0.0.1:PORT, `log()` what it logged so far
    (one line per request, with the URI)."""

    def __init__(self, work, name, cert=None, key=None, ca=None, htpasswd=None, wait_s=30):
        self.dir = os.path.join(work, name)
        os.makedirs(os.path.join(self.dir, "storage"), exist_ok=True)
        self.port = free_port()
        self.addr = f"127.0.0.1:{self.port}"
        self.tls = cert is not None
        self.ca = ca
        config = [
            "version: 0.1",
            "log:",
            "  level: info",
            "  accesslog:",
            "    disabled: false",
            "storage:",
            "  filesystem:",
            f"    rootdirectory: {self.dir}/storage",
            "  delete:",
            "    enabled: true",
            "http:",
            f"  addr: {self.addr}",
        ]
        if self.tls:
            config += ["  tls:", f"    certificate: {cert}", f"    key: {key}"]
        self.auth = htpasswd is not None
        if self.auth:  # basic auth against an htpasswd file (bcrypt entries)
            config += ["auth:", "  htpasswd:", "    realm: codebox-test", f"    path: {htpasswd}"]
        self.config = os.path.join(self.dir, "config.yml")
        with open(self.config, "w") as f:
            f.write("\n".join(config) + "\n")
        self.log_path = os.path.join(self.dir, "registry.log")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([DOCKER_REGISTRY, "serve", self.config], stdout=self._log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            self._wait(wait_s)
        except Exception:
            self.close()
            raise

    def _connection(self, timeout=5):
        if self.tls:
            context = ssl.create_default_context(cafile=self.ca)
            return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout,
                                               context=context)
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, headers=None):
        """(status, headers, body) of one request to the registry."""
        conn = self._connection()
        try:
            conn.request(method, path, headers=headers or {})
            r = conn.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            conn.close()

    def _wait(self, wait_s):
        deadline = time.monotonic() + wait_s
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"docker-registry exited ({self.proc.returncode}): "
                                   f"{self.log()[-2000:]}")
            try:
                status, _, _ = self.request("GET", "/v2/")
                if status == 200 or (self.auth and status == 401):
                    return
                last = f"GET /v2/ answered {status}"
            except (OSError, http.client.HTTPException) as e:
                last = str(e)
            time.sleep(0.1)
        raise RuntimeError(f"docker-registry on {self.addr} did not answer GET /v2/ with 200 "
                           f"within {wait_s} s ({last}): {self.log()[-2000:]}")

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def requests_logged(self):
        """How many requests the registry has logged (its access log: one line each)."""
        return sum(1 for line in self.log().splitlines() if '"GET /v2' in line or
                   '"HEAD /v2' in line or '"POST /v2' in line or '"PUT /v2' in line)

    def manifest_digest(self, name, tag):
        """The Docker-Content-Digest the registry gives for NAME:TAG (an OCI manifest)."""
        status, headers, _ = self.request(
            "GET", f"/v2/{name}/manifests/{tag}",
            {"Accept": "application/vnd.oci.image.manifest.v1+json"})
        if status != 200:
            raise RuntimeError(f"GET /v2/{name}/manifests/{tag}: {status}")
        return {k.lower(): v for k, v in headers.items()}["docker-content-digest"]

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self._log.close()


def push(layout, tag, registry, name, timeout=300, creds=None):
    """skopeo copy oci:LAYOUT:TAG docker://REGISTRY/NAME:TAG (no TLS checks: the test's own)."""
    login = ["--dest-creds", creds] if creds else []
    subprocess.run(["skopeo", "copy", "--insecure-policy", "--dest-tls-verify=false",
                    "--retry-times", "0", *login, f"oci:{layout}:{tag}",
                    f"docker://{registry.addr}/{name}:{tag}"],
                   check=True, capture_output=True, text=True, timeout=timeout)
