"""Shared by the CLI tests: skipping with the reason, and finding a codebox's boxes."""
import os
import subprocess
import sys

SKIP = 77  # CTest's SKIP_RETURN_CODE for these tests


def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(SKIP)


def require_box(codebox, image):
    """Skips unless this host can run a jail box of `image` with IPython in it."""
    if os.geteuid() != 0:
        skip("needs root for jail boxes")
    probe = subprocess.run(
        [codebox, "run", "--driver", "jail", "--image", image, "import IPython"],
        capture_output=True, text=True, timeout=120)
    if probe.returncode == 0:
        return
    if "codebox image build" in probe.stderr or "no recipe" in probe.stderr:
        skip(f"image {image} is not available: {probe.stderr.strip()}")
    if "ModuleNotFoundError" in probe.stderr:
        skip(f"image {image} has no IPython; rebuild it: codebox image build {image}")
    raise SystemExit(f"FAIL: a {image} box does not run: {probe.stderr.strip()}")


def jails_of(pid):
    """PIDs of the codebox-jail processes that `pid` started (their command line names it)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"codebox-jail") and \
                b"--parent" in argv and argv[argv.index(b"--parent") + 1:][:1] == [str(pid).encode()]:
            found.append(int(entry))
    return found


def alive(pids):
    """Those of `pids` that still run a codebox-jail."""
    left = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read().split(b"\0")[0].endswith(b"codebox-jail"):
                    left.append(pid)
        except OSError:
            pass
    return left
