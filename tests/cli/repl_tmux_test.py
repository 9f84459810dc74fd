#!/usr/bin/env python3
"""`codebox repl` in a real terminal: tmux runs it in a detached session of a fixed size, the
test types into it (send-keys) and reads the screen (capture-pane), each wait bounded.

usage: repl_tmux_test.py PATH/TO/codebox   (exit 77 = skipped, with the reason printed)
"""
import os
import re
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_test_util import alive, jails_of, require_box, skip  # noqa: E402
from tmux_util import Terminal, Tmux  # noqa: E402

CODEBOX = os.path.abspath(sys.argv[1])
TMUX = Tmux("codebox-repl-test")


def repl(name, env, *args):
    return Terminal(TMUX, name, [CODEBOX, "repl", *args], env)


def wait_at_prompt(term, pattern, timeout=Terminal.WAIT):
    """Waits for `pattern` followed by a fresh prompt, and a moment more: a Ctrl-D typed while
    the terminal is still in cooked mode (the cell's end) is the tty's EOF, which never reaches
    the line editor."""
    term.wait_for(pattern + r"\n>>> ?$", timeout)
    time.sleep(0.5)


def check_no_box_left(term, jails):
    deadline = time.monotonic() + 10
    while alive(jails) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(jails), f"{term.name}: codebox-jail {alive(jails)} outlived the repl"


def first_session(state, out):
    t = repl("data", {"XDG_STATE_HOME": state}, "--driver", "jail", "--image", "python-data",
             "--out", out)
    t.wait_for(r"codebox repl: Python 3\.\S+ IPython \S+ in a jail box \(image python-data\)")
    t.wait_for(r"^>>> ?$")
    jails = jails_of(t.pid)
    assert jails, f"no codebox-jail started by the repl (pid {t.pid})"

    # A variable set in one input is there in the next; the last expression's value prints.
    t.type("x = 21")
    t.type("print('val' + 'ue', x * 2)")
    t.wait_for(r"^value 42$")
    t.type("x + 1")
    t.wait_for(r"^22$")

    # A multi-line def: `... ` prompts, ended by an empty line.
    t.type("def add(a, b):")
    t.wait_for(r"^\.\.\. ?$")
    t.type("    return a + b")
    t.type("")
    t.type("print('su' + 'm', add(2, 3))")
    t.wait_for(r"^sum 5$")

    # An exception prints its traceback; the session goes on with its state.
    t.type("1 / 0")
    t.wait_for(r"ZeroDivisionError")
    t.type("print('after' + 'error', x)")
    t.wait_for(r"^aftererror 21$")

    # Ctrl-C in a long cell interrupts it and keeps the state.
    t.type("import time; print('sleep' + 'ing'); time.sleep(120)")
    t.wait_for(r"^sleeping$")
    started = time.monotonic()
    t.keys("C-c")
    t.wait_for(r"KeyboardInterrupt")
    t.type("print('kep' + 't', x)")
    t.wait_for(r"^kept 21$", timeout=20)
    assert time.monotonic() - started < 20, "the interrupt took the whole sleep"

    # Ctrl-C at the prompt abandons the line being typed.
    t.type("abandoned_name", enter=False)
    t.wait_for(r"^>>> abandoned_name$")  # libedit has it, so the Ctrl-C cannot overtake it
    t.keys("C-c")
    t.type("print('clean' + 'line')")
    t.wait_for(r"^cleanline$")
    assert "NameError" not in t.screen(), "the abandoned line ran:\n" + t.screen()

    # A chart is saved as a PNG under a name the host chose, and its path printed.
    t.type("import matplotlib.pyplot as plt")
    t.type("plt.plot([1, 3, 2]); plt.show()")
    m = t.wait_for(r"\[image/png (\d+)x(\d+) saved to (\S+)\]")
    path = m.group(3)
    assert os.path.dirname(path) == out and re.fullmatch(r"out-\d+-1\.png", os.path.basename(path)), path
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert int(m.group(1)) > 100 and int(m.group(2)) > 100, m.group(0)

    # The last line before leaving, for the history check.
    t.type("print('hist' + 'ory', 7)")
    wait_at_prompt(t, r"^history 7$")
    t.keys("C-d")
    status = t.wait_exit()
    assert status == 0, f"exit status {status}:\n{t.screen()}"
    check_no_box_left(t, jails)


def second_session(state):
    t = repl("again", {"XDG_STATE_HOME": state}, "--driver", "jail", "--image", "python")
    t.wait_for(r"^>>> ?$")
    jails = jails_of(t.pid)
    assert jails, f"no codebox-jail started by the repl (pid {t.pid})"
    t.keys("Up")
    t.wait_for(r"^>>> print\('hist' \+ 'ory', 7\)$", timeout=10)
    t.keys("Enter")
    t.wait_for(r"^history 7$")
    t.type("exit()")
    status = t.wait_exit()
    assert status == 0, f"exit status {status}:\n{t.screen()}"
    check_no_box_left(t, jails)


def main():
    if not shutil.which("tmux"):
        skip("tmux is not installed (apt-get install tmux)")
    require_box(CODEBOX, "python")
    require_box(CODEBOX, "python-data")
    work = tempfile.mkdtemp(prefix="repl_tmux_test.")
    state, out = os.path.join(work, "state"), os.path.join(work, "out")
    TMUX("new-session", "-d", "-s", "keep", "sleep 600")  # holds the server while panes come and go
    try:
        first_session(state, out)
        history = os.path.join(state, "codebox", "repl_history")
        assert os.path.isfile(history), f"no history file at {history}"
        assert oct(os.stat(history).st_mode & 0o777) == "0o600", "the history is readable by others"
        second_session(state)
    finally:
        TMUX.close()
        shutil.rmtree(work, ignore_errors=True)
    print("PASS: codebox repl in tmux")


if __name__ == "__main__":
    main()
