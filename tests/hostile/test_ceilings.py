"""Ceilings (issue 32, attack 3 and "Ceilings"): a request may not set its own resource
ceiling. `/v1/run` asking `output_limit_bytes` of 4 GiB took the server to 3.2 GB RSS; now any
option over the server's ceiling is a 400 that names the option, the value and the ceiling
(spec32 section 3: "<option> <value> is over this server's ceiling <ceiling> (--max-...)"),
with the defaults and with small ceilings given as flags; "none" for a timeout is capped, not
refused; and a streamed exec that prints more than its output limit does not grow the server's
RSS by the output's size."""
import json
import os
import re

import pytest

import hostile
from hostile import BOX, assert_alive, assert_no_boxes, request

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30

SMALL_FLAGS = ["--max-output-limit", "8M", "--max-memory", "512", "--max-cpus", "1",
               "--max-disk", "1024", "--max-box-processes", "128", "--max-box-open-files", "1024",
               "--max-exec-timeout", "60", "--max-lifetime", "600",
               "--max-network-bytes", "16M", "--max-body", "2",
               # The server's own box defaults must fit its ceilings (serve refuses otherwise).
               "--output-limit-bytes", "4M", "--network-max-bytes", "8M"]


@pytest.fixture(scope="module")
def default_server(serve):
    s = serve(name="default-ceilings")
    yield s
    hostile.finish(s)


@pytest.fixture(scope="module")
def small_server(serve):
    s = serve(SMALL_FLAGS, name="small-ceilings")
    yield s
    hostile.finish(s)


def host_cores():
    return {os.cpu_count(), len(os.sched_getaffinity(0))}


# How a value may be written in the message: as the request's number, or in a larger unit.
def renderings(value, unit):
    out = {str(value)}
    if isinstance(value, float):
        out.add(f"{value:g}")
    if unit == "bytes":
        for name, factor in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB), ("G", GIB), ("M", MIB),
                             ("K", KIB)):
            if value % factor == 0:
                out |= {f"{value // factor} {name}", f"{value // factor}{name}"}
    elif unit == "MiB":
        out |= {f"{value} MiB", f"{value}MiB", f"{value}M"}
        if value % 1024 == 0:
            out |= {f"{value // 1024} GiB", f"{value // 1024}GiB", f"{value // 1024}G"}
    elif unit == "s":
        out |= {f"{value} s", f"{value}s", f"{value}.0", f"{value}.0 s"}
        if value % 60 == 0:
            out |= {f"{value // 60}m", f"{value // 60} min"}
        if value % 3600 == 0:
            out |= {f"{value // 3600}h", f"{value // 3600} h"}
    return out


def mentions(message, value, unit):
    return any(re.search(r"(?<![\w.])" + re.escape(r) + r"(?![\d])", message)
               for r in renderings(value, unit))


def assert_over_ceiling(a, option, value, unit, flag, ceilings, what):
    """400 invalid_argument naming the option, the value, the ceiling and the flag."""
    assert a.status == 400, f"{what}: {option}={value} over {flag} answered {a!r}"
    message = hostile.assert_short_error(a, "invalid_argument")
    assert option in message, f"{what}: the message does not name {option}: {message!r}"
    assert mentions(message, value, unit), f"{what}: the message lacks {value}: {message!r}"
    assert any(mentions(message, c, unit) for c in ceilings), \
        f"{what}: the message lacks the ceiling {sorted(ceilings)}: {message!r}"
    assert flag in message, f"{what}: the message does not name {flag}: {message!r}"
    assert "ceiling" in message, f"{what}: {message!r}"


def ask(server, route, options):
    body = {**BOX, **options}
    if route == "/v1/run":
        body["code"] = "print(1+1)"
    a = request(server, "POST", route, body, timeout=120)
    if a.status != 400:
        # a request that got through (a missing ceiling) must not leave its box to the others
        hostile.destroy_all(server)
    return a


ROUTES = ["/v1/run", "/v1/boxes"]

