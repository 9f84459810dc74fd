"""A box's secrets (docs/security.md, "Secrets"), attacked from inside a real jail box: the box
holds only "<CODEBOX_SECRET:WEATHER>", and the value must appear at the secret's host (the
test's HTTPS server "secure", through the proxy's interception) and nowhere else: not in the
box's environment, files or processes, not in its output, not at any other host however the
placeholder is sent there. The boxes run in this (namespaced) process: local=True; the proxy
checks the upstream against the test's CA ($CODEBOX_UPSTREAM_CA_FILE)."""
import json
import os
import secrets
import tempfile
import time

import pytest

from boxcode import FETCH, answers, fetch_all
from conftest import BOX_CA, cli

codebox = pytest.importorskip(
    "codebox", reason="the codebox Python package is not importable (PYTHONPATH=python:"
    "build/release/python after ninja -C build/release _codebox)")

pytestmark = pytest.mark.usefixtures("jail_image")

# Random per run: found anywhere, it can only have come from this run's secret.
VALUE = "wx-" + secrets.token_hex(16)
PLACEHOLDER = "<CODEBOX_SECRET:WEATHER>"

# send(url, headers, data) -> {"status", "body"} or {"error"}, like boxcode's fetch; every
# header value may use `key`, the box's $WEATHER.
SEND = FETCH + '''
import os, ssl, urllib.parse
key = os.environ["WEATHER"]
def send(url, headers=None, data=None, cafile=None):
    request = urllib.request.Request(url, headers=headers or {}, data=data)
    context = ssl.create_default_context(cafile=cafile) if cafile else None
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as r:
            return {"status": r.status, "body": r.read().decode("latin-1")}
    except urllib.error.HTTPError as e:
        return {"status": e.code, "body": e.read().decode("latin-1")}
    except Exception as e:
        return {"error": f"{type(e).__name__}: {getattr(e, 'reason', e)}"}
'''


@pytest.fixture(autouse=True)
def upstream_ca(net, monkeypatch):
    monkeypatch.setenv("CODEBOX_UPSTREAM_CA_FILE", net.ca)


def box(net, **options):
    weather = {"name": "WEATHER", "value": VALUE, "hosts": [net.host["secure"]]}
    return codebox.SyncCodeBox(local=True, driver="jail", secrets=[weather], **options)


def received(net, label, since=0):
    """The raw requests (head and body) the servers got for that host, after `since`."""
    return [r.raw.decode("latin-1") for r in net.servers.requests()[since:]
            if r.host.rsplit(":", 1)[0] == net.host[label]]


def everywhere_but(net, label, since):
    return [r.raw.decode("latin-1") for r in net.servers.requests()[since:]
            if r.host.rsplit(":", 1)[0] != net.host[label]]


def last_json(out):
    return json.loads(out.strip().splitlines()[-1])


def test_the_value_reaches_the_secrets_host_in_headers_query_and_credentials(net):
    since = len(net.servers.requests())
    secure = net.host["secure"]
    with box(net) as b:
        assert "secrets: WEATHER for " + secure in b.info.network, b.info.network
        out = b.run(SEND + f'''
q = urllib.parse.quote(key)
print(json.dumps([
    send("https://{secure}/hello?key=" + q, {{"Authorization": "Bearer " + key}}),
    send("https://{secure}/hello", {{"X-Api-Key": key}}),
    send("http://{secure}/hello?key=" + q),
    send("https://user:" + q + "@{secure}/hello"),
]))''')
        log = b.egress_log()
        lines = b.egress_log_lines()
    assert [json.loads(line) for line in lines.splitlines()] == log, lines
    answers = last_json(out)
    assert [a.get("status") for a in answers[:3]] == [200, 200, 200], answers
    assert answers[0]["body"] == net.hello("secure", "https") + "\n", answers
    assert VALUE not in out
    got = received(net, "secure", since)
    assert len(got) >= 3, got
    assert f"Authorization: Bearer {VALUE}" in got[0] and f"key={VALUE}" in got[0], got[0]
    assert f"X-Api-Key: {VALUE}" in got[1], got[1]
    assert f"key={VALUE}" in got[2], got[2]
    assert not any("CODEBOX_SECRET" in r for r in got), got
    injected = [r for r in log if r["secrets"] == ["WEATHER"]]
    assert len(injected) >= 3 and all(r["allowed"] for r in injected), log
    assert any("intercepted" in r["reason"] for r in injected), log
    assert not any(VALUE in json.dumps(r) for r in log), log


