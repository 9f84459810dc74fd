"""A network and mount namespace of the test's own, so that nothing a test opens leaves it.

enter() moves the calling process (root, still single-threaded) into a new network namespace
and a private mount namespace, brings `lo` up and adds a dummy interface that carries the
"named" servers' addresses (or puts them on `lo` where the kernel has no dummy driver).
hosts() bind-mounts a test /etc/hosts over the real one, so the host's resolver (codebox's
egress proxy resolves on the host) gives the addresses the test chose. There is no default
route: an address the namespace does not hold is unreachable.

The addresses: a public-looking one for named servers (the proxy refuses internal ones
unless an allowlist entry names them as a literal), and a private one for a rebinding case.
"""
import ctypes
import os
import subprocess
import tempfile

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000

# 11.0.0.0/8 is public address space that nothing here routes to; only the dummy interface
# of this namespace holds these addresses.
NAMED = "11.7.0.1"      # the servers behind every allowed name
LITERAL = "11.7.0.3"    # the same servers, reached by an IP literal
PRIVATE = "10.7.0.1"    # an internal address an allowed name may "rebind" to
DUMMY = "cbxtest0"
interface = None  # the one that holds the addresses: DUMMY, or lo where there is no dummy driver

DOMAIN = "codebox-test.example"  # .example: reserved, never a real host


def name(label):
    return f"{label}.{DOMAIN}"


def entered():
    return os.environ.get("CODEBOX_NET_TEST_NETNS") == str(os.getpid())


def why_not_possible():
    """None when enter() can work here, else what is missing (for a skip message)."""
    if os.geteuid() != 0:
        return "needs root to make a network namespace"
    for tool in ("ip", "mount"):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode:
            return f"`{tool}` is missing (apt-get install iproute2 mount)"
    return None


def _ip(*args):
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")


def enter():
    """Moves this process into its own network + mount namespace (once). Raises with the
    reason when that is impossible; must run before any thread starts."""
    if entered():
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET | CLONE_NEWNS) != 0:
        err = ctypes.get_errno()
        raise RuntimeError(f"unshare(CLONE_NEWNET|CLONE_NEWNS): {os.strerror(err)} "
                           "(needs root and a single-threaded process)")
    # Nothing mounted here may propagate back to the host's mount namespace.
    subprocess.run(["mount", "--make-rprivate", "/"], check=True)
    _ip("link", "set", "lo", "up")
    global interface
    try:
        _ip("link", "add", DUMMY, "type", "dummy")
        interface = DUMMY
    except RuntimeError:
        interface = "lo"  # a kernel without the dummy driver: lo holds any address just as well
    for address in (NAMED, LITERAL, PRIVATE):
        _ip("addr", "add", f"{address}/32", "dev", interface)
    _ip("link", "set", interface, "up")
    os.environ["CODEBOX_NET_TEST_NETNS"] = str(os.getpid())


def hosts(entries):
    """Bind-mounts an /etc/hosts made of `entries` ({name: address}) over the real one, in
    this mount namespace only; the file itself is unlinked at once (the mount keeps it)."""
    if not entered():
        raise RuntimeError("netns.hosts() before netns.enter(): it would change the host")
    lines = ["127.0.0.1 localhost", "::1 localhost"]
    lines += [f"{address} {host}" for host, address in sorted(entries.items())]
    fd, path = tempfile.mkstemp(prefix="codebox-net-test-hosts.")
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(path, 0o644)
    try:
        subprocess.run(["mount", "--bind", path, "/etc/hosts"], check=True)
    finally:
        os.unlink(path)
