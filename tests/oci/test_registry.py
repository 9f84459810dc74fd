"""Pulling from a registry and running what was pulled, under the jail driver: the two images
the tests build (pyapp: the python recipe's tree plus a user app and its config; bb: busybox
and no libc), pushed to docker-registry on 127.0.0.1, plain HTTP (pulled with --insecure) and
TLS with the test CA (pulled on first use, with SSL_CERT_FILE, by the CLI and the Python
module)."""
import asyncio
import hashlib
import os
import subprocess
import time

import pytest

import registry
from conftest import result_of

JAIL = ["--driver", "jail", "--timeout", "60"]
PYAPP_PROBE = "import os; print(os.getuid(), os.getcwd(), os.environ['GREETING'])"


def _push(registries, layout, name):
    for r in registries:
        registry.push(layout[0], "1", r, name)
    return layout[1]["manifest_digest"]


@pytest.fixture(scope="module")
def bb_pushed(plain_registry, tls_registry, bb_layout, jail_works):
    """bb in both registries, tagged 1; its manifest digest."""
    return _push((plain_registry, tls_registry), bb_layout, "bb")


@pytest.fixture(scope="module")
def pyapp_pushed(plain_registry, tls_registry, pyapp_layout, jail_works):
    """pyapp in both registries, tagged 1; its manifest digest."""
    return _push((plain_registry, tls_registry), pyapp_layout, "pyapp")


@pytest.fixture(scope="module")
def plain(plain_registry):
    return plain_registry.addr


def _pulled(codebox, ref):
    r = codebox("image", "pull", "--insecure", ref)
    assert r.returncode == 0, r.stderr
    return codebox


@pytest.fixture(scope="module")
def bb_pulled(codebox, plain, bb_pushed):
    """The module's CLI, bb pulled by tag from the plain registry."""
    return _pulled(codebox, f"{plain}/bb:1")


@pytest.fixture(scope="module")
def pyapp_pulled(codebox, plain, pyapp_pushed):
    """The module's CLI, pyapp pulled by tag from the plain registry."""
    return _pulled(codebox, f"{plain}/pyapp:1")


# Pulls -------------------------------------------------------------------------------------

def test_pull_by_tag_stores_the_image_and_ls_shows_it(codebox, plain, pyapp_pushed):
    r = codebox("image", "pull", "--insecure", f"{plain}/pyapp:1")
    assert r.returncode == 0, r.stderr
    said = r.stdout + r.stderr  # `image pull` tells its progress on stdout
    assert f"pulling {plain}/pyapp:1" in said and "ready" in said, said
    ls = codebox("image", "ls")
    assert ls.returncode == 0, ls.stderr
    rows = [line for line in ls.stdout.splitlines() if line.startswith(f"{plain}/pyapp:1 ")]
    assert len(rows) == 1, ls.stdout
    assert f"oci {pyapp_pushed[:19]}" in rows[0], rows[0]


def test_pull_of_a_tag_the_store_has_fetches_no_blob(codebox, plain_registry, pyapp_pushed):
    ref = f"{plain_registry.addr}/pyapp:1"
    assert codebox("image", "pull", "--insecure", ref).returncode == 0
    start = len(_marker(plain_registry, "tag-1"))
    r = codebox("image", "pull", "--insecure", ref)
    assert r.returncode == 0, r.stderr
    assert "up to date" in r.stdout, r.stdout
    between = _marker(plain_registry, "tag-2")[start:]
    assert "/manifests/1" in between, between  # a tag is resolved with the registry...
    assert "/blobs/" not in between, between   # ...and nothing is fetched


def test_the_registry_digest_is_the_layout_manifest_digest(plain_registry, pyapp_pushed):
    header = plain_registry.manifest_digest("pyapp", "1")
    raw = subprocess.run(["skopeo", "inspect", "--raw", "--tls-verify=false",
                          f"docker://{plain_registry.addr}/pyapp:1"],
                         capture_output=True, check=True, timeout=60).stdout
    assert header == "sha256:" + hashlib.sha256(raw).hexdigest() == pyapp_pushed