def test_the_box_never_holds_the_value(net):
    with box(net) as b:
        out = b.run(r'''
import json, os
value_seen = []
def search(path):
    try:
        with open(path, "rb") as f:
            data = f.read(1 << 22)
    except OSError:
        return
    if NEEDLE in data:
        value_seen.append(path)
NEEDLE = bytes.fromhex("''' + VALUE.encode().hex() + r'''")
for root in ("/etc", "/tmp", "/work", "/root", "/home", "/run", "/var", "/opt", "/usr/local"):
    for d, _, files in os.walk(root):
        for name in files:
            search(os.path.join(d, name))
processes = {}
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for part in ("environ", "cmdline"):
            search(f"/proc/{pid}/{part}")
        try:
            processes[pid] = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
        except OSError:
            pass
print(json.dumps({"env": os.environ["WEATHER"], "self": open("/proc/self/environ", "rb").read().decode("latin-1"),
                  "seen": value_seen, "processes": processes,
                  "cert_file": os.environ.get("SSL_CERT_FILE")}))
''')
    found = last_json(out)
    assert VALUE not in out
    assert found["env"] == PLACEHOLDER, found["env"]
    assert "WEATHER=" + PLACEHOLDER in found["self"]
    assert found["seen"] == [], found["seen"]
    assert found["cert_file"] == "/tmp/codebox-ca/ca-bundle.pem", found
    # The proxy is a thread of this test's own process on the host: nothing in the box is it,
    # so no /proc/PID/mem there can be read for the value.
    assert os.getpid() > 0 and not any("pytest" in c for c in found["processes"].values()), found


def test_the_placeholder_to_any_other_host_is_refused_and_the_value_never_goes_there(net):
    since = len(net.servers.requests())
    secure, web = net.host["secure"], net.host["web"]
    with box(net, allow_hosts=[web]) as b:
        with open(net.ca, "rb") as f:
            b.files.write(BOX_CA, f.read())
        out = b.run(SEND + f'''
print(json.dumps([
    send("http://{web}/hello", {{"X-Api-Key": key}}),
    send("http://{web}/hello?key=" + urllib.parse.quote(key)),
    send("http://{web}/post", {{"Content-Type": "text/plain"}}, ("body " + key).encode()),
    send("https://{secure}/redirect?to=" + urllib.parse.quote("http://{web}/hello"),
         {{"Authorization": "Bearer " + key}}),
    send("https://{web}/hello", {{"X-Api-Key": key}}, cafile="{BOX_CA}"),
]))''')
        log = b.egress_log()
    header, query, body, redirected, tunnel = last_json(out)
    for refused in (header, query, redirected):
        assert refused.get("status") == 403, refused
        assert "secret WEATHER, which may be sent only to " + secure in refused["body"], refused
    assert body.get("status") == 403 or "error" in body, body
    # HTTPS to a host no secret is for is relayed untouched (the box sees the server's own
    # certificate, of the test's CA): it may send its placeholder inside its own TLS, but never
    # gets the value put in.
    assert tunnel.get("status") == 200, tunnel
    assert VALUE not in out
    elsewhere = everywhere_but(net, "secure", since)
    assert not any(VALUE in r for r in elsewhere), elsewhere
    plain = [r.raw.decode("latin-1") for r in net.servers.requests()[since:]
             if r.scheme == "http" and r.host.rsplit(":", 1)[0] == web]
    assert not any("CODEBOX_SECRET" in r for r in plain), plain
    refusals = [r for r in log if not r["allowed"] and r["host"] == web]
    assert len(refusals) >= 3, log
    assert all("WEATHER" in r["reason"] or "placeholder" in r["reason"] for r in refusals), log


def test_raw_tricks_on_an_intercepted_connection(net):
    """A TLS name (SNI) other than the CONNECT's, and a second request with another Host on
    the same connection."""
    since = len(net.servers.requests())
    secure, web = net.host["secure"], net.host["web"]
    with box(net, allow_hosts=[web]) as b:
        out = b.run(f'''
import json, os, socket, ssl
def tunnel(host):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(f"CONNECT {{host}}:443 HTTP/1.1\\r\\nHost: {{host}}:443\\r\\n\\r\\n".encode())
    answer = b""
    while b"\\r\\n\\r\\n" not in answer:
        answer += s.recv(1)
    return s
context = ssl.create_default_context()
out = {{}}
try:
    context.wrap_socket(tunnel("{secure}"), server_hostname="{web}")
    out["sni"] = "connected"
except (OSError, ssl.SSLError) as e:
    out["sni"] = type(e).__name__
key = os.environ["WEATHER"]
t = context.wrap_socket(tunnel("{secure}"), server_hostname="{secure}")
t.sendall((f"GET /hello HTTP/1.1\\r\\nHost: {secure}\\r\\nX-Api-Key: {{key}}\\r\\n\\r\\n"
           f"GET /hello HTTP/1.1\\r\\nHost: {web}\\r\\nX-Api-Key: {{key}}\\r\\n\\r\\n").encode())
data = b""
while chunk := t.recv(65536):
    data += chunk
out["pipelined"] = data.decode("latin-1")
print(json.dumps(out))
''')
        log = b.egress_log()
    found = last_json(out)
    assert found["sni"] != "connected", found
    assert any("asked for " + web in r["reason"] for r in log), log
    assert found["pipelined"].startswith("HTTP/1.0 200") or \
        found["pipelined"].startswith("HTTP/1.1 200"), found
    assert VALUE not in out
    got_secure = [r for r in received(net, "secure", since)]
    assert sum(r.count(VALUE) for r in got_secure) == 1, got_secure
    assert not any(VALUE in r for r in everywhere_but(net, "secure", since))


