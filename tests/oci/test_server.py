"""OCI references through the HTTP API: `codebox serve` on 127.0.0.1 makes a box of an image
that was imported (the request's "image" is a reference, as in the CLI and Python), and a box
of a reference no store has is refused when its registry is not allowed on the server
(test_server_pulls.py: pulls for a server's clients)."""
import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest

import registry

IMAGE = "local/bb-served:1"


@pytest.fixture(scope="module")
def server(codebox, bb_layout, jail_works):
    r = codebox("image", "import", "--name", IMAGE, bb_layout[0])
    assert r.returncode == 0, r.stderr
    port = registry.free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("CODEBOX_SERVER", "CODEBOX_TOKEN")}
    env["CODEBOX_HOME"] = codebox.home
    proc = subprocess.Popen([codebox.binary, "serve", "--listen", f"127.0.0.1:{port}"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(base + "/healthz", timeout=2).read()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"codebox serve did not come up: {proc.stdout.read()}")
            time.sleep(0.1)
    yield base
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def call(base, method, path, body=None, timeout=120):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            text = resp.read()
            return resp.status, json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def test_a_box_of_an_oci_reference_runs_its_commands(server):
    status, box = call(server, "POST", "/v1/boxes", {"image": IMAGE, "driver": "jail"})
    assert status == 201, box
    assert box["image"] == IMAGE
    try:
        status, result = call(server, "POST", f"/v1/boxes/{box['id']}/exec",
                              {"argv": ["sh", "-c", "echo served; echo $PATH"]})
        assert status == 200, result
        assert result["exit_code"] == 0, result
        assert result["stdout"].splitlines()[0] == "served"
        assert result["stdout"].splitlines()[1] == "/bin", "the image's PATH"
    finally:
        call(server, "DELETE", f"/v1/boxes/{box['id']}")


def test_a_reference_that_cannot_be_pulled_is_a_clear_error(server):
    port = registry.free_port()  # nothing listens there
    status, error = call(server, "POST", "/v1/boxes",
                         {"image": f"127.0.0.1:{port}/nothing:1", "driver": "jail"})
    # This server allows no registry (no --allow-registry): refused before any connection
    # (test_server_pulls.py has the rest).
    assert status == 403, error
    text = json.dumps(error)
    assert re.search(r"not allowed on this server.*codebox image pull", text), text


def test_a_malformed_reference_is_refused_by_the_schema(server):
    status, error = call(server, "POST", "/v1/boxes", {"image": "Not A Ref!", "driver": "jail"})
    assert status == 400, error
    assert "image" in json.dumps(error)
