"""Hostile JSON (issue 32, attack 1 and "Parsing"): nested 200,000 deep (the `id` of a
JSON-RPC message to /mcp, `env` of /v1/boxes and /v1/run, the whole body of every route that
takes JSON), 60 MB strings and field names below --max-body and a body over it, invalid
UTF-8. Each is a 400 (MCP: a JSON-RPC parse error) whose message is a few hundred bytes at
most, answered quickly; the server lives on for everyone else and keeps no box of it."""
import json
import time

import pytest

import hostile
from hostile import BOX, assert_alive, assert_no_boxes, assert_short_error, request

DEPTH = 200_000
MIB = 1 << 20
HUGE = 60 * MIB  # below the default --max-body (64 MiB)
MAX_BODY = 64 * MIB
# A parse (and the answer) of a 60 MB body on a busy 2-core machine; a client's value must not
# be compared, suggested or echoed at its own length.
QUICK_S = 10


@pytest.fixture(scope="module")
def server(serve):
    # A configured model (at a closed port of loopback, never reached: every body here is
    # refused before) so that /v1/ask parses its body instead of answering 409.
    s = serve(["--model", "hostile-test", "--base-url",
                                   "http://127.0.0.1:9/v1", "--max-body", "64"], name="parsing")
    yield s
    hostile.finish(s)


def deep(shape, depth=DEPTH):
    if shape == "array":
        return b"[" * depth + b"]" * depth
    if shape == "object":
        return b'{"a":' * depth + b"1" + b"}" * depth
    # arrays and objects in turn, the innermost value a string
    half = depth // 2
    return b'[{"k":' * half + b'"v"' + b"}]" * half


SHAPES = ["array", "object", "mixed"]


def assert_too_deep(a, what):
    assert a.status == 400, f"{what}: {a!r}"
    message = assert_short_error(a, "invalid_argument")
    assert "more than 64 deep" in message, f"{what}: {message!r}"


def mcp_post(server, raw, session=None, timeout=30):
    headers = {"Accept": "application/json, text/event-stream"}
    if session:
        headers["Mcp-Session-Id"] = session
        headers["MCP-Protocol-Version"] = "2025-11-25"
    return request(server, "POST", "/mcp", raw=raw, headers=headers, timeout=timeout)


def assert_rpc_parse_error(a, what):
    assert a.status in (200, 400), f"{what}: {a!r}"
    assert len(a.body) <= hostile.MAX_ERROR_BODY, f"{what}: {len(a.body)} bytes: {a!r}"
    j = a.json
    assert isinstance(j, dict) and j.get("jsonrpc") == "2.0", f"{what}: {a!r}"
    assert j.get("id", "absent") is None, f"{what}: id must be null: {a!r}"
    assert j.get("error", {}).get("code") == -32700, f"{what}: want -32700: {a!r}"


INIT_PARAMS = {"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "hostile", "version": "1"}}


def mcp_initialize(server):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": INIT_PARAMS}).encode()
    a = mcp_post(server, body)
    assert a.status == 200, f"initialize: {a!r}"
    session = a.headers.get("mcp-session-id")
    assert session, f"initialize answered no Mcp-Session-Id: {a!r}"
    note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
    assert mcp_post(server, note, session).status == 202
    return session


def mcp_end(server, session):
    a = request(server, "DELETE", "/mcp", headers={"Mcp-Session-Id": session}, timeout=30)
    assert a.status in (200, 204), f"DELETE /mcp: {a!r}"


# Deep JSON -------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("method", ["initialize", "ping", "tools/call"])
def test_deep_id_of_a_json_rpc_message(server, shape, method):
    """The crash of the issue: a 200,000-deep id, echoed back through a recursive dump()."""
    session = None if method == "initialize" else mcp_initialize(server)
    try:
        params = {"initialize": INIT_PARAMS, "ping": {},
                  "tools/call": {"name": "run_python", "arguments": {"code": "1"}}}[method]
        body = (b'{"jsonrpc":"2.0","id":' + deep(shape) + b',"method":' +
                json.dumps(method).encode() + b',"params":' + json.dumps(params).encode() + b"}")
        assert_rpc_parse_error(mcp_post(server, body, session), f"{method} with a deep id")
        assert_alive(server)
        if session:  # the session goes on
            ping = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "ping"}).encode()
            a = mcp_post(server, ping, session)
            assert a.status == 200 and a.json.get("id") == 7, f"ping after the attack: {a!r}"
    finally:
        if session:
            mcp_end(server, session)
    assert_no_boxes(server)


@pytest.mark.parametrize("shape", SHAPES)
def test_deep_mcp_params(server, shape):
    session = mcp_initialize(server)
    try:
        body = (b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_python",'
                b'"arguments":{"code":' + deep(shape) + b"}}}")
        assert_rpc_parse_error(mcp_post(server, body, session), "deep tool arguments")
        assert_alive(server)
    finally:
        mcp_end(server, session)
    assert_no_boxes(server)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("route", ["/v1/boxes", "/v1/run"])
