"""A box's network from Python: the options, install_package(s) and egress_log, and (where a
box can start) the proxy's audit trail for a loopback server allowed by literal and a host off
the list. The namespace-isolated end-to-end cases (HTTPS, pip from a local index, rebinding)
are in tests/net."""

from __future__ import annotations

import asyncio
import http.server
import threading
from typing import Iterator

import pytest

import codebox

pytestmark = pytest.mark.usefixtures("need_core")


def test_install_arguments_are_checked_before_the_box_is_needed() -> None:
    b = codebox.SyncCodeBox(allow_hosts=["127.0.0.1:9"])
    with pytest.raises(TypeError, match="packages must be a list of str"):
        b.install_packages("six")  # a str would be its letters
    with pytest.raises(TypeError, match="each package must be a str, got int 3"):
        b.install_packages(["six", 3])
    with pytest.raises(ValueError, match="packages is empty"):
        b.install_packages([])
    with pytest.raises(TypeError, match="index_url must be a str"):
        b.install_package("six", index_url=3)
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        b.install_package("six", timeout=0)
    with pytest.raises(codebox.BoxClosedError, match="not started"):
        b.install_package("six")


def test_install_without_a_network_policy_says_how_to_get_one() -> None:
    with pytest.raises(codebox.BoxNetworkError, match=r"no network; create it with allow_hosts"):
        asyncio.run(codebox.CodeBox().install_package("six"))
    with pytest.raises(codebox.BoxNetworkError, match=r'network="allow"'):
        codebox.SyncCodeBox(network="none").install_packages(["six", "attrs"])
    assert issubclass(codebox.BoxNetworkError, codebox.BoxError)


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = b"hello from the host\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def loopback_server() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_a_box_without_network_has_none(need_box: None) -> None:
    with codebox.SyncCodeBox() as box:
        assert box.info.network == "none"
        assert box.egress_log() == []
        r = box.exec("sh", "-c", 'echo "${HTTP_PROXY:-unset}"')
        assert r.stdout.strip() == "unset"


FETCH = """
import sys, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=20).read().decode(), end="")
except Exception as e:
    print("failed:", e)
"""


def test_allowed_loopback_host_is_reached_and_audited(need_box: None, loopback_server: int) -> None:
    allowed = f"127.0.0.1:{loopback_server}"
    with codebox.SyncCodeBox(allow_hosts=[allowed], timeout=60) as box:
        if box.info.network == "none":
            pytest.skip("this build's boxes do not have a network yet (the egress service)")
        assert box.info.network == f"allow: {allowed}"
        # The allowlist names the host's 127.0.0.1, so the box's NO_PROXY leaves it out.
        assert "127.0.0.1" not in box.exec("sh", "-c", "echo $NO_PROXY").stdout
        out = box.exec("python3", "-c", FETCH, f"http://{allowed}/x").stdout
        assert out == "hello from the host\n"
        refused = box.exec("python3", "-c", FETCH, "http://example.invalid/").stdout
        assert refused.startswith("failed:"), refused
        log = box.egress_log()
        ok = [r for r in log if r["allowed"]]
        assert ok and ok[0]["host"] == "127.0.0.1" and ok[0]["port"] == loopback_server
        assert ok[0]["bytes_down"] > len("hello from the host\n")
        bad = [r for r in log if not r["allowed"]]
        assert bad and bad[0]["host"] == "example.invalid" and bad[0]["reason"], log
