"""The vm driver's network, the basics: one allowed fetch and one refusal in one box (a boot
under QEMU tcg takes seconds), through `codebox run --driver vm --allow-emulation --json`.
Skipped, with the reason, where a vm box cannot start here (no QEMU, kernel or image)."""
import json

import netns
from boxcode import escapes, fetch_all
from conftest import cli, require

VM = ["run", "--local", "--driver", "vm", "--allow-emulation", "--timeout", "120"]


def test_vm_box_reaches_an_allowed_host_and_is_refused_another(codebox_bin, net):
    probe = cli(codebox_bin, *VM, "print(1)", timeout=300)
    if probe.returncode != 0 or probe.stdout != "1\n":
        require(f"a vm box does not start here: {probe.stderr.strip()}")
    code = fetch_all(net.url("web"), net.url("other"), net.url("rebind-lo")) + \
        escapes(netns.NAMED, net.host["web"])
    r = cli(codebox_bin, *VM, "--allow-host", net.host["web"], "--allow-host",
            net.host["rebind-lo"], "--json", code, timeout=300)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["result"]["driver"].startswith("vm"), result  # vm/tcg here, vm/kvm with kvm
    lines = result["result"]["stdout"].strip().splitlines()
    web, other, rebound = json.loads(lines[0])
    assert web == {"status": 200, "body": net.hello("web") + "\n"}, web
    assert other["status"] == 403 and "allowlist" in other["body"], other
    assert rebound["status"] == 403 and "loopback" in rebound["body"], rebound
    out = json.loads(lines[1])
    assert all(v != "succeeded" for v in out.values()), out
    records = {rec["host"]: rec for rec in result["egress"]}
    assert records[net.host["web"]]["allowed"] is True, records
    assert records[net.host["other"]]["allowed"] is False, records
