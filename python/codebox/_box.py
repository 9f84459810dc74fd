"""CodeBox and SyncCodeBox: disposable isolated boxes for untrusted code.

The work is done by the C++ core (``_codebox``, a pybind11 extension): each call that waits on
the box releases the GIL. :class:`CodeBox` is the asyncio API (each blocking call runs in a
worker thread, so the event loop never stalls); :class:`SyncCodeBox` is its blocking twin, and
a plain ``with CodeBox() as box:`` gives one. Both are made from one :class:`_Base`, in which
each operation is written once (its signature, docstring and argument checks; _twins.py).
"""

from __future__ import annotations

import asyncio
import functools
import os
from typing import (
    TYPE_CHECKING, Any, Awaitable, Callable, Generic, Mapping, Optional, Sequence, Tuple,
    TypeVar,
)

from ._execution import Execution, Result
from ._files import Files, SyncFiles, _FileCalls, _max_bytes
from ._network import _Network
from ._session import _await_cell, _cell_call
from ._sinks import _end, _raise_first_error, _text_sink
from ._threads import _EXECUTOR, _destroy_when_created
from ._values import (
    BoxInfo,
    ExecResult,
    ProcessInfo,
    _pid,
    _argv,
    _box_options,
    _core,
    _document_options,
    _exec_options,
    _not_found_as_file_error,
    _shown_options,
    _run_result,
)
from ._twins import AsyncTwin, Awaited, BlockingTwin, Steps, Twins, twin
from .errors import BoxClosedError, BoxError, BoxFileNotFoundError

if TYPE_CHECKING:
    from typing_extensions import Self

Callback = Optional[Callable[[str], Any]]

T = TypeVar("T")
_F = TypeVar("_F", bound=_FileCalls)


