"""E2B's face (issue 35, docs/e2b.md) under hostile clients and a hostile box: a real
`codebox serve` with two tenants, spoken to in E2B's wire protocol without its SDK, so that
every byte is the attacker's choice.

* In-sandbox routes: no token, a wrong one, another sandbox's, an unknown sandbox: 401, and
  nothing of the sandbox answers. Another tenant's key on the control plane gets what an unknown
  id gets.
* Hostile per-call users (the SDK's Basic header): garbage, a path, a huge header, a third
  user: a clear invalid_argument, and nothing runs.
* Malformed Connect envelopes (a length past the body, a compressed or end-of-stream flag, a
  huge claimed length, not JSON): the stream's clear invalid_argument; hostile multipart
  uploads, and gzip uploads that are bombs or not gzip: a clear 400; never a crash.
* A box that floods its output through process.Process/Start: bounded by the output limit
  while the server's memory stays flat; a client that leaves mid-flood does not stop a command
  (E2B's rule), but its timeout (Connect-Timeout-Ms) does.
* A box that kills its own agent: its routes answer that the sandbox is gone; the server and
  the other sandboxes live on.
* Bounds a client cannot pass: twelve contexts created at once get the server's eight places,
  and a command's Connect-Timeout-Ms past the exec ceiling gets the ceiling.

After each case, the server still answers and runs code (hostile.assert_alive)."""
import base64
import gzip
import json
import secrets
import struct
import time

import pytest

import hostile
from hostile import assert_alive, request

TOK_A, TOK_B = (f"tok{n}-{secrets.token_hex(12)}" for n in ("A", "B"))
TOKEN_LINES = [f"{TOK_A} tenant=a", f"{TOK_B} tenant=b"]
MIB = 1 << 20


@pytest.fixture(scope="module")
def server(serve):
    s = serve(token_lines=TOKEN_LINES, name="e2b")
    yield s
    hostile.finish(s, token=TOK_A)


def control(server, method, path, body=None, *, key=TOK_A, timeout=120):
    """A control-plane request as E2B's SDK sends it: the key in X-API-KEY."""
    return request(server, method, path, body, token="", headers={"X-API-KEY": key},
                   timeout=timeout)


def envd(server, sandbox, method, *, message=None, raw=None, token=None, stream=False,
         timeout=60, headers=None, port="49983"):
    """An in-sandbox Connect call: a unary message, or a streaming call's one envelope."""
    h = {"E2b-Sandbox-Id": sandbox["sandboxID"], "E2b-Sandbox-Port": port,
         "X-Access-Token": sandbox["envdAccessToken"] if token is None else token}
    h.update(headers or {})
    if raw is None:
        text = json.dumps(message or {}).encode()
        raw = struct.pack(">BI", 0, len(text)) + text if stream else text
    kind = "application/connect+json" if stream else "application/json"
    return request(server, "POST", method, raw=raw, content_type=kind, token="", headers=h,
                   timeout=timeout)


def envelopes(body):
    """The messages of a Connect stream: [(flags, parsed JSON)], checked to be whole."""
    out, pos = [], 0
    while pos < len(body):
        assert pos + 5 <= len(body), f"a cut envelope header at {pos}"
        flags, size = struct.unpack(">BI", body[pos:pos + 5])
        assert pos + 5 + size <= len(body), f"a cut envelope at {pos}"
        out.append((flags, json.loads(body[pos + 5:pos + 5 + size])))
        pos += 5 + size
    return out


@pytest.fixture(scope="module")
def sandbox(server, python_image):
    a = control(server, "POST", "/v2/sandboxes", {"templateID": "python", "timeout": 600})
    assert a.status == 201, f"create: {a!r}"
    return a.json


def test_in_sandbox_routes_need_that_sandboxs_token(server, sandbox):
    other = control(server, "POST", "/v2/sandboxes", {"templateID": "python", "timeout": 600})
    assert other.status == 201, f"{other!r}"
    try:
        for token in ("", "x", other.json["envdAccessToken"], sandbox["envdAccessToken"][:-1]):
            r = envd(server, sandbox, "/process.Process/List", token=token)
            assert r.status == 401, f"token {token[:8]!r}...: {r!r}"
            assert b"processes" not in r.body
        unknown = dict(sandbox, sandboxID="b-0123456789abcdef")
        r = envd(server, unknown, "/process.Process/List")
        assert r.status == 401, f"an unknown sandbox: {r!r}"
        assert envd(server, sandbox, "/process.Process/List").status == 200
    finally:
        control(server, "DELETE", f"/sandboxes/{other.json['sandboxID']}")
    assert_alive(server, token=TOK_A)


