"""HTTP framing tricks (issue 32, "Shown by"): bad chunk sizes, both Content-Length and
Transfer-Encoding, negative and overflowing Content-Length, pipelined requests, oversized
headers, and the slow clients: slowloris (one byte a second), a connection that never sends
its first byte, a Content-Length larger than the body and then silence. Each is refused or cut
within the server's deadlines (docs/server.md, Security: a first byte within 5 s, a request's
head within 10 s of its first byte, a body within 30 s) while another client is served."""
import json
import threading
import time

import pytest

import hostile
from hostile import assert_alive, assert_no_boxes, raw_exchange, request, status_of

FIRST_BYTE_S = 5     # spec32 section 2: first_byte_timeout
HEADER_S = 10        # header_timeout, from the first byte to the end of the head
BODY_S = 30          # read_timeout for the body
SLACK_S = 4          # a busy 2-core machine
HOST = b"Host: 127.0.0.1\r\n"
# A route that takes a body and makes no box: a request framed well is a 404 (no such box), one
# framed badly a 400; a lenient parse never starts a box.
NO_BOX = "/v1/boxes/b-0123456789abcdef/restart"


@pytest.fixture(scope="module")
def server(serve):
    s = serve(["--max-body", "1"], name="framing")
    yield s
    hostile.finish(s)


# The slow clients run in the background from the start of the module, while the other cases
# (and a poller of their own) are served; the last cases of the file collect what happened.

class SlowClient(threading.Thread):
    def __init__(self, server, name, opening, drip, limit_s):
        super().__init__(daemon=True, name=name)
        self.server, self.opening, self.drip, self.limit_s = server, opening, drip, limit_s
        self.cut_after = None   # seconds from its first byte (or connect) to the server's close
        self.answer = b""
        self.error = None

    def run(self):
        try:
            s = hostile.tcp_socket(self.server, timeout=5)
        except OSError as e:
            self.error = f"connect: {e!r}"
            return
        try:
            t0 = time.monotonic()
            if self.opening:
                s.sendall(self.opening)
            while time.monotonic() - t0 < self.limit_s:
                got, closed = hostile.read_until_close(s, 1.0)
                self.answer += got
                if closed:
                    self.cut_after = time.monotonic() - t0
                    return
                if self.drip:
                    try:
                        s.send(self.drip)
                    except OSError:
                        self.cut_after = time.monotonic() - t0
                        return
        except OSError as e:
            self.error = repr(e)
        finally:
            s.close()


class Poller(threading.Thread):
    """Another client: a fresh GET /healthz every half second; records the failures."""

    def __init__(self, server, seconds):
        super().__init__(daemon=True, name="poller")
        self.server, self.seconds = server, seconds
        self.served, self.failures = 0, []

    def run(self):
        end = time.monotonic() + self.seconds
        while time.monotonic() < end:
            t0 = time.monotonic()
            try:
                a = request(self.server, "GET", "/healthz", timeout=3)
                if a.status == 200:
                    self.served += 1
                else:
                    self.failures.append(f"{a!r}")
            except OSError as e:
                self.failures.append(f"{e!r} after {time.monotonic() - t0:.1f} s")
            time.sleep(0.5)


@pytest.fixture(scope="module")
def slow_clients(server):
    limit = BODY_S + SLACK_S + 2
    clients = {
        # one byte a second of a head that never ends
        "slowloris": SlowClient(server, "slowloris",
                                b"GET /healthz HTTP/1.1\r\n" + HOST + b"X-Slow: ", b"a", limit),
        # a connection that sends nothing at all
        "silent": SlowClient(server, "silent", b"", b"", limit),
        # a head, a Content-Length of 100, ten bytes of body and then silence
        "short_body": SlowClient(server, "short_body",
                                 b"POST /v1/boxes HTTP/1.1\r\n" + HOST +
                                 b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
                                 b'{"image":"', b"", limit),
        # a chunk that says 0x100 bytes, ten of them, then silence
        "short_chunk": SlowClient(server, "short_chunk",
                                  b"POST /v1/boxes HTTP/1.1\r\n" + HOST +
                                  b"Content-Type: application/json\r\n"
                                  b"Transfer-Encoding: chunked\r\n\r\n100\r\n{\"image\":", b"",
                                  limit),
    }
    poller = Poller(server, limit)
    for c in clients.values():
        c.start()
    poller.start()
    return clients, poller