class _Base(_Network, Twins, Generic[_F]):
    """Options, state and every operation of the two twins (``_F``: their ``files``)."""

    _files: Callable[[Any], _F]  # Files or SyncFiles
    _cells: asyncio.Lock | None = None  # CodeBox: its cells, one at a time

    def __init__(self, *args: Any, local: bool = False, **options: Any) -> None:
        # Checked here, against the C++ schema, so a bad option fails at construction and not
        # at `async with`; the resolved values (defaults from C++) are what the box gets.
        if not isinstance(local, bool):
            raise TypeError(f"local must be True or False, got {local!r}")
        self._local = local
        self._options: dict[str, Any] = _box_options(args, options)
        self._box: Any = None
        self._closed = False

    @property
    def options(self) -> dict[str, Any]:
        """Every box option by its name, as checked and resolved by the C++ core: defaults
        filled in, aliases in the option's unit (``disk_size_gb=2`` is ``disk_mib=2048``); a
        ``server_token`` as ``"<set>"``."""
        return _shown_options(self._options)

    @property
    def closed(self) -> bool:
        """True once the box has been closed (it cannot be used again)."""
        return self._closed

    @property
    def info(self) -> BoxInfo:
        """The driver running this box and the limits it enforces."""
        raw = self._live().info
        o = self._options
        return BoxInfo(
            driver=raw["driver"],
            limits=tuple(raw["limits"]),
            limits_not_enforced=tuple(raw["limits_not_enforced"]),
            image=o["image"],
            memory_mib=o["memory_mib"],
            cpus=o["cpus"],
            timeout=o["exec_timeout"],
            disk_mib=o["disk_mib"],
            options=_shown_options(o),
            network=raw.get("network", "none"),
            user=raw.get("user", "root"),
            start=raw.get("start", ""),
            warnings=tuple(raw.get("warnings", ())),
        )

    def _live(self) -> Any:
        if self._closed:
            raise BoxClosedError(
                "the box has been closed (its `with` block ended); create a new CodeBox", "closed"
            )
        if self._box is None:
            raise BoxClosedError(
                "the box is not started; use `async with CodeBox() as box:` "
                "(or `with SyncCodeBox() as box:`), or call start() first",
                "closed",
            )
        return self._box

    def _exec_call(
        self,
        cmd: Sequence[Any],
        env: Any,
        cwd: Any,
        timeout: float | None,
        stdin: str | bytes | None,
        on_stdout: Callback = None,
        on_stderr: Callback = None,
        loop: Optional[asyncio.AbstractEventLoop] = None,
        user: str | None = None,
    ) -> Tuple[Callable[[], Any], Callable[[Any], ExecResult]]:
        """Validates exec's arguments here, in the caller's thread. Returns the blocking call
        and what turns its outcome into the result, run by the caller once it returned (on the
        loop's thread for the asyncio API: after every queued callback)."""
        argv = _argv(cmd)
        options = _exec_options(env, cwd, timeout, stdin, user)
        out = _text_sink(on_stdout, loop, "on_stdout")
        err = _text_sink(on_stderr, loop, "on_stderr")
        box = self._live()

        def call() -> Any:
            try:
                return box.exec(argv, options, out, err)
            except BoxError:
                _raise_first_error(out, err)  # a callback raised: that is what the caller sees
                raise

        def finish(raw: Any) -> ExecResult:
            _end(out, err)
            _raise_first_error(out, err)
            return ExecResult._from_core(raw)

        return call, finish

    def _copy_call(
        self, direction: str, src: Any, dst: Any, max_bytes: int | None = None
    ) -> Callable[[], None]:
        box = self._live()
        src, dst = os.fspath(src), os.fspath(dst)
        limit = _max_bytes(max_bytes)
        if direction == "in" and not os.path.lexists(src):
            raise BoxFileNotFoundError(f"copy_in: host path {src!r} does not exist", "not_found")

        def call() -> None:
            with _not_found_as_file_error():
                if direction == "in":
                    box.copy_in(src, dst)
                else:
                    box.copy_out(src, dst, max_bytes=limit)

        return call

    # The operations, each written once as steps (_twins.py): SyncCodeBox has each as a blocking
    # method, CodeBox as a coroutine. What only the coroutines need follows them.

    @twin
    def start(self) -> Steps[Self]:
        """Starts the box; raises :class:`BoxError` (a RuntimeError) saying why it cannot."""
        if self._closed or self._box is not None:
            raise BoxClosedError("a CodeBox starts once; create a new one", "closed")
        create = functools.partial(_create, self._options, self._local)
        self._box = yield Awaited(create, self._create_in_worker)
        return self

    @twin
    def close(self) -> Steps[None]:
        """Destroys the box: kills every process in it and removes its files. Idempotent.

        Awaited, it runs to completion even if the awaiting task is cancelled meanwhile.
        """
        if self._closed:
            return
        self._closed = True
        box, self._box = self._box, None
        if box is not None:
            yield Awaited(box.destroy, _shielded)

    @twin
    def run(self, code: str, *, timeout: float | None = None) -> Steps[str]:
        """Runs Python ``code`` (``python3 -c``) and returns its stdout.

        Code that raises still returns its stdout; the traceback and exit code are in the
        result of :meth:`exec` (``{await}box.exec("python3", "-c", code)``): ``stderr`` and
        ``exit_code``. Raises :class:`BoxTimeoutError` (a TimeoutError) past ``timeout``
        (default: the box's), :class:`BoxError` when the code ran out of memory or the box
        failed.
        """
        limit = timeout if timeout is not None else self._options["exec_timeout"]
        result = yield from _Base.exec.body(self, "python3", "-c", code, timeout=timeout)
        return _run_result(result, limit)

    @twin
    def exec(
        self,
        *cmd: Any,
        env: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        timeout: float | None = None,
        stdin: str | bytes | None = None,
        on_stdout: Callback = None,
        on_stderr: Callback = None,
        user: str | None = None,
    ) -> Steps[ExecResult]:
        """Runs a command (argv; no shell: use ``exec("sh", "-c", line)`` for one).

        ``env`` (a mapping or (name, value) pairs) adds to the box's environment, ``cwd``
        defaults to the workdir (relative paths are under it), ``timeout`` in seconds
        overrides the box's (``math.inf``: no limit; at least 0.001), ``stdin`` is fed to the
        process (else it reads /dev/null); ``None`` is the default of each. They are checked
        here, as the box options are (TypeError, ValueError naming the argument). A timeout is
        reported as ``timed_out=True``. ``user`` runs it as ``"root"`` or as the box's user
        (the ``user`` box option) by name; the default is the box's user.

        ``on_stdout`` / ``on_stderr`` are called with each piece of output as it comes (str,
        decoded as UTF-8), in order, all before ``exec`` returns; the result still holds the
        whole output. On a :class:`CodeBox` they run on the event loop's thread; on a
        :class:`SyncCodeBox`, on codebox's I/O thread with the GIL held: keep them short there,
        and do not call this box from them. If one raises, the command is killed and ``exec``
        raises that exception. Cancelling the task that awaits a CodeBox's ``exec`` does not
        stop the command; closing the box does.
        """
        call, finish = self._exec_call(
            cmd, env, cwd, timeout, stdin, on_stdout, on_stderr, self._loop(), user
        )
        return finish((yield call))

    @twin
    def run_code(
        self,
        code: str,
        *,
        timeout: float | None = None,
        on_stdout: Callback = None,
        on_stderr: Callback = None,
        on_result: Optional[Callable[[Result], Any]] = None,
    ) -> Steps[Execution]:
        """Runs ``code`` as one cell of this box's code-interpreter session: a long-lived
        IPython kernel, started on first use, in which variables persist from cell to cell.

        ::

            {await}box.run_code("import pandas as pd; df = pd.read_csv('in.csv')")
            e = {await}box.run_code("df.describe()")
            e.text, e.results[0].html      # the last expression's value
            e = {await}box.run_code("df.plot()")
            png = base64.b64decode(e.results[0].png)

        An exception in the cell is a result (``Execution.error``), not a raised exception;
        raised are errors of the box (:class:`BoxError`: no IPython in the image, box gone).
        ``timeout`` (seconds; default the box's; ``math.inf`` none) interrupts the cell with
        KeyboardInterrupt and keeps the state (``timed_out``); a cell that ignores it gets its
        kernel restarted (``kernel_restarted``: state lost). ``on_stdout`` / ``on_stderr``
        (str) and ``on_result`` (:class:`Result`) are called as output comes, in order, all
        before this returns: on a :class:`CodeBox` on the event loop's thread, on a
        :class:`SyncCodeBox` on the thread that called ``run_code``. If one raises, the cell is
        interrupted and this raises that exception. Cells of one box run one at a time.
        Cancelling the task that awaits a CodeBox's ``run_code`` interrupts the cell (and
        waits for it to stop).
        """
        box = self._live()
        loop = self._loop()
        call, finish = _cell_call(box, code, timeout, on_stdout, on_stderr, on_result, loop)
        return finish((yield Awaited(call, functools.partial(self._cell_in_worker, box))))

    @twin
    def restart(self) -> Steps[None]:
        """Ends the session's kernel: the next :meth:`run_code` starts a fresh one (variables
        gone, files kept)."""
        yield self._live().restart_kernel

    @twin
    def interrupt(self) -> Steps[None]:
        """Interrupts the cell running now (KeyboardInterrupt, as its timeout would); nothing
        happens when none runs. A SyncCodeBox's may be called from any thread."""
        yield self._live().interrupt_code

    @property
    def files(self) -> _F:
        """The box's files in memory: ``write``, ``read``, ``read_text``, ``list``, ``remove``
        (coroutines on a CodeBox, blocking calls on a SyncCodeBox)."""
        return self._files(self)

    @twin
    def copy_in(self, host_path: str | os.PathLike[str], box_path: str) -> Steps[None]:
        """Copies a host file or directory (recursively) into the box (relative: under workdir)."""
        yield self._copy_call("in", host_path, box_path)

    @twin
    def copy_out(
        self, box_path: str, host_path: str | os.PathLike[str], *, max_bytes: int | None = None
    ) -> Steps[None]:
        """Copies a file or directory (recursively) from the box to the host.

        Only regular files and directories come out, with permission bits only (no setuid,
        setgid or sticky); symlinks, FIFOs, sockets and devices are skipped. ``max_bytes`` caps
        the file data of the whole copy (default: the box's disk size); over it the copy raises
        BoxLimitExceededError and leaves nothing behind.
        """
        yield self._copy_call("out", box_path, host_path, max_bytes)

    # Processes that outlive the call that started them (the box's process table).

    @twin
    def spawn(
        self,
        *cmd: Any,
        env: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        timeout: float | None = None,
        stdin: str | bytes | None = None,
        ring_bytes: int = 1 << 20,
        user: str | None = None,
    ) -> Steps[int]:
        """Starts a command in the background and returns its pid in the box at once.

        ::

            pid = {await}box.spawn("python3", "-m", "http.server", "8000")
            {await}box.processes()          # [ProcessInfo(pid=..., running=True, ...)]
            r = {await}box.attach(pid)      # its output so far and to come, then its end
            {await}box.kill(pid)

        It runs until it exits, is killed or the box is closed; ``timeout`` (seconds) is none
        unless given. ``env``, ``cwd``, ``stdin`` and ``user`` are as for :meth:`exec`; stdin stays open
        after ``stdin`` for :meth:`send_stdin`. The box keeps the last ``ring_bytes`` of each
        of its output streams (at most 64 MiB) for :meth:`attach`.
        """
        argv = _argv(cmd)
        options = _exec_options(env, cwd, timeout, stdin, user)
        if isinstance(ring_bytes, bool) or not isinstance(ring_bytes, int):
            raise TypeError(f"ring_bytes must be an int, got {ring_bytes!r}")
        if not 0 <= ring_bytes <= 64 << 20:
            raise ValueError(f"ring_bytes must be 0..{64 << 20}, got {ring_bytes}")
        box = self._live()
        return (yield functools.partial(box.spawn, argv, options, ring_bytes))

    @twin
    def processes(self) -> Steps[list[ProcessInfo]]:
        """The box's processes: every one started in it (by :meth:`exec`, :meth:`spawn`,
        :meth:`run`, ...) that still runs, and the last 32 that ended, oldest first."""
        box = self._live()
        raw = yield box.processes
        return [ProcessInfo._from_core(p) for p in raw]

    @twin
    def attach(
        self, pid: int, *, on_stdout: Callback = None, on_stderr: Callback = None
    ) -> Steps[ExecResult]:
        """Follows the process ``pid`` to its end and returns its :class:`ExecResult`: what the
        box still holds of its output (``dropped_stdout`` / ``dropped_stderr`` count what fell
        out before), then its output as it comes, to ``on_stdout`` / ``on_stderr`` too (as for
        :meth:`exec`). A process that ended answers at once. Several may follow one process;
        raises :class:`BoxError` (not_found) for a pid the box does not know."""
        pid = _pid(pid)
        out = _text_sink(on_stdout, self._loop(), "on_stdout")
        err = _text_sink(on_stderr, self._loop(), "on_stderr")
        box = self._live()

        def call() -> Any:
            try:
                return box.attach(pid, out, err)
            except BoxError:
                _raise_first_error(out, err)
                raise

        raw = yield call
        _end(out, err)
        _raise_first_error(out, err)
        return ExecResult._from_core(raw)

    @twin
    def kill(self, pid: int, signal: int | None = None) -> Steps[None]:
        """Kills the process ``pid`` and everything it started (also what left its process
        group); with ``signal`` (a number) sends only that signal to its process group.
        Raises :class:`BoxError` (not_found) when it does not run."""
        pid = _pid(pid)
        box = self._live()
        if signal is None:
            yield functools.partial(box.kill_process, pid)
            return
        if isinstance(signal, bool) or not isinstance(signal, int) or not 1 <= signal <= 64:
            raise ValueError(f"signal must be a signal number 1..64, got {signal!r}")
        yield functools.partial(box.signal_process, pid, int(signal))

    @twin
    def send_stdin(self, pid: int, data: str | bytes, *, close: bool = False) -> Steps[None]:
        """Writes ``data`` to the stdin of the process ``pid`` (one started by :meth:`spawn`),
        then with ``close`` ends it. To a process that ended meanwhile the data is dropped."""
        pid = _pid(pid)
        if isinstance(data, str):
            data = data.encode()
        if not isinstance(data, bytes):
            raise TypeError(f"data must be str or bytes, got {type(data).__name__}")
        box = self._live()
        yield functools.partial(box.send_stdin, pid, data, bool(close))

    async def _create_in_worker(self, create: Callable[[], Any]) -> Any:
        """start's step, awaited: the box may still come up in its thread after the awaiting
        task was cancelled; it is destroyed as soon as it does. The callback hangs on the
        thread's future, not the event loop, which may be gone by then (asyncio.run() ending)."""
        job = _EXECUTOR.submit(create)
        try:
            return await asyncio.wrap_future(job)
        except asyncio.CancelledError:
            self._closed = True
            job.add_done_callback(_destroy_when_created)
            raise

    async def _cell_in_worker(self, box: Any, call: Callable[[], Any]) -> Any:
        """run_code's step, awaited: one cell at a time from this CodeBox, so that a cancelled
        task interrupts its own."""
        if self._cells is None:
            self._cells = asyncio.Lock()
        async with self._cells:
            return await _await_cell(box, call)

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("running" if self._box is not None else "not started")
        o = self._options
        return f"<{type(self).__name__} image={o['image']!r} driver={o['driver']!r} {state}>"


