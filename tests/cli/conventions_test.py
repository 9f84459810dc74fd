#!/usr/bin/env python3
"""The command line's conventions, as scripts and people rely on them: `--opt=value`, exec's
command after its options, `codebox help CMD`, "did you mean", help within 80 columns, the
exit status table of the README, a host file run by name with tracebacks that show it, and
`--json` as documented in docs/cli.md (version, exit_code equal to the process's status,
bytes that are not UTF-8 as base64).

usage: conventions_test.py PATH/TO/codebox   (exit 77 = skipped, with the reason printed)
"""
import base64
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_test_util import require_box  # noqa: E402

CODEBOX = os.path.abspath(sys.argv[1])
JAIL = ["--driver", "jail"]
failures = []


def codebox(*args, stdin=None, cwd=None):
    return subprocess.run([CODEBOX, *args], capture_output=True, text=True, timeout=180,
                          input=stdin, cwd=cwd)


def check(ok, what, r=None):
    if ok:
        print(f"ok   {what}")
        return
    detail = "" if r is None else f"\n     exit {r.returncode}\n     stdout {r.stdout[-600:]!r}" \
                                  f"\n     stderr {r.stderr[-600:]!r}"
    print(f"FAIL {what}{detail}")
    failures.append(what)


def parsing_without_a_box():
    r = codebox("rnu", "print(1)")
    check(r.returncode == 2 and "did you mean run?" in r.stderr, "an unknown command: 2, nearest", r)
    r = codebox("run", "--memroy", "1G", "print(1)")
    check(r.returncode == 2 and "did you mean --memory?" in r.stderr,
          "an unknown option: 2, nearest", r)
    r = codebox("exec", "--jsno", "true")
    check(r.returncode == 2 and "did you mean --json?" in r.stderr, "exec's own flags too", r)
    r = codebox("run", "--copy-i=a:b", "print(1)")
    check(r.returncode == 2 and "--copy-in" in r.stderr and "=" not in r.stderr.split("option")[1]
          .split(";")[0], "an unknown --opt=value names the option without its value", r)
    r = codebox("run")
    check(r.returncode == 2 and "no code given" in r.stderr, "run without code: 2", r)
    r = codebox("exec")
    check(r.returncode == 2 and "no command given" in r.stderr, "exec without a command: 2", r)
    r = codebox("run", "--cpus", "abc", "print(1)")
    check(r.returncode == 2 and "--cpus" in r.stderr, "a bad value: 2, naming the flag", r)
    r = codebox("run", "--cpus=abc", "print(1)")
    check(r.returncode == 2 and "--cpus" in r.stderr, "a bad --opt=value: 2, naming the flag", r)
    r = codebox("run", "--json=yes", "print(1)")
    check(r.returncode == 2 and "--json takes no value" in r.stderr, "a switch given a value", r)
    r = codebox("run", "no_such_file_here.py")
    check(r.returncode == 2 and "no such file" in r.stderr, "a missing FILE.py: 2, said plainly", r)

    r = codebox("help", "run")
    check(r.returncode == 0 and r.stdout.startswith("usage: codebox run"), "codebox help run", r)
    r = codebox("help", "image", "pull")
    check(r.returncode == 0 and "pull" in r.stdout, "codebox help image pull", r)
    r = codebox("help", "exce")
    check(r.returncode == 2 and "did you mean exec?" in r.stderr, "codebox help with a slip", r)
    r = codebox("--help")
    check(r.returncode == 0 and "exit status:" in r.stdout and "124" in r.stdout,
          "the top help has the exit status table", r)

    commands = ["run", "exec", "shell", "ask", "repl", "doctor", "image", "gc", "options", "serve",
                "status", "mcp"]
    for command in [None, *commands]:
        r = codebox("--help") if command is None else codebox("help", command)
        wide = [line for line in r.stdout.splitlines() if len(line) > 79]
        check(r.returncode == 0 and r.stdout and not wide,
              f"`codebox help {command or ''}` fits 80 columns" + (f": {wide[:2]}" if wide else ""),
              r)


