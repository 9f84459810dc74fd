#!/usr/bin/env python3
"""Output that is live, in a real terminal (tmux): `codebox run` shows a program's first line
while the program still sleeps (Python in a box is unbuffered), stdout and stderr keep the
order the program wrote them in (exactly on a terminal with `exec -t`; across two pipes for
writes a moment apart), and the exit status is the program's.

usage: live_output_test.py PATH/TO/codebox   (exit 77 = skipped, with the reason printed)
"""
import os
import re
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_test_util import require_box, skip  # noqa: E402
from tmux_util import Terminal, Tmux  # noqa: E402

CODEBOX = os.path.abspath(sys.argv[1])
BOX = ["--driver", "jail", "--image", "python"]
TMUX = Tmux("codebox-live-output-test")


def lines_of(screen, wanted):
    """The lines of `screen` that are among `wanted`, in screen order."""
    return [line.strip() for line in screen.splitlines() if line.strip() in wanted]


def first_line_before_the_sleep_ends():
    program = "import time\nprint('first line')\ntime.sleep(8)\nprint('second line')"
    started = time.monotonic()
    t = Terminal(TMUX, "run", [CODEBOX, "run", *BOX, program])
    t.wait_for(r"^first line$", timeout=7)
    seen_after = time.monotonic() - started
    screen = t.screen()
    assert "second line" not in screen and "exit-status=" not in screen, \
        f"the first line came only with the rest ({seen_after:.1f} s):\n{screen}"
    assert t.wait_exit(timeout=60) == 0
    assert re.search(r"^first line\nsecond line$", t.screen(), re.MULTILINE), t.screen()
    print(f"ok   the first line showed {seen_after:.1f} s after the start, during the sleep")


def pipes_keep_the_order_of_writes_a_moment_apart():
    script = ("echo out1; sleep 0.2; echo err1 >&2; sleep 0.2; echo out2; sleep 0.2; "
              "echo err2 >&2; exit 5")
    t = Terminal(TMUX, "pipes", [CODEBOX, "exec", *BOX, "sh", "-c", script])
    assert t.wait_exit(timeout=60) == 5, t.screen()
    order = lines_of(t.screen(), {"out1", "err1", "out2", "err2"})
    assert order == ["out1", "err1", "out2", "err2"], f"order {order}:\n{t.screen()}"
    print("ok   stdout and stderr in the order written (pipes, writes 0.2 s apart)")


def a_terminal_keeps_the_exact_order():
    script = "echo out1; echo err1 >&2; echo out2; echo err2 >&2; exit 6"
    t = Terminal(TMUX, "tty", [CODEBOX, "exec", "-t", *BOX, "sh", "-c", script])
    assert t.wait_exit(timeout=60) == 6, t.screen()
    order = lines_of(t.screen(), {"out1", "err1", "out2", "err2"})
    assert order == ["out1", "err1", "out2", "err2"], f"order {order}:\n{t.screen()}"
    print("ok   exec -t: the exact order of back-to-back writes")


def main():
    if shutil.which("tmux") is None:
        skip("tmux is not installed (scripts/test, or scripts/setup --for-tests, installs it)")
    require_box(CODEBOX, "python")
    TMUX("new-session", "-d", "-s", "keep", "sleep 600")  # holds the server while panes come and go
    try:
        first_line_before_the_sleep_ends()
        pipes_keep_the_order_of_writes_a_moment_apart()
        a_terminal_keeps_the_exact_order()
    finally:
        TMUX.close()
    print("PASS: live output in a terminal")


if __name__ == "__main__":
    main()