def _marker(reg, n):
    """A request of our own, then a wait until the registry has logged it: every request
    before it is in the log then. Returns the log up to the marker."""
    agent = f"codebox-test-marker-{n}"
    reg.request("GET", "/v2/", {"User-Agent": agent})
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        log = reg.log()
        if agent in log:
            return log[:log.index(agent)]
        time.sleep(0.05)
    raise AssertionError(f"the registry did not log request {agent}")


def _skopeo_requests(log):
    return sum(1 for line in log.splitlines() if line.startswith("127.0.0.1 - ") and
               '"skopeo/' in line)


def test_pull_by_digest_then_again_up_to_date_without_the_registry(fresh_codebox,
                                                                  plain_registry, bb_pushed):
    cb = fresh_codebox
    digest = plain_registry.manifest_digest("bb", "1")
    ref = f"{plain_registry.addr}/bb@{digest}"
    before = _skopeo_requests(_marker(plain_registry, 1))
    r = cb("image", "pull", "--insecure", ref)
    assert r.returncode == 0, r.stderr
    assert "ready" in r.stdout, r.stdout
    fetched = _skopeo_requests(_marker(plain_registry, 2))
    assert fetched > before, "the first pull by digest did not ask the registry?"
    assert os.path.islink(os.path.join(cb.images, "by-ref",
                                       ref.replace("/", "%"))), cb.store_entries()

    r = cb("image", "pull", "--insecure", ref)
    assert r.returncode == 0, r.stderr
    said = r.stdout + r.stderr
    assert "up to date" in said, said
    assert "resolving" not in said and "skopeo" not in said, said
    after = _skopeo_requests(_marker(plain_registry, 3))
    assert after == fetched, f"the second pull of {ref} made {after - fetched} requests"


def test_pull_without_insecure_from_a_plain_registry_says_so(fresh_codebox, plain, bb_pushed):
    r = fresh_codebox("image", "pull", f"{plain}/bb:1")
    assert r.returncode != 0
    assert "--insecure" in r.stderr, r.stderr
    fresh_codebox.assert_nothing_stored()


def test_pull_from_tls_registry_without_its_ca_says_so(fresh_codebox, tls_registry, bb_pushed):
    r = fresh_codebox("image", "pull", f"{tls_registry.addr}/bb:1")
    assert r.returncode != 0
    assert "SSL_CERT_FILE" in r.stderr and "certificate" in r.stderr, r.stderr
    fresh_codebox.assert_nothing_stored()


def test_pull_from_tls_registry_with_its_ca(fresh_codebox, tls_registry, ca_env, bb_pushed):
    r = fresh_codebox("image", "pull", f"{tls_registry.addr}/bb:1", env=ca_env)
    assert r.returncode == 0, r.stderr
    assert "ready" in r.stdout, r.stdout


# Running pyapp: the image config's User, WorkingDir and Env ------------------------------

def test_pyapp_runs_as_its_user_in_its_workdir_with_its_env(pyapp_pulled, plain):
    r = pyapp_pulled("run", *JAIL, "--image", f"{plain}/pyapp:1", PYAPP_PROBE)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "1000 /home/app/work hello-from-oci\n", r.stdout


def test_pyapp_exec_id_is_the_image_user(pyapp_pulled, plain):
    r = pyapp_pulled("exec", *JAIL, "--image", f"{plain}/pyapp:1", "--", "id", "-u")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "1000\n", r.stdout