def run_and_exec(work):
    r = codebox("run", *JAIL, "--memory=256M", "--timeout=20", "print('eq ok')")
    check(r.returncode == 0 and r.stdout == "eq ok\n", "--memory=256M --timeout=20", r)
    r = codebox("exec", *JAIL, "ls", "-la", "/")
    check(r.returncode == 0 and "proc" in r.stdout, "exec ls -la /: options after the command "
          "are the command's", r)
    r = codebox("exec", *JAIL, "--", "sh", "-c", "echo $#", "x", "--json")
    check(r.returncode == 0 and r.stdout == "1\n", "exec -- CMD: nothing after it is codebox's", r)
    r = codebox("run", *JAIL, "import os; print(os.environ.get('PYTHONUNBUFFERED'))")
    check(r.stdout == "1\n", "Python in a box is unbuffered", r)
    r = codebox("run", *JAIL, "--env", "PYTHONUNBUFFERED=", "import os; "
                "print(repr(os.environ.get('PYTHONUNBUFFERED')))")
    check(r.stdout == "''\n", "unless the user says otherwise", r)

    # A host file by name: run as `python3 NAME`, so a traceback names it and shows its line.
    prog = os.path.join(work, "prog.py")
    with open(prog, "w") as f:
        f.write("import sys\nprint('argv', sys.argv[0], __file__)\nvalue = 1 / 0  # the line\n")
    for args, what in ((["prog.py"], "run FILE.py"), (["--file", prog], "run --file F"),
                       ([f"--file={prog}"], "run --file=F")):
        r = codebox("run", *JAIL, *args, cwd=work)
        check(r.returncode == 1 and "argv prog.py /work/prog.py" in r.stdout and
              'File "/work/prog.py", line 3, in <module>' in r.stderr and
              "value = 1 / 0  # the line" in r.stderr and "ZeroDivisionError" in r.stderr,
              f"{what}: the traceback names the file and shows the line", r)

    # The exit status table.
    cases = [
        (["exec", "sh", "-c", "exit 7"], 7, "the program's own code"),
        (["exec", "--timeout", "1", "sleep", "30"], 124, "an exec timeout: 124"),
        (["exec", "--box-timeout", "1", "sleep", "30"], 124, "the box's lifetime: 124"),
        (["exec", "no-such-program"], 127, "not found: 127"),
        (["exec", "/etc/passwd"], 126, "not executable: 126"),
        (["exec", "sh", "-c", "kill -TERM $$"], 143, "killed by SIGTERM: 128+15"),
        (["run", "--image", "no-such-image-x", "print(1)"], 125, "a missing image: 125"),
    ]
    for args, status, what in cases:
        r = codebox(args[0], *JAIL, *args[1:])
        check(r.returncode == status, what, r)
    r = codebox("exec", *JAIL, "--box-timeout", "1", "sleep", "30")
    check("box-timeout" in r.stderr or "timed out" in r.stderr, "the lifetime is named", r)


def json_interface(work):
    r = codebox("run", *JAIL, "--json", "import sys; print('hi'); sys.exit(3)")
    j = json.loads(r.stdout)
    check(r.returncode == 3 and j["version"] == 2 and j["exit_code"] == 3 and
          j["result"]["exit_code"] == 3 and j["result"]["stdout"] == "hi\n" and
          j["result"]["stdout_encoding"] == "utf-8" and j["error"] is None and
          j["result"]["driver"] == "jail",
          "--json: version, exit_code, the result in the API's shape", r)
    r = codebox("exec", *JAIL, "--json", "--", "sh", "-c", r"printf '\377\376\000x'; exit 0")
    j = json.loads(r.stdout)
    check(j["result"]["stdout_encoding"] == "base64" and
          base64.b64decode(j["result"]["stdout"]) == b"\xff\xfe\x00x" and
          j["result"]["stderr_encoding"] == "utf-8",
          "--json: bytes that are not UTF-8 come as base64, never replaced", r)
    r = codebox("exec", *JAIL, "--json", "--timeout", "1", "sleep", "30")
    j = json.loads(r.stdout)
    check(r.returncode == 124 and j["exit_code"] == 124 and j["result"]["timed_out"] is True,
          "--json: a timeout is 124 in both", r)
    out = os.path.join(work, "copied")
    r = codebox("run", *JAIL, "--json", "--copy-out", "/work/missing:" + out, "print(1)")
    j = json.loads(r.stdout)
    check(r.returncode == 125 and j["exit_code"] == 125 and j["result"]["exit_code"] == 0 and
          j["error"] and "missing" in j["error"]["message"],
          "--json: a failed copy-out is 125 in the JSON and the process alike", r)
    r = codebox("run", "--json", "--image", "no-such-image-x", "print(1)")
    j = json.loads(r.stdout)
    check(r.returncode == 125 and j["exit_code"] == 125 and j["error"]["message"],
          "--json: a box that cannot start still answers in JSON", r)


def main():
    parsing_without_a_box()
    require_box(CODEBOX, "python")
    with tempfile.TemporaryDirectory(prefix="conventions_test.") as work:
        run_and_exec(work)
        json_interface(work)
    if failures:
        raise SystemExit(f"FAIL: {len(failures)} check(s): {failures}")
    print("all passed")


if __name__ == "__main__":
    main()