def test_another_tenants_key_sees_nothing(server, sandbox):
    sid = sandbox["sandboxID"]
    for method, path, body in (("GET", f"/sandboxes/{sid}", None),
                               ("POST", f"/sandboxes/{sid}/timeout", {"timeout": 1}),
                               ("POST", f"/v2/sandboxes/{sid}/connect", {}),
                               ("GET", f"/sandboxes/{sid}/metrics", None),
                               ("DELETE", f"/sandboxes/{sid}", None)):
        r = control(server, method, path, body, key=TOK_B)
        unknown = control(server, method, path.replace(sid, "b-0123456789abcdef"), body,
                          key=TOK_B)
        assert r.status == unknown.status == 404, f"{method} {path}: {r!r}"
        assert r.json["code"] == 404
        assert r.json["message"].replace(sid, "ID") == \
            unknown.json["message"].replace("b-0123456789abcdef", "ID")
    listed = control(server, "GET", "/v2/sandboxes", key=TOK_B)
    assert listed.status == 200 and listed.json == [], f"{listed!r}"
    assert control(server, "GET", f"/sandboxes/{sid}").status == 200, "a's sandbox is intact"
    # and its own routes still serve it (b's probes must not have marked it gone)
    assert envd(server, sandbox, "/process.Process/List").status == 200
    wrong = control(server, "GET", "/v2/sandboxes", key="not-a-token")
    assert wrong.status == 401, f"{wrong!r}"


@pytest.mark.parametrize("name, header", [
    ("not Basic", "Bearer dXNlcjo="),
    ("not base64", "Basic !!!!"),
    ("a path for a name", "Basic " + base64.b64encode(b"../etc:").decode()),
    ("a huge header", "Basic " + "A" * 6000),
    ("a third user", "Basic " + base64.b64encode(b"nobody:").decode()),
    ("root by uid, not name, with a group", "Basic " + base64.b64encode(b"0:0:").decode()),
])
def test_hostile_user_headers_run_nothing(server, sandbox, name, header):
    """The SDK's per-call user (Authorization: Basic base64(user:)) is decoded with bounds and
    names only the box's user or root; anything else runs nothing and says why."""
    marker = f"/tmp/ran-{secrets.token_hex(4)}"
    r = envd(server, sandbox, "/process.Process/Start", stream=True,
             message={"process": {"cmd": "touch", "args": [marker]}},
             headers={"Authorization": header})
    assert r.status == 200, f"{name}: {r!r}"
    messages = envelopes(r.body)
    assert messages[-1][0] == 2, f"{name}: {messages!r}"
    assert messages[-1][1]["error"]["code"] == "invalid_argument", f"{name}: {messages!r}"
    assert len(messages[-1][1]["error"]["message"]) < 400
    check = envd(server, sandbox, "/filesystem.Filesystem/Stat", message={"path": marker})
    assert check.status == 404, f"{name}: the command ran: {check!r}"
    assert_alive(server, token=TOK_A)


@pytest.mark.parametrize("name, raw", [
    ("no envelope", b'{"process":{"cmd":"true"}}'),
    ("a length past the body", struct.pack(">BI", 0, 1000) + b"{}"),
    ("a huge claimed length", struct.pack(">BI", 0, 0xFFFFFFFF) + b"{}"),
    ("compressed", struct.pack(">BI", 1, 2) + b"{}"),
    ("end of stream from a client", struct.pack(">BI", 2, 2) + b"{}"),
    ("two envelopes", (struct.pack(">BI", 0, 2) + b"{}") * 2),
    ("not JSON", struct.pack(">BI", 0, 3) + b"{{{"),
    ("deep JSON", struct.pack(">BI", 0, 20000) + b"[" * 10000 + b"]" * 10000),
    ("an argv with a NUL", None),
])
def test_malformed_connect_calls(server, sandbox, name, raw):
    if raw is None:
        text = json.dumps({"process": {"cmd": "echo", "args": ["a\u0000b"]}}).encode()
        raw = struct.pack(">BI", 0, len(text)) + text
    r = envd(server, sandbox, "/process.Process/Start", raw=raw, stream=True)
    # A stream's error is its end-of-stream envelope (a Connect client reads it only there).
    assert r.status == 200, f"{name}: {r!r}"
    [(flags, end)] = envelopes(r.body)
    assert flags == 2 and end["error"]["code"] == "invalid_argument", f"{name}: {end!r}"
    assert len(end["error"]["message"]) < 1000
    assert_alive(server, token=TOK_A)