# option, value asked, unit, flag, ceiling of SMALL_FLAGS
SMALL_CASES = [
    ("output_limit_bytes", 4 * GIB, "bytes", "--max-output-limit", 8 * MIB),
    ("memory_mib", 4096, "MiB", "--max-memory", 512),
    ("cpus", 2, "cpus", "--max-cpus", 1),
    ("disk_mib", 100000, "MiB", "--max-disk", 1024),
    ("max_processes", 100000, "count", "--max-box-processes", 128),
    ("max_open_files", 100000, "count", "--max-box-open-files", 1024),
    ("network_max_bytes", GIB, "bytes", "--max-network-bytes", 16 * MIB),
    ("exec_timeout", 7200, "s", "--max-exec-timeout", 60),
    ("box_timeout", 7200, "s", "--max-lifetime", 600),
]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("case", SMALL_CASES, ids=[c[0] for c in SMALL_CASES])
def test_over_a_ceiling_given_as_a_flag(small_server, route, case):
    option, value, unit, flag, ceiling = case
    a = ask(small_server, route, {option: value})
    assert_over_ceiling(a, option, value, unit, flag, {ceiling}, f"{route}")
    assert_alive(small_server)
    assert_no_boxes(small_server)


def test_run_timeout_over_the_exec_ceiling(small_server):
    """/v1/run's `timeout` is the exec's: over --max-exec-timeout it is refused the same way."""
    a = ask(small_server, "/v1/run", {"timeout": 7200})
    assert_over_ceiling(a, "timeout", 7200, "s", "--max-exec-timeout", {60}, "/v1/run")
    assert_no_boxes(small_server)


# The attack on a server started without any ceiling flag: the defaults hold.
DEFAULT_CASES = [
    ("output_limit_bytes", 4 * GIB, "bytes", "--max-output-limit", {64 * MIB}),
    ("memory_mib", 100000, "MiB", "--max-memory", {8192}),
    ("disk_mib", 20000, "MiB", "--max-disk", {16384}),
    ("max_processes", 100000, "count", "--max-box-processes", {4096}),
    ("max_open_files", 100000, "count", "--max-box-open-files", {65536}),
    ("exec_timeout", 7200, "s", "--max-exec-timeout", {3600}),
    ("box_timeout", 7200, "s", "--max-lifetime", {3600}),
    ("network_max_bytes", 8 * GIB, "bytes", "--max-network-bytes", {4 * GIB}),
    ("cpus", 64, "cpus", "--max-cpus", host_cores()),
]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("case", DEFAULT_CASES, ids=[c[0] for c in DEFAULT_CASES])
def test_over_a_default_ceiling(default_server, route, case):
    option, value, unit, flag, ceilings = case
    if option == "cpus" and max(host_cores()) >= value:
        pytest.skip(f"this host has {max(host_cores())} cores")
    rss_before = default_server.rss_kib()
    a = ask(default_server, route, {option: value})
    assert_over_ceiling(a, option, value, unit, flag, ceilings, f"{route}")
    grown = (default_server.rss_kib() - rss_before) / 1024
    assert grown < 64, f"the server's RSS grew by {grown:.0f} MiB"
    assert_alive(default_server)
    assert_no_boxes(default_server)


def test_max_body_flag(small_server):
    """--max-body 2: a 3 MiB body is a 413, the upload ceiling."""
    a = request(small_server, "POST", "/v1/run",
                raw=b'{"code": "' + b"#" * (3 * MIB) + b'"}', timeout=60)
    assert a.status == 413, f"{a!r}"
    assert_alive(small_server)


# Within the ceilings ---------------------------------------------------------------------------

def test_at_the_ceilings_runs(small_server, python_image):
    """Each option at its ceiling is allowed: a ceiling is the most, not a refusal of all."""
    body = {**BOX, "code": "print(1+1)", "output_limit_bytes": 8 * MIB, "memory_mib": 512,
            "cpus": 1, "disk_mib": 1024, "max_processes": 128, "max_open_files": 1024,
            "exec_timeout": 60, "box_timeout": 600, "timeout": 60}
    a = request(small_server, "POST", "/v1/run", body, timeout=120)
    assert a.status == 200 and a.json.get("stdout") == "2\n", f"{a!r}"
    assert_no_boxes(small_server)


