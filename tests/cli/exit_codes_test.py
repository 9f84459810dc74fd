#!/usr/bin/env python3
"""The exit statuses of codebox's subcommands: 0 ok, 2 a bad flag or value (the message names
the flag as the user types it, never a C++ field), 125 codebox could not do it. Needs no box.

usage: exit_codes_test.py PATH/TO/codebox
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

CODEBOX = os.path.abspath(sys.argv[1])
FIELD = re.compile(r"\b(max_processes|memory_mib|allow_hosts|exec_timeout|disk_mib)\b")


def main():
    home = tempfile.mkdtemp(prefix="exit_codes_test.")
    env = {**os.environ, "CODEBOX_HOME": home, "CODEBOX_SERVER": ""}
    usage = [
        (["no-such-command"], "unknown command"),
        (["doctor", "--no-such-flag"], "unknown option --no-such-flag"),
        (["doctor", "--pids", "0"], "--pids: must be at least 1, got 0"),
        (["doctor", "--network", "open", "--allow-host", "a.example.org"],
         "--allow-host: given with --network open"),
        (["gc", "--no-such-flag"], "unknown option --no-such-flag"),
        (["gc", "--home"], "--home needs a value"),
        (["image"], "usage"),
        (["image", "no-such-verb"], "unknown command"),
        (["image", "build", "--no-such-flag"], "unknown option"),
        (["image", "ls", "extra"], "unexpected argument"),
        (["image", "rm"], "name the image"),
        (["image", "pull"], "name the image"),
        (["options", "--no-such-flag"], "unknown argument"),
        (["status", "--no-such-flag"], "unknown or incomplete option"),
        (["serve", "--no-such-flag"], "unknown option"),
        (["serve", "--pids", "0"], "--pids: must be at least 1"),
        (["serve", "--network", "open", "--allow-host", "a.example.org"],
         "--allow-host: given with --network open"),
        (["mcp", "--no-such-flag"], "unknown option"),
        (["mcp", "--network", "open", "--allow-host", "a.example.org"],
         "--allow-host: given with --network open"),
        (["repl", "--no-such-flag"], "unknown option"),
        (["repl", "--memory", "1"], "--memory: must be at least"),
        (["repl", "--network", "open", "--allow-host", "a.example.org"],
         "--allow-host: given with --network open"),
    ]
    failures = []
    try:
        for args, message in usage:
            r = subprocess.run([CODEBOX, *args], capture_output=True, text=True, timeout=60,
                               env=env, stdin=subprocess.DEVNULL)
            if r.returncode != 2 or message not in r.stderr or FIELD.search(r.stderr):
                failures.append(f"codebox {' '.join(args)}: want exit 2 and '{message}', got "
                                f"{r.returncode}: {r.stderr.strip()}")
        failed = [
            (["status", "--server", f"unix:{home}/no-such.sock"], "codebox status: "),
            (["image", "rm", "no-such-image"], "codebox image rm: "),
        ]
        for args, message in failed:
            r = subprocess.run([CODEBOX, *args], capture_output=True, text=True, timeout=60,
                               env=env, stdin=subprocess.DEVNULL)
            if r.returncode != 125 or message not in r.stderr:
                failures.append(f"codebox {' '.join(args)}: want exit 125 and '{message}', got "
                                f"{r.returncode}: {r.stderr.strip()}")
        for args in (["options"], ["gc", "--dry-run"], ["image", "ls"]):
            r = subprocess.run([CODEBOX, *args], capture_output=True, text=True, timeout=60,
                               env=env, stdin=subprocess.DEVNULL)
            if r.returncode != 0:
                failures.append(f"codebox {' '.join(args)}: want exit 0, got {r.returncode}: "
                                f"{r.stderr.strip()}")
    finally:
        shutil.rmtree(home, ignore_errors=True)
    if failures:
        raise SystemExit("FAIL:\n" + "\n".join(failures))
    print(f"PASS: {len(usage) + 5} exit statuses")


if __name__ == "__main__":
    main()