@pytest.fixture(autouse=True)
def _slow_clients_from_the_start(slow_clients):
    """Every case of this file runs while the slow clients hold their connections."""


# Chunked encoding ------------------------------------------------------------------------------

def chunked(route, chunk_lines):
    return (f"POST {route} HTTP/1.1\r\n".encode() + HOST +
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk_lines)


BAD_CHUNKS = {
    "not_hex": b"zz\r\n{}\r\n0\r\n\r\n",
    "negative": b"-1\r\n{}\r\n0\r\n\r\n",
    "overflow": b"1" + b"0" * 40 + b"\r\n{}\r\n0\r\n\r\n",
    "64bit_wrap": b"10000000000000002\r\n{}\r\n0\r\n\r\n",
    "0x_prefix": b"0x2\r\n{}\r\n0\r\n\r\n",
    "empty_size": b"\r\n{}\r\n0\r\n\r\n",
    "nul_in_size": b"2\x00\r\n{}\r\n0\r\n\r\n",
    "size_too_small": b"1\r\n{}\r\n0\r\n\r\n",
    "no_crlf_after_data": b"2\r\n{}XX0\r\n\r\n",
    # RFC 9112, 7.1.1: chunk extensions are limited like the rest of a request (else they
    # are bytes past every limit)
    "huge_extension": b"2;" + b"e" * (64 << 10) + b"\r\n{}\r\n0\r\n\r\n",
}


@pytest.mark.parametrize("name", list(BAD_CHUNKS))
def test_bad_chunk_sizes(server, name):
    got, closed = raw_exchange(server, chunked(NO_BOX, BAD_CHUNKS[name]), timeout=8)
    status = status_of(got)
    allowed = (400, 413) if name in ("overflow", "64bit_wrap", "huge_extension") else (400,)
    assert status in allowed, f"{name}: want {allowed}, got {got[:300]!r}"
    assert closed, f"{name}: the connection stays open after a framing error"
    assert hostile.statuses_of(got) == [status], f"{name}: more than one answer: {got[:600]!r}"
    assert_alive(server)
    assert_no_boxes(server)


def test_content_length_and_transfer_encoding(server):
    """Smuggling: the bytes after the chunked body must not become a request of their own on
    that connection. Either the request is refused, or it is read as chunked and the
    connection is closed after the one answer (RFC 9112, section 6.1)."""
    smuggled = b"GET /v1/openapi.json HTTP/1.1\r\n" + HOST + b"\r\n"
    for order in ("cl_first", "te_first"):
        cl = b"Content-Length: 3\r\n"
        te = b"Transfer-Encoding: chunked\r\n"
        both = cl + te if order == "cl_first" else te + cl
        head = (b"POST " + NO_BOX.encode() + b" HTTP/1.1\r\n" + HOST +
                b"Content-Type: application/json\r\n" + both + b"\r\n")
        got, closed = raw_exchange(server, head + b"0\r\n\r\n" + smuggled, timeout=8)
        statuses = hostile.statuses_of(got)
        assert len(statuses) == 1, f"{order}: {len(statuses)} answers: {got[:600]!r}"
        assert closed, f"{order}: the connection stays open after CL and TE together"
        assert statuses[0] in (400, 404), f"{order}: {got[:300]!r}"
        assert b'"openapi"' not in got, f"{order}: the smuggled request was answered"
    assert_alive(server)
    assert_no_boxes(server)


@pytest.mark.parametrize("te", [b"chunked, identity", b"gzip", b"identity", b"xchunked"])
def test_odd_transfer_encodings(server, te):
    """RFC 9112, 6.3: a request whose Transfer-Encoding does not end in chunked has no
    knowable length: the server MUST answer 400 and close, never read the bytes after the head
    as a request of their own (how requests are smuggled past a proxy)."""
    head = (b"POST " + NO_BOX.encode() + b" HTTP/1.1\r\n" + HOST +
            b"Content-Type: application/json\r\nTransfer-Encoding: " + te + b"\r\n\r\n")
    got, closed = raw_exchange(server, head + b"2\r\n{}\r\n0\r\n\r\n", timeout=8)
    status = status_of(got)
    assert status in (400, 501), f"Transfer-Encoding {te!r}: {got[:300]!r}"
    assert closed, f"Transfer-Encoding {te!r}: the connection stays open"
    assert_alive(server)
    assert_no_boxes(server)


