"""Box and exec options: every one settable by keyword and alias, checked at construction
against the C++ schema, with errors that name the option; and real boxes that get them."""

from __future__ import annotations

import inspect
import math
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

import codebox
from codebox._values import _core
from conftest import box_unavailable_reason

pytestmark = pytest.mark.usefixtures("need_core")


def _schema() -> list[dict[str, Any]]:
    return list(_core().box_option_schema())


STRING_SAMPLES = {"image": "img-1", "workdir": "/w", "home": "/tmp/codebox-home", "cwd": "sub",
                  "server": "unix:/run/x.sock", "server_token": "secret-3", "user": "user"}


def sample(option: dict[str, Any]) -> Any:
    """A valid value, not the default, in the option's unit; a new option needs one here."""
    kind = option["type"]
    if kind == "bool":
        return not option["default"]
    if kind in ("integer", "size"):
        return int(option["min"]) * 2 + 1
    if kind in ("number", "duration"):
        return 2.5
    if kind == "choice":
        return option["choices"][-1]
    if kind == "environment":
        return {"A": "1", "B": "x y"}
    if kind == "list" and option["name"] == "secrets":
        return ["KEY=v@lue@api.example.org"]
    if kind == "list":
        return ["example.org", "*.example.net:8443"]
    assert option["name"] in STRING_SAMPLES, f"add a sample for option {option['name']}"
    return STRING_SAMPLES[option["name"]]


def test_every_option_is_settable_by_keyword_and_each_alias() -> None:
    for option in _schema():
        name, value = option["name"], sample(option)
        assert value != option["default"], name
        shown = "<set>" if name == "server_token" else value  # a secret is never shown
        assert codebox.SyncCodeBox(**{name: value}).options[name] == shown, name
        assert codebox.CodeBox(**{name: value}).options[name] == shown, name
        for alias, scale, _unit in option["aliases"]:
            given = value / scale if scale != 1 else value
            assert codebox.SyncCodeBox(**{alias: given}).options[name] == shown, alias


def test_the_server_token_never_shows_in_options_or_reprs() -> None:
    box = codebox.SyncCodeBox(server="unix:/run/x.sock", token="hunter2-secret")
    assert "hunter2-secret" not in repr(box.options)
    assert "hunter2-secret" not in repr(box)


def test_none_is_the_default_and_for_timeouts_no_limit() -> None:
    defaults = codebox.SyncCodeBox().options
    for option in _schema():
        name = option["name"]
        resolved = codebox.SyncCodeBox(**{name: None}).options[name]
        if option["allows_none"]:
            assert resolved is None, name  # CodeBox(timeout=None): no limit, as before
        else:
            assert resolved == option["default"] == defaults[name], name
    assert defaults["memory_mib"] == 512 and defaults["exec_timeout"] == 30.0