@pytest.mark.parametrize("name, body", [
    ("unterminated", b"--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nx"),
    ("no filename", b"--B\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nx\r\n--B--"),
    ("2000 parts", b"".join(b"--B\r\nContent-Disposition: form-data; name=\"f\"; "
                            b"filename=\"p%d\"\r\n\r\nx\r\n" % i for i in range(2000)) + b"--B--"),
    ("endless headers", b"--B\r\n" + b"X: y\r\n" * 4000),
])
def test_hostile_uploads(server, sandbox, name, body):
    h = {"E2b-Sandbox-Id": sandbox["sandboxID"], "E2b-Sandbox-Port": "49983",
         "X-Access-Token": sandbox["envdAccessToken"]}
    r = request(server, "POST", "/files", raw=body, content_type="multipart/form-data; boundary=B",
                token="", headers=h)
    assert r.status == 400, f"{name}: {r!r}"
    assert_alive(server, token=TOK_A)


@pytest.mark.parametrize("name, body", [
    # 256 MiB of zeros in about 250 KiB of gzip: inflated only to what a plain body may hold
    # (--max-body, 64 MiB), then 413.
    ("bomb", None),
    ("not gzip", b"plain text said to be gzip"),
    ("cut short", gzip.compress(b"some data " * 1000)[:50]),
    ("trailing bytes", gzip.compress(b"data") + b"more"),
])
def test_hostile_gzip_uploads(server, sandbox, name, body):
    if body is None:
        body = gzip.compress(bytes(256 * MIB), compresslevel=9)
    h = {"E2b-Sandbox-Id": sandbox["sandboxID"], "E2b-Sandbox-Port": "49983",
         "X-Access-Token": sandbox["envdAccessToken"], "Content-Encoding": "gzip"}
    baseline = server.rss_kib()
    r = request(server, "POST", "/files?path=/home/user/up.bin", raw=body,
                content_type="application/octet-stream", token="", headers=h, timeout=120)
    assert r.status == (413 if name == "bomb" else 400), f"{name}: {r!r}"
    assert b"gzip body" in r.body, f"{name}: {r.body[:300]!r}"
    growth_mib = (server.rss_kib() - baseline) / 1024
    assert growth_mib < 100, f"{name}: the server's RSS grew by {growth_mib:.0f} MiB"
    assert_alive(server, token=TOK_A)


def test_an_output_flood_is_bounded_and_the_server_stays_flat(server, sandbox):
    baseline = server.rss_kib()
    sampler = hostile.RssSampler(server)
    sampler.start()
    r = envd(server, sandbox, "/process.Process/Start", stream=True, timeout=180,
             message={"process": {"cmd": "sh", "args": [
                 "-c", "head -c 200000000 /dev/zero | tr '\\0' x"]}},
             headers={"Connect-Timeout-Ms": "120000"})
    peak = sampler.stop()
    assert r.status == 200, f"{r!r}"
    messages = envelopes(r.body)
    assert messages[0][1] == {"event": {"start": {"pid": messages[0][1]["event"]["start"]["pid"]}}}
    assert messages[-1] == (2, {}), f"the end of the stream: {messages[-1]!r}"
    end = messages[-2][1]["event"]["end"]
    got = sum(len(m["event"]["data"]["stdout"]) * 3 // 4 for _, m in messages[1:-2]
              if "data" in m.get("event", {}))
    assert 8 * MIB <= got <= 20 * MIB, f"{got} bytes of a 200 MB flood came through"
    assert "exitCode" in end, f"{end!r}"
    growth_mib = (peak - baseline) / 1024
    assert growth_mib < 48, f"the server's RSS grew by {growth_mib:.0f} MiB during the flood"
    assert_alive(server, token=TOK_A)


def test_a_client_that_leaves_mid_stream_leaves_the_command_to_its_timeout(server, sandbox):
    text = json.dumps({"process": {"cmd": "sh", "args": ["-c", "while :; do echo tick; sleep 0.05; done"]}}).encode()
    head = (f"POST /process.Process/Start HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"E2b-Sandbox-Id: {sandbox['sandboxID']}\r\nE2b-Sandbox-Port: 49983\r\n"
            f"X-Access-Token: {sandbox['envdAccessToken']}\r\nConnect-Timeout-Ms: 4000\r\n"
            f"Content-Type: application/connect+json\r\nContent-Length: {len(text) + 5}\r\n\r\n")
    s = hostile.tcp_socket(server, timeout=10)
    try:
        s.sendall(head.encode() + struct.pack(">BI", 0, len(text)) + text)
        # The headers go out before the command starts; its start event says it runs.
        got, deadline = b"", time.monotonic() + 30
        while b'"start"' not in got and time.monotonic() < deadline:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
        assert b" 200 " in got.split(b"\r\n")[0], got[:200]
        assert b'"start"' in got, f"no start event: {got[:300]!r}"
    finally:
        s.close()  # gone mid-stream

    def ticking():
        listed = envd(server, sandbox, "/process.Process/List")
        assert listed.status == 200, f"{listed!r}"
        return [p for p in listed.json["processes"] if "tick" in " ".join(p["config"]["args"])]

    assert ticking(), "the command stopped when its client left (E2B leaves it running)"
    deadline = time.monotonic() + 20
    while ticking() and time.monotonic() < deadline:
        time.sleep(0.25)
    assert not ticking(), "the command outlived its Connect-Timeout-Ms"
    assert_alive(server, token=TOK_A)


