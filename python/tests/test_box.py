"""CodeBox / SyncCodeBox against real boxes (skipped, with the reason, where none can start)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

import codebox
from conftest import box_processes, wait_no_box_processes

pytestmark = pytest.mark.usefixtures("need_box")


def test_run_returns_stdout(box: codebox.SyncCodeBox) -> None:
    assert box.run("print(6 * 7)") == "42\n"


def test_run_code_that_raises_returns_stdout(box: codebox.SyncCodeBox) -> None:
    assert box.run("print('before'); raise ValueError('boom')") == "before\n"


def test_exec_exit_code_and_stderr(box: codebox.SyncCodeBox) -> None:
    r = box.exec("python3", "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)")
    assert (r.exit_code, r.stdout, r.stderr) == (3, "out\n", "err\n")
    assert not r.ok and not r.timed_out and not r.out_of_memory
    assert r.driver and r.duration >= 0
    r = box.exec("python3", "-c", "raise ValueError('boom')")
    assert r.exit_code == 1 and "ValueError: boom" in r.stderr


def test_exec_env_cwd_stdin_and_argv_list(box: codebox.SyncCodeBox) -> None:
    r = box.exec("sh", "-c", 'echo "$GREETING"; pwd; cat', env={"GREETING": "hi"}, cwd="/tmp", stdin="piped")
    assert r.stdout == "hi\n/tmp\npiped"
    assert box.exec(["python3", "-c", "import os; print(os.getcwd())"]).stdout == "/work\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="a jail maps a second user only for host root")
def test_a_box_of_a_user_and_an_exec_as_root() -> None:
    with codebox.SyncCodeBox(user="user", workdir="/home/user", timeout=20) as b:
        assert b.info.user == "1000:1000 (user)"
        assert b.exec("sh", "-c", "id -un; pwd").stdout == "user\n/home/user\n"
        assert b.exec("id", "-un", user="root").stdout == "root\n"
        with pytest.raises(ValueError, match="user 'Root'"):
            b.exec("id", user="Root")
        with pytest.raises(Exception, match="an exec may run as that user or as root only"):
            b.exec("id", user="nobody")


def test_output_is_decoded_with_replacement(box: codebox.SyncCodeBox) -> None:
    r = box.exec("python3", "-c", "import sys; sys.stdout.buffer.write(b'ok\\xff')")
    assert r.stdout == "ok\ufffd" and r.stdout_bytes == b"ok\xff"


def test_host_environment_does_not_enter(box: codebox.SyncCodeBox, monkeypatch: pytest.MonkeyPatch) -> None:
    os.environ["CODEBOX_TEST_SECRET"] = "s3cret"
    try:
        assert "s3cret" not in box.exec("env").stdout
    finally:
        del os.environ["CODEBOX_TEST_SECRET"]


def test_exec_timeout_is_a_result(box: codebox.SyncCodeBox) -> None:
    t0 = time.monotonic()
    r = box.exec("python3", "-c", "import time; print('start', flush=True); time.sleep(30)", timeout=1)
    assert r.timed_out and not r.ok
    assert r.stdout == "start\n"
    assert time.monotonic() - t0 < 10


def test_run_timeout_raises_timeout_error(box: codebox.SyncCodeBox) -> None:
    with pytest.raises(TimeoutError) as info:
        box.run("import time; time.sleep(30)", timeout=1)
    assert isinstance(info.value, RuntimeError)  # a BoxError too
    assert "timed out" in str(info.value)
    # The box still works afterwards.
    assert box.run("print('alive')") == "alive\n"


def test_box_default_timeout_applies(need_box: None) -> None:
    with codebox.SyncCodeBox(timeout=1) as b:
        assert b.exec("sleep", "30").timed_out


def test_copy_file_round_trip(box: codebox.SyncCodeBox, tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_bytes(b"line 1\nline 2\n\x00\xff")
    box.copy_in(src, "data/in.txt")
    r = box.exec("python3", "-c", "import sys; d=open('data/in.txt','rb').read(); print(len(d)); open('/work/out.bin','wb').write(d[::-1])")
    assert r.stdout == "16\n", r.stderr
    box.copy_out("out.bin", tmp_path / "out.bin")
    assert (tmp_path / "out.bin").read_bytes() == src.read_bytes()[::-1]


def test_copy_directory_round_trip(box: codebox.SyncCodeBox, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "a.txt").write_text("a")
    (tree / "sub" / "b.txt").write_text("b")
    box.copy_in(tree, "/work/tree")
    listing = box.run("import os\nfor r, d, f in sorted(os.walk('/work/tree')):\n  print(r, sorted(f))")
    assert "/work/tree ['a.txt']" in listing and "/work/tree/sub ['b.txt']" in listing
    box.exec("sh", "-c", "echo c > /work/tree/sub/c.txt")
    box.copy_out("/work/tree", tmp_path / "back")
    assert (tmp_path / "back" / "a.txt").read_text() == "a"
    assert (tmp_path / "back" / "sub" / "c.txt").read_text() == "c\n"


def test_copy_missing_paths(box: codebox.SyncCodeBox, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        box.copy_in(tmp_path / "nope", "x")
    with pytest.raises(RuntimeError):
        box.copy_out("/work/nope", tmp_path / "nope")


def test_info(box: codebox.SyncCodeBox) -> None:
    info = box.info
    assert info.driver in ("jail", "vm/kvm", "vm/tcg")
    assert info.memory_mib == 512 and info.image == "python"
    assert isinstance(info.limits, tuple)
    assert box.exec("true").driver == info.driver
    # How it started: a jail just starts; a vm box boots or is restored from a template.
    if info.driver == "jail":
        assert info.start == ""
    else:
        assert info.start.split(" ")[0] in ("boot", "snapshot")
    assert info.warnings == ()


def test_use_after_close_raises(need_box: None) -> None:
    with codebox.SyncCodeBox() as b:
        pass
    assert b.closed
    with pytest.raises(codebox.BoxClosedError, match="closed"):
        b.run("print(1)")
    with pytest.raises(RuntimeError):
        b.exec("true")
    b.close()  # idempotent


def test_plain_with_on_codebox_gives_the_sync_twin(need_box: None) -> None:
    with codebox.CodeBox() as b:
        assert isinstance(b, codebox.SyncCodeBox)
        assert b.run("print('sync')") == "sync\n"
    assert b.closed


def test_async_canonical_usage(need_box: None) -> None:
    code = "print('hello from a box')"

    async def main() -> tuple[str, codebox.ExecResult]:
        async with codebox.CodeBox() as box:
            out = await box.run(code)
            result = await box.exec("python3", "-c", code)
            return out, result

    out, result = asyncio.run(main())
    assert out == "hello from a box\n"
    assert (result.exit_code, result.stdout, result.stderr) == (0, "hello from a box\n", "")


def test_async_copy_and_timeout(need_box: None, tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("42")

    async def main() -> None:
        async with codebox.CodeBox(timeout=10) as box:
            await box.copy_in(tmp_path / "x.txt", "x.txt")
            await box.exec("sh", "-c", "cat x.txt x.txt > y.txt")
            await box.copy_out("y.txt", tmp_path / "y.txt")
            assert (await box.exec("sleep", "30", timeout=0.5)).timed_out
            with pytest.raises(TimeoutError):
                await box.run("while True: pass", timeout=0.5)

    asyncio.run(main())
    assert (tmp_path / "y.txt").read_text() == "4242"


def test_twenty_boxes_at_once(need_box: None) -> None:
    async def one(i: int) -> str:
        async with codebox.CodeBox() as box:
            return await box.run(f"import time; time.sleep(0.5); print({i} * {i})")

    async def main() -> list[str]:
        return await asyncio.gather(*(one(i) for i in range(20)))

    before = len(box_processes())
    t0 = time.monotonic()
    outs = asyncio.run(main())
    elapsed = time.monotonic() - t0
    assert outs == [f"{i * i}\n" for i in range(20)]
    # Concurrent, not one after the other (20 x 0.5 s of sleeping alone would be 10 s).
    assert elapsed < 9, f"20 boxes took {elapsed:.1f} s"
    assert wait_no_box_processes(before) <= before


def test_event_loop_keeps_running_while_a_box_works(need_box: None) -> None:
    ticks = 0

    async def ticker(stop: asyncio.Event) -> None:
        nonlocal ticks
        while not stop.is_set():
            await asyncio.sleep(0.1)
            ticks += 1

    async def main() -> str:
        async with codebox.CodeBox() as box:
            stop = asyncio.Event()
            task = asyncio.create_task(ticker(stop))
            await asyncio.sleep(0)  # let the ticker start before the box call
            out = await box.run("import time; time.sleep(1); print('done')")
            stop.set()
            await task
            return out

    assert asyncio.run(main()) == "done\n"
    assert ticks >= 8, f"only {ticks} ticks of 0.1 s during a 1 s box call"


def test_gil_released_for_sync_calls(box: codebox.SyncCodeBox) -> None:
    import threading

    count = 0
    stop = threading.Event()

    def spin() -> None:
        nonlocal count
        while not stop.is_set():
            time.sleep(0.01)
            count += 1

    t = threading.Thread(target=spin)
    t.start()
    box.run("import time; time.sleep(1)")
    stop.set()
    t.join()
    assert count >= 40


def test_box_destroyed_on_exception(need_box: None) -> None:
    before = len(box_processes())
    held: list[codebox.CodeBox] = []

    async def main() -> None:
        async with codebox.CodeBox() as box:
            held.append(box)
            await box.run("print(1)")
            assert len(box_processes()) > before
            raise KeyError("user error")

    with pytest.raises(KeyError):
        asyncio.run(main())
    assert held[0].closed
    assert wait_no_box_processes(before) == before

    with pytest.raises(ZeroDivisionError):
        with codebox.SyncCodeBox() as b:
            1 / 0
    assert b.closed and wait_no_box_processes(before) == before


def test_box_destroyed_on_cancellation(need_box: None) -> None:
    before = len(box_processes())
    started = asyncio.Event

    async def worker(ready: asyncio.Event) -> None:
        async with codebox.CodeBox(timeout=60) as box:
            ready.set()
            await box.exec("python3", "-c", "import time; time.sleep(60)")

    async def main() -> float:
        ready = started()
        task = asyncio.create_task(worker(ready))
        await ready.wait()
        await asyncio.sleep(0.5)  # the exec is running in the box now
        assert len(box_processes()) > before
        t0 = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - t0

    took = asyncio.run(main())
    assert took < 10, f"cancellation took {took:.1f} s"
    assert wait_no_box_processes(before) == before


def test_cancel_while_starting_leaves_nothing(need_box: None) -> None:
    before = len(box_processes())

    async def main() -> None:
        task = asyncio.create_task(codebox.CodeBox().start())
        await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    # The start goes on in a worker thread and the box is destroyed once it is up: give it
    # the time to appear, then it must go.
    deadline = time.monotonic() + 2
    while len(box_processes()) <= before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert wait_no_box_processes(before) == before


def test_close_while_another_thread_execs(need_box: None) -> None:
    import threading

    before = len(box_processes())
    b = codebox.SyncCodeBox().start()
    outcome: list[object] = []

    def worker() -> None:
        try:
            outcome.append(b.exec("python3", "-c", "import time; time.sleep(30)"))
        except RuntimeError as e:
            outcome.append(e)

    t = threading.Thread(target=worker)
    t.start()
    time.sleep(0.5)
    t0 = time.monotonic()
    b.close()
    t.join(10)
    assert not t.is_alive() and time.monotonic() - t0 < 10
    r = outcome[0]
    assert isinstance(r, RuntimeError) or (isinstance(r, codebox.ExecResult) and not r.ok)
    assert wait_no_box_processes(before) == before


def test_garbage_collected_box_is_destroyed(need_box: None) -> None:
    import gc

    before = len(box_processes())
    b = codebox.SyncCodeBox().start()
    assert len(box_processes()) > before
    del b
    gc.collect()
    assert wait_no_box_processes(before) == before


def test_limits_are_reported(need_box: None) -> None:
    with codebox.SyncCodeBox(memory_mib=64, output_limit_bytes=1000) as b:
        r = b.exec("python3", "-c", "x = bytearray(500 * 1024 * 1024)")
        assert r.out_of_memory and not r.ok
        with pytest.raises(RuntimeError, match="out of memory"):
            b.run("x = bytearray(500 * 1024 * 1024)")
        r = b.exec("python3", "-c", "print('x' * 5000)")
        assert r.output_truncated and len(r.stdout) == 1000


def test_box_lifetime(need_box: None) -> None:
    with codebox.SyncCodeBox(box_timeout=1) as b:
        time.sleep(1.5)
        with pytest.raises(TimeoutError, match="lifetime"):
            b.run("print(1)")
