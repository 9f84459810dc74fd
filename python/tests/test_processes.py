"""Processes that outlive the call that started them: spawn, processes, attach, send_stdin, kill,
through both twins against real boxes."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import codebox

pytestmark = pytest.mark.usefixtures("need_box")


def test_spawn_attach_stdin_and_the_table(box: codebox.SyncCodeBox) -> None:
    pid = box.spawn("sh", "-c", 'echo up; read line; echo "got $line"; exit 4')
    assert isinstance(pid, int) and pid > 0
    listed = {p.pid: p for p in box.processes()}
    assert listed[pid].running and listed[pid].background
    assert listed[pid].argv[0] == "sh" and listed[pid].exit is None
    seen: list[str] = []
    threading.Timer(0.3, lambda: box.send_stdin(pid, "hi\n", close=True)).start()
    r = box.attach(pid, on_stdout=seen.append)
    assert (r.exit_code, r.stdout) == (4, "up\ngot hi\n")
    assert "".join(seen) == "up\ngot hi\n"
    assert r.dropped_stdout == 0
    ended = {p.pid: p for p in box.processes()}[pid]
    assert not ended.running and ended.exit is not None and ended.exit.exit_code == 4
    # A late attacher gets what the box kept and the exit at once.
    assert box.attach(pid).stdout == "up\ngot hi\n"


def test_kill_ends_the_tree_and_signal_reaches_the_group(box: codebox.SyncCodeBox) -> None:
    tree = box.spawn("sh", "-c", "setsid sleep 600 & exec sleep 600")
    box.kill(tree)
    assert box.attach(tree).signal == 9
    count = "import os; print(sum(open(f'/proc/{p}/comm').read().strip() == 'sleep' " \
            "for p in os.listdir('/proc') if p.isdigit()))"
    deadline = time.monotonic() + 5
    while box.run(count) != "0\n" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert box.run(count) == "0\n", "the setsid child went with its tree"
    termed = box.spawn("sleep", "600")
    box.kill(termed, signal=15)
    assert box.attach(termed).signal == 15
    with pytest.raises(codebox.BoxError):
        box.kill(termed)
    with pytest.raises(ValueError):
        box.kill(0)
    with pytest.raises(ValueError):
        box.spawn("true", ring_bytes=1 << 40)
    # A program too long for an argument would go as a file, removed at an end nobody awaits.
    with pytest.raises(codebox.BoxInvalidArgumentError, match="background python3 -c"):
        box.spawn("python3", "-c", "pass\n" * 20000)


def test_a_small_ring_drops_the_oldest_and_says_so(box: codebox.SyncCodeBox) -> None:
    pid = box.spawn("sh", "-c", "head -c 50000 /dev/zero | tr '\\0' x; echo; echo end", ring_bytes=1000)
    # Once it ended: an attacher that comes earlier gets the ring and then the rest live.
    deadline = time.monotonic() + 10
    while any(p.pid == pid and p.running for p in box.processes()) and time.monotonic() < deadline:
        time.sleep(0.05)
    r = box.attach(pid)
    assert len(r.stdout) == 1000 and r.stdout.endswith("\nend\n")
    assert r.dropped_stdout == 50005 - 1000


def test_the_async_twin() -> None:
    async def main() -> None:
        async with codebox.CodeBox() as box:
            pid = await box.spawn("sh", "-c", "echo async; sleep 600")
            procs = await box.processes()
            assert any(p.pid == pid and p.running for p in procs)
            follower = asyncio.ensure_future(box.attach(pid))
            await asyncio.sleep(0.3)
            await box.kill(pid)
            r = await follower
            assert (r.stdout, r.signal) == ("async\n", 9)

    asyncio.run(main())