def test_a_box_that_kills_its_own_agent(server, python_image):
    a = control(server, "POST", "/v2/sandboxes", {"templateID": "python", "timeout": 600})
    assert a.status == 201, f"{a!r}"
    victim = a.json
    r = envd(server, victim, "/process.Process/Start", stream=True, timeout=60,
             message={"process": {"cmd": "sh", "args": ["-c", "kill -9 -1; kill -9 1; sleep 5"]}},
             headers={"Connect-Timeout-Ms": "30000"})
    assert r.status == 200, f"{r!r}"
    assert envelopes(r.body)[-1][0] == 2, "the stream ends with its end-of-stream envelope"
    # Whatever is left of it answers cleanly: a Connect error or "not running", never a 500.
    for _ in range(3):
        after = envd(server, victim, "/process.Process/List")
        assert after.status in (200, 502, 503), f"{after!r}"
        files = request(server, "GET", "/files?path=/etc/hostname", token="",
                        headers={"E2b-Sandbox-Id": victim["sandboxID"], "E2b-Sandbox-Port": "49983",
                                 "X-Access-Token": victim["envdAccessToken"]})
        assert files.status in (200, 404, 502, 503), f"{files!r}"
    control(server, "DELETE", f"/sandboxes/{victim['sandboxID']}")
    assert_alive(server, token=TOK_A, run=True)


def test_contexts_racing_for_the_last_places_stay_within_the_bound(server, sandbox):
    """Twelve context creates at once: eight places (the server's bound), the rest 429."""
    import concurrent.futures
    h = {"E2b-Sandbox-Id": sandbox["sandboxID"], "E2b-Sandbox-Port": "49999",
         "E2B-Traffic-Access-Token": sandbox["envdAccessToken"]}

    def create(_):
        return request(server, "POST", "/contexts", {"language": "bash"}, token="", headers=h)

    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(create, range(12)))
    made = [a for a in answers if a.status == 200]
    refused = [a for a in answers if a.status == 429]
    assert len(made) == 8 and len(refused) == 4, [a.status for a in answers]
    listed = request(server, "GET", "/contexts", token="", headers=h)
    assert listed.status == 200 and len(listed.json) == 8 + 2, f"{listed!r}"
    for a in made:
        gone = request(server, "DELETE", f"/contexts/{a.json['id']}", token="", headers=h)
        assert gone.status == 204, f"{gone!r}"
    assert_alive(server, token=TOK_A)


def test_a_command_timeout_past_the_ceiling_gets_the_ceiling(serve, python_image):
    """Connect-Timeout-Ms asks for 10 minutes on a server whose exec ceiling is 3 s: the
    command is killed at the ceiling."""
    small = serve(["--max-exec-timeout", "3", "--exec-timeout", "3"], token_lines=TOKEN_LINES,
                  name="e2b-ceiling")
    try:
        a = control(small, "POST", "/v2/sandboxes", {"templateID": "python", "timeout": 600})
        assert a.status == 201, f"{a!r}"
        started = time.monotonic()
        r = envd(small, a.json, "/process.Process/Start", stream=True, timeout=60,
                 message={"process": {"cmd": "sleep", "args": ["60"]}},
                 headers={"Connect-Timeout-Ms": "600000"})
        took = time.monotonic() - started
        assert r.status == 200, f"{r!r}"
        messages = envelopes(r.body)
        end = messages[-2][1]["event"]["end"]
        assert end["exited"] is False and "timeout" in end["error"], f"{end!r}"
        assert messages[-1][1]["error"]["code"] == "deadline_exceeded", f"{messages[-1]!r}"
        assert took < 20, f"the command ran {took:.1f} s past a 3 s ceiling"
    finally:
        hostile.finish(small, token=TOK_A)