def test_boxlite_spellings() -> None:
    o = codebox.CodeBox(
        working_dir="/srv", disk_size_gb=2, memory_mib=None, cpus=None, env=[("K", "V"), ("L", "W")]
    ).options
    assert o["workdir"] == "/srv" and o["disk_mib"] == 2048
    assert o["memory_mib"] == 512 and o["cpus"] == 1.0
    assert o["env"] == {"K": "V", "L": "W"}
    assert codebox.CodeBox(disk_size_gb=0.5).options["disk_mib"] == 512
    assert codebox.CodeBox(env={"K": "V"}).options["env"] == {"K": "V"}
    assert codebox.CodeBox(home=Path("/tmp/h")).options["home"] == "/tmp/h"
    # The historical positional order still works.
    o = codebox.SyncCodeBox("python-data", "jail", 256, 2.0, 5).options
    assert (o["image"], o["driver"], o["memory_mib"], o["cpus"], o["exec_timeout"]) == (
        "python-data", "jail", 256, 2.0, 5.0)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"memroy_mib": 512}, TypeError,
         "unknown option 'memroy_mib'; did you mean 'memory_mib'?"),
        ({"max_open_file": 64}, TypeError, "did you mean 'max_open_files'?"),
        ({"wrking_dir": "/x"}, TypeError, "did you mean 'working_dir'?"),
        ({"colour": "red"}, TypeError, "unknown option 'colour'; valid: image, driver"),
        ({"memory_mib": "512"}, TypeError, "memory_mib: must be a number of MiB, got str '512'"),
        ({"env": {"A": 1}}, TypeError, "env[A]: must be a str, got int 1"),
        ({"env": "A=1"}, TypeError, "env: must be a mapping"),
        ({"prestart": 1}, TypeError, "prestart: must be true or false, got int 1"),
        ({"image": b"python"}, TypeError, "image: must be a string, got bytes"),
        ({"timeout": 1, "exec_timeout": 2}, TypeError,
         "given twice, as 'timeout' and as 'exec_timeout'"),
        ({"memory_mib": 1}, ValueError, "memory_mib: must be at least 32 MiB, got 1 MiB"),
        ({"memory": 10**30}, ValueError, "memory: must be at most 1048576 MiB"),
        ({"memory_mib": 100.5}, ValueError, "memory_mib: must be a whole number of MiB, got 100.5"),
        ({"pids": 0}, ValueError, "pids: must be at least 1, got 0"),
        ({"max_open_files": 8}, ValueError, "max_open_files: must be at least 16, got 8"),
        ({"cpus": 0}, ValueError, "cpus: must be more than 0"),
        ({"driver": "docker"}, ValueError,
         "driver: unknown driver 'docker' (choose auto, jail or vm)"),
        ({"workdir": "work"}, ValueError, "workdir: must be an absolute path"),
        ({"image": "../etc"}, ValueError, "image: image name '../etc' is neither a recipe's name"),
        ({"timeout": 0}, ValueError, "timeout: must be at least 1 ms (at least 0.001 s), got 0 s"),
        ({"box_timeout": -1}, ValueError, "box_timeout: must be at least 1 ms (at least 0.001 s)"),
        ({"disk_size_gb": 4096}, ValueError, "disk_size_gb: must be at most 1048576 MiB"),
        ({"allow_hosts": "pypi.org"}, TypeError,
         "allow_hosts: must be a list of strings, got str 'pypi.org'"),
        ({"allow_hosts": ["pypi.org", 3]}, TypeError, "allow_hosts entry: must be a str, got int 3"),
        ({"allow_hosts": ["pypi.org", "-bad-"]}, ValueError,
         "allow_hosts: allowlist entry '-bad-'"),
        ({"network": "wide"}, ValueError, "network: network 'wide' is not one of none"),
        ({"network": "open", "allow_hosts": ["pypi.org"]}, ValueError,
         "allow_hosts: given with network open"),
        ({"network_max_bytes": 0}, ValueError, "network_max_bytes: must be at least 1 bytes"),
    ],
)
def test_bad_options_fail_at_construction_naming_the_option(
    kwargs: dict[str, Any], error: type, message: str
) -> None:
    for cls in (codebox.CodeBox, codebox.SyncCodeBox):
        with pytest.raises(error) as info:
            cls(**kwargs)
        assert message in str(info.value)


def test_network_keywords() -> None:
    o = codebox.CodeBox(allow_hosts=("pypi.org", "*.example.org:8443"), network_max_bytes=1 << 20).options
    assert o["allow_hosts"] == ["pypi.org", "*.example.org:8443"]
    assert o["network"] == "none"  # allow_hosts alone: the box gets allow (EffectiveNetwork)
    assert o["network_max_bytes"] == 1 << 20 and o["network_rate_bytes"] == 0
    assert codebox.SyncCodeBox(network="open").options["network"] == "open"
    assert codebox.SyncCodeBox(allow_host=["a.org"]).options["allow_hosts"] == ["a.org"]
    assert codebox.SyncCodeBox().options["allow_hosts"] == []


def test_positional_misuse_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="at most 9 positional"):
        codebox.CodeBox(*(["python"] * 10))
    with pytest.raises(TypeError, match="both by position and by keyword"):
        codebox.CodeBox("python", image="python")


def test_exec_options_are_checked_before_any_box_is_needed() -> None:
    b = codebox.SyncCodeBox()  # never started: the checks come first
    with pytest.raises(TypeError, match=r"env\[A\]: must be a str"):
        b.exec("true", env={"A": 1})
    with pytest.raises(TypeError, match="cwd: must be a string, got int"):
        b.exec("true", cwd=3)
    with pytest.raises(TypeError, match="stdin: must be text or bytes, got int"):
        b.exec("true", stdin=123)
    with pytest.raises(ValueError, match="timeout: must be a number of seconds or none, got 'so"):
        b.exec("true", timeout="soon")
    with pytest.raises(ValueError, match=r"timeout: must be at least 1 ms \(at least 0.001 s\)"):
        b.exec("true", timeout=0)
    with pytest.raises(codebox.BoxClosedError, match="not started"):
        b.exec("true", env=[("A", "1")], cwd=Path("sub"), stdin=b"x", timeout=math.inf)


