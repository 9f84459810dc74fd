#!/usr/bin/env python3
"""`codebox ask` against a slow scripted model server: on a terminal (tmux) a status line with
a spinner says which model it waits for and is erased without a trace, and the answer is
labeled; with stderr a pipe, stderr carries the step lines only. Bad flags exit 2, naming the
flag; a failing model server 125. Under emulation, a vm's start is announced, then erased (in
ask and repl).

usage: ask_progress_test.py PATH/TO/codebox   (exit 77 = skipped, with the reason printed)
"""
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_test_util import require_box, skip  # noqa: E402
from tmux_util import Terminal, Tmux  # noqa: E402

CODEBOX = os.path.abspath(sys.argv[1])
HERE = os.path.dirname(os.path.abspath(__file__))
FAKE_SERVER = os.path.join(HERE, "..", "llm", "fake_openai_server.py")
SCENARIOS = os.path.join(HERE, "..", "llm", "scenarios")
ANSWER = "The sum of 0..100 is 5050."
# The model thinks 3 s before its tool call and 1 s before the answer.
SLOW = {"replies": [
    {"delay": 3.0, "message": {"content": "", "tool_calls": [
        {"name": "run_python", "arguments": json.dumps({"code": "print(sum(range(101)))"})}]}},
    {"delay": 1.0, "message": {"content": ANSWER}},
]}
SPINNER = r"[|/\-\\]"


def fail(what, r=None):
    detail = f"\nexit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}" if r else ""
    raise SystemExit(f"FAIL: {what}{detail}")


class FakeModel:
    """fake_openai_server.py with one scenario; it stops when its stdin closes."""

    def __init__(self, scenario_path):
        self.proc = subprocess.Popen([sys.executable, FAKE_SERVER, "--script", scenario_path,
                                      "--max-seconds", "300"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 20)
        line = self.proc.stdout.readline() if ready else ""
        if not line.startswith("PORT "):
            self.close()
            raise SystemExit(f"FAIL: the fake model server did not start: {line!r}")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}/v1"

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=20)


def ask_argv(url, *extra):
    return [CODEBOX, "ask", "--local", "--base-url", url, "--model", "fake-model", "--driver",
            "jail", "--image", "python", *extra, "sum 0..100"]


def run(argv, timeout, env=None):
    """argv's result with stdout and stderr as text, byte for byte: a "\r" stays one (text=True
    would turn it into a newline)."""
    r = subprocess.run(argv, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL,
                       env=env)
    r.stdout, r.stderr = r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
    return r


def ask(*args, timeout=120):
    return run([CODEBOX, "ask", "--local", *args], timeout,
               env={**os.environ, "OPENAI_API_KEY": "sk-test"})


def usage_errors():
    cases = [
        ([], "no task given"),
        (["--max-steps", "0", "t"], "--max-steps: '0' is not a number from 1 to 1000"),
        (["--memory", "1", "t"], "--memory: must be at least"),
        (["--network", "open", "--allow-host", "a.example.org", "t"],
         "--allow-host: given with --network open"),
        (["--file", "/nonexistent/input.csv", "t"], "--file /nonexistent/input.csv: no such file"),
        (["--no-such-flag", "t"], "unknown option --no-such-flag"),
    ]
    for args, message in cases:
        r = ask(*args, timeout=30)
        if r.returncode != 2 or message not in r.stderr:
            fail(f"codebox ask {' '.join(args)}: exit 2 and '{message}'", r)
        if re.search(r"\b(max_processes|memory_mib|allow_hosts)\b", r.stderr):
            fail("a usage error names a field, not the flag", r)


def piped_stderr_is_unchanged(scenario):
    model = FakeModel(scenario)
    try:
        r = ask(*ask_argv(model.url)[3:])
    finally:
        model.close()
    if r.returncode != 0 or r.stdout != ANSWER + "\n":
        fail("ask with stderr a pipe answers on stdout alone", r)
    lines = r.stderr.splitlines()
    if len(lines) != 2 or lines[0] != "[step 1] running Python..." or \
            not re.fullmatch(r"\[step 1\] ok in \d+ ms \(jail\)", lines[1]):
        fail("stderr holds the step lines and nothing else", r)
    if "\r" in r.stderr or "\x1b" in r.stderr or "asking" in r.stderr or "answer:" in r.stderr:
        fail("no status line, spinner or label off a terminal", r)


def json_has_the_common_fields(scenario):
    """ask --json: the transcript with docs/cli.md's version, exit_code and error."""
    model = FakeModel(scenario)
    try:
        r = ask(*ask_argv(model.url, "--json")[3:])
    finally:
        model.close()
    try:
        j = json.loads(r.stdout)
    except ValueError:
        fail("ask --json prints one JSON object", r)
    if r.returncode != 0 or j.get("version") != 1 or j.get("exit_code") != 0 or \
            j.get("error") is not None or j.get("answer") != ANSWER:
        fail("ask --json: version 1, exit_code 0 like the process, the answer", r)


