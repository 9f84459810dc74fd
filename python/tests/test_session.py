"""run_code: the box's stateful code-interpreter session (an IPython kernel), both twins, against
real boxes (skipped, with the reason, where no box can start or an image is missing)."""

from __future__ import annotations

import asyncio
import base64
import struct
import threading
import time
import zlib
from typing import Iterator

import pytest

import codebox
from codebox._values import _core

pytestmark = pytest.mark.usefixtures("need_box")


@pytest.fixture(autouse=True)
def need_session() -> None:
    if not hasattr(_core().Box, "run_code"):
        pytest.fail("the _codebox extension has no Box.run_code (built without session_module.cc)")


@pytest.fixture
def session() -> Iterator[codebox.SyncCodeBox]:
    with codebox.SyncCodeBox(image="python", timeout=60) as b:
        yield b


@pytest.fixture
def data_box() -> Iterator[codebox.SyncCodeBox]:
    try:
        b = codebox.SyncCodeBox(image="python-data", timeout=120).start()
    except codebox.BoxError as e:
        if e.code != "not_found":
            raise
        pytest.skip(f"the python-data image is not built here ({e}); "
                    "build it with `codebox image build python-data`")
    try:
        yield b
    finally:
        b.close()


def test_state_persists_across_cells(session: codebox.SyncCodeBox) -> None:
    first = session.run_code("x = 21\nimport math")
    assert first.error is None and first.results == [] and first.text is None
    second = session.run_code("x * 2")
    assert second.text == "42"
    assert second.execution_count == first.execution_count + 1
    assert session.run_code("math.sqrt(x + 4)").text == "5.0"
    assert second.driver == "jail" and second.duration >= 0


def test_the_last_expression_is_the_main_result(session: codebox.SyncCodeBox) -> None:
    e = session.run_code("print('hello')\n1 + 1")
    assert e.text == "2"
    assert e.logs.stdout == ["hello\n"] or "".join(e.logs.stdout) == "hello\n"
    main = [r for r in e.results if r.is_main_result]
    assert len(main) == 1 and main[0].text == "2" and "text" in main[0].formats()
    assert session.run_code("None").text is None, "None shows nothing, as in IPython"
    e = session.run_code("{'a': [1, 2]}")
    assert e.text == "{'a': [1, 2]}"


def test_an_exception_is_a_result_and_the_next_cell_runs(session: codebox.SyncCodeBox) -> None:
    session.run_code("kept = 'yes'")
    e = session.run_code("print('before')\n1 / 0")
    assert e.error is not None
    assert (e.error.name, e.error.value) == ("ZeroDivisionError", "division by zero")
    assert "ZeroDivisionError" in e.error.traceback and "\x1b[" not in e.error.traceback
    assert "".join(e.logs.stdout) == "before\n"
    assert not e.timed_out and not e.kernel_restarted
    assert session.run_code("kept").text == "'yes'"


def test_a_timeout_interrupts_the_cell_and_keeps_the_state(session: codebox.SyncCodeBox) -> None:
    session.run_code("total = 5")
    t0 = time.monotonic()
    e = session.run_code("import time\nwhile True: time.sleep(0.1)", timeout=1)
    assert time.monotonic() - t0 < 15
    assert e.timed_out and not e.kernel_restarted
    assert e.error is not None and e.error.name == "KeyboardInterrupt"
    assert session.run_code("total + 1").text == "6"


def test_callbacks_arrive_before_the_cell_ends(session: codebox.SyncCodeBox) -> None:
    stamps: list[tuple[str, float]] = []
    results: list[codebox.Result] = []
    e = session.run_code(
        "import sys, time\nprint('first', flush=True)\ntime.sleep(1)\n"
        "print('oops', file=sys.stderr)\ndisplay('shown')\n'last'",
        on_stdout=lambda s: stamps.append((s, time.monotonic())),
        on_stderr=lambda s: stamps.append(("err:" + s, time.monotonic())),
        on_result=results.append,
    )
    ended = time.monotonic()
    assert stamps and stamps[0][0].startswith("first")
    assert ended - stamps[0][1] > 0.7, "stdout came while the cell still ran"
    assert "".join(s for s, _ in stamps if not s.startswith("err:")) == "".join(e.logs.stdout)
    assert any(s.startswith("err:oops") for s, _ in stamps)
    assert [r.text for r in results] == [r.text for r in e.results] == ["'shown'", "'last'"]
    assert [r.is_main_result for r in results] == [False, True]

    def boom(_: object) -> None:
        raise RuntimeError("callback failed")

    # A callback that raises interrupts the cell (not left to run its 30 s), and the caller
    # gets its exception; the session lives on.
    session.run_code("alive = True")
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="callback failed"):
        session.run_code("import time\nprint('x', flush=True)\ntime.sleep(30)", on_stdout=boom)
    assert time.monotonic() - t0 < 15
    assert session.run_code("alive").text == "True"


def test_restart_forgets_variables_and_keeps_files(session: codebox.SyncCodeBox) -> None:
    session.run_code("v = 1\nopen('kept.txt', 'w').write('file')")
    session.restart()
    e = session.run_code("v")
    assert e.error is not None and e.error.name == "NameError"
    assert e.execution_count == 1, "a fresh kernel counts from 1"
    assert session.run_code("open('kept.txt').read()").text == "'file'"