class SyncCodeBox(_Base[SyncFiles], BlockingTwin):
    """A disposable isolated box, blocking API.

    ::

        with SyncCodeBox() as box:
            print(box.run("print(6 * 7)"))                # "42\\n"
            r = box.exec("python3", "-c", "import sys; sys.exit(3)")
            r.exit_code                                   # 3

    The box starts on ``with`` (or :meth:`start`) and is destroyed, with everything in it, when
    the block ends, exception or not. Arguments are those of :class:`CodeBox`. Methods may be
    called from several threads at once.

    Options (as for :class:`CodeBox`; docs/options.md lists them all):

{options}
    """

    _files = SyncFiles

    def __enter__(self) -> SyncCodeBox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CodeBox(_Base[Files], AsyncTwin):
    """A disposable isolated box for untrusted code, asyncio API.

    ::

        async with CodeBox() as box:
            print(await box.run("print(6 * 7)"))
            result = await box.exec("python3", "-c", code)
            result.exit_code, result.stdout, result.stderr

    Options, each a keyword argument (the first nine may also be given by position, in this
    order: image, driver, memory_mib, cpus, timeout, env, allow_emulation, disk_mib, workdir).
    They are checked when the CodeBox is made: an unknown name or a wrong type is a TypeError
    naming the closest valid option, a bad value a ValueError. ``None`` is the default, except
    for the timeouts, where it means no limit (``0`` is an error, never a silent "no limit").
    ``env`` is a mapping or a list of (name, value) pairs. Every option, with its aliases,
    units and bounds, is in docs/options.md:

{options}

    The box starts on ``async with`` (or ``await start()``) and is destroyed when the block
    ends, also on an exception or when the task is cancelled. Blocking work runs in worker
    threads with the GIL released, so many boxes run at once under ``asyncio.gather``.
    A plain ``with CodeBox() as box:`` gives the blocking twin, a :class:`SyncCodeBox`.

    On a codebox server (``codebox serve``) the box is the server's and every call is a
    request to it, with the same API: ``server=`` (``"unix:/path.sock"``,
    ``"http://127.0.0.1:8080"``) and ``token=`` name it; without them $CODEBOX_SERVER and
    $CODEBOX_TOKEN do, else the default socket when a server answers there. ``local=True``
    always runs the box in this process.
    """

    _files = Files
    _sync: SyncCodeBox | None = None

    async def __aenter__(self) -> CodeBox:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __enter__(self) -> SyncCodeBox:
        if self._sync is not None:
            raise BoxClosedError("a CodeBox starts once; create a new one", "closed")
        sync = SyncCodeBox(local=self._local, **self._options)
        sync.start()
        self._sync = sync
        return sync

    def __exit__(self, *exc: object) -> None:
        if self._sync is not None:
            self._sync.close()
        self._closed = True


def _shielded(call: Callable[[], T]) -> Awaitable[T]:
    """close's step, awaited: it runs to its end even if the awaiting task is cancelled."""
    return asyncio.shield(asyncio.get_running_loop().run_in_executor(_EXECUTOR, call))


def _create(options: dict[str, Any], local: bool) -> Any:
    """Starts a box (blocking, without the GIL) where the CLI's rule says (docs/remote.md):
    ``local=True``, else ``server=``, $CODEBOX_SERVER, a default socket that answers, local."""
    core = _core()
    resolved = dict(options)
    resolved["server"], resolved["server_token"] = core.choose_server(
        options["server"], options["server_token"], local
    )
    return core.Box.create(**resolved)


_document_options(CodeBox, SyncCodeBox)

__all__ = ["BoxInfo", "CodeBox", "ExecResult", "SyncCodeBox"]
