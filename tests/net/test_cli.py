"""A jail box's network through the codebox CLI: `codebox run/exec --allow-host`, `--pip`,
`--network-max-bytes` and `--json`, against the test's servers (conftest.py)."""
import json

import pytest

import netns
import boxcode
from boxcode import answers, escapes, fetch_all
from conftest import BOX_CA, BOX_CA_ENV, cli

pytestmark = pytest.mark.usefixtures("jail_image")


def run(codebox_bin, code, *flags, timeout=300):
    return cli(codebox_bin, "run", "--local", "--driver", "jail", *flags, code, timeout=timeout)


def exec_(codebox_bin, argv, *flags, timeout=300):
    return cli(codebox_bin, "exec", "--local", "--driver", "jail", *flags, "--", *argv,
               timeout=timeout)


def ca_flags(net):
    flags = ["--copy-in", f"{net.ca}:{BOX_CA}"]
    for k, v in BOX_CA_ENV.items():
        flags += ["--env", f"{k}={v}"]
    return flags


def test_urllib_reaches_an_allowed_host(codebox_bin, net):
    before = len(net.servers.requests(net.host["web"]))
    r = run(codebox_bin, fetch_all(net.url("web")), "--allow-host", net.host["web"])
    assert r.returncode == 0, r.stderr
    [answer] = answers(r.stdout)
    assert answer == {"status": 200, "body": net.hello("web") + "\n"}
    assert len(net.servers.requests(net.host["web"])) == before + 1


def test_curl_reaches_an_allowed_host_over_https(codebox_bin, net, need_curl):
    r = exec_(codebox_bin, ["curl", "-sS", "--max-time", "30", net.url("secure", scheme="https")],
              "--allow-host", net.host["secure"], *ca_flags(net))
    assert r.returncode == 0, r.stderr
    assert r.stdout == net.hello("secure", "https") + "\n"


def test_tls_is_end_to_end_with_the_test_ca(codebox_bin, net):
    # The proxy only tunnels: the box verifies the server itself, so without the test CA the
    # same request fails verification.
    url = net.url("secure", scheme="https")
    trusting = run(codebox_bin, fetch_all(url), "--allow-host", net.host["secure"],
                   *ca_flags(net))
    assert trusting.returncode == 0, trusting.stderr
    assert answers(trusting.stdout) == [{"status": 200,
                                         "body": net.hello("secure", "https") + "\n"}]
    untrusting = run(codebox_bin, fetch_all(url), "--allow-host", net.host["secure"])
    assert untrusting.returncode == 0, untrusting.stderr
    [answer] = answers(untrusting.stdout)
    assert "CERTIFICATE_VERIFY_FAILED" in answer.get("error", ""), answer


def test_a_host_off_the_list_is_refused_with_a_clear_error(codebox_bin, net):
    r = run(codebox_bin, fetch_all(net.url("other"), net.url("other", scheme="https")),
            "--allow-host", net.host["web"])
    assert r.returncode == 0, r.stderr
    plain, tls = answers(r.stdout)
    assert plain["status"] == 403, plain
    assert "codebox egress proxy" in plain["body"], plain
    assert net.host["other"] in plain["body"] and "allowlist" in plain["body"], plain
    assert "403" in tls.get("error", ""), tls  # urllib: "Tunnel connection failed: 403 ..."
    assert net.servers.requests(net.host["other"]) == []


def test_curl_sees_the_refusal(codebox_bin, net, need_curl):
    r = exec_(codebox_bin, ["curl", "-sS", "--max-time", "30", "-o", "/dev/stderr",
                            "-w", "%{http_code}", net.url("other")],
              "--allow-host", net.host["web"])
    assert r.stdout == "403", (r.stdout, r.stderr)
    assert "allowlist" in r.stderr, r.stderr
    r = exec_(codebox_bin, ["curl", "-sS", "--max-time", "30", net.url("other", scheme="https")],
              "--allow-host", net.host["web"])
    assert r.returncode != 0 and "403" in r.stderr, r.stderr


