#!/usr/bin/env python3
"""`codebox exec -it`, `codebox shell` and `codebox exec -i` as a user runs them: tmux gives
them a real terminal; the test types into it (send-keys), resizes it and reads the screen
(capture-pane), each wait bounded. `-i` is fed through a FIFO.

usage: exec_tty_test.py PATH/TO/codebox   (exit 77 = skipped, with the reason printed)
"""
import fcntl
import os
import select
import signal
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_test_util import alive, jails_of, require_box, skip  # noqa: E402
from tmux_util import Terminal, Tmux  # noqa: E402

CODEBOX = os.path.abspath(sys.argv[1])
TMUX = Tmux("codebox-exec-tty-test")
BOX = ["--driver", "jail", "--image", "python"]


def check_no_box_left(term, jails):
    deadline = time.monotonic() + 10
    while alive(jails) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(jails), f"{term.name}: codebox-jail {alive(jails)} outlived the exec"


def bash_session():
    t = Terminal(TMUX, "bash", [CODEBOX, "exec", "-it", *BOX, "--", "bash"], {"TERM": "xterm"})
    t.wait_for(r"[#$] $")
    jails = jails_of(t.pid)
    assert jails, f"no codebox-jail started by codebox exec (pid {t.pid})"
    t.type("PS1='in-box$ '")
    t.wait_for(r"^in-box\$ $")

    # Typed commands run in the box's bash; its output comes back as it is written.
    t.type("echo $((6*7))")
    t.wait_for(r"^42$")
    t.type("tty; echo term=$TERM")
    t.wait_for(r"^/dev/pts/\d+$")
    t.wait_for(r"^term=xterm$")

    # The window's size, and a new one when tmux resizes it (SIGWINCH, forwarded).
    t.type("stty size")
    t.wait_for(r"^50 120$")
    t.resize(100, 30)
    time.sleep(0.5)
    t.type("stty size")
    t.wait_for(r"^30 100$")

    # python3 interactively; Ctrl-D (byte 0x04) ends it, not the session.
    t.type("python3 -q")
    t.wait_for(r"^>>> $")
    t.type("print(1+1)")
    t.wait_for(r"^2$")
    t.keys("C-d")
    t.type("echo back-$((1+2))")
    t.wait_for(r"^back-3$")

    # Ctrl-C (byte 0x03) interrupts the box's foreground program; bash goes on.
    t.type("sleep 100")
    time.sleep(1)
    started = time.monotonic()
    t.keys("C-c")
    t.type("echo after-$((2*5))")
    t.wait_for(r"^after-10$", timeout=20)
    assert time.monotonic() - started < 20, "Ctrl-C did not interrupt sleep"

    t.type("exit 3")
    status = t.wait_exit()
    assert status == 3, f"exit status {status}:\n{t.screen()}"
    check_no_box_left(t, jails)
    # The host's terminal is back in cooked mode: what is typed now (to the pane's `sleep`,
    # which reads nothing) is echoed by the terminal itself; in raw mode nothing would show.
    t.type("typed-after-exit")
    t.wait_for(r"^typed-after-exit$")


def shell_session():
    t = Terminal(TMUX, "shell", [CODEBOX, "shell", *BOX])
    t.wait_for(r"[#$] $")
    t.type("echo shell-$BASH_VERSION")
    t.wait_for(r"^shell-5\.")
    t.type("exit")
    status = t.wait_exit()
    assert status == 0, f"exit status {status}:\n{t.screen()}"


def killed_session():
    """SIGTERM to codebox ends the session (128+15) and restores the terminal."""
    t = Terminal(TMUX, "killed", [CODEBOX, "exec", "-it", *BOX, "--", "bash"])
    t.wait_for(r"[#$] $")
    jails = jails_of(t.pid)
    os.kill(t.pid, signal.SIGTERM)
    status = t.wait_exit()
    assert status == 128 + signal.SIGTERM, f"exit status {status}:\n{t.screen()}"
    check_no_box_left(t, jails)
    t.type("typed-after-kill")
    t.wait_for(r"^typed-after-kill$")


def read_line(stream, timeout=60):
    """One line from `stream` (a pipe), or fails after `timeout` s."""
    deadline = time.monotonic() + timeout
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([stream], [], [], left)[0]:
            raise AssertionError(f"no line in {timeout} s; so far {line!r}")
        chunk = os.read(stream.fileno(), 1)
        if not chunk:
            raise AssertionError(f"end of output; so far {line!r}")
        line += chunk
    return line.decode()


def stdin_streamed(work):
    """-i without -t: each line written to the FIFO is echoed before stdin is closed."""
    fifo = os.path.join(work, "stdin")
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    writer = os.open(fifo, os.O_WRONLY)
    fcntl.fcntl(reader, fcntl.F_SETFL, fcntl.fcntl(reader, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    proc = subprocess.Popen([CODEBOX, "exec", "-i", *BOX, "--", "cat"], stdin=reader,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.close(reader)
    try:
        os.write(writer, b"first line\n")
        assert read_line(proc.stdout) == "first line\n"
        os.write(writer, b"second line\n")
        assert read_line(proc.stdout) == "second line\n"
    finally:
        os.close(writer)  # the end of stdin ends cat
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and out == b"", f"status {proc.returncode}: {out!r} {err!r}"


def timeout_given():
    """-i has no exec timeout unless --timeout is given; then it holds (124)."""
    start = time.monotonic()
    r = subprocess.run([CODEBOX, "exec", "-i", "--timeout", "1", *BOX, "--", "sleep", "30"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert r.returncode == 124 and "timed out" in r.stderr, (r.returncode, r.stderr)
    assert time.monotonic() - start < 20, "the timeout did not hold"


def no_terminal():
    """-t with stdin that is not a terminal is refused before any box starts."""
    r = subprocess.run([CODEBOX, "exec", "-t", *BOX, "--", "true"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "not a TTY" in r.stderr, (r.returncode, r.stderr)


def main():
    if not shutil.which("tmux"):
        skip("tmux is not installed (apt-get install tmux)")
    require_box(CODEBOX, "python")
    work = tempfile.mkdtemp(prefix="exec_tty_test.")
    TMUX("new-session", "-d", "-s", "keep", "sleep 600")  # holds the server while panes come and go
    try:
        no_terminal()
        stdin_streamed(work)
        timeout_given()
        bash_session()
        shell_session()
        killed_session()
    finally:
        TMUX.close()
        shutil.rmtree(work, ignore_errors=True)
    print("PASS: codebox exec -it, codebox shell and codebox exec -i")


if __name__ == "__main__":
    main()
