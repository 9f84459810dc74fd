"""Scale-out of `codebox serve` on one machine (issue 18): three replicas on 127.0.0.2,
127.0.0.3 and 127.0.0.4, all on one TCP port, nodes n2, n3 and n4, jail boxes of the `python`
image of the system store (/var/lib/codebox). Peers come from `--peers` (static) or from
`--peers-dns NAME:PORT`, NAME resolved by a DNS responder of the test's own on 127.0.0.5:53
(dns_responder.py); each replica then runs in a private mount namespace whose /etc/resolv.conf
names that responder and whose /etc/hosts lacks NAME, so nothing of this machine's resolver
takes part. Loopback only: every request, forwarded ones included, stays on 127.0.0.x.

Needs root (jail boxes, mount namespaces). Every case skips (exit 77, reasons printed) without
root, the codebox binary, the `python` image, or a codebox built with scale-out (serve's
--peers-dns); under CODEBOX_TESTS_REQUIRE_BOX=1 (CI) a box that cannot start is a failure.

Every wait has a deadline; replicas end with SIGTERM, then SIGKILL after a bound, and a failed
test carries the tail of every replica's log (stdout and stderr) in its report.

Run: /usr/bin/python3 -m pytest -q tests/cluster   (as root; ctest runs each file with
CODEBOX_BIN and PYTHONPATH set for its build).
"""
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
sys.path.insert(0, str(HERE.parent / "common"))  # ctest_skip.py
if "PYTHONPATH" not in os.environ:  # a manual run: the package and the release build's module
    for path in (REPO / "build" / "release" / "python", REPO / "python"):
        sys.path.insert(0, str(path))

from ctest_skip import pytest_runtest_logreport, pytest_sessionfinish  # noqa: E402,F401
from ctest_skip import require  # noqa: E402,F401
import dns_responder  # noqa: E402
import replicas  # noqa: E402
from replicas import ADDRESSES, DNS_ADDRESS, DNS_NAME, replica_env  # noqa: E402

SYSTEM_STORE = "/var/lib/codebox"


def codebox_bin_path():
    given = os.environ.get("CODEBOX_BIN")
    path = Path(given) if given else REPO / "build" / "release" / "bin" / "codebox"
    return str(path) if path.is_file() else None


def _serve_has_scale_out(binary):
    r = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True, timeout=30,
                       stdin=subprocess.DEVNULL)
    return "--peers-dns" in r.stdout + r.stderr


@pytest.fixture(scope="session")
def codebox_bin():
    if os.geteuid() != 0:
        pytest.skip("needs root (jail boxes, mount namespaces for the DNS peers)")
    path = codebox_bin_path()
    require(path is None and "the codebox CLI is not built (ninja -C build/release codebox, "
                             "or set CODEBOX_BIN)")
    if not _serve_has_scale_out(path):
        pytest.skip(f"{path} has no scale-out (`codebox serve --help` lacks --peers-dns)")
    link = os.path.join(SYSTEM_STORE, "images", "by-name", "python")
    require(not os.path.exists(link) and
            f"the python recipe image is not built in {SYSTEM_STORE} (codebox image build python)")
    r = subprocess.run([path, "exec", "--local", "--driver", "jail", "--", "true"],
                       capture_output=True, text=True, timeout=120, env=replica_env(),
                       stdin=subprocess.DEVNULL)
    require(r.returncode != 0 and f"a jail box does not start here: {r.stderr.strip()}")
    return path


@pytest.fixture(scope="session")
def dns_possible(codebox_bin):
    """Skips unless the mount namespace trick and the responder work here: `getent ahostsv4`
    inside the namespace must give the three addresses."""
    if shutil.which("unshare") is None or shutil.which("getent") is None:
        pytest.skip("needs unshare and getent (util-linux, libc-bin)")
    work = tempfile.mkdtemp(prefix="codebox-cluster-dns.", dir="/var/tmp")
    resolv, hosts = os.path.join(work, "resolv.conf"), os.path.join(work, "hosts")
    Path(resolv).write_text(f"nameserver {DNS_ADDRESS}\noptions timeout:1 attempts:2\n")
    Path(hosts).write_text("127.0.0.1 localhost\n")
    try:
        responder = dns_responder.Responder(DNS_ADDRESS, 53, DNS_NAME, list(ADDRESSES.values()))
    except OSError as e:
        shutil.rmtree(work, ignore_errors=True)
        pytest.skip(f"cannot serve DNS on {DNS_ADDRESS}:53: {e}")
    try:
        script = ('mount --bind "$1" /etc/resolv.conf && mount --bind "$2" /etc/hosts && '
                  f'getent ahostsv4 {DNS_NAME}')
        r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            script, "sh", resolv, hosts], capture_output=True, text=True,
                           timeout=30)
    finally:
        responder.close()
        shutil.rmtree(work, ignore_errors=True)
    got = {line.split()[0] for line in r.stdout.splitlines() if line.strip()}
    if r.returncode != 0 or got != set(ADDRESSES.values()):
        pytest.skip(f"getent in a private mount namespace does not resolve {DNS_NAME} through "
                    f"the test's responder (exit {r.returncode}, {got}, {r.stderr.strip()})")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for cluster in list(replicas.LIVE_CLUSTERS):
            for node, r in cluster.replicas.items():
                report.sections.append((f"codebox serve {node} log ({r.log_path})",
                                        r.log_tail()))