@pytest.mark.parametrize("label,why", [("rebind-lo", "loopback"), ("rebind-ten", "private")])
def test_an_allowed_name_that_resolves_inside_is_refused(codebox_bin, net, label, why):
    # The name is on the list, but the host resolves it to an internal address (DNS
    # rebinding): refused after resolution, before any connection.
    r = run(codebox_bin, fetch_all(net.url(label), net.url(label, scheme="https")),
            "--allow-host", net.host[label])
    assert r.returncode == 0, r.stderr
    plain, tls = answers(r.stdout)
    assert plain["status"] == 403 and why in plain["body"], plain
    assert "403" in tls.get("error", ""), tls
    assert net.servers.requests(net.host[label]) == []


def test_an_ip_literal_not_allowed_is_refused(codebox_bin, net):
    # web's name resolves to NAMED, but the box may not ask for that address by itself.
    r = run(codebox_bin, fetch_all(f"http://{netns.LITERAL}/hello", f"http://{netns.NAMED}/hello",
                                   "http://10.7.0.1/hello"),
            "--allow-host", net.host["web"])
    assert r.returncode == 0, r.stderr
    for answer in answers(r.stdout):
        assert answer["status"] == 403 and "allowlist" in answer["body"], answer
    # Named as a literal, the same address is reached.
    r = run(codebox_bin, fetch_all(f"http://{netns.LITERAL}/hello"),
            "--allow-host", netns.LITERAL)
    assert r.returncode == 0, r.stderr
    assert answers(r.stdout)[0]["status"] == 200


def test_no_way_out_but_the_proxy(codebox_bin, net):
    r = run(codebox_bin, escapes(netns.NAMED, net.host["web"]), "--allow-host", net.host["web"])
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out) == {"tcp_named", "tcp_public", "tcp_loopback_80", "raw_named", "udp_dns",
                        "resolve"}, out
    for attempt, result in out.items():
        assert result != "succeeded", (attempt, out)
    assert out["tcp_named"] == "ENETUNREACH", out
    assert out["tcp_loopback_80"] == "ECONNREFUSED", out  # the box's loopback, not the test's


