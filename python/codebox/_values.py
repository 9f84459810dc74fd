"""What the box API takes and gives: results, box info, options and their checks.

Kept apart from the box classes (``_box.py``) so that the interpreter module and both box
twins share one definition of each value and each argument check.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from .errors import BoxError, BoxTimeoutError


def _core() -> Any:
    """The C++ extension; imported on first use so that `import codebox` always works."""
    try:  # installed (pip install ./python): inside the package, beside its helpers
        from . import _codebox  # type: ignore[attr-defined]

        return _codebox
    except ImportError:
        pass
    try:  # the build tree: build/release/python, on the path through scripts/setup's .pth
        import _codebox  # type: ignore[import-not-found]
    except ImportError as exc:
        raise BoxError(
            "the codebox C++ extension (_codebox) is not importable: `pip install ./python`, or "
            "build it with scripts/setup (or `ninja -C build/release _codebox`) so it lands in "
            f"build/release/python ({exc})",
            "unavailable",
        ) from None
    return _codebox


@dataclass(frozen=True)
class ExecResult:
    """What one command in a box did. A non-zero exit is a result, not an exception."""

    exit_code: int
    """The exit status; -1 when a signal ended the process (see :attr:`signal`)."""
    stdout: str
    """Standard output, decoded as UTF-8 (undecodable bytes become U+FFFD)."""
    stderr: str
    """Standard error, decoded likewise."""
    timed_out: bool = False
    """The command ran past its timeout and was killed."""
    out_of_memory: bool = False
    """The command was killed for exceeding the box's memory limit."""
    output_truncated: bool = False
    """More output came than the box keeps; the rest was dropped."""
    driver: str = ""
    """Which isolation ran it: ``"jail"``, ``"vm/kvm"`` or ``"vm/tcg"``."""
    duration: float = 0.0
    """Wall-clock seconds the command took."""
    signal: int = 0
    """The signal that ended the process, 0 if it exited."""
    stdout_bytes: bytes = field(default=b"", repr=False)
    """Standard output as the raw bytes."""
    stderr_bytes: bytes = field(default=b"", repr=False)
    """Standard error as the raw bytes."""

    @property
    def ok(self) -> bool:
        """True when the command exited 0 within its limits."""
        return self.exit_code == 0 and not self.timed_out and not self.out_of_memory

    @classmethod
    def _from_core(cls, r: Any) -> ExecResult:
        out, err = r.stdout, r.stderr
        return cls(
            exit_code=r.exit_code,
            stdout=out.decode("utf-8", errors="replace"),
            stderr=err.decode("utf-8", errors="replace"),
            timed_out=r.timed_out,
            out_of_memory=r.out_of_memory,
            output_truncated=r.output_truncated,
            driver=r.driver,
            duration=r.duration,
            signal=r.signal,
            stdout_bytes=out,
            stderr_bytes=err,
        )


@dataclass(frozen=True)
class BoxInfo:
    """What a running box enforces, as its driver reports it (honest about this host)."""

    driver: str
    """``"jail"``, ``"vm/kvm"`` or ``"vm/tcg"``."""
    limits: tuple[str, ...]
    """Limits in force, e.g. ``"memory 512 MiB (cgroup v1)"``."""
    limits_not_enforced: tuple[str, ...]
    """Limits asked for that this host could not enforce, each with the reason."""
    image: str
    memory_mib: int
    cpus: float
    timeout: float | None
    disk_mib: int


@dataclass(frozen=True)
class _Options:
    image: str = "python"
    driver: str = "auto"
    memory_mib: int = 512
    cpus: float = 1.0
    timeout: float | None = 30.0
    env: Mapping[str, str] | None = None
    allow_emulation: bool = False
    disk_mib: int = 256
    workdir: str = "/work"
    max_processes: int = 128
    output_limit_bytes: int = 16 << 20
    box_timeout: float | None = None
    home: str | None = None
    prestart: bool = False

    def create(self) -> Any:
        """Starts a box (blocking; the GIL is released while it starts)."""
        return _core().Box.create(
            image=self.image,
            driver=self.driver,
            memory_mib=self.memory_mib,
            cpus=float(self.cpus),
            timeout=self.timeout,
            env=dict(self.env or {}),
            allow_emulation=self.allow_emulation,
            disk_mib=self.disk_mib,
            workdir=self.workdir,
            max_processes=self.max_processes,
            output_limit_bytes=self.output_limit_bytes,
            box_timeout=self.box_timeout,
            home=os.fspath(self.home) if self.home else "",
            prestart=self.prestart,
        )


def _check_seconds(value: float | None, what: str) -> None:
    """A timeout is None, math.inf (no limit) or at least 1 ms: smaller would round to 0."""
    if value is None or value == math.inf:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{what} must be a number of seconds or None, got {value!r}")
    if value < 0.001:
        raise ValueError(
            f"{what} must be at least 0.001 s, got {value!r}; for no limit pass None "
            "(CodeBox(timeout=None)) or math.inf (exec(..., timeout=math.inf))"
        )


def _argv(cmd: Sequence[Any]) -> list[str]:
    if len(cmd) == 1 and isinstance(cmd[0], (list, tuple)):
        cmd = cmd[0]
    if not cmd:
        raise ValueError("exec needs a command, e.g. exec('python3', '-c', code)")
    return [os.fspath(c) if isinstance(c, os.PathLike) else str(c) for c in cmd]


def _stdin_bytes(stdin: str | bytes | None) -> bytes | None:
    if stdin is None or isinstance(stdin, bytes):
        return stdin
    if isinstance(stdin, str):
        return stdin.encode("utf-8")
    raise TypeError(f"stdin must be str, bytes or None, not {type(stdin).__name__}")


def _run_result(result: ExecResult, timeout: float | None) -> str:
    """Turns run()'s ExecResult into its stdout, or the exception for a tripped limit."""
    if result.timed_out:
        limit = f" after {timeout:g} s" if timeout else ""
        err = BoxTimeoutError(
            f"the code timed out{limit}; stdout so far: {result.stdout[-2000:]!r}",
            "deadline_exceeded",
        )
        err.result = result  # type: ignore[attr-defined]
        raise err
    if result.out_of_memory:
        err = BoxError(
            f"the code ran out of memory; stderr: {result.stderr[-2000:]!r}", "out_of_memory"
        )
        err.result = result  # type: ignore[attr-defined]
        raise err
    return result.stdout
