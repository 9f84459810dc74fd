"""The vm driver's network, the basics: one allowed fetch and one refusal in one box (a boot
under QEMU tcg takes seconds), through `codebox run --driver vm --allow-emulation --json`.
Skipped, with the reason, where a vm box cannot start here (no QEMU, kernel or image)."""
import json
import os

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


def test_vm_box_secret_reaches_its_host_over_intercepted_https_only(codebox_bin, net,
                                                                     monkeypatch, tmp_path):
    """The secrets path (test_secrets.py attacks it in jail boxes) in a vm: the value goes
    into HTTPS to its host, a placeholder to another host is refused and is an event."""
    probe = cli(codebox_bin, *VM, "print(1)", timeout=300)
    if probe.returncode != 0 or probe.stdout != "1\n":
        require(f"a vm box does not start here: {probe.stderr.strip()}")
    monkeypatch.setenv("CODEBOX_UPSTREAM_CA_FILE", net.ca)
    value = "vm-" + os.urandom(12).hex()
    secrets_file = tmp_path / "secrets"
    secrets_file.write_text(f"KEY={value}@{net.host['secure']}\n")
    since = len(net.servers.requests())
    code = ("import json, os, urllib.request\n"
            "def send(url):\n"
            "    r = urllib.request.Request(url, headers={'X-Api-Key': os.environ['KEY']})\n"
            "    try:\n"
            "        return urllib.request.urlopen(r, timeout=60).status\n"
            "    except urllib.error.HTTPError as e:\n"
            "        return e.code\n"
            f"print(json.dumps([send('https://{net.host['secure']}/hello'), "
            f"send('http://{net.host['web']}/hello'), os.environ['KEY']]))\n")
    r = cli(codebox_bin, *VM, "--allow-host", net.host["web"], "--secret-file", str(secrets_file),
            "--json", code, timeout=300)
    assert r.returncode == 0, r.stderr
    assert value not in r.stdout + r.stderr
    result = json.loads(r.stdout)
    assert json.loads(result["result"]["stdout"]) == [200, 403, "<CODEBOX_SECRET:KEY>"], result
    [event] = result["result"]["network_events"]
    assert event["rule"] == "secret_elsewhere" and event["host"] == net.host["web"], event
    got = [q.raw.decode("latin-1") for q in net.servers.requests()[since:]]
    assert sum(f"X-Api-Key: {value}" in q for q in got) == 1, got