def test_the_image_user_cannot_become_root_or_stop_the_agent(pyapp_pulled, plain):
    # From inside a real box, as the image's user: every way back to root is refused, and the
    # agent (PID 1, which U may signal through its saved id) ignores what it is sent.
    code = ("import os, signal\n"
            "for name, call in (('setuid', lambda: os.setuid(0)),\n"
            "                   ('setresuid', lambda: os.setresuid(0, 0, 0)),\n"
            "                   ('setgid', lambda: os.setgid(0))):\n"
            "    try:\n"
            "        call(); print(name, 'became root')\n"
            "    except PermissionError:\n"
            "        print(name, 'refused')\n"
            "for sig in (signal.SIGKILL, signal.SIGSTOP, signal.SIGTERM):\n"
            "    try:\n"
            "        os.kill(1, sig)\n"
            "    except PermissionError:\n"
            "        pass\n"
            "print(os.getresuid(), os.getresgid())\n")
    r = pyapp_pulled("run", *JAIL, "--image", f"{plain}/pyapp:1", code)
    # The agent lived through the signals: the whole run's result came back.
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    lines = r.stdout.splitlines()
    assert lines[:3] == ["setuid refused", "setresuid refused", "setgid refused"], r.stdout
    assert lines[3] == "(1000, 1000, 1000) (1000, 1000, 1000)", r.stdout


def test_pyapp_can_write_in_its_workdir(pyapp_pulled, plain):
    code = ("import os\n"
            "open('made-here.txt', 'w').write('written')\n"
            "print(os.getcwd(), open(os.path.join(os.getcwd(), 'made-here.txt')).read())\n")
    r = pyapp_pulled("run", *JAIL, "--image", f"{plain}/pyapp:1", code)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "/home/app/work written\n", r.stdout


def test_pyapp_path_is_the_image_path_and_finds_python(pyapp_pulled, plain):
    r = pyapp_pulled("exec", *JAIL, "--json", "--image", f"{plain}/pyapp:1", "--", "sh", "-c",
               'echo "$PATH"; command -v python3; python3 -c "print(6*7)"')
    result = result_of(r)
    assert result["exit_code"] == 0, result
    path, python, answer = result["result"]["stdout"].splitlines()
    assert (python, answer) == ("/usr/bin/python3", "42"), result
    assert path == "/usr/local/bin:/usr/bin:/bin", result


def test_pyapp_by_digest_is_the_same_image(pyapp_pulled, plain, pyapp_pushed):
    # The pull by tag pointed the digest at the image too: nothing to fetch.
    r = pyapp_pulled("image", "pull", "--insecure", f"{plain}/pyapp@{pyapp_pushed}")
    assert r.returncode == 0, r.stderr
    assert "up to date" in r.stdout and "skopeo" not in r.stdout, r.stdout
    r = pyapp_pulled("exec", *JAIL, "--image", f"{plain}/pyapp@{pyapp_pushed}", "--", "sh", "-c",
               "test -x /usr/bin/python3 && grep -c ^app: /etc/passwd")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "1\n", r.stdout


# Running bb: busybox, no libc ------------------------------------------------------------

def test_bb_exec_runs_busybox(bb_pulled, plain):
    r = bb_pulled("exec", *JAIL, "--image", f"{plain}/bb:1", "--", "sh", "-c", "echo hi; id -u")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "hi\n0\n", r.stdout
    assert not os.path.exists(os.path.join(_rootfs_of(bb_pulled, "bb"), "lib")), \
        "bb should have no libc at all"


def test_bb_path_is_the_image_path(bb_pulled, plain):
    r = bb_pulled("exec", *JAIL, "--image", f"{plain}/bb:1", "--", "sh", "-c", 'echo "$PATH"')
    assert r.returncode == 0, r.stderr
    assert r.stdout == "/bin\n", r.stdout


def test_bb_run_python_fails_saying_python3_is_not_there(bb_pulled, plain):
    r = bb_pulled("run", *JAIL, "--image", f"{plain}/bb:1", "print(1)")
    assert r.returncode == 127, (r.returncode, r.stderr)
    assert r.stdout == ""
    assert "exec python3: No such file or directory" in r.stderr, r.stderr
    # and codebox's hint (src/cli/run_command.cc): what is missing and what to use instead
    assert f"image {plain}/bb:1 has no python3 on its PATH" in r.stderr, r.stderr
    assert "codebox exec --image" in r.stderr, r.stderr


