"""Python code the tests run in a box, and how they read its answer."""
import json

# fetch(url, ...) -> {"status", "body"} or {"error"}; prints nothing itself. In the box,
# urllib takes the proxy from HTTP_PROXY/HTTPS_PROXY, as any program there does.
FETCH = '''
import json, urllib.request, urllib.error
def fetch(url, direct=False, limit=None):
    opener = urllib.request.build_opener(
        *([urllib.request.ProxyHandler({})] if direct else []))
    try:
        with opener.open(url, timeout=30) as r:
            body = r.read(limit) if limit else r.read()
            return {"status": r.status, "body": body.decode("latin-1")}
    except urllib.error.HTTPError as e:
        return {"status": e.code, "body": e.read().decode("latin-1")}
    except Exception as e:
        return {"error": f"{type(e).__name__}: {getattr(e, 'reason', e)}"}
'''


def fetch_all(*urls):
    """Code that prints one JSON line: fetch() of each url."""
    return FETCH + f"print(json.dumps([fetch(u) for u in {list(urls)!r}]))\n"


def answers(stdout):
    """The JSON list fetch_all printed (its last line)."""
    return json.loads(stdout.strip().splitlines()[-1])


# Every way around the proxy a box might try; each must fail. Prints one JSON object.
ESCAPES = '''
import errno, json, socket
out = {}
def attempt(name, f):
    try:
        f()
        out[name] = "succeeded"
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e)) if e.errno else type(e).__name__
def tcp(address):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(5)
    with s:
        s.connect(address)
def raw(address):
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.settimeout(5)
    with s:
        s.sendto(b"\\x08\\x00\\xf7\\xff\\x00\\x00\\x00\\x00", (address, 0))
def udp(address):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with s:
        s.sendto(b"x", address)
attempt("tcp_named", lambda: tcp((NAMED, 80)))
attempt("tcp_public", lambda: tcp(("1.1.1.1", 80)))
attempt("tcp_loopback_80", lambda: tcp(("127.0.0.1", 80)))
attempt("raw_named", lambda: raw(NAMED))
attempt("udp_dns", lambda: udp(("1.1.1.1", 53)))
attempt("resolve", lambda: socket.getaddrinfo(NAME, 80))
print(json.dumps(out))
'''


def escapes(named, name):
    return f"NAMED = {named!r}\nNAME = {name!r}\n" + ESCAPES