def test_the_byte_cap_holds(codebox_bin, net):
    cap = 1 << 20
    code = fetch_all(net.url("web", "/bytes/200000"), net.url("web", "/bytes/8000000"))
    r = run(codebox_bin, code, "--allow-host", net.host["web"], "--network-max-bytes",
            str(cap), "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    small, big = answers(result["result"]["stdout"])
    assert small["status"] == 200 and len(small["body"]) == 200000, {**small, "body": "..."}
    assert "body" not in big or len(big["body"]) < 8000000, {**big, "body": "..."}
    down = sum(rec["bytes_down"] + rec["bytes_up"] for rec in result["egress"])
    assert 200000 < down <= cap, result["egress"]


def test_json_has_the_network_and_the_egress_records(codebox_bin, net):
    r = run(codebox_bin, fetch_all(net.url("web"), net.url("other")),
            "--allow-host", net.host["web"], "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["network"] == "allow", result
    records = {rec["host"]: rec for rec in result["egress"]}
    assert set(records) == {net.host["web"], net.host["other"]}, result["egress"]
    web, other = records[net.host["web"]], records[net.host["other"]]
    assert web["allowed"] is True and web["port"] == 80, web
    assert web["address"].startswith(netns.NAMED) and web["bytes_down"] > len(net.hello("web"))
    assert other["allowed"] is False and "allowlist" in other["reason"], other
    assert other["address"] == "" and other["bytes_down"] == 0 and other["port"] == 80, other


def test_a_box_without_a_network_has_none(codebox_bin, net):
    r = run(codebox_bin, fetch_all(net.url("web")) +
            "import os; print(sorted(k for k in os.environ if 'proxy' in k.lower()))\n", "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["network"] == "none" and result.get("egress", []) == [], result
    lines = result["result"]["stdout"].strip().splitlines()
    assert "error" in json.loads(lines[0])[0], lines
    assert lines[1] == "[]", lines


def test_pip_in_the_box_reaches_an_allowed_index(codebox_bin, net, need_pip):
    install = (f"python3 -m pip install --user --break-system-packages --no-input "
               f"--disable-pip-version-check "
               f"--index-url {net.index_url('https')} {net.PACKAGE} && "
               f"python3 -c 'import {net.MODULE} as m; print(m.TOKEN)'")
    r = exec_(codebox_bin, ["sh", "-c", install], "--allow-host", net.host["index"],
              *ca_flags(net), "--timeout", "180")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == net.token, r.stdout


def test_run_pip_installs_from_the_local_index_for_that_install_only(codebox_bin, net, need_pip):
    code = f"import {net.MODULE} as m; print(m.TOKEN)\n" + fetch_all(net.url("index"))
    r = run(codebox_bin, code, "--pip", net.PACKAGE, "--index-url", net.index_url(),
            "--env", f"PIP_TRUSTED_HOST={net.host['index']}", "--timeout", "180")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0] == net.token, r.stdout
    # The index's host was allowed for the install, not for the code that ran after it.
    assert answers(r.stdout)[0]["status"] == 403, r.stdout


def test_run_pip_of_an_unknown_package_says_why(codebox_bin, net, need_pip):
    r = run(codebox_bin, "print('ran')", "--pip", "codebox-nettest-no-such-package",
            "--index-url", net.index_url(), "--env", f"PIP_TRUSTED_HOST={net.host['index']}",
            "--timeout", "180")
    assert r.returncode != 0 and "ran" not in r.stdout, (r.returncode, r.stdout)
    assert "install" in r.stderr and "codebox-nettest-no-such-package" in r.stderr, r.stderr
    assert "No matching distribution" in r.stderr, r.stderr


def test_the_byte_cap_counts_request_heads(codebox_bin, net):
    # Plain-HTTP requests carry data upstream in their heads (URL, headers): that is the box
    # sending, and the cap must hold for it as for a body.
    cap = 64 << 10
    code = boxcode.FETCH + '''
import urllib.request
answers = []
for i in range(12):
    request = urllib.request.Request(URL + f"?n={i}", headers={"X-Pad": "a" * 12000})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            answers.append(r.status)
    except urllib.error.HTTPError as e:
        answers.append(e.code)
    except Exception as e:
        answers.append(type(e).__name__)
print(json.dumps(answers))
'''.replace("URL", repr(net.url("web", "/pad")))
    before = {id(q) for q in net.servers.requests(net.host["web"])}
    r = run(codebox_bin, code, "--allow-host", net.host["web"], "--network-max-bytes", str(cap),
            "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    statuses = json.loads(result["result"]["stdout"].strip().splitlines()[-1])
    assert statuses[0] == 404 and 403 in statuses, statuses  # /pad: the server's 404
    reached = [q for q in net.servers.requests(net.host["web"])
               if id(q) not in before and q.path == "/pad"]
    received = sum(q.head_bytes for q in reached)
    assert received <= cap, f"{len(reached)} heads, {received} bytes reached the server"
    audited = sum(rec["bytes_up"] for rec in result["egress"])
    assert audited >= received, (audited, received, result["egress"])


def test_an_open_network_reaches_public_addresses_only_and_says_so(codebox_bin, net):
    r = run(codebox_bin, fetch_all(net.url("web"), f"http://{netns.LITERAL}/hello",
                                   net.url("rebind-lo"), net.url("rebind-ten"),
                                   f"http://{netns.PRIVATE}/hello"),
            "--network", "open")
    assert r.returncode == 0, r.stderr
    web, literal, *internal = answers(r.stdout)
    assert web == {"status": 200, "body": net.hello("web") + "\n"}, web
    assert literal["status"] == 200, literal
    for answer in internal:
        assert answer["status"] == 403, answer
    assert "open network" in r.stderr, r.stderr