def _rootfs_of(cb, name):
    for entry in os.listdir(os.path.join(cb.images, "by-ref")):
        if entry.endswith(f"%{name}:1"):
            return os.path.join(cb.images, "by-ref", entry, "rootfs")
    raise AssertionError(f"no {name}:1 in {cb.store_entries()}")


# Pull on first use, TLS ------------------------------------------------------------------

def test_cli_exec_pulls_on_first_use_with_progress(fresh_codebox, tls_registry, ca_env,
                                                   bb_pushed):
    ref = f"{tls_registry.addr}/bb:1"
    r = fresh_codebox("exec", *JAIL, "--image", ref, "--", "sh", "-c", "echo first use",
                      env=ca_env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "first use\n"
    assert "pulling it (first use)" in r.stderr, r.stderr
    assert f"image pull: pulling {ref}" in r.stderr and "ready" in r.stderr, r.stderr
    ls = fresh_codebox("image", "ls")
    assert any(line.startswith(ref + " ") for line in ls.stdout.splitlines()), ls.stdout
    # Second use: no pull.
    r = fresh_codebox("exec", *JAIL, "--image", ref, "--", "echo", "again", env=ca_env)
    assert r.returncode == 0 and r.stdout == "again\n", r.stderr
    assert "pull" not in r.stderr, r.stderr


def test_cli_run_pulls_pyapp_on_first_use(fresh_codebox, tls_registry, ca_env, pyapp_pushed):
    ref = f"{tls_registry.addr}/pyapp:1"
    r = fresh_codebox("run", *JAIL, "--image", ref, "print('ran', 6 * 7)", env=ca_env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ran 42\n", r.stdout
    assert "pulling it (first use)" in r.stderr and "image pull: " in r.stderr, r.stderr


def test_first_use_without_the_ca_fails_clearly(fresh_codebox, tls_registry, bb_pushed):
    ref = f"{tls_registry.addr}/bb:1"
    r = fresh_codebox("exec", *JAIL, "--image", ref, "--", "echo", "no")
    assert r.returncode != 0
    assert r.stdout == ""
    assert "pulling it failed" in r.stderr and "SSL_CERT_FILE" in r.stderr, r.stderr
    fresh_codebox.assert_nothing_stored()


@pytest.fixture
def ca_in_environ(ca_env, monkeypatch):
    """SSL_CERT_FILE in this process's environment: the Python module's boxes (and the skopeo
    a first use runs) are made here."""
    for k, v in ca_env.items():
        monkeypatch.setenv(k, v)


def test_python_module_pulls_on_first_use(fresh_codebox, tls_registry, ca_in_environ,
                                          bb_pushed, capfd):
    import codebox
    ref = f"{tls_registry.addr}/bb:1"

    async def main():
        async with codebox.CodeBox(image=ref, home=fresh_codebox.home, driver="jail",
                                   local=True) as box:
            return await box.exec("sh", "-c", "echo from python; id -u")

    r = asyncio.run(asyncio.wait_for(main(), 300))
    assert (r.exit_code, r.stdout) == (0, "from python\n0\n"), r
    err = capfd.readouterr().err
    assert "pulling it (first use)" in err and f"image pull: pulling {ref}" in err, err
    assert any(line.startswith(ref + " ") for line in
               fresh_codebox("image", "ls").stdout.splitlines())


def test_python_module_runs_pyapp_pulled_on_first_use(fresh_codebox, tls_registry,
                                                      ca_in_environ, pyapp_pushed):
    import codebox
    with codebox.SyncCodeBox(image=f"{tls_registry.addr}/pyapp:1", home=fresh_codebox.home,
                             driver="jail", local=True) as box:
        assert box.run("print(6 * 7)") == "42\n"
        r = box.exec("python3", "-c", PYAPP_PROBE)
        assert (r.exit_code, r.stdout) == (0, "1000 /home/app/work hello-from-oci\n"), r
