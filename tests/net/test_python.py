"""A jail box's network through the Python module: CodeBox/SyncCodeBox(allow_hosts=[...],
network=..., network_max_bytes=...), install_package(s), egress_log() and info.network, against
the test's servers (conftest.py). The boxes run in this (namespaced) process: local=True."""
import asyncio

import pytest

import netns
from boxcode import answers, fetch_all
from conftest import BOX_CA, BOX_CA_ENV

codebox = pytest.importorskip(
    "codebox", reason="the codebox Python package is not importable (PYTHONPATH=python:"
    "build/release/python after ninja -C build/release _codebox)")

pytestmark = pytest.mark.usefixtures("jail_image")


def box(**options):
    return codebox.SyncCodeBox(local=True, driver="jail", **options)


def trust_test_ca(b, net):
    with open(net.ca, "rb") as f:
        b.files.write(BOX_CA, f.read())


def records(b):
    return {(r["host"], r["port"]): r for r in b.egress_log()}


def test_allowed_hosts_are_reached_and_logged(net):
    with box(allow_hosts=[net.host["web"], net.host["secure"]], env=BOX_CA_ENV) as b:
        assert "allow" in b.info.network and net.host["secure"] in b.info.network, b.info
        trust_test_ca(b, net)
        out = b.run(fetch_all(net.url("web"), net.url("secure", scheme="https")))
        assert answers(out) == [{"status": 200, "body": net.hello("web") + "\n"},
                                {"status": 200, "body": net.hello("secure", "https") + "\n"}]
        log = records(b)
    assert set(log) == {(net.host["web"], 80), (net.host["secure"], 443)}, log
    for r in log.values():
        assert r["allowed"] and r["address"].startswith(netns.NAMED), r
        assert r["bytes_up"] > 0 and r["bytes_down"] > 0, r


def test_refusals_are_errors_in_the_box_and_records_in_the_log(net):
    with box(allow_hosts=[net.host["web"], net.host["rebind-lo"], net.host["rebind-ten"]]) as b:
        out = b.run(fetch_all(net.url("other"), net.url("rebind-lo"), net.url("rebind-ten"),
                              f"http://{netns.LITERAL}/hello"))
        other, lo, ten, literal = answers(out)
        log = records(b)
    assert other["status"] == 403 and "allowlist" in other["body"], other
    assert lo["status"] == 403 and "loopback" in lo["body"], lo
    assert ten["status"] == 403 and "private" in ten["body"], ten
    assert literal["status"] == 403 and "allowlist" in literal["body"], literal
    assert len(log) == 4, log
    for (host, _), r in log.items():
        assert not r["allowed"] and r["address"] == "" and r["bytes_down"] == 0, r
    assert "loopback" in log[(net.host["rebind-lo"], 80)]["reason"], log
    for label in ("other", "rebind-lo", "rebind-ten"):
        assert net.servers.requests(net.host[label]) == [], label


def test_the_byte_cap_holds(net):
    cap = 1 << 20
    with box(allow_hosts=[net.host["web"]], network_max_bytes=cap) as b:
        out = b.run(fetch_all(net.url("web", "/bytes/3000000")))
        [answer] = answers(out)
        moved = sum(r["bytes_up"] + r["bytes_down"] for r in b.egress_log())
    assert "body" not in answer or len(answer["body"]) < 3000000, {**answer, "body": "..."}
    assert cap // 2 < moved <= cap, moved


def test_install_package_from_the_local_index_then_import(net, need_pip):
    with box(network="allow", env=BOX_CA_ENV) as b:
        trust_test_ca(b, net)
        r = b.install_package(net.PACKAGE, index_url=net.index_url("https"))
        assert r.exit_code == 0, r.stderr
        assert b.run(f"import {net.MODULE} as m; print(m.TOKEN)").strip() == net.token
        # The index was allowed for the install only.
        [after] = answers(b.run(fetch_all(net.url("index", scheme="https"))))
        log = b.egress_log()
    assert "403" in after.get("error", ""), after
    assert any(rec["host"] == net.host["index"] and rec["allowed"] for rec in log), log
    assert log[-1]["host"] == net.host["index"] and not log[-1]["allowed"], log


def test_install_packages_async_reports_a_missing_package(net, need_pip):
    async def main():
        async with codebox.CodeBox(local=True, driver="jail", network="allow",
                                   env={"PIP_TRUSTED_HOST": net.host["index"]}) as b:
            return await b.install_packages([net.PACKAGE, "codebox-nettest-no-such-package"],
                                            index_url=net.index_url())
    r = asyncio.run(main())
    assert r.exit_code != 0, r
    assert "codebox-nettest-no-such-package" in r.stderr, r.stderr


def test_install_package_without_a_network_says_so(net):
    with box() as b:
        assert b.info.network == "none", b.info
        with pytest.raises(Exception) as e:
            b.install_package(net.PACKAGE, index_url=net.index_url())
        assert b.egress_log() == []
    text = str(e.value)
    assert "no network" in text and "allow_hosts" in text, text


def test_a_bad_allowlist_entry_is_refused_before_any_box(net):
    with pytest.raises(ValueError) as e:
        box(allow_hosts=[net.host["web"], "http://not a host/"])
    assert "not a host" in str(e.value), e.value


def test_the_rate_limit_holds(net):
    size, rate = 3_000_000, 1 << 20
    with box(allow_hosts=[net.host["web"]], network_rate_bytes=rate) as b:
        code = ("import time\nstart = time.monotonic()\n" +
                fetch_all(net.url("web", f"/bytes/{size}")) + "print(time.monotonic() - start)\n")
        lines = b.run(code, timeout=60).strip().splitlines()
    [answer] = answers(lines[0])
    assert answer["status"] == 200 and len(answer["body"]) == size, {**answer, "body": "..."}
    assert float(lines[1]) >= 0.9 * size / rate, lines[1]  # ~2.9 s at 1 MiB/s, not ~0.01 s