def test_exec_keywords_are_the_exec_schema() -> None:
    """exec()'s keywords are names or aliases of the exec options (besides the streaming
    callbacks, which are not options), and every option has one."""
    schema = list(_core().exec_option_schema())
    spellings = {o["name"]: {o["name"], *(a[0] for a in o["aliases"])} for o in schema}
    keywords = {
        p.name for p in inspect.signature(codebox.SyncCodeBox.exec).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }
    assert keywords >= {"on_stdout", "on_stderr"}
    keywords -= {"on_stdout", "on_stderr"}
    assert keywords == {"env", "cwd", "timeout", "stdin", "user"}
    for name, names in spellings.items():
        assert names & keywords, f"exec() has no keyword for exec option {name}"
        value = b"in" if name == "stdin_data" else sample(next(o for o in schema if o["name"] == name))
        for keyword in names & keywords:
            _core().exec_options({keyword: value})  # accepted
            _core().exec_options({keyword: None})  # None: the default


def test_signature_and_docstring_list_every_option() -> None:
    params = inspect.signature(codebox.CodeBox).parameters
    for option in _schema():
        name = "timeout" if option["name"] == "exec_timeout" else option["name"]
        assert name in params, name
        assert params[name].default == option["default"], name
        for cls in (codebox.CodeBox, codebox.SyncCodeBox):
            assert f"{option['name']}" in (cls.__doc__ or ""), (cls, option["name"])
            for alias, _scale, _unit in option["aliases"]:
                assert alias in (cls.__doc__ or ""), (cls, alias)


def _need_box() -> None:
    reason = box_unavailable_reason()
    if reason is not None:
        if os.environ.get("CODEBOX_TESTS_REQUIRE_BOX") == "1":
            pytest.fail(f"no box can start (CODEBOX_TESTS_REQUIRE_BOX=1): {reason}")
        pytest.skip(f"no box can start here: {reason}")


PROBE = 'ulimit -n; echo "$A $B"; pwd; cat'


def test_a_real_box_gets_non_default_options() -> None:
    _need_box()
    with codebox.SyncCodeBox(
        driver="jail", max_open_files=200, pids=64, memory=300, working_dir="/srv",
        env=[("A", "1")], timeout=20,
    ) as box:
        r = box.exec("sh", "-c", PROBE, env={"B": "2"}, stdin=b"in")
        assert r.stdout == "200\n1 2\n/srv\nin", r.stderr
        info = box.info
        assert info.memory_mib == 300 and info.timeout == 20.0
        assert info.options["max_open_files"] == 200 and info.options["max_processes"] == 64
        assert any("300" in limit for limit in info.limits), info.limits


def _cli() -> Path:
    built = Path(_core().__file__).resolve().parent.parent / "bin" / "codebox"
    if not built.exists():
        pytest.skip(f"the codebox CLI is not built beside the extension ({built})")
    return built


def test_the_cli_starts_a_box_with_non_default_options() -> None:
    _need_box()
    r = subprocess.run(
        [str(_cli()), "exec", "--driver=jail", "--max-open-files", "200", "--pids=64",
         "--memory-mib", "300", "--working-dir", "/srv", "--env", "A=1", "--env", "B=2",
         "--stdin", "--", "sh", "-c", PROBE],
        input=b"in", capture_output=True, timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"200\n1 2\n/srv\nin"


def test_the_cli_names_the_flag_typed() -> None:
    cli = str(_cli())
    r = subprocess.run([cli, "run", "--pids", "0", "print(1)"], capture_output=True, timeout=60)
    assert r.returncode == 2 and b"--pids: must be at least 1, got 0" in r.stderr
    r = subprocess.run([cli, "run", "--memroy", "1G", "print(1)"], capture_output=True, timeout=60)
    assert r.returncode == 2 and b"did you mean --memory?" in r.stderr


def test_secrets_as_objects_and_errors_that_never_show_the_value() -> None:
    o = codebox.CodeBox(secrets=[{"name": "KEY", "value": "s3cr=t@x", "hosts": ["api.example.org",
                                                                          "*.example.net"]}]).options
    assert o["secrets"] == ["KEY=s3cr=t@x@api.example.org,*.example.net"]
    for bad, error in (
        ([{"name": "1KEY", "value": "hidden-1", "hosts": ["a.org"]}], ValueError),
        ([{"name": "KEY", "value": "hidden-1\r\nX: y", "hosts": ["a.org"]}], ValueError),
        ([{"name": "KEY", "value": "hidden-1", "hosts": []}], ValueError),
        ([{"name": "KEY", "value": "hidden-1", "hosts": ["bad host"]}], ValueError),
        ([{"name": "KEY", "value": "hidden-1"}], TypeError),
        ("KEY=hidden-1@a.org", TypeError),
        (["KEY=hidden-1"], ValueError),
        (["KEY=hidden-1@a.org", "KEY=hidden-1@b.org"], ValueError),
    ):
        with pytest.raises(error) as e:
            codebox.CodeBox(secrets=bad)
        assert "hidden-1" not in str(e.value), str(e.value)
        assert "secret" in str(e.value), str(e.value)
