"""Tenants (issue 32, attack 5 and "Tenants"; spec32 section 5): a token file with two tokens of
tenant a, one of tenant b and an admin. On every route tenant b gets for a's box exactly what
an unknown box id gets (404 not_found, the same message but for the id); a's second token sees
and uses a's box; the admin sees every tenant. b's attempts change nothing of a's. GET
/v1/boxes, /v1/status, /metrics and MCP sessions show each tenant only its own. Per-tenant
quotas: with --tenant-max-boxes 2 a tenant's third box is a 429 naming the quota while another
tenant can still create, and a token-file field overrides the flag for its tenant."""
import json
import re
import secrets

import pytest

import hostile
from hostile import BOX, assert_alive, request

TOK_A, TOK_A2, TOK_B, TOK_ADMIN = (f"tok{n}-{secrets.token_hex(12)}"
                                   for n in ("A", "A2", "B", "Admin"))
TOKEN_LINES = ["# hostile-client tests: two tenants and an admin",
               f"{TOK_A} tenant=a", f"{TOK_A2} tenant=a", "", f"{TOK_B} tenant=b",
               f"{TOK_ADMIN} admin"]
SECRET = "a-secret-" + secrets.token_hex(8)


@pytest.fixture(scope="module")
def server(serve):
    s = serve(token_lines=TOKEN_LINES, name="tenants")
    yield s
    hostile.finish(s, token=TOK_ADMIN)


@pytest.fixture(scope="module")
def a_box(server, python_image):
    """Tenant a's box, with a file in it."""
    a = request(server, "POST", "/v1/boxes", BOX, token=TOK_A, timeout=120)
    assert a.status == 201, f"tenant a creates a box: {a!r}"
    box = a.json["id"]
    w = request(server, "PUT", f"/v1/boxes/{box}/files?path=/work/secret.txt",
                raw=SECRET.encode(), content_type="application/octet-stream", token=TOK_A)
    assert w.status == 204, f"tenant a writes a file: {w!r}"
    yield box
    request(server, "DELETE", f"/v1/boxes/{box}", token=TOK_A, timeout=60)


def unknown_like(box_id):
    """An id this server could have made (its node, its incarnation: the first 4 hex digits)
    that no box has: what a box destroyed a moment ago leaves."""
    m = re.fullmatch(r"b-([0-9a-f]{4})([0-9a-f]{12})(\..*)?", box_id)
    assert m, f"a box id of an unexpected shape: {box_id}"
    while True:
        other = "b-" + m.group(1) + secrets.token_hex(6) + (m.group(3) or "")
        if other != box_id:
            return other


def masked(text, box_id):
    return text.replace(box_id, "<id>")


# method, path (after /v1/boxes/{id}), JSON body or raw bytes, extra headers
ROUTES = {
    "get": ("GET", "", None, None, {}),
    "delete": ("DELETE", "", None, None, {}),
    "exec": ("POST", "/exec", {"argv": ["cat", "/work/secret.txt"]}, None, {}),
    "exec_stream": ("POST", "/exec", {"argv": ["cat", "/work/secret.txt"]}, None,
                    {"Accept": "text/event-stream"}),
    "python": ("POST", "/python", {"code": "print(open('/work/secret.txt').read())"}, None, {}),
    "run_code": ("POST", "/run_code", {"code": "open('/work/secret.txt').read()"}, None, {}),
    "run_code_stream": ("POST", "/run_code", {"code": "1"}, None,
                        {"Accept": "text/event-stream"}),
    "restart": ("POST", "/restart", None, None, {}),
    "interrupt": ("POST", "/interrupt", None, None, {}),
    "packages": ("POST", "/packages", {"packages": ["tabulate"]}, None, {}),
    "files_put": ("PUT", "/files?path=/work/evil.txt", None, b"evil", {}),
    "files_put_tar": ("PUT", "/files?path=/work/evil", None, b"\0" * 1024,
                      {"Content-Type": "application/x-tar"}),
    "files_get": ("GET", "/files?path=/work/secret.txt", None, None, {}),
    "files_get_dir": ("GET", "/files?path=/work", None, None, {}),
    "files_list": ("GET", "/files?path=/work&list=1", None, None, {}),
    "files_delete": ("DELETE", "/files?path=/work/secret.txt", None, None, {}),
}