def test_deep_env(server, route, shape):
    body = (b'{"image":"python","driver":"jail","code":"print(1)","env":' + deep(shape) + b"}"
            if route == "/v1/run" else
            b'{"image":"python","driver":"jail","env":' + deep(shape) + b"}")
    assert_too_deep(request(server, "POST", route, raw=body, timeout=30), f"{route} deep env")
    assert_alive(server)
    assert_no_boxes(server)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("route", ["/v1/boxes", "/v1/run", "/v1/ask"])
def test_deep_whole_body(server, route, shape):
    assert_too_deep(request(server, "POST", route, raw=deep(shape), timeout=30),
                    f"{route} deep body")
    assert_alive(server)
    assert_no_boxes(server)


@pytest.mark.parametrize("shape", SHAPES)
def test_deep_whole_body_mcp(server, shape):
    assert_rpc_parse_error(mcp_post(server, deep(shape)), "/mcp deep body")
    session = mcp_initialize(server)
    try:
        assert_rpc_parse_error(mcp_post(server, deep(shape), session), "/mcp deep body, session")
    finally:
        mcp_end(server, session)
    assert_alive(server)
    assert_no_boxes(server)


def test_one_past_the_bound(server):
    """65 deep is refused as too deep; the bound is 64, not 200,000."""
    assert_too_deep(request(server, "POST", "/v1/boxes",
                            raw=b'{"image":"python","env":' + deep("array", 65) + b"}"),
                    "/v1/boxes env 65 deep")
    assert_no_boxes(server)


# Huge JSON -------------------------------------------------------------------------------------

def test_huge_string_value(server):
    """A 60 MB image name: refused, the answer short and quick, the name not echoed whole."""
    body = b'{"image":"' + b"x" * HUGE + b'"}'
    a = request(server, "POST", "/v1/boxes", raw=body, timeout=60)
    assert a.status == 400, f"{a!r}"
    assert_short_error(a, "invalid_argument")
    assert a.seconds < QUICK_S, f"answered in {a.seconds:.1f} s"
    assert_alive(server)
    assert_no_boxes(server)


@pytest.mark.parametrize("route", ["/v1/boxes", "/v1/run"])
def test_huge_unknown_field_name(server, route):
    """A 60 MB unknown field name: the closest-name suggestion must not compare 60 MB."""
    body = b'{"' + b"k" * HUGE + b'":1}'
    a = request(server, "POST", route, raw=body, timeout=120)
    assert a.status == 400, f"{a!r}"
    assert_short_error(a, "invalid_argument")
    assert a.seconds < QUICK_S, f"answered in {a.seconds:.1f} s (a 60 MB name compared?)"
    assert_alive(server)
    assert_no_boxes(server)


def test_huge_mcp_id(server):
    """A 60 MB string id: an invalid id (longer than 256 bytes), never echoed."""
    body = b'{"jsonrpc":"2.0","id":"' + b"i" * HUGE + b'","method":"ping"}'
    a = mcp_post(server, body, timeout=120)
    assert a.status in (200, 400), f"{a!r}"
    assert len(a.body) <= hostile.MAX_ERROR_BODY, f"{len(a.body)} bytes answered"
    assert a.json.get("error", {}).get("code") == -32600, f"want -32600 (invalid id): {a!r}"
    assert a.seconds < QUICK_S, f"answered in {a.seconds:.1f} s"
    assert_alive(server)


def test_long_mcp_id_is_invalid(server):
    session = mcp_initialize(server)
    try:
        body = json.dumps({"jsonrpc": "2.0", "id": "i" * 257, "method": "ping"}).encode()
        a = mcp_post(server, body, session)
        assert a.json.get("error", {}).get("code") == -32600, f"a 257-byte id: {a!r}"
        assert b"i" * 257 not in a.body
        body = json.dumps({"jsonrpc": "2.0", "id": "i" * 256, "method": "ping"}).encode()
        a = mcp_post(server, body, session)
        assert a.status == 200 and a.json.get("id") == "i" * 256, f"a 256-byte id: {a!r}"
    finally:
        mcp_end(server, session)


def _send_big(server, head, body_chunks, timeout=60):
    """Sends `head` and then the body chunks (in a thread: a server may answer and close before
    it read the body) and returns (the answer bytes, seconds to it)."""
    import threading
    s = hostile.tcp_socket(server, timeout=timeout)
    errors = []

    def send():
        try:
            s.sendall(head)
            for chunk in body_chunks:
                s.sendall(chunk)
        except OSError as e:
            errors.append(e)

    t0 = time.monotonic()
    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        got, _ = hostile.read_until_close(s, timeout)
        return got, time.monotonic() - t0
    finally:
        s.close()
        sender.join(10)


