"""A registry that wants a login (docker-registry with an htpasswd file, over TLS with the
test CA): `codebox image pull --creds USER:PASSWORD`, a registry auth file (`--authfile`, and
$REGISTRY_AUTH_FILE as podman and skopeo read it), and a pull without credentials that says
how to log in. The password never appears in the arguments of a process."""
import base64
import json
import os
import warnings

import pytest

import registry

USER, PASSWORD = "tester", "s3cret-pw"

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import crypt  # bcrypt through libxcrypt: the one hash docker-registry's htpasswd takes


@pytest.fixture(scope="module")
def auth_registry(work, tls_pki, bb_layout):
    htpasswd = os.path.join(work, "htpasswd")
    with open(htpasswd, "w") as f:
        f.write(f"{USER}:{crypt.crypt(PASSWORD, crypt.mksalt(crypt.METHOD_BLOWFISH))}\n")
    ca, cert, key = tls_pki
    r = registry.Registry(work, "auth-registry", cert=cert, key=key, ca=ca, htpasswd=htpasswd)
    registry.push(bb_layout[0], "1", r, "private/bb", creds=f"{USER}:{PASSWORD}")
    yield r
    r.close()


def test_pull_without_credentials_says_how_to_log_in(fresh_codebox, auth_registry, ca_env):
    r = fresh_codebox("image", "pull", f"{auth_registry.addr}/private/bb:1", env=ca_env)
    assert r.returncode != 0
    assert "--creds" in r.stderr, r.stderr
    fresh_codebox.assert_nothing_stored()


def test_pull_with_creds(fresh_codebox, auth_registry, ca_env):
    ref = f"{auth_registry.addr}/private/bb:1"
    r = fresh_codebox("image", "pull", "--creds", f"{USER}:{PASSWORD}", ref, env=ca_env)
    assert r.returncode == 0, r.stderr
    run = fresh_codebox("exec", "--driver", "jail", "--image", ref, "--", "echo", "logged in")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "logged in\n"


def test_pull_with_wrong_creds_fails(fresh_codebox, auth_registry, ca_env):
    r = fresh_codebox("image", "pull", "--creds", f"{USER}:wrong",
                      f"{auth_registry.addr}/private/bb:1", env=ca_env)
    assert r.returncode != 0
    assert "unauthorized" in r.stderr or "authentication" in r.stderr, r.stderr
    fresh_codebox.assert_nothing_stored()


def _auth_file(path, addr):
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    with open(path, "w") as f:
        json.dump({"auths": {addr: {"auth": token}}}, f)
    os.chmod(path, 0o600)
    return path


def test_pull_with_an_auth_file(fresh_codebox, auth_registry, ca_env, tmp_path):
    path = _auth_file(str(tmp_path / "auth.json"), auth_registry.addr)
    ref = f"{auth_registry.addr}/private/bb:1"
    r = fresh_codebox("image", "pull", "--authfile", path, ref, env=ca_env)
    assert r.returncode == 0, r.stderr


def test_pull_with_registry_auth_file_from_the_environment(fresh_codebox, auth_registry,
                                                           ca_env, tmp_path):
    path = _auth_file(str(tmp_path / "auth.json"), auth_registry.addr)
    ref = f"{auth_registry.addr}/private/bb:1"
    r = fresh_codebox("image", "pull", ref, env=dict(ca_env, REGISTRY_AUTH_FILE=path))
    assert r.returncode == 0, r.stderr


def test_the_password_is_never_an_argument(fresh_codebox, auth_registry, ca_env, tmp_path):
    # skopeo behind a wrapper that records its arguments (CODEBOX_SKOPEO picks the program).
    record = tmp_path / "argv"
    wrapper = tmp_path / "skopeo"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {record}\nexec skopeo "$@"\n')
    wrapper.chmod(0o755)
    r = fresh_codebox("image", "pull", "--creds", f"{USER}:{PASSWORD}",
                      f"{auth_registry.addr}/private/bb:1",
                      env=dict(ca_env, CODEBOX_SKOPEO=str(wrapper)))
    assert r.returncode == 0, r.stderr
    argv = record.read_text()
    assert "--authfile" in argv and "--src-authfile" in argv, argv
    assert PASSWORD not in argv, argv