def call_route(server, name, box_id, token):
    method, suffix, body, raw, headers = ROUTES[name]
    ctype = headers.get("Content-Type", "application/octet-stream") if raw is not None else None
    return request(server, method, f"/v1/boxes/{box_id}{suffix}", body, raw=raw, token=token,
                   headers={k: v for k, v in headers.items() if k != "Content-Type"},
                   content_type=ctype, timeout=60)


@pytest.mark.parametrize("route", list(ROUTES))
def test_another_tenants_box_is_an_unknown_box(server, a_box, route):
    other = unknown_like(a_box)
    theirs = call_route(server, route, a_box, TOK_B)
    unknown = call_route(server, route, other, TOK_B)
    assert unknown.status == 404, f"{route} on an unknown id: {unknown!r}"
    assert theirs.status == unknown.status, \
        f"{route}: tenant b on a's box got {theirs!r}, on an unknown id {unknown!r}"
    assert theirs.error[0] == unknown.error[0] == "not_found", f"{route}: {theirs!r}"
    assert masked(theirs.error[1], a_box) == masked(unknown.error[1], other), \
        f"{route}: the messages differ: {theirs.error[1]!r} / {unknown.error[1]!r}"
    assert SECRET.encode() not in theirs.body
    # the same holds for a's box on tenant b's side of the cluster headers etc.: nothing of a's
    # box differs from nothing at all
    assert set(theirs.headers) - {"x-request-id", "date"} == \
        set(unknown.headers) - {"x-request-id", "date"}, f"{route}: headers differ"


def test_b_changed_nothing_of_a(server, a_box):
    g = request(server, "GET", f"/v1/boxes/{a_box}", token=TOK_A)
    assert g.status == 200, f"a's box after b's attempts: {g!r}"
    f = request(server, "GET", f"/v1/boxes/{a_box}/files?path=/work/secret.txt", token=TOK_A)
    assert f.status == 200 and f.body == SECRET.encode(), f"a's file: {f!r}"
    e = request(server, "GET", f"/v1/boxes/{a_box}/files?path=/work/evil.txt", token=TOK_A)
    assert e.status == 404, f"b's write reached a's box: {e!r}"
    e = request(server, "GET", f"/v1/boxes/{a_box}/files?path=/work/evil", token=TOK_A)
    assert e.status == 404, f"b's tar reached a's box: {e!r}"


def test_box_json_names_its_tenant(server, a_box):
    g = request(server, "GET", f"/v1/boxes/{a_box}", token=TOK_A)
    assert g.status == 200 and g.json.get("tenant") == "a", f"{g!r}"


def test_a_second_token_of_the_tenant_shares_its_boxes(server, a_box):
    assert a_box in hostile.box_ids(server, token=TOK_A2)
    e = request(server, "POST", f"/v1/boxes/{a_box}/exec",
                {"argv": ["cat", "/work/secret.txt"]}, token=TOK_A2)
    assert e.status == 200 and e.json["stdout"] == SECRET, f"{e!r}"


def test_the_admin_sees_every_tenant(server, a_box):
    b = request(server, "POST", "/v1/boxes", BOX, token=TOK_B, timeout=120)
    assert b.status == 201, f"tenant b creates a box: {b!r}"
    b_box = b.json["id"]
    try:
        assert b.json.get("tenant") == "b", f"{b!r}"
        admin = hostile.box_ids(server, token=TOK_ADMIN)
        assert a_box in admin and b_box in admin, f"the admin lists {admin}"
        seen_by_a = hostile.box_ids(server, token=TOK_A)
        seen_by_b = hostile.box_ids(server, token=TOK_B)
        assert b_box not in seen_by_a, f"tenant a lists b's box: {seen_by_a}"
        assert a_box not in seen_by_b, f"tenant b lists a's box: {seen_by_b}"
        assert b_box in seen_by_b
        g = request(server, "GET", f"/v1/boxes/{a_box}", token=TOK_ADMIN)
        assert g.status == 200 and g.json.get("tenant") == "a", f"{g!r}"
        e = request(server, "POST", f"/v1/boxes/{b_box}/exec", {"argv": ["echo", "admin"]},
                    token=TOK_ADMIN)
        assert e.status == 200 and e.json["stdout"] == "admin\n", f"{e!r}"
        # a's box is as unknown to b as b's is to a
        x = request(server, "GET", f"/v1/boxes/{b_box}", token=TOK_A)
        assert x.status == 404 and x.error[0] == "not_found", f"{x!r}"
    finally:
        request(server, "DELETE", f"/v1/boxes/{b_box}", token=TOK_B, timeout=60)


