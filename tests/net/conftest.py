"""The network tests' world: this pytest process moves into a network + mount namespace of its
own before anything else runs (netns.py), then a session fixture makes a CA, a package index,
the servers and a test /etc/hosts. Every codebox process the tests start (the CLI, or boxes of
the Python module imported here) inherits that namespace, so nothing leaves it.

Run: /usr/bin/python3 -m pytest -q tests/net   (as root, after ninja -C build/release codebox
_codebox; ctest runs each file with CODEBOX_BIN and PYTHONPATH set for its build).
Exit status 77 (CTest's skip) when every test skipped, with the reasons printed.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "common"))  # pki.py, ctest_skip.py
if "PYTHONPATH" not in os.environ:  # a manual run: the package and the release build's module
    for path in (REPO / "build" / "release" / "python", REPO / "python"):
        sys.path.insert(0, str(path))

import netns  # noqa: E402
import package_index  # noqa: E402
import pki  # noqa: E402
from ctest_skip import pytest_runtest_logreport, pytest_sessionfinish  # noqa: E402,F401
from servers import Servers  # noqa: E402

_namespace_problem = None

# Where the box finds the test CA (copied in by each test that uses TLS).
BOX_CA = "/tmp/codebox-test-ca.pem"
BOX_CA_ENV = {"SSL_CERT_FILE": BOX_CA, "REQUESTS_CA_BUNDLE": BOX_CA, "CURL_CA_BUNDLE": BOX_CA,
              "PIP_CERT": BOX_CA}


def pytest_configure(config):
    """Enters the namespace while pytest is still single-threaded."""
    global _namespace_problem
    _namespace_problem = netns.why_not_possible()
    if _namespace_problem is None:
        try:
            netns.enter()
        except (RuntimeError, subprocess.CalledProcessError) as e:
            _namespace_problem = str(e)


def require(problem):
    """Skips with `problem` (what is missing), or fails under CODEBOX_TESTS_REQUIRE_BOX=1;
    nothing when `problem` is None or False."""
    if not problem:
        return
    if os.environ.get("CODEBOX_TESTS_REQUIRE_BOX") == "1":
        pytest.fail(f"{problem} (CODEBOX_TESTS_REQUIRE_BOX=1)")
    pytest.skip(problem)


class Net:
    """The session's servers and names (see netns.py for the addresses)."""
    PACKAGE = "codebox-nettest-greeting"
    MODULE = "codebox_nettest_greeting"

    def __init__(self, work):
        self.work = work
        self.host = {label: netns.name(label) for label in
                     ("web", "secure", "index", "other", "rebind-lo", "rebind-ten")}
        netns.hosts({self.host["web"]: netns.NAMED, self.host["secure"]: netns.NAMED,
                     self.host["index"]: netns.NAMED, self.host["other"]: netns.NAMED,
                     self.host["rebind-lo"]: "127.0.0.1",
                     self.host["rebind-ten"]: netns.PRIVATE})
        self.ca, cert, key = pki.make(os.path.join(work, "pki"), list(self.host.values()))
        index = os.path.join(work, "index")
        self.servers = Servers(cert=cert, key=key, index_dir=index)
        self.token = self.servers.token
        wheel = package_index.build_wheel(os.path.join(index, "files"), self.PACKAGE, "1.0",
                                          self.MODULE, f"TOKEN = {self.token!r}\n")
        package_index.write_index(index, {self.PACKAGE: [wheel]})

    def url(self, label, path="/hello", scheme="http"):
        return f"{scheme}://{self.host[label]}{path}"

    def index_url(self, scheme="http"):
        return f"{scheme}://{self.host['index']}/simple/"

    def hello(self, label, scheme="http"):
        """What /hello answers when reached by name."""
        return f"hello from {self.host[label]} over {scheme} token={self.token}"

    def close(self):
        self.servers.close()


@pytest.fixture(scope="session")
def net():
    require(_namespace_problem and f"no network namespace: {_namespace_problem}")
    require(pki.why_not_possible())
    work = tempfile.mkdtemp(prefix="codebox-net-test.")
    n = Net(work)
    yield n
    n.close()
    shutil.rmtree(work, ignore_errors=True)


def _codebox_bin():
    given = os.environ.get("CODEBOX_BIN")
    path = Path(given) if given else REPO / "build" / "release" / "bin" / "codebox"
    return str(path) if path.is_file() else None


@pytest.fixture(scope="session")
def codebox_bin():
    path = _codebox_bin()
    require(path is None and "the codebox CLI is not built (ninja -C build/release codebox, "
                             "or set CODEBOX_BIN)")
    return path


def cli(codebox, *args, timeout=300):
    """`codebox ARGS` with nothing of a codebox server in its environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("CODEBOX_SERVER", "CODEBOX_TOKEN")}
    return subprocess.run([codebox, *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


_PROBE = ("import shutil, importlib.util, json; print(json.dumps({'curl': shutil.which('curl'),"
          " 'pip': importlib.util.find_spec('pip') is not None}))")


@pytest.fixture(scope="session")
def jail_image(net, codebox_bin):
    """What the python image's jail box has: {'curl': path or None, 'pip': bool}; skips when
    no jail box starts here."""
    r = cli(codebox_bin, "run", "--local", "--driver", "jail", _PROBE, timeout=120)
    if r.returncode != 0:
        require(f"a jail box of image python does not start here: {r.stderr.strip()}")
    return json.loads(r.stdout)


@pytest.fixture
def need_curl(jail_image):
    require(jail_image["curl"] is None and
            "image python has no curl; rebuild it (codebox image build python)")


@pytest.fixture
def need_pip(jail_image):
    require(not jail_image["pip"] and
            "image python has no pip; rebuild it (codebox image build python)")