def model_server_failure_is_125():
    model = FakeModel(os.path.join(SCENARIOS, "unauthorized.json"))
    try:
        r = ask("--base-url", model.url, "--driver", "jail", "--image", "python", "t")
        rj = ask("--base-url", model.url, "--driver", "jail", "--image", "python", "--json", "t")
    finally:
        model.close()
    if r.returncode != 125 or "codebox ask: " not in r.stderr:
        fail("a model server that refuses the key: exit 125, saying why", r)
    j = json.loads(rj.stdout) if rj.stdout.strip().startswith("{") else {}
    if rj.returncode != 125 or j.get("exit_code") != 125 or not (j.get("error") or {}).get("message"):
        fail("ask --json: a failure is 125 in the JSON and the process alike, with the error", rj)


def terminal_shows_the_wait(tmux, scenario):
    model = FakeModel(scenario)
    try:
        t = Terminal(tmux, "ask", ask_argv(model.url), {"OPENAI_API_KEY": "sk-test"})
        first = t.wait_for(rf"^\[step 1\] asking fake-model\.\.\. ({SPINNER})$", timeout=30)
        # The spinner turns while the model thinks.
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            now = re.search(rf"^\[step 1\] asking fake-model\.\.\. ({SPINNER})$", t.screen(),
                            re.MULTILINE)
            if now and now.group(1) != first.group(1):
                break
            time.sleep(0.05)
        else:
            raise AssertionError(f"the spinner did not turn:\n{t.screen()}")
        # The status comes back for the second turn, after the step's lines.
        t.wait_for(rf"^\[step 1\] ok in \d+ ms \(jail\)\n\[step 2\] asking fake-model\.\.\. "
                   rf"{SPINNER}$", timeout=30)
        status = t.wait_exit(timeout=60)
        screen = t.screen()
    finally:
        model.close()
    assert status == 0, f"exit status {status}:\n{screen}"
    expected = ["[step 1] running Python...", "[step 1] ok in N ms (jail)", "answer:", ANSWER,
                "exit-status=0"]
    shown = [re.sub(r"ok in \d+ ms", "ok in N ms", line) for line in screen.splitlines()
             if line.strip()]
    # Nothing of the status lines is left: the screen is the step lines, the label, the answer.
    assert shown == expected, f"the screen holds more than the output:\n{screen}"


def emulated_start_is_announced():
    """A vm under emulation announces its start (ask and repl), then erases it. Here the image
    is on a registry that is not there, so the start fails at once, after the library logged
    that it pulls it: the log lines go above the notice, the error follows on a clean line.
    `script` gives codebox a terminal and records every byte it writes."""
    if not shutil.which("qemu-system-x86_64") or not shutil.which("script"):
        print("note: no qemu-system-x86_64 or script(1): the vm start notice is not checked")
        return
    vm = ["--local", "--driver", "vm", "--allow-emulation", "--image", "localhost:1/no-such:1"]
    for name, args in (("ask", ["--base-url", "http://127.0.0.1:9/v1", *vm, "t"]),
                       ("repl", vm)):
        command = " ".join([CODEBOX, name, *args])
        r = run(["script", "-qefc", command, "/dev/null"], 120,
                env={**os.environ, "TERM": "xterm"})
        out = r.stdout
        shown = out.find("starting VM (emulated, a few seconds)... ")
        error = out.find(f"codebox {name}: create box: ")
        if r.returncode != 125 or shown < 0 or error < shown or \
                not out[:error].endswith("\r\x1b[K"):
            fail(f"{name}: the notice, erased, then the error: {out!r}", r)
        # Nothing was written after the notice's text on its line: a log line starts a line.
        for m in re.finditer(r"codebox\[\d+\] ", out):
            if not (out[:m.start()].endswith("\r\x1b[K") or out[:m.start()].endswith("\n")):
                fail(f"{name}: a log line glued to the status line: {out!r}", r)


def main():
    usage_errors()
    require_box(CODEBOX, "python")
    work = tempfile.mkdtemp(prefix="ask_progress_test.")
    scenario = os.path.join(work, "slow.json")
    with open(scenario, "w") as f:
        json.dump(SLOW, f)
    tmux = Tmux("codebox-ask-test")
    try:
        piped_stderr_is_unchanged(scenario)
        json_has_the_common_fields(scenario)
        model_server_failure_is_125()
        emulated_start_is_announced()
        if not shutil.which("tmux"):
            skip("tmux is not installed (apt-get install tmux): the terminal part did not run")
        tmux("new-session", "-d", "-s", "keep", "sleep 600")
        terminal_shows_the_wait(tmux, scenario)
    finally:
        tmux.close()
        shutil.rmtree(work, ignore_errors=True)
    print("PASS: codebox ask's progress, on a terminal and off one")


if __name__ == "__main__":
    main()