def test_cli_secret_file_injects_and_prints_no_value(net, codebox_bin):
    since = len(net.servers.requests())
    secure = net.host["secure"]
    with tempfile.NamedTemporaryFile("w", suffix=".secrets") as f:
        f.write(f"# the weather service\nWEATHER={VALUE}@{secure}\n")
        f.flush()
        r = cli(codebox_bin, "run", "--local", "--driver", "jail", "--json", "--secret-file",
                f.name, SEND + f'print(json.dumps(send("https://{secure}/hello", '
                               f'{{"X-Api-Key": key}})))')
        assert r.returncode == 0, r.stderr
        bad = cli(codebox_bin, "run", "--local", "--secret", f"WEATHER={VALUE}@bad host", "1")
    assert VALUE not in r.stdout + r.stderr
    assert json.loads(r.stdout)["result"]["stdout"].count('"status": 200') == 1, r.stdout
    assert any(f"X-Api-Key: {VALUE}" in q for q in received(net, "secure", since))
    assert bad.returncode == 2 and "secret WEATHER" in bad.stderr, bad.stderr
    assert VALUE not in bad.stdout + bad.stderr


def test_network_events_come_with_the_exec_and_the_cell(net):
    """Every refusal is an event of the exec or cell it happened in: the rule, the proxy's
    words and what to do; a secret's placeholder sent elsewhere is one too."""
    web, other = net.host["web"], net.host["other"]
    with box(net, allow_hosts=[web, net.host["rebind-lo"]]) as b:
        r = b.exec("python3", "-c", SEND + f'''
print(json.dumps([send("http://{other}/hello"), send("http://{web}/hello", {{"X-Api-Key": key}}),
                  send("http://{web}/hello")]))''')
        cell = b.run_code(SEND + f'send("http://{net.host["rebind-lo"]}/hello")')
        quiet = b.exec("python3", "-c", SEND + f'send("http://{web}/hello")')
    refused_other, refused_secret, fine = last_json(r.stdout)
    assert fine["status"] == 200 and refused_other["status"] == 403, r.stdout
    by_rule = {e.rule: e for e in r.network_events}
    assert set(by_rule) == {"not_allowed", "secret_elsewhere"}, r.network_events
    assert by_rule["not_allowed"].host == other and by_rule["not_allowed"].port == 80
    assert "allowlist" in by_rule["not_allowed"].message
    assert "retrying will not help" in by_rule["not_allowed"].hint
    # The box's client got the same words as its 403's body.
    assert by_rule["not_allowed"].message in refused_other["body"], refused_other
    assert "secret WEATHER" in by_rule["secret_elsewhere"].message
    assert VALUE not in repr(r.network_events)
    [event] = cell.network_events
    assert event.rule == "internal_address" and "loopback" in event.message, event
    assert quiet.network_events == (), quiet.network_events


SLOW_DOWNLOAD = '''
import sys, time, urllib.request
got = 0
try:
    with urllib.request.urlopen(sys.argv[1], timeout=60) as r:
        open("/tmp/started", "w").close()
        while chunk := r.read(65536):
            got += len(chunk)
            time.sleep(0.02)
    print("finished", got, flush=True)
except Exception as e:
    print("cut after", got, type(e).__name__, flush=True)
'''


def test_set_network_opens_narrows_and_cuts_what_it_no_longer_allows(net):
    web = net.host["web"]
    with codebox.SyncCodeBox(local=True, driver="jail", network="allow") as b:
        before = b.run(fetch_all(net.url("web")))
        described = b.set_network([web])
        assert web in described and web in b.info.network, described
        opened = b.run(fetch_all(net.url("web")))
        pid = b.spawn("python3", "-c", SLOW_DOWNLOAD, net.url("web", "/bytes/500000000"))
        deadline = time.monotonic() + 30
        while b.exec("test", "-e", "/tmp/started").exit_code != 0:
            assert time.monotonic() < deadline, "the download did not start"
            time.sleep(0.1)
        time.sleep(0.5)
        b.set_network(network="none")
        ended = b.attach(pid)
        after = b.run(fetch_all(net.url("web")))
        log = b.egress_log()
    assert answers(before)[0]["status"] == 403, before
    assert answers(opened)[0] == {"status": 200, "body": net.hello("web") + "\n"}, opened
    assert "cut after" in ended.stdout, ended.stdout
    assert int(ended.stdout.split("cut after ")[1].split()[0]) < 500000000, ended.stdout
    assert answers(after)[0]["status"] == 403, after
    cut = [r for r in log if "network was changed" in r["reason"]]
    assert len(cut) == 1 and cut[0]["bytes_down"] > 0, log


def test_set_network_needs_the_proxy_channel(net):
    with codebox.SyncCodeBox(local=True, driver="jail") as b:
        with pytest.raises(codebox.BoxNetworkError, match="no proxy channel"):
            b.set_network([net.host["web"]])
        with pytest.raises(ValueError):
            b.set_network(network="wide")
