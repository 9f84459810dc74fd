"""exec(..., on_stdout=, on_stderr=): streaming callbacks on both twins, against real boxes
(skipped, with the reason, where no box can start)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import codebox

pytestmark = pytest.mark.usefixtures("need_box")

SLOW = "echo start; sleep 1; echo oops >&2; echo end"


def test_sync_callbacks_stream_before_exec_returns(box: codebox.SyncCodeBox) -> None:
    out: list[tuple[str, float, str]] = []
    err: list[str] = []
    r = box.exec("sh", "-c", SLOW,
                 on_stdout=lambda s: out.append((s, time.monotonic(), threading.current_thread().name)),
                 on_stderr=err.append)
    returned = time.monotonic()
    assert r.exit_code == 0
    assert "".join(s for s, _, _ in out) == r.stdout == "start\nend\n"
    assert "".join(err) == r.stderr == "oops\n"
    first = out[0]
    assert first[0].startswith("start")
    assert returned - first[1] > 0.7, "the first piece came while the command still ran"
    # The blocking twin calls them from codebox's I/O thread, not the caller's.
    assert first[2] != threading.current_thread().name


def test_a_character_cut_between_pieces_arrives_whole(box: codebox.SyncCodeBox) -> None:
    pieces: list[str] = []
    r = box.exec("sh", "-c", r"printf '\303'; sleep 0.3; printf '\251\n'; printf '\377'",
                 on_stdout=pieces.append)
    assert "".join(pieces) == r.stdout == "é\n\ufffd"


def test_a_raising_callback_reaches_the_caller_and_kills_the_command(
    box: codebox.SyncCodeBox,
) -> None:
    def boom(_: str) -> None:
        raise ValueError("callback failed")

    t0 = time.monotonic()
    with pytest.raises(ValueError, match="callback failed"):
        box.exec("sh", "-c", "echo one; sleep 20; echo two", on_stdout=boom)
    assert time.monotonic() - t0 < 10
    assert box.run("print('still fine')") == "still fine\n"
    with pytest.raises(TypeError):
        box.exec("true", on_stdout="not callable")  # type: ignore[arg-type]


def test_async_callbacks_run_on_the_loop_in_order_before_exec_returns() -> None:
    async def main() -> None:
        async with codebox.CodeBox(timeout=20) as box:
            loop_thread = threading.get_ident()
            seen: list[tuple[str, str, int, float]] = []
            r = await box.exec(
                "sh", "-c", "for i in 1 2 3 4 5; do echo $i; echo e$i >&2; sleep 0.2; done",
                on_stdout=lambda s: seen.append(("out", s, threading.get_ident(), time.monotonic())),
                on_stderr=lambda s: seen.append(("err", s, threading.get_ident(), time.monotonic())),
            )
            returned = time.monotonic()
            # Every piece was delivered before exec returned, on the loop's thread, in order.
            assert "".join(s for k, s, _, _ in seen if k == "out") == r.stdout == "1\n2\n3\n4\n5\n"
            assert "".join(s for k, s, _, _ in seen if k == "err") == r.stderr
            assert {t for _, _, t, _ in seen} == {loop_thread}
            assert returned - seen[0][3] > 0.5, "the first piece came while the command ran"

            # Meanwhile the loop stays free for other work.
            ticks = 0

            async def ticker() -> None:
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.05)
                    ticks += 1

            tick = asyncio.create_task(ticker())
            await box.exec("sleep", "0.5", on_stdout=print)
            tick.cancel()
            assert ticks >= 5

            def boom(_: str) -> None:
                raise KeyError("async callback failed")

            t0 = time.monotonic()
            with pytest.raises(KeyError):
                await box.exec("sh", "-c", "echo 1; sleep 0.3; echo 2; sleep 20", on_stdout=boom)
            assert time.monotonic() - t0 < 10

    asyncio.run(main())


def test_python_in_the_box_prints_as_it_goes(box: codebox.SyncCodeBox) -> None:
    # PYTHONUNBUFFERED=1 is in every box's default environment: a print reaches the callback
    # while the program still runs, as it would on a terminal, though its stdout is a pipe.
    out: list[tuple[str, float]] = []
    program = "import time\nprint('first')\ntime.sleep(1.5)\nprint('second')"
    r = box.exec("python3", "-c", program, on_stdout=lambda s: out.append((s, time.monotonic())))
    returned = time.monotonic()
    assert r.stdout == "first\nsecond\n"
    assert out[0][0].startswith("first") and not out[0][0].endswith("second\n")
    assert returned - out[0][1] > 1.0, "the first line came before the sleep ended"
    # The user's own setting wins.
    r = box.exec("python3", "-c", "import os; print(repr(os.environ.get('PYTHONUNBUFFERED')))",
                 env={"PYTHONUNBUFFERED": ""})
    assert r.stdout == "''\n"