def png_info(png: bytes) -> tuple[int, int, set[bytes]]:
    """Width, height and the set of distinct pixels of an 8-bit RGB/RGBA PNG, decoded here
    with zlib only (filters undone), so nothing of the box's making is trusted to do it."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    pos, idat, header = 8, b"", None
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos:pos + 4])
        kind, body = png[pos + 4:pos + 8], png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert header is not None, "no IHDR chunk"
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    bpp = 4 if colour == 6 else 3
    raw, stride = zlib.decompress(idat), width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    pixels = {row[i:i + bpp] for row in rows[::7] for i in range(0, stride, bpp * 5)}
    return width, height, pixels


def test_a_chart_comes_back_as_a_png_of_the_figures_size(data_box: codebox.SyncCodeBox) -> None:
    e = data_box.run_code(
        "import matplotlib.pyplot as plt\n"
        "fig = plt.figure(figsize=(4, 3), dpi=100)\n"
        "plt.plot([1, 3, 2, 4], color='red')\nplt.title('chart')\nplt.show()"
    )
    assert e.error is None, e.error
    pngs = [r for r in e.results if r.png]
    assert len(pngs) == 1, e.results
    width, height, pixels = png_info(base64.b64decode(pngs[0].png))
    assert (width, height) == (400, 300)
    assert len(pixels) > 1, "the chart is blank"
    # A figure left open at the end of a cell comes back too.
    e = data_box.run_code("import matplotlib.pyplot as plt\nplt.figure(figsize=(2, 2), dpi=50)\nplt.bar([1, 2], [3, 4])")
    assert any(r.png for r in e.results), e.results


def test_a_dataframe_gives_html_and_text(data_box: codebox.SyncCodeBox) -> None:
    e = data_box.run_code("import pandas as pd\ndf = pd.DataFrame({'city': ['Oslo', 'Rome'], 'temp': [3, 18]})\ndf")
    assert e.error is None, e.error
    main = [r for r in e.results if r.is_main_result][0]
    assert main.html is not None and "<table" in main.html and "Oslo" in main.html
    assert main.text is not None and "Rome" in main.text
    assert {"text", "html"} <= set(main.formats())
    assert data_box.run_code("int(df.temp.sum())").text == "21"


def test_twenty_sessions_in_parallel_from_asyncio() -> None:
    async def one(i: int) -> tuple[str | None, str | None, int]:
        async with codebox.CodeBox(image="python", timeout=180) as box:
            await box.run_code(f"n = {i}\nimport os\npid = os.getpid()")
            square = await box.run_code("n * n")
            mine = await box.run_code("n")
            return square.text, mine.text, square.execution_count

    async def main() -> list[tuple[str | None, str | None, int]]:
        return await asyncio.gather(*(one(i) for i in range(20)))

    t0 = time.monotonic()
    results = asyncio.run(main())
    assert results == [(str(i * i), str(i), 2) for i in range(20)]
    print(f"20 sessions in parallel: {time.monotonic() - t0:.1f} s")


def test_the_async_api_streams_on_the_loop_and_cancelling_interrupts() -> None:
    async def main() -> None:
        async with codebox.CodeBox(image="python", timeout=60) as box:
            loop_thread = threading.get_ident()
            seen: list[tuple[str, int]] = []
            e = await box.run_code(
                "for i in range(3): print(i, flush=True)\n'done'",
                on_stdout=lambda s: seen.append((s, threading.get_ident())),
            )
            assert e.text == "'done'"
            assert "".join(s for s, _ in seen) == "0\n1\n2\n"
            assert {t for _, t in seen} == {loop_thread}

            await box.run_code("state = 'kept'")
            task = asyncio.create_task(box.run_code("import time\ntime.sleep(50)"))
            await asyncio.sleep(1.5)
            t0 = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # The cell was interrupted, not left running: the next one answers at once.
            after = await box.run_code("state")
            assert after.text == "'kept'"
            assert time.monotonic() - t0 < 15
            def boom(_: object) -> None:
                raise LookupError("async callback failed")

            t0 = time.monotonic()
            with pytest.raises(LookupError):
                await box.run_code("import time\nprint(1, flush=True)\ntime.sleep(30)", on_stdout=boom)
            assert time.monotonic() - t0 < 15, "the cell was interrupted"
            assert (await box.run_code("state")).text == "'kept'"

            await box.restart()
            assert (await box.run_code("1")).execution_count == 1

    asyncio.run(main())


def test_a_session_and_files_under_the_vm_driver() -> None:
    """The basics under the vm driver (QEMU; tcg where the host has no kvm)."""
    try:
        box = codebox.SyncCodeBox(image="python", driver="vm", allow_emulation=True, timeout=120).start()
    except codebox.BoxError as e:
        if e.code not in ("unavailable", "not_found"):
            raise
        pytest.skip(f"no vm box here: {e}")
    try:
        assert box.info.driver.startswith("vm/")
        box.files.write("in/data.bin", bytes(range(256)))
        e = box.run_code("data = open('in/data.bin', 'rb').read()\nlen(data), data == bytes(range(256))")
        assert e.error is None, e.error
        assert e.text == "(256, True)" and e.driver.startswith("vm/")
        assert box.run_code("len(data) * 2").text == "512", "state across cells"
        box.run_code("open('out.txt', 'w').write('from the vm')")
        assert box.files.read_text("out.txt") == "from the vm"
        assert [x.name for x in box.files.list("in")] == ["data.bin"]
        box.files.remove("in")
        with pytest.raises(FileNotFoundError):
            box.files.read("in/data.bin")
    finally:
        box.close()
