#!/usr/bin/env python3
"""Copy errors as a user meets them in `codebox exec`: each says what failed once, without
the same context repeated by the layers it passed (agent, its client, the box, the CLI).

usage: errors_once_test.py PATH/TO/codebox   (exit 77 = skipped, with the reason printed)
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_test_util import require_box  # noqa: E402

CODEBOX = os.path.abspath(sys.argv[1])


def repeated(message):
    """A context said twice in a row: "mkdir /x: mkdir /x: ..." (empty when none is)."""
    parts = message.split(": ")
    for i in range(len(parts) - 1):
        if parts[i] == parts[i + 1]:
            return parts[i]
    return ""


def main():
    require_box(CODEBOX, "python")
    with tempfile.TemporaryDirectory() as tmp:
        cases = [
            (["--copy-in", "/etc/hostname:/proc/x/y"],
             "codebox exec: copy /etc/hostname to box /proc/x/y: mkdir /proc/x: No such file or "
             "directory"),
            (["--copy-in", "/etc/hostname:/etc/x/y"],
             "codebox exec: copy /etc/hostname to box /etc/x/y: mkdir /etc/x: Read-only file "
             "system"),
            (["--copy-in", "/etc/hostname:/usr/x"],
             "codebox exec: copy /etc/hostname to box /usr/x: write /usr/x: Read-only file system"),
            (["--copy-in", f"{os.path.dirname(CODEBOX)}:/proc/x"],
             f"codebox exec: copy {os.path.dirname(CODEBOX)} to box /proc/x: mkdir /proc/x: No "
             "such file or directory"),
            (["--copy-out", f"/proc/no-such-file:{tmp}/out"],
             "codebox exec: copy out: read /proc/no-such-file: No such file or directory"),
            (["--copy-out", "/etc/hostname:/proc/x/y"],
             "codebox exec: copy out /etc/hostname: create host directory /proc/x: No such file "
             "or directory"),
        ]
        failures = []
        for args, want in cases:
            r = subprocess.run([CODEBOX, "exec", "--driver", "jail", *args, "--", "true"],
                               capture_output=True, text=True, timeout=120)
            said = r.stderr.strip()
            if r.returncode != 125 or said != want or repeated(said):
                failures.append(f"codebox exec {' '.join(args)}: exit {r.returncode}\n"
                                f"  said: {said}\n  want: {want}")
    if failures:
        raise SystemExit("FAIL:\n" + "\n".join(failures))
    print(f"PASS: {len(cases)} copy errors, each said once")


if __name__ == "__main__":
    main()
