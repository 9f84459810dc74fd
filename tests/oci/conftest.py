"""OCI images end to end (issue 15): images the tests build themselves as OCI layouts
(ocilayout.py), pushed with skopeo to registries on 127.0.0.1 (registry.py: Debian's
docker-registry, plain and TLS; hostile_registry.py: one that lies), then pulled, imported and
run by the codebox CLI and the Python module. Loopback only: nothing here leaves the host
(a vm box fetches its guest kernel with apt once, if the machine's store has none).

Every codebox process gets a temp CODEBOX_HOME of its test module (or test), so the machine's
image store is never touched. Pull and import need root; the tests skip (exit 77, reasons
printed) without root, skopeo, docker-registry or openssl, which scripts/test installs.
Under CODEBOX_TESTS_REQUIRE_BOX=1 (CI) a box that does not start is a failure, not a skip.

Run: /usr/bin/python3 -m pytest -q tests/oci   (as root; ctest runs each file with
CODEBOX_BIN and PYTHONPATH set for its build).
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

import ocilayout  # noqa: E402
import pki  # noqa: E402
from ctest_skip import pytest_runtest_logreport, pytest_sessionfinish  # noqa: E402,F401
from ctest_skip import require  # noqa: E402,F401
import registry  # noqa: E402


# The recipe image whose tree is pyapp's first layer (`codebox image build python`).
SYSTEM_STORE = "/var/lib/codebox"


def _prerequisites():
    """What this host lacks for these tests (a plain skip, also in CI: scripts/test installs
    the packages), or None."""
    if os.geteuid() != 0:
        return "needs root (codebox image pull/import and jail boxes)"
    return registry.why_not_possible()


@pytest.fixture(scope="session")
def prerequisites():
    problem = _prerequisites()
    if problem:
        pytest.skip(problem)


def _codebox_bin():
    given = os.environ.get("CODEBOX_BIN")
    path = Path(given) if given else REPO / "build" / "release" / "bin" / "codebox"
    return str(path) if path.is_file() else None


@pytest.fixture(scope="session")
def codebox_bin(prerequisites):
    path = _codebox_bin()
    require(path is None and "the codebox CLI is not built (ninja -C build/release codebox, "
                             "or set CODEBOX_BIN)")
    return path


class Codebox:
    """The codebox CLI with one CODEBOX_HOME, nothing of a codebox server or of this host's CA
    settings in its environment unless given (`env`)."""

    def __init__(self, binary, home):
        self.binary = binary
        self.home = home

    def __call__(self, *args, env=None, timeout=300):
        e = {k: v for k, v in os.environ.items()
             if k not in ("CODEBOX_SERVER", "CODEBOX_TOKEN", "SSL_CERT_FILE", "SSL_CERT_DIR")}
        e["CODEBOX_HOME"] = self.home
        e.update(env or {})
        return subprocess.run([self.binary, *args], capture_output=True, text=True,
                              timeout=timeout, env=e, stdin=subprocess.DEVNULL)

    @property
    def images(self):
        return os.path.join(self.home, "images")

    def store_entries(self):
        """Every name in images/ and images/by-ref (the store's image dirs, temp dirs and
        reference pointers)."""
        found = []
        for d in (self.images, os.path.join(self.images, "by-ref")):
            if os.path.isdir(d):
                found += [os.path.relpath(os.path.join(d, n), self.images) for n in os.listdir(d)]
        return sorted(found)

    def assert_nothing_stored(self):
        """No image dir, no .tmp-* left over and no reference pointer: what a failed pull or
        import must leave."""
        left = [n for n in self.store_entries() if n not in ("by-ref", "by-name", ".lock")]
        assert left == [], f"the failed pull/import left {left} in {self.images}"


def new_home(prefix="codebox-oci-test.", mode=0o755):
    """An empty CODEBOX_HOME, mode 0755 as `mkdir` makes it (mkdtemp's 0700 is a case of its
    own: see test_import.py)."""
    home = tempfile.mkdtemp(prefix=prefix, dir="/var/tmp")
    os.chmod(home, mode)
    return home


@pytest.fixture(scope="module")
def codebox(codebox_bin):
    """The CLI with a CODEBOX_HOME of this test module's own."""
    home = new_home()
    yield Codebox(codebox_bin, home)
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def fresh_codebox(codebox_bin):
    """The CLI with a CODEBOX_HOME of this test's own (empty)."""
    home = new_home()
    yield Codebox(codebox_bin, home)
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def work(prerequisites):
    d = tempfile.mkdtemp(prefix="codebox-oci-work.", dir="/var/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


# Images ------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def bb_layout(work):
    """The busybox-only image as an OCI layout, tagged 1: (path, write_image's result)."""
    path = os.path.join(work, "bb")
    return path, ocilayout.write_image(path, [ocilayout.busybox_layer()], ocilayout.BB_CONFIG,
                                       tag="1")


def python_recipe_rootfs():
    """The python recipe image's tree in the system store, or None."""
    link = os.path.join(SYSTEM_STORE, "images", "by-name", "python")
    if not os.path.islink(link) and not os.path.isdir(link):
        return None
    rootfs = os.path.join(os.path.realpath(link), "rootfs")
    return rootfs if os.path.isfile(os.path.join(rootfs, "usr", "bin", "python3")) else None


@pytest.fixture(scope="session")
def pyapp_layout(work):
    """pyapp: the python recipe's tree (one gzip -1 layer, tarred once per session) and a layer
    with user app (1000:1000), its home and an empty /home/app/work; User app, WorkingDir
    /home/app/work, Env PATH and GREETING. (path, write_image's result)."""
    rootfs = python_recipe_rootfs()
    require(rootfs is None and f"the python recipe image is not built in {SYSTEM_STORE} "
                               "(run: codebox image build python)")
    path = os.path.join(work, "pyapp")
    layers = [lambda tar: ocilayout.add_tree(tar, rootfs), ocilayout.app_user_layer(rootfs)]
    return path, ocilayout.write_image(path, layers, ocilayout.PYAPP_CONFIG, tag="1",
                                       compresslevel=1)


# Registries --------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def tls_pki(work):
    return pki.make(os.path.join(work, "pki"), ["127.0.0.1"], "codebox OCI test CA")  # (ca.pem, server.pem, server.key)


@pytest.fixture(scope="session")
def plain_registry(work):
    """docker-registry on 127.0.0.1, plain HTTP (pulled with --insecure)."""
    r = registry.Registry(work, "plain-registry")
    yield r
    r.close()


@pytest.fixture(scope="session")
def tls_registry(work, tls_pki):
    """docker-registry on 127.0.0.1 with TLS, its certificate (for IP 127.0.0.1) signed by the
    test CA: pulled without --insecure, with SSL_CERT_FILE naming the CA."""
    ca, cert, key = tls_pki
    r = registry.Registry(work, "tls-registry", cert=cert, key=key, ca=ca)
    yield r
    r.close()


@pytest.fixture(scope="session")
def ca_env(tls_pki):
    """The environment that makes a codebox process (and its skopeo) trust the test CA."""
    return {"SSL_CERT_FILE": tls_pki[0]}


# Boxes -------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def jail_works(codebox_bin):
    """Skips (fails in CI) unless a jail box of the python recipe image starts here: after
    this, a box that does not start in a test is that test's failure."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("CODEBOX_SERVER", "CODEBOX_TOKEN", "CODEBOX_HOME")}
    r = subprocess.run([codebox_bin, "exec", "--local", "--driver", "jail", "--", "true"],
                       capture_output=True, text=True, timeout=120, env=env,
                       stdin=subprocess.DEVNULL)
    require(r.returncode != 0 and f"a jail box does not start here: {r.stderr.strip()}")


def seed_vm_kernel(home):
    """Points `home`'s guest kernel at the system store's, when it has one (so a vm box in a
    temp CODEBOX_HOME does not fetch the kernel again); else the box fetches it itself."""
    system = os.path.join(SYSTEM_STORE, "kernels")
    try:
        release = open(os.path.join(system, "default")).read().strip()
    except OSError:
        return False
    if not release or not os.path.isdir(os.path.join(system, release)):
        return False
    kernels = os.path.join(home, "kernels")
    os.makedirs(kernels, exist_ok=True)
    if not os.path.exists(os.path.join(kernels, release)):
        os.symlink(os.path.join(system, release), os.path.join(kernels, release))
    with open(os.path.join(kernels, "default"), "w") as f:
        f.write(release + "\n")
    return True


def result_of(r):
    """The --json result of a CLI run, with its stderr on failure to parse."""
    try:
        return json.loads(r.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"no JSON result (exit {r.returncode}): stdout {r.stdout!r}, "
                             f"stderr {r.stderr!r}")
