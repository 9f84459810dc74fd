"""A pulled OCI image under the vm driver: bb (busybox, no libc) from the plain registry, one
exec in a QEMU box (tcg here: no hardware virtualization; a boot takes seconds). Skipped, with
doctor's reason, where this host has no vm driver at all (no QEMU); a failure in CI."""
import os
import re

import pytest

import registry
from conftest import result_of, require, seed_vm_kernel


def _vm_problem(codebox):
    """None when doctor says a vm box can start here (kvm, or tcg with allow_emulation)."""
    r = codebox("doctor", timeout=120)
    lines = r.stdout.splitlines()
    for label in ("vm (kvm)", "vm (tcg)"):
        for line in lines:
            if line.strip().startswith(label) and re.match(rf"\s*{re.escape(label)}\s+yes\b",
                                                           line):
                return None
    vm_lines = [line.strip() for line in lines if line.strip().startswith("vm (")]
    return "no vm driver here: " + ("; ".join(vm_lines) or r.stdout[-500:] + r.stderr[-500:])


@pytest.fixture(scope="module")
def bb_in_store(codebox, plain_registry, bb_layout):
    registry.push(bb_layout[0], "1", plain_registry, "bb")
    ref = f"{plain_registry.addr}/bb:1"
    r = codebox("image", "pull", "--insecure", ref)
    assert r.returncode == 0, r.stderr
    return ref


def test_bb_exec_in_a_vm_box(codebox, bb_in_store):
    require(_vm_problem(codebox))
    seeded = seed_vm_kernel(codebox.home)
    r = codebox("exec", "--driver", "vm", "--allow-emulation", "--timeout", "120", "--json",
                "--image", bb_in_store, "--", "sh", "-c", "echo hi from the vm; id -u; uname -r",
                timeout=400)
    result = result_of(r)
    assert result["exit_code"] == 0, (result, r.stderr, f"kernel seeded: {seeded}")
    assert result["result"]["driver"].startswith("vm/"), result
    hi, uid, release = result["result"]["stdout"].splitlines()
    assert (hi, uid) == ("hi from the vm", "0"), result
    assert release != os.uname().release, "the guest runs the host's kernel?"
