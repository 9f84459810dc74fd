"""What the box API takes and gives: results, box info, options and their checks.

Kept apart from the box classes (``_box.py``) so that the interpreter module and both box
twins share one definition of each value and each argument check.
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Optional, Sequence, Tuple

from .errors import BoxError, BoxFileNotFoundError, BoxTimeoutError


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
class NetworkEvent:
    """A connection of the box's that was refused, failed or was cut, and why: returned with
    the exec or cell during which it ended (:attr:`ExecResult.network_events`)."""

    host: str
    port: int
    rule: str
    """``not_allowed``, ``internal_address``, ``resolve``, ``connect``, ``budget``,
    ``secret_elsewhere``, ``request``, ``tls`` or ``upstream_tls``."""
    message: str
    """What happened, in the egress proxy's words."""
    hint: str
    """What to do about it."""

    @classmethod
    def _list(cls, raw: Any) -> Tuple[NetworkEvent, ...]:
        return tuple(cls(**e) for e in raw)


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
    dropped_stdout: int = 0
    """:meth:`CodeBox.attach`: bytes of stdout that had fallen out of the box's ring before."""
    dropped_stderr: int = 0
    """The same for stderr."""
    network_events: Tuple[NetworkEvent, ...] = ()
    """The box's connections refused, failed or cut while it ran: why, and what to do."""

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
            dropped_stdout=r.dropped_stdout,
            dropped_stderr=r.dropped_stderr,
            network_events=NetworkEvent._list(r.network_events),
        )


