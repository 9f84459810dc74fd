"""run_code's machinery, shared by both box twins: the checked call of one cell, the interrupt
of a cell whose callback raised, and of one whose awaiting task was cancelled."""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any, Callable, Optional, Tuple

from ._execution import Execution, Result
from ._sinks import _end, _raise_first_error, _sink, _text_sink
from ._threads import _EXECUTOR
from ._values import _check_seconds
from .errors import BoxError


class _CellStopper:
    """Interrupts a cell whose callback raised, so that it ends as an exec would, rather than
    run to its end. The interrupt goes from a worker thread, never from the callback's own
    (which may be the thread that waits for the cell), and is waited for before the cell's call
    returns, so it can never reach a later cell."""

    def __init__(self, box: Any) -> None:
        self._box = box
        self._job: Optional[concurrent.futures.Future[Any]] = None

    def __call__(self) -> None:
        if self._job is None:
            self._job = _EXECUTOR.submit(self._box.interrupt_code)

    def wait(self) -> None:
        if self._job is not None:
            concurrent.futures.wait([self._job])


def _cell_call(
    box: Any,
    code: str,
    timeout: Optional[float],
    on_stdout: Optional[Callable[[str], Any]],
    on_stderr: Optional[Callable[[str], Any]],
    on_result: Optional[Callable[[Result], Any]],
    loop: Optional[asyncio.AbstractEventLoop] = None,
) -> Tuple[Callable[[], Any], Callable[[Any], Execution]]:
    """run_code's arguments checked here, in the caller's thread. Returns the blocking call and
    what turns its outcome into the Execution, run by the caller once it returned (on the
    loop's thread for the asyncio API: after every queued callback)."""
    if not isinstance(code, str):
        raise TypeError(f"run_code takes the cell's code as a str, got {type(code).__name__}")
    _check_seconds(timeout, "timeout")
    stopper = _CellStopper(box)
    out = _text_sink(on_stdout, loop, "on_stdout", stopper)
    err = _text_sink(on_stderr, loop, "on_stderr", stopper)
    res = _sink(on_result, loop, Result._from_core, "on_result", stopper)

    def call() -> Any:
        try:
            return box.run_code(code, timeout, out, err, res)
        except BoxError:
            _raise_first_error(out, err, res)
            raise
        finally:
            stopper.wait()

    def finish(raw: Any) -> Execution:
        stopper.wait()
        _end(out, err)
        _raise_first_error(out, err, res)
        return Execution._from_core(raw)

    return call, finish


async def _await_cell(box: Any, call: Callable[[], Any]) -> Any:
    """Runs a cell's call in a worker thread and returns its outcome. Cancelling the awaiting
    task interrupts the cell and waits until it has stopped (at most the kernel's interrupt
    grace), so the next cell starts clean; a second cancellation, or a box that is gone, ends
    that wait."""
    cell = asyncio.wrap_future(_EXECUTOR.submit(call))
    try:
        return await asyncio.shield(cell)
    except asyncio.CancelledError:
        if not cell.done():
            try:
                await asyncio.get_running_loop().run_in_executor(_EXECUTOR, box.interrupt_code)
                await asyncio.wait([cell])
            except (asyncio.CancelledError, BoxError):
                pass
        raise
