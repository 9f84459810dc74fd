#!/usr/bin/env python3
"""A memory bomb in `codebox run`: the box's memory limit kills it, the exit status is 137
(128 + SIGKILL, as a shell reports it) and stderr says it was out of memory, with the limit
and the flag that changes it.

usage: run_oom_test.py PATH/TO/codebox   (exit 77 = skipped, with the reason printed)
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_test_util import require_box, skip  # noqa: E402

CODEBOX = os.path.abspath(sys.argv[1])
BOMB = "chunks = []\nwhile True:\n    chunks.append(b'x' * (8 << 20))  # written, so resident\n"


def main():
    require_box(CODEBOX, "python")
    doctor = subprocess.run([CODEBOX, "doctor", "--driver", "jail"], capture_output=True,
                            text=True, timeout=300)
    memory = next((line for line in doctor.stdout.splitlines()
                   if line.strip().startswith("memory ")), "")
    if " yes " not in memory:
        skip(f"a jail box's memory limit is not enforced here: {memory.strip()}")
    r = subprocess.run([CODEBOX, "run", "--local", "--driver", "jail", "--memory", "96M",
                        "--timeout", "120", BOMB], capture_output=True, text=True, timeout=300)
    said = "codebox: killed: out of memory (limit 96 MiB, --memory to change)"
    if r.returncode != 137 or said not in r.stderr:
        raise SystemExit(f"FAIL: want exit 137 and '{said}'\nexit {r.returncode}\n"
                         f"stdout:\n{r.stdout[-2000:]}\nstderr:\n{r.stderr[-2000:]}")
    print("PASS: a memory bomb exits 137, out of memory, with the limit")


if __name__ == "__main__":
    main()