def test_status_shows_only_the_callers_tenant(server, a_box):
    b = request(server, "GET", "/v1/status", token=TOK_B)
    assert b.status == 200, f"{b!r}"
    assert a_box.encode() not in b.body, "tenant b's /v1/status names a's box"
    assert [x for x in b.json.get("boxes", [])] == [], f"b's status lists {b.json['boxes']}"
    a = request(server, "GET", "/v1/status", token=TOK_A)
    assert a.status == 200 and a_box.encode() in a.body, f"a's status lacks its box: {a!r}"
    admin = request(server, "GET", "/v1/status", token=TOK_ADMIN)
    assert admin.status == 200 and a_box.encode() in admin.body


def test_metrics_show_a_tenant_nothing_of_another(server, a_box):
    none = request(server, "GET", "/metrics", token="")
    assert none.status == 401, f"/metrics without a token: {none!r}"
    b = request(server, "GET", "/metrics", token=TOK_B)
    assert b.status in (200, 403), f"/metrics for tenant b: {b!r}"
    text = b.body.decode(errors="replace")
    assert 'tenant="a"' not in text and a_box not in text, \
        f"tenant b's /metrics shows tenant a: {text[:600]}"
    admin = request(server, "GET", "/metrics", token=TOK_ADMIN)
    assert admin.status == 200, f"{admin!r}"
    assert 'codebox_tenant_boxes{tenant="a"}' in admin.body.decode(), \
        "the admin's /metrics lacks codebox_tenant_boxes{tenant=\"a\"}"
    assert "codebox_tenant_requests_total{" in admin.body.decode()


def test_metrics_of_a_tenant_are_its_own_series_only(server, a_box):
    """docs/server.md, Tenants: an admin sees every series; any other tenant only its own."""
    a = request(server, "GET", "/metrics", token=TOK_A)
    assert a.status == 200, f"{a!r}"
    text = a.body.decode(errors="replace")
    assert 'codebox_tenant_boxes{tenant="a"}' in text, text[:600]
    series = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert all('tenant="a"' in line for line in series), \
        f"tenant a's /metrics shows series that are not its own: {series[:10]}"


def test_unauthenticated_and_wrong_tokens(server, a_box):
    for token in ("", "tokA", TOK_A + "x", TOK_A[:-1], f"{TOK_A} tenant=a"):
        r = request(server, "GET", f"/v1/boxes/{a_box}", token=token)
        assert r.status == 401, f"token {token!r}: {r!r}"
        assert SECRET.encode() not in r.body


# MCP sessions ----------------------------------------------------------------------------------

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "hostile", "version": "1"}}}


def mcp(server, message, token, session=None, method="POST"):
    headers = {"Accept": "application/json, text/event-stream"}
    if session:
        headers["Mcp-Session-Id"] = session
        headers["MCP-Protocol-Version"] = "2025-11-25"
    raw = json.dumps(message).encode() if message is not None else None
    return request(server, method, "/mcp", raw=raw, token=token, headers=headers, timeout=120)


def test_another_tenants_mcp_session_is_an_unknown_session(server, python_image):
    init = mcp(server, INIT, TOK_A)
    assert init.status == 200, f"a's initialize: {init!r}"
    session = init.headers.get("mcp-session-id")
    assert session, f"{init!r}"
    try:
        assert mcp(server, {"jsonrpc": "2.0", "method": "notifications/initialized"}, TOK_A,
                   session).status == 202
        # a's session makes its box, with a file
        w = mcp(server, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                         "params": {"name": "write_file",
                                    "arguments": {"path": "s.txt", "content": SECRET}}},
                TOK_A, session)
        assert w.status == 200 and not w.json["result"].get("isError"), f"{w!r}"
        unknown = secrets.token_hex(16)
        for message in ({"jsonrpc": "2.0", "id": 3, "method": "ping"},
                        {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                         "params": {"name": "read_file", "arguments": {"path": "s.txt"}}}):
            theirs = mcp(server, message, TOK_B, session)
            other = mcp(server, message, TOK_B, unknown)
            assert other.status == 404, f"an unknown session: {other!r}"
            assert theirs.status == other.status, f"b with a's session: {theirs!r} / {other!r}"
            assert masked(theirs.body.decode(), session) == masked(other.body.decode(), unknown), \
                f"b with a's session: {theirs!r} / {other!r}"
            assert SECRET.encode() not in theirs.body
        theirs = mcp(server, None, TOK_B, session, method="DELETE")
        other = mcp(server, None, TOK_B, unknown, method="DELETE")
        assert theirs.status == other.status == 404, f"DELETE /mcp: {theirs!r} / {other!r}"
        assert masked(theirs.body.decode(), session) == masked(other.body.decode(), unknown)
        # a's session is untouched, and its box is not b's to see
        r = mcp(server, {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                         "params": {"name": "read_file", "arguments": {"path": "s.txt"}}},
                TOK_A, session)
        assert r.status == 200 and SECRET in json.dumps(r.json), f"a's session after b: {r!r}"
        assert hostile.box_ids(server, token=TOK_B) == []
    finally:
        mcp(server, None, TOK_A, session, method="DELETE")