# Content-Length --------------------------------------------------------------------------------

BAD_LENGTHS = {
    "negative": [b"-1"],
    "overflow": [b"99999999999999999999999999"],
    "u64_wrap": [b"18446744073709551617"],
    "hex": [b"0x10"],
    "exponent": [b"1e3"],
    "plus": [b"+2"],
    "list": [b"2, 3"],
    "two_headers": [b"2", b"3"],
    "space_inside": [b"1 0"],
}


@pytest.mark.parametrize("name", list(BAD_LENGTHS))
def test_bad_content_length(server, name):
    head = b"POST " + NO_BOX.encode() + b" HTTP/1.1\r\n" + HOST + \
        b"Content-Type: application/json\r\n"
    for value in BAD_LENGTHS[name]:
        head += b"Content-Length: " + value + b"\r\n"
    got, closed = raw_exchange(server, head + b"\r\n{}", timeout=8)
    status = status_of(got)
    allowed = (400, 413) if name in ("overflow", "u64_wrap") else (400,)
    assert status in allowed, f"Content-Length {BAD_LENGTHS[name]}: {got[:300]!r}"
    assert closed, f"Content-Length {BAD_LENGTHS[name]}: the connection stays open"
    assert_alive(server)
    assert_no_boxes(server)


# Pipelining ------------------------------------------------------------------------------------

def test_pipelined_requests_answered_in_order(server):
    bad_body = b"{not json"
    requests = [
        b"GET /healthz HTTP/1.1\r\n" + HOST + b"\r\n",
        b"GET /v1/status HTTP/1.1\r\n" + HOST + b"\r\n",
        b"GET /v1/boxes/b-0123456789abcdef HTTP/1.1\r\n" + HOST + b"\r\n",
        b"POST /v1/boxes HTTP/1.1\r\n" + HOST + b"Content-Type: application/json\r\n" +
        b"Content-Length: %d\r\n\r\n" % len(bad_body) + bad_body,
        b"GET /no/such/route HTTP/1.1\r\n" + HOST + b"\r\n",
        b"GET /v1/openapi.json HTTP/1.1\r\n" + HOST + b"\r\n",
        b"GET /healthz HTTP/1.1\r\n" + HOST + b"Connection: close\r\n\r\n",
    ]
    want = [200, 200, 404, 400, 404, 200, 200]
    s = hostile.tcp_socket(server)
    try:
        s.sendall(b"".join(requests))  # one write
        answers = hostile.read_answers(s, len(requests))
        got, closed = hostile.read_until_close(s, 5)
    finally:
        s.close()
    assert [a.status for a in answers] == want, [repr(a)[:200] for a in answers]
    assert answers[1].json.get("version"), "the second answer is not /v1/status's"
    assert answers[5].json.get("openapi"), "the sixth answer is not the OpenAPI document"
    ids = [a.headers.get("x-request-id") for a in answers]
    assert len(set(ids)) == len(ids), f"request ids {ids}"
    assert closed and got == b"", f"after Connection: close: {got[:200]!r}"
    assert_alive(server)


def test_many_pipelined_requests(server):
    """A hundred requests in one write: a hundred answers, in order."""
    count = 100
    paths = [b"/healthz" if i % 2 == 0 else b"/no/such/route/%d" % i for i in range(count)]
    blob = b"".join(b"GET " + p + b" HTTP/1.1\r\n" + HOST + b"\r\n" for p in paths)
    s = hostile.tcp_socket(server)
    try:
        s.sendall(blob)
        answers = hostile.read_answers(s, count, timeout=30)
    finally:
        s.close()
    assert [a.status for a in answers] == [200 if i % 2 == 0 else 404 for i in range(count)]
    assert_alive(server)


# Oversized heads -------------------------------------------------------------------------------

def _big_head_exchange(server, head, timeout=10):
    """Sends a head of any size (in a thread: the server may answer before it read it all)."""
    s = hostile.tcp_socket(server, timeout=timeout)

    def send():
        try:
            s.sendall(head)
        except OSError:
            pass

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        return hostile.read_until_close(s, timeout)
    finally:
        s.close()
        sender.join(10)


