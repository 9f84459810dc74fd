"""codebox.describe_host(): the C++ DescribeHost, checked against facts read here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import codebox


def test_describe_host_agrees_with_the_host(tmp_path: Path) -> None:
    host = codebox.describe_host()
    assert isinstance(host, codebox.HostDescription)
    assert host.jail["root"] == (os.geteuid() == 0)
    if Path("/sys/fs/cgroup/cgroup.controllers").exists():
        assert host.jail["cgroup_version"] != 1
    elif Path("/sys/fs/cgroup/memory").is_dir():
        assert host.jail["cgroup_version"] != 2
    assert (host.jail["cgroup_version"] == 0) == (not host.jail["cgroup_controllers"])
    assert host.vm["tcg_usable"] == bool(host.vm["qemu"])
    if host.vm["qemu"]:
        assert os.access(host.vm["qemu"], os.X_OK)
    if host.driver_usable:
        assert host.driver in ("jail", "vm")
        assert {"memory", "processes", "cpu", "disk", "network"} <= {l["name"] for l in host.limits}
    else:
        assert host.driver == "" and host.driver_reason
    assert [i["name"] for i in host.images] == sorted(i["name"] for i in host.images)
    for image in host.images:
        assert image["built"] == bool(image["id"])
        if not image["built"]:
            assert "codebox image build" in image["detail"]


def test_explicit_home_is_the_only_store(tmp_path: Path) -> None:
    host = codebox.describe_host(home=str(tmp_path))
    assert host.stores == [{"path": str(tmp_path), "kind": "explicit", "writable": True}]
    for image in host.images:  # nothing is built in an empty store
        assert not image["built"]
        assert f"CODEBOX_HOME={tmp_path}" in image["detail"]


def test_options_choose_the_described_limits() -> None:
    host = codebox.describe_host(driver="jail", memory_mib=300, disk_mib=77)
    if not host.driver_usable:
        pytest.skip(f"the jail driver cannot run here: {host.driver_reason}")
    limits = {l["name"]: l for l in host.limits}
    assert "300 MiB" in limits["memory"]["detail"]
    assert limits["disk"]["detail"].startswith("77 MiB")


def test_unknown_option_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        codebox.describe_host(no_such_option=1)