def test_none_timeouts_are_capped_not_refused(small_server, python_image):
    a = request(small_server, "POST", "/v1/boxes",
                {**BOX, "exec_timeout": "none", "box_timeout": "none"}, timeout=120)
    try:
        assert a.status == 201, f"exec_timeout and box_timeout none: {a!r}"
        box = a.json["id"]
        e = request(small_server, "POST", f"/v1/boxes/{box}/exec",
                    {"argv": ["echo", "ok"], "timeout": "none"}, timeout=60)
        assert e.status == 200 and e.json["stdout"] == "ok\n", f"exec timeout none: {e!r}"
    finally:
        hostile.destroy_all(small_server)
    r = request(small_server, "POST", "/v1/run", {**BOX, "code": "print(1+1)", "timeout": "none"},
                timeout=120)
    assert r.status == 200 and r.json.get("stdout") == "2\n", f"/v1/run timeout none: {r!r}"
    assert_no_boxes(small_server)


def test_exec_request_timeout_over_the_ceiling(small_server, python_image):
    """The exec requests of a box (exec, python, run_code) are held to --max-exec-timeout."""
    a = request(small_server, "POST", "/v1/boxes", BOX, timeout=120)
    assert a.status == 201, f"{a!r}"
    box = a.json["id"]
    try:
        for route, body in (("exec", {"argv": ["true"], "timeout": 7200}),
                            ("python", {"code": "1", "timeout": 7200}),
                            ("run_code", {"code": "1", "timeout": 7200})):
            r = request(small_server, "POST", f"/v1/boxes/{box}/{route}", body, timeout=60)
            assert_over_ceiling(r, "timeout", 7200, "s", "--max-exec-timeout", {60}, route)
    finally:
        request(small_server, "DELETE", f"/v1/boxes/{box}", timeout=60)
    assert_alive(small_server, run=True)
    assert_no_boxes(small_server)


# Streaming past the output limit ---------------------------------------------------------------

def test_streamed_output_does_not_grow_the_server(default_server, python_image):
    """A streamed exec printing 200 MB with an output limit of 64 MiB (the default ceiling),
    read as it comes: the server passes it on and does not also build it whole in memory."""
    server = default_server
    a = request(server, "POST", "/v1/boxes", {**BOX, "output_limit_bytes": 64 * MIB},
                timeout=120)
    assert a.status == 201, f"{a!r}"
    box = a.json["id"]
    try:
        warm = request(server, "POST", f"/v1/boxes/{box}/exec", {"argv": ["echo", "warm"]})
        assert warm.status == 200, f"{warm!r}"
        baseline = server.rss_kib()
        sampler = hostile.RssSampler(server)
        sampler.start()
        got = [0]
        status, events = hostile.stream_events(
            server, f"/v1/boxes/{box}/exec",
            {"argv": ["sh", "-c", "head -c 200000000 /dev/zero | tr '\\0' x"]},
            timeout=120, on_bytes=lambda n: got.__setitem__(0, got[0] + n))
        peak = sampler.stop()
        assert status == 200, f"{status}: {events[:1]}"
        assert events and events[-1][0] == "done", f"the last event: {events[-1:]!r}"
        done = json.loads(events[-1][1])
        assert done.get("output_truncated") is True, f"done: {str(done)[:300]}"
        assert got[0] >= 32 * MIB, f"only {got[0]} bytes streamed"
        growth_mib = (peak - baseline) / 1024
        assert growth_mib < 32, \
            f"the server's RSS grew by {growth_mib:.0f} MiB streaming 64 MiB of output"
    finally:
        request(server, "DELETE", f"/v1/boxes/{box}", timeout=60)
    assert_alive(server, run=True)
    assert_no_boxes(server)
