#!/usr/bin/env python3
"""`codebox doctor` and the vm driver for a user who may not open /dev/kvm: they must say so,
and how to get access, instead of "no hardware virtualization".

Runs codebox as nobody (setpriv), against this host's /dev/kvm as it is and against a node
made 0660 root:users and bind-mounted over /dev/kvm in a private mount namespace (the real one
is never changed).

usage: doctor_kvm_test.py PATH/TO/codebox   (exit 77 = skipped, with the reason printed)
"""
import os
import shlex
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_test_util import skip  # noqa: E402

CODEBOX = os.path.abspath(sys.argv[1])
AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def fail(what, r):
    raise SystemExit(f"FAIL: {what}\nexit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")


def doctor_as_nobody(prefix=(), home="/tmp"):
    """`codebox doctor --driver vm` as nobody; --driver vm fails fast without kvm."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home}
    return subprocess.run([*prefix, *AS_NOBODY, CODEBOX, "doctor", "--driver", "vm"],
                          capture_output=True, text=True, timeout=300, env=env)


def kvm_line(stdout):
    return next((line for line in stdout.splitlines() if line.strip().startswith("vm (kvm)")),
                "")


def check_says_no_access(r, group_hint):
    line = kvm_line(r.stdout)
    if "/dev/kvm: Permission denied; " not in line or group_hint not in line:
        fail(f"doctor's kvm line names neither the permission nor '{group_hint}': {line!r}", r)
    if "no hardware virtualization" in r.stdout:
        fail("doctor blames the hardware for a permission", r)
    # The vm driver's own error (what creating a box would say) says the same.
    picks = next((line for line in r.stdout.splitlines() if "vm picks:" in line), "")
    if "vm driver: /dev/kvm: Permission denied; " not in picks or group_hint not in picks or \
            not picks.endswith("; use --driver jail or --allow-emulation"):
        fail(f"the vm driver's error does not say why: {picks!r}", r)
    if r.returncode != 125:
        fail("doctor exits 125 when no box can start", r)


def main():
    if os.geteuid() != 0:
        skip("needs root to run codebox as another user")
    if not os.path.exists("/dev/kvm"):
        skip("this host has no /dev/kvm")
    path = CODEBOX
    while path != "/":
        if not os.stat(path).st_mode & 0o001:
            skip(f"nobody cannot reach {path}")
        path = os.path.dirname(path)
    opens = subprocess.run([*AS_NOBODY, "sh", "-c", "exec 3<>/dev/kvm"], capture_output=True)
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        if opens.returncode != 0:
            # This host's node, as it is: nobody is in none of its groups.
            group = subprocess.run(["stat", "-c", "%G", "/dev/kvm"], capture_output=True,
                                   text=True, check=True).stdout.strip()
            hint = (f"add yourself to group {group}: sudo usermod -aG {group} $USER"
                    if group != "root" else "it belongs to group root: an admin makes it group kvm")
            check_says_no_access(doctor_as_nobody(), hint)
        # A node of kvm's numbers that only root and group users may open, in place of
        # /dev/kvm for this one command.
        node = os.path.join(tmp, "kvm")
        rdev = os.stat("/dev/kvm").st_rdev
        script = (f"mknod {node} c {os.major(rdev)} {os.minor(rdev)} && chgrp users {node} && "
                  f"chmod 0660 {node} && mount --bind {node} /dev/kvm && exec \"$@\"")
        unshare = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"]
        r = doctor_as_nobody(prefix=unshare)
        if "mknod" in r.stderr or "mount" in r.stderr:
            skip(f"cannot make a private /dev/kvm here: {r.stderr.strip()}")
        check_says_no_access(r, "add yourself to group users: sudo usermod -aG users $USER, then "
                                "log in again")
    print("ok:", shlex.quote(kvm_line(r.stdout).strip()))


if __name__ == "__main__":
    main()