@pytest.mark.parametrize("kind", ["one_20k_header", "many_small_headers", "one_1m_header",
                                  "endless_header"])
def test_oversized_headers(server, kind):
    start = b"GET /healthz HTTP/1.1\r\n" + HOST
    if kind == "one_20k_header":
        head = start + b"X-Big: " + b"a" * (20 << 10) + b"\r\n\r\n"
    elif kind == "many_small_headers":
        head = start + b"".join(b"X-H%d: %s\r\n" % (i, b"b" * 50) for i in range(600)) + b"\r\n"
    elif kind == "one_1m_header":
        head = start + b"Cookie: " + b"c" * (1 << 20) + b"\r\n\r\n"
    else:  # 4 MiB of one header that never ends
        head = start + b"X-Endless: " + b"d" * (4 << 20)
    got, closed = _big_head_exchange(server, head)
    assert status_of(got) == 431, f"{kind}: {got[:300]!r}"
    assert closed, f"{kind}: the connection stays open"
    assert_alive(server)


def test_oversized_request_line(server):
    head = b"GET /" + b"p" * (64 << 10) + b" HTTP/1.1\r\n" + HOST + b"\r\n"
    got, closed = _big_head_exchange(server, head)
    assert status_of(got) in (414, 431), f"{got[:300]!r}"
    assert closed
    assert_alive(server)


def test_garbage_instead_of_a_request(server):
    for junk in (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64,  # a TLS hello
                 b"\x00\xff\xfe\r\n\r\n", b"GET\r\n\r\n", b"GET / HTTP/7.0\r\n\r\n",
                 b"G\xc3\x28T / HTTP/1.1\r\n" + HOST + b"\r\n"):
        got, closed = raw_exchange(server, junk, timeout=8)
        assert closed, f"{junk[:20]!r}: the connection stays open: {got[:200]!r}"
        status = status_of(got)
        assert status is None or 400 <= status < 500 or status == 505, \
            f"{junk[:20]!r}: {got[:300]!r}"
    assert_alive(server)


def test_error_answers_are_json_and_short(server):
    """A JSON body that is not JSON: the error names line and column, in a few hundred bytes,
    and does not echo the client's bytes at their length."""
    a = request(server, "POST", "/v1/boxes", raw=b'{"image": "' + b"\x01" * 5000 + b'"}')
    assert a.status == 400
    hostile.assert_short_error(a, "invalid_argument")
    a = request(server, "POST", "/v1/boxes", raw=b"[" + b"1," * 100000 + b"x]")
    assert a.status == 400
    hostile.assert_short_error(a, "invalid_argument")
    assert_alive(server)


# The slow clients, collected -------------------------------------------------------------------

def _collect(slow_clients, name, bound_s):
    clients, poller = slow_clients
    c = clients[name]
    c.join(c.limit_s + 10)
    assert c.error is None, f"{name}: {c.error}"
    assert c.cut_after is not None, \
        f"{name}: the connection was not cut within {c.limit_s} s"
    assert c.cut_after <= bound_s, \
        f"{name}: cut after {c.cut_after:.1f} s, want within {bound_s} s"
    status = status_of(c.answer)
    assert status is None or status in (400, 408), f"{name}: answered {c.answer[:300]!r}"
    return c


def test_slowloris_is_cut_within_the_header_deadline(server, slow_clients):
    _collect(slow_clients, "slowloris", HEADER_S + SLACK_S)
    assert_alive(server)


def test_silent_connection_is_cut_within_the_first_byte_deadline(server, slow_clients):
    _collect(slow_clients, "silent", FIRST_BYTE_S + SLACK_S)
    assert_alive(server)


def test_short_body_is_cut_within_the_body_deadline(server, slow_clients):
    _collect(slow_clients, "short_body", BODY_S + SLACK_S)
    _collect(slow_clients, "short_chunk", BODY_S + SLACK_S)
    assert_alive(server)
    assert_no_boxes(server)


def test_others_were_served_all_along(server, slow_clients):
    clients, poller = slow_clients
    poller.join(poller.seconds + 10)
    assert not poller.failures, f"another client was not served: {poller.failures[:5]}"
    assert poller.served >= 10, f"only {poller.served} answers to the poller"
    assert_alive(server)
    assert_no_boxes(server)
