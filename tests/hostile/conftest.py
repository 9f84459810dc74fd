"""Hostile clients against a real `codebox serve` (issue 32): each file starts its own server
(`--listen 127.0.0.1:0 --listen unix:...`, jail boxes of the `python` image of the system
store), attacks it the way a client without scruples would, and checks after each attack that
the server still answers another client (GET /healthz over TCP and the unix socket; where
boxes are involved, a real /v1/run of print(1+1)) and that nothing leaked (no box left in
GET /v1/boxes, nothing of another tenant).

Needs root (jail boxes; the server's store). Every case skips (exit 77, reasons printed)
without root or the codebox binary; a case that needs a box also skips without the `python`
image, and under CODEBOX_TESTS_REQUIRE_BOX=1 (CI) fails instead.

All traffic stays on 127.0.0.0/8 and the server's own unix socket; every wait and every loop
is bounded. A failed case carries the tail of its server's log.

Run: /usr/bin/python3 -m pytest -q tests/hostile   (as root; ctest runs each file with
CODEBOX_BIN set for its build)."""
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "common"))  # ctest_skip.py, pki.py

from ctest_skip import pytest_runtest_logreport, pytest_sessionfinish  # noqa: E402,F401
from ctest_skip import require  # noqa: E402
import hostile  # noqa: E402

# The connection floods open more than a thousand sockets; the server started after this
# inherits the limit too.
hostile.raise_fd_limit()


def codebox_bin_path():
    given = os.environ.get("CODEBOX_BIN")
    path = Path(given) if given else REPO / "build" / "release" / "bin" / "codebox"
    return str(path) if path.is_file() else None


@pytest.fixture(scope="session")
def codebox_bin():
    if os.geteuid() != 0:
        pytest.skip("needs root (jail boxes, the server's store in /var/lib/codebox)")
    path = codebox_bin_path()
    require(path is None and "the codebox CLI is not built (ninja -C build/release codebox, "
                             "or set CODEBOX_BIN)")
    return path


@pytest.fixture(scope="session")
def python_image(codebox_bin):
    """For a case that makes a box: the python recipe image must be in the system store."""
    require(hostile.python_image_problem())


@pytest.fixture(scope="session")
def serve(codebox_bin):
    """serve(extra flags, name=..., token_lines=...): a started hostile.Server; its start
    failing is the case's failure (a flag the server does not know yet, say), with the log.
    End it with hostile.finish(server)."""
    def start(extra=(), **kw):
        server = hostile.Server(codebox_bin, extra, **kw)
        try:
            return server.start()
        except hostile.ServerError as e:
            server.cleanup()
            pytest.fail(str(e))
    return start


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for server in list(hostile.LIVE_SERVERS):
            report.sections.append((f"codebox serve {server.name} log ({server.log_path})",
                                    server.log_tail()))
