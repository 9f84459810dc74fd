#!/usr/bin/env python3
"""`codebox run --session FILE...`: the files run as cells of one kernel, in order.

usage: run_session_test.py PATH/TO/codebox   (exit 77 = skipped, with the reason printed)
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_test_util import require_box  # noqa: E402

CODEBOX = os.path.abspath(sys.argv[1])
PNG_1X1 = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJ"
           "RU5ErkJggg==")


def run_session(*files):
    return subprocess.run([CODEBOX, "run", "--driver", "jail", "--session", *files],
                          capture_output=True, text=True, timeout=180)


def main():
    require_box(CODEBOX, "python")
    work = tempfile.mkdtemp(prefix="run_session_test.")
    try:
        def file(name, code):
            path = os.path.join(work, name)
            with open(path, "w") as f:
                f.write(code)
            return path

        load = file("load.py", "x = 40\nprint('loaded' + ' x')\n")
        use = file("use.py", "x + 2\n")
        fail = file("fail.py", "print('before' + ' the error')\n1 / 0\n")
        never = file("never.py", "print('never' + ' ran')\n")

        # Two files share a variable; each cell's output, then its last expression's value.
        r = run_session(load, use)
        assert r.returncode == 0, f"exit {r.returncode}: {r.stderr}"
        assert r.stdout == "loaded x\n42\n", repr(r.stdout)

        # The first cell that raises stops the run with its traceback: exit status 1.
        r = run_session(load, fail, never)
        assert r.returncode == 1, f"exit {r.returncode}: {r.stdout} {r.stderr}"
        assert r.stdout == "loaded x\nbefore the error\n", repr(r.stdout)
        assert "ZeroDivisionError" in r.stderr, r.stderr
        assert "fail.py (cell 2 of 3) raised ZeroDivisionError; the 1 after it did not run" \
            in r.stderr, r.stderr

        # Images go to --out under names the host picks; the path is printed.
        out = os.path.join(work, "out")
        image = file("image.py", "import base64\nfrom IPython.display import Image, display\n"
                     f"display(Image(data=base64.b64decode('{PNG_1X1}')))\n")
        r = run_session("--out", out, image)
        assert r.returncode == 0, f"exit {r.returncode}: {r.stderr}"
        saved = os.path.join(out, "out-1-1.png")
        assert r.stdout == f"[image/png 1x1 saved to {saved}]\n", repr(r.stdout)
        with open(saved, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n", f"{saved} is not a PNG"

        # A missing file is found before any box starts: a usage error.
        r = run_session(load, os.path.join(work, "missing.py"))
        assert r.returncode == 2 and "missing.py" in r.stderr, r.stderr
        assert r.stdout == "", repr(r.stdout)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS: codebox run --session")


if __name__ == "__main__":
    main()