@dataclass(frozen=True)
class ProcessInfo:
    """One process of a box's table (:meth:`CodeBox.processes`). The box is the attacker: its
    word is bounded by the host (256 entries, 8 arguments of 128 bytes) but no more."""

    pid: int
    """Its pid in the box (what :meth:`CodeBox.attach` and :meth:`CodeBox.kill` take)."""
    argv: tuple[str, ...]
    """Its first arguments, each cut short."""
    running: bool
    background: bool
    """Started by :meth:`CodeBox.spawn`."""
    tty: bool
    started: float
    """When it started, in seconds since the epoch by the box's clock."""
    exit: Optional[ExecResult]
    """Once it ended: its exit_code, signal, timed_out, out_of_memory, duration (no output)."""
    stdout_bytes: int
    """What it wrote in all."""
    stderr_bytes: int
    dropped_stdout: int
    """What is no longer held for :meth:`CodeBox.attach`."""
    dropped_stderr: int

    @classmethod
    def _from_core(cls, p: Mapping[str, Any]) -> ProcessInfo:
        raw_exit = p["exit"]
        return cls(
            pid=p["pid"],
            argv=tuple(p["argv"]),
            running=p["running"],
            background=p["background"],
            tty=p["tty"],
            started=p["started"],
            exit=ExecResult._from_core(raw_exit) if raw_exit is not None else None,
            stdout_bytes=p["stdout_bytes"],
            stderr_bytes=p["stderr_bytes"],
            dropped_stdout=p["dropped_stdout"],
            dropped_stderr=p["dropped_stderr"],
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
    """The default limit of each exec in seconds (None: no limit)."""
    disk_mib: int
    options: Mapping[str, Any] = field(default_factory=dict)
    """Every box option by its name, as the C++ core resolved it (defaults filled in)."""
    network: str = "none"
    """The box's way out: ``"none"``, ``"allow: pypi.org, *.example.org"`` or
    ``"open (any public address)"``."""
    user: str = "root"
    """Who the box's processes run as: ``"root"``, the image's user (``"1000:1000 (app)"``), or
    ``"root (...)"`` saying why the image's user cannot be on this host."""
    start: str = ""
    """How the box started: ``"boot"``, ``"snapshot KEY"`` (a vm box restored from template KEY),
    or ``""`` (a jail)."""
    warnings: tuple[str, ...] = ()
    """What did not go as asked but did not stop the box (a vm restore that fell back to a
    cold boot, and why)."""


# CodeBox's positional parameters, in their historical order; every option is also a keyword.
_POSITIONAL = (
    "image", "driver", "memory_mib", "cpus", "timeout", "env", "allow_emulation", "disk_mib",
    "workdir",
)


def _box_options(args: Sequence[Any], options: dict[str, Any]) -> dict[str, Any]:
    """Checks box options against the C++ schema; returns every option, resolved.

    Raises TypeError for an unknown name (naming the closest valid one) or a wrong type, and
    ValueError (:class:`BoxInvalidArgumentError`) for a value out of bounds.
    """
    if len(args) > len(_POSITIONAL):
        raise TypeError(
            f"CodeBox takes at most {len(_POSITIONAL)} positional options "
            f"({', '.join(_POSITIONAL)}), got {len(args)}; pass the others by keyword"
        )
    for name, value in zip(_POSITIONAL, args):
        if name in options:
            raise TypeError(f"CodeBox got option {name!r} both by position and by keyword")
        options[name] = value
    return dict(_core().box_options(options))


def _shown_options(options: dict[str, Any]) -> dict[str, Any]:
    """The options to show (a server token as "<set>": options and reprs end up in logs)."""
    shown = dict(options)
    if shown.get("server_token"):
        shown["server_token"] = "<set>"
    return shown


def _exec_options(
    env: Any, cwd: Any, timeout: float | None, stdin: str | bytes | None, user: Any = None
) -> Any:
    """exec()'s keyword arguments checked against the C++ schema, ready for Box.exec."""
    return _core().exec_options(
        {"env": env, "cwd": cwd, "timeout": timeout, "stdin": stdin, "user": user}
    )


def _options_doc(schema: Sequence[Mapping[str, Any]], indent: str = "        ") -> str:
    """The options of a schema as docstring lines: name, aliases, unit, bounds, default, help."""
    import textwrap

    lines = []
    for o in schema:
        aliases = [a[0] + (f" (in {a[2]})" if a[1] != 1 else "") for a in o["aliases"]]
        also = f" (also {', '.join(aliases)})" if aliases else ""
        facts = [o["unit"]] if o["unit"] else []
        if o["min"] is not None:
            low = "more than" if o["min_exclusive"] else "from"
            facts.append(f"{low} {o['min']:.15g} to {o['max']:.15g}")
        facts.append(f"default {o['default']!r}")
        text = f"{o['name']}{also}: {o['help']} ({', '.join(facts)})."
        lines.append(
            textwrap.fill(text, 96, initial_indent=indent, subsequent_indent=indent + "    ")
        )
    return "\n".join(lines)


def _document_options(*classes: type) -> None:
    """Fills the ``{options}`` of each class docstring from the C++ schema (its defaults,
    units and help), and gives each a signature listing them; without the extension the
    docstring points at docs/options.md instead."""
    import inspect

    try:
        schema = _core().box_option_schema()
    except BoxError:
        for cls in classes:
            cls.__doc__ = (cls.__doc__ or "").replace(
                "{options}",
                "        (see docs/options.md; the C++ extension _codebox is not built)",
            )
        return
    by_name = {o["name"]: o for o in schema}
    by_name["timeout"] = by_name["exec_timeout"]
    params = [
        inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=by_name[n]["default"])
        for n in _POSITIONAL
    ]
    params += [
        inspect.Parameter(o["name"], inspect.Parameter.KEYWORD_ONLY, default=o["default"])
        for o in schema
        if o["name"] not in _POSITIONAL and o["name"] != "exec_timeout"
    ]
    for cls in classes:
        cls.__doc__ = (cls.__doc__ or "").replace("{options}", _options_doc(schema))
        cls.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]


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


@contextlib.contextmanager
def _not_found_as_file_error() -> Iterator[None]:
    """A box path that does not exist raises BoxFileNotFoundError (a FileNotFoundError).

    Only around calls on paths: elsewhere "not_found" (a missing image) stays a BoxError."""
    try:
        yield
    except BoxError as e:
        if e.code == "not_found" and not isinstance(e, FileNotFoundError):
            raise BoxFileNotFoundError(str(e), e.code) from None
        raise


def _pid(pid: Any) -> int:
    """A pid as the box's table takes it."""
    if isinstance(pid, bool) or not isinstance(pid, int) or not 1 <= pid <= 1 << 22:
        raise ValueError(f"pid must be a process id 1..{1 << 22}, got {pid!r}")
    return pid


def _argv(cmd: Sequence[Any]) -> list[str]:
    if len(cmd) == 1 and isinstance(cmd[0], (list, tuple)):
        cmd = cmd[0]
    if not cmd:
        raise ValueError("exec needs a command, e.g. exec('python3', '-c', code)")
    return [os.fspath(c) if isinstance(c, os.PathLike) else str(c) for c in cmd]


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