def test_body_over_max_body(server):
    """Content-Length past --max-body: 413, whether or not the body follows."""
    size = MAX_BODY + 1
    head = (f"POST /v1/boxes HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {size}\r\nConnection: close\r\n\r\n").encode()
    chunk = b" " * MIB
    got, seconds = _send_big(server, head, [chunk] * 65)
    assert hostile.status_of(got) == 413, f"{got[:300]!r}"
    assert b"payload_too_large" in got, f"{got[:300]!r}"
    assert seconds < QUICK_S, f"answered in {seconds:.1f} s"
    # and a Content-Length of 1 TiB with no body at all
    head = (f"POST /v1/run HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {1 << 40}\r\nConnection: close\r\n\r\n").encode()
    got, _ = _send_big(server, head, [], timeout=15)
    assert hostile.status_of(got) == 413, f"{got[:300]!r}"
    assert_alive(server)
    assert_no_boxes(server)


def test_chunked_body_over_max_body(server):
    head = (b"POST /v1/boxes HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
    chunk = b"%x\r\n" % MIB + b" " * MIB + b"\r\n"
    got, seconds = _send_big(server, head, [chunk] * 66 + [b"0\r\n\r\n"])
    assert hostile.status_of(got) == 413, f"{got[:300]!r}"
    assert seconds < QUICK_S * 2, f"answered in {seconds:.1f} s"
    assert_alive(server)
    assert_no_boxes(server)


# Invalid UTF-8 ---------------------------------------------------------------------------------

INVALID_UTF8 = [
    b'{"image":"py\xc3\x28thon"}',           # a broken two-byte sequence
    b'{"image":"python","env":{"A":"\xff\xfe"}}',
    b'{"\xed\xa0\x80":1}',                   # an encoded surrogate as a key
    b'{"image":"python","env":{"A":"\\ud800"}}',  # a lone surrogate escape
    b'{"image":"\xf8\x88\x80\x80\x80"}',     # a five-byte form
    b'{"image":"\xc0\xaf"}',                 # an overlong "/"
]


@pytest.mark.parametrize("body", INVALID_UTF8, ids=range(len(INVALID_UTF8)))
@pytest.mark.parametrize("route", ["/v1/boxes", "/v1/run"])
def test_invalid_utf8(server, route, body):
    a = request(server, "POST", route, raw=body, timeout=30)
    assert a.status == 400, f"{a!r}"
    assert_short_error(a, "invalid_argument")  # the answer is UTF-8 JSON itself
    assert_alive(server)
    assert_no_boxes(server)


@pytest.mark.parametrize("body", [b'{"jsonrpc":"2.0","id":"\xff\xfe","method":"ping"}',
                                  b'{"jsonrpc":"2.0","id":1,"method":"p\xc3\x28ing"}'],
                         ids=["id", "method"])
def test_invalid_utf8_mcp(server, body):
    assert_rpc_parse_error(mcp_post(server, body), "invalid UTF-8 to /mcp")
    assert_alive(server)


# Routes of a box ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def box(server, python_image):
    a = request(server, "POST", "/v1/boxes", BOX, timeout=120)
    assert a.status == 201, f"create: {a!r}"
    box_id = a.json["id"]
    yield box_id
    request(server, "DELETE", f"/v1/boxes/{box_id}", timeout=60)


BOX_ROUTES = ["exec", "python", "run_code", "packages"]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("route", BOX_ROUTES)
def test_deep_body_of_box_routes(server, box, route, shape):
    path = f"/v1/boxes/{box}/{route}"
    assert_too_deep(request(server, "POST", path, raw=deep(shape), timeout=30), f"{route}")
    # and as the value of a field the route takes
    field = {"exec": b'{"argv":["true"],"env":', "python": b'{"code":"1","env":',
             "run_code": b'{"code":', "packages": b'{"packages":'}[route]
    assert_too_deep(request(server, "POST", path, raw=field + deep(shape) + b"}", timeout=30),
                    f"{route} deep field")
    a = request(server, "POST", f"/v1/boxes/{box}/exec", {"argv": ["echo", "still"]})
    assert a.status == 200 and a.json["stdout"] == "still\n", f"the box after it: {a!r}"
    assert_alive(server)


def test_invalid_utf8_in_a_box(server, box):
    """Invalid UTF-8 in an exec's argv and env: refused, the box and server go on."""
    for raw in (b'{"argv":["echo","\xff"]}', b'{"argv":["true"],"env":{"\xc3":"1"}}'):
        a = request(server, "POST", f"/v1/boxes/{box}/exec", raw=raw, timeout=30)
        assert a.status == 400, f"{raw!r}: {a!r}"
        assert_short_error(a, "invalid_argument")
    assert_alive(server)


# After all of it --------------------------------------------------------------------------------

def test_server_runs_code_after_everything(server, box, python_image):
    a = request(server, "DELETE", f"/v1/boxes/{box}", timeout=60)
    assert a.status == 204, f"DELETE the module's box: {a!r}"
    assert_alive(server, run=True)
    assert_no_boxes(server)
