"""The harness itself, checked from the test's namespace without any box: names resolve to what
the test chose, the servers answer by name over HTTP and HTTPS (with the test CA only), the
index's wheel installs with pip, and nothing outside the namespace is reachable."""
import errno
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

import pytest

import netns
from servers import pattern

DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def get(url, context=None):
    opener = DIRECT if context is None else urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context))
    with opener.open(url, timeout=10) as r:
        return r.read()


def test_names_resolve_to_the_test_addresses(net):
    def addresses(host):
        return {a[4][0] for a in socket.getaddrinfo(host, 80, socket.AF_INET)}
    assert addresses(net.host["web"]) == {netns.NAMED}
    assert addresses(net.host["rebind-lo"]) == {"127.0.0.1"}
    assert addresses(net.host["rebind-ten"]) == {netns.PRIVATE}


def test_servers_answer_by_name_and_literal(net):
    assert get(net.url("web")).decode().strip() == net.hello("web")
    assert get(f"http://{netns.LITERAL}/hello").decode().startswith(
        f"hello from {netns.LITERAL} over http")
    assert get(net.url("web", "/bytes/300000")) == pattern(300000)
    assert net.servers.requests(net.host["web"]), "the server recorded no request"


def test_https_needs_the_test_ca(net):
    trusting = ssl.create_default_context(cafile=net.ca)
    assert get(net.url("secure", scheme="https"), trusting).decode().strip() == \
        net.hello("secure", "https")
    with pytest.raises(urllib.error.URLError) as e:
        get(net.url("secure", scheme="https"), ssl.create_default_context())
    assert "CERTIFICATE_VERIFY_FAILED" in str(e.value)


def test_the_index_wheel_installs_with_pip(net):
    if subprocess.run([sys.executable, "-m", "pip", "--version"],
                      capture_output=True).returncode != 0:
        pytest.skip("no pip for this python3 on the host (apt-get install python3-pip)")
    with tempfile.TemporaryDirectory() as target:
        r = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--no-input", "--disable-pip-version-check",
             "--no-cache-dir", "--index-url", net.index_url(),
             "--trusted-host", net.host["index"], "--target", target, net.PACKAGE],
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "PIP_CONFIG_FILE": os.devnull})
        assert r.returncode == 0, r.stderr
        check = subprocess.run([sys.executable, "-c", f"import {net.MODULE} as m; print(m.TOKEN)"],
                               capture_output=True, text=True, env={"PYTHONPATH": target})
        assert check.stdout.strip() == net.token, check.stderr


def test_nothing_outside_the_namespace_is_reachable(net):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        with pytest.raises(OSError) as e:
            s.connect(("1.1.1.1", 80))
    assert e.value.errno == errno.ENETUNREACH, e.value