def test_nothing_left(server):
    hostile.destroy_all(server, token=TOK_A)
    assert_alive(server, token=TOK_ADMIN)
    hostile.assert_no_boxes(server, token=TOK_ADMIN)


# Quotas ----------------------------------------------------------------------------------------

TOK_C = f"tokC-{secrets.token_hex(12)}"


@pytest.fixture(scope="module")
def quota_server(serve):
    s = serve(["--tenant-max-boxes", "2"],
                     token_lines=TOKEN_LINES + [f"{TOK_C} tenant=c max-boxes=1"],
                     name="tenant-quotas")
    yield s
    hostile.finish(s, token=TOK_ADMIN)


def create(server, token):
    return request(server, "POST", "/v1/boxes", BOX, token=token, timeout=120)


def assert_quota_refusal(a, quota, what):
    assert a.status == 429, f"{what}: {a!r}"
    message = hostile.assert_short_error(a, "resource_exhausted")
    assert a.headers.get("retry-after"), f"{what}: no Retry-After: {a!r}"
    assert "max-boxes" in message and str(quota) in message, \
        f"{what}: the message does not name the quota: {message!r}"


def test_tenant_box_quota(quota_server, python_image):
    s = quota_server
    made = []
    try:
        for token in (TOK_A, TOK_A2):
            a = create(s, token)
            assert a.status == 201, f"tenant a's box {len(made) + 1}: {a!r}"
            made.append((a.json["id"], token))
        third = create(s, TOK_A)
        if third.status == 201:
            made.append((third.json["id"], TOK_A))
        assert_quota_refusal(third, 2, "tenant a's third box")
        run = request(s, "POST", "/v1/run", {**BOX, "code": "print(1+1)"}, token=TOK_A2,
                      timeout=120)
        assert run.status == 429, f"a one-shot run past tenant a's quota: {run!r}"
        b = create(s, TOK_B)
        assert b.status == 201, f"tenant b while a is at its quota: {b!r}"
        made.append((b.json["id"], TOK_B))
        assert_alive(s, token=TOK_B, run=True)
        # a box given back makes room again
        box, token = made.pop(0)
        assert request(s, "DELETE", f"/v1/boxes/{box}", token=token).status == 204
        again = create(s, TOK_A)
        assert again.status == 201, f"tenant a after deleting one: {again!r}"
        made.append((again.json["id"], TOK_A))
    finally:
        for box, token in made:
            request(s, "DELETE", f"/v1/boxes/{box}", token=token, timeout=60)
    hostile.assert_no_boxes(s, token=TOK_ADMIN)


def test_token_file_quota_overrides_the_flag(quota_server, python_image):
    s = quota_server
    made = []
    try:
        a = create(s, TOK_C)
        assert a.status == 201, f"tenant c's first box: {a!r}"
        made.append(a.json["id"])
        second = create(s, TOK_C)
        if second.status == 201:
            made.append(second.json["id"])
        assert_quota_refusal(second, 1, "tenant c's second box (max-boxes=1)")
        assert_alive(s, token=TOK_A, run=True)
    finally:
        for box in made:
            request(s, "DELETE", f"/v1/boxes/{box}", token=TOK_C, timeout=60)
    hostile.assert_no_boxes(s, token=TOK_ADMIN)
