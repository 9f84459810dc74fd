"""A codebox command in a real terminal, for the CLI tests: tmux runs it in a detached session
(120x50 unless told), the test types into it (send-keys), resizes it and reads the screen
(capture-pane), each wait bounded."""
import os
import re
import shlex
import subprocess
import time


class Tmux:
    """A tmux server of our own (-L SOCKET, named after this process), so that the tests never
    touch a user's; call it with tmux's arguments."""

    def __init__(self, name):
        self.socket = f"{name}-{os.getpid()}"

    def __call__(self, *args):
        return subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", *args], check=True,
                              capture_output=True, text=True, timeout=20).stdout

    def close(self):
        """Kills the server and what runs in it."""
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


class Terminal:
    """One command (argv) in a tmux window of 120x50 by default; each wait is bounded."""

    WAIT = 60  # seconds any one expected text may take

    def __init__(self, tmux, name, argv, env=None, width=120, height=50):
        self.tmux = tmux
        self.name = name
        # A shell in the pane says the exit status, on a line of its own: tmux does not always
        # reap a process whose pane closed (its SIGCHLD may be blocked where ctest started it).
        command = " ".join(shlex.quote(a) for a in
                           ["env", *[f"{k}={v}" for k, v in (env or {}).items()], *argv])
        tmux("new-session", "-d", "-s", name, "-x", str(width), "-y", str(height),
             f"{command}; printf '\\nexit-status=%s\\n' $?; sleep 600")
        shell = int(tmux("display-message", "-p", "-t", name, "#{pane_pid}").strip())
        self.pid = child_of(shell)

    def screen(self):
        # -J joins wrapped lines; -S - includes everything that scrolled off.
        return self.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", self.name)

    def type(self, text, enter=True):
        self.tmux("send-keys", "-t", self.name, "-l", text)
        if enter:
            self.tmux("send-keys", "-t", self.name, "Enter")

    def keys(self, *keys):
        self.tmux("send-keys", "-t", self.name, *keys)

    def resize(self, width, height):
        self.tmux("resize-window", "-t", self.name, "-x", str(width), "-y", str(height))

    def wait_for(self, pattern, timeout=WAIT):
        """The first match of regex `pattern` on the screen; fails after `timeout` s."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            m = re.search(pattern, screen, re.MULTILINE)
            if m:
                return m
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: no /{pattern}/ after {timeout} s; "
                                     f"the screen:\n{screen}")
            time.sleep(0.1)

    def wait_exit(self, timeout=WAIT):
        """The command's exit status (128+N: killed by signal N)."""
        return int(self.wait_for(r"^exit-status=(\d+)$", timeout).group(1))


def child_of(pid, timeout=10):
    """The first child process of `pid`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if entry.isdigit() and int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        return int(entry)
            except (OSError, ValueError, IndexError):
                pass
        time.sleep(0.05)
    raise AssertionError(f"the shell {pid} in the tmux pane started nothing")
