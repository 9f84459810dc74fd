"""What a cell of a box's code-interpreter session gives back (``run_code``).

The names follow E2B's code-interpreter SDK (``Execution``, ``Result``, ``ExecutionError``,
``Logs``; ``.text``, ``.png``, ``.html``, ``is_main_result``), so code written for it reads
naturally. Everything here came out of the box: the C++ core has checked its types and sizes,
but the content is the box's choice.
"""

from __future__ import annotations

import json as _json
from dataclasses import dataclass, field
from typing import Any, List, Mapping, Optional

from ._values import NetworkEvent

# Result's attributes and the MIME types they stand for, in E2B's order.
_FORMATS = (
    ("text", "text/plain"),
    ("html", "text/html"),
    ("markdown", "text/markdown"),
    ("svg", "image/svg+xml"),
    ("png", "image/png"),
    ("jpeg", "image/jpeg"),
    ("pdf", "application/pdf"),
    ("latex", "text/latex"),
    ("json", "application/json"),
    ("javascript", "application/javascript"),
    ("chart", "application/vnd.codebox.chart+json"),
)


@dataclass(frozen=True)
class Result:
    """One rich output of a cell, a MIME bundle: ``display(x)``, a chart, or the value of the
    cell's last expression (then :attr:`is_main_result`).

    ``.png`` and ``.jpeg`` are base64 text, as in Jupyter and E2B
    (``base64.b64decode(result.png)`` gives the image's bytes); ``.json`` is parsed.
    """

    data: Mapping[str, str] = field(default_factory=dict)
    """Every format: MIME type -> value (text; images as base64)."""
    is_main_result: bool = False
    """The value of the cell's last expression (at most one result per cell)."""

    @property
    def text(self) -> Optional[str]:
        """``text/plain``: the repr IPython shows (``'2'`` for ``1 + 1``)."""
        return self.data.get("text/plain")

    @property
    def html(self) -> Optional[str]:
        return self.data.get("text/html")

    @property
    def markdown(self) -> Optional[str]:
        return self.data.get("text/markdown")

    @property
    def svg(self) -> Optional[str]:
        return self.data.get("image/svg+xml")

    @property
    def png(self) -> Optional[str]:
        """``image/png`` as base64 text."""
        return self.data.get("image/png")

    @property
    def jpeg(self) -> Optional[str]:
        """``image/jpeg`` as base64 text."""
        return self.data.get("image/jpeg")

    @property
    def pdf(self) -> Optional[str]:
        return self.data.get("application/pdf")

    @property
    def latex(self) -> Optional[str]:
        return self.data.get("text/latex")

    def _parsed(self, mime: str) -> Any:
        raw = self.data.get(mime)
        if raw is None:
            return None
        try:
            return _json.loads(raw)
        except ValueError:
            return None

    @property
    def json(self) -> Any:
        """``application/json``, parsed (a dict or list); None when absent or not valid JSON."""
        return self._parsed("application/json")

    @property
    def javascript(self) -> Optional[str]:
        return self.data.get("application/javascript")

    @property
    def chart(self) -> Any:
        """A matplotlib figure's chart as data (E2B's ``result.chart``: ``type``, ``title``,
        ``elements``...), parsed; None when absent (docs/kernel.md, "Charts")."""
        return self._parsed("application/vnd.codebox.chart+json")

    def formats(self) -> List[str]:
        """The formats this result has: E2B's names (``"text"``, ``"png"``, ...) for the known
        MIME types, the MIME type itself for any other."""
        known = {mime for _, mime in _FORMATS}
        names = [name for name, mime in _FORMATS if mime in self.data]
        return names + [mime for mime in self.data if mime not in known]

    def __getitem__(self, name: str) -> Any:
        """``result["png"]`` as ``result.png`` (E2B allows both)."""
        if name not in dict(_FORMATS):
            raise KeyError(name)
        return getattr(self, name)

    def __repr__(self) -> str:
        main = ", is_main_result=True" if self.is_main_result else ""
        return f"Result(formats={self.formats()!r}{main})"

    @classmethod
    def _from_core(cls, raw: Mapping[str, Any]) -> Result:
        return cls(data=dict(raw["data"]), is_main_result=bool(raw["is_main_result"]))


@dataclass(frozen=True)
class ExecutionError:
    """An exception the cell raised, or why its kernel is gone (``name == "KernelRestarted"``)."""

    name: str
    """The exception's class: ``"ZeroDivisionError"``, ``"KeyboardInterrupt"`` (timed out)."""
    value: str
    """Its message: ``"division by zero"``."""
    traceback: str
    """Formatted by IPython, without colour codes."""


@dataclass(frozen=True)
class Logs:
    """What the cell printed, in the pieces it came in."""

    stdout: List[str] = field(default_factory=list)
    stderr: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class Execution:
    """What one cell did. An exception in the cell is :attr:`error`, not a raised exception.

    ::

        e = await box.run_code("import math\\nmath.pi * 2")
        e.text                     # '6.283185307179586'
        e.results[0].is_main_result
        e.logs.stdout, e.error, e.execution_count
    """

    results: List[Result] = field(default_factory=list)
    logs: Logs = field(default_factory=Logs)
    error: Optional[ExecutionError] = None
    execution_count: int = 0
    """The kernel's counter (``In [n]``); it starts at 1 again after a restart."""
    duration: float = 0.0
    """Wall-clock seconds the cell took."""
    timed_out: bool = False
    """Interrupted (KeyboardInterrupt) at its timeout; the state survives unless
    :attr:`kernel_restarted` is also set."""
    kernel_restarted: bool = False
    """The kernel died or was killed (it ignored the interrupt, or ran out of memory): every
    variable is gone; the next cell runs in a fresh kernel. ``error.value`` says why."""
    out_of_memory: bool = False
    """The kernel was killed for the box's memory limit."""
    output_truncated: bool = False
    """The cell passed the box's output cap; the rest was dropped."""
    driver: str = ""
    """Which isolation ran it: ``"jail"``, ``"vm/kvm"`` or ``"vm/tcg"``."""
    network_events: List[NetworkEvent] = field(default_factory=list)
    """The box's connections refused, failed or cut while the cell ran: why, what to do."""

    @property
    def text(self) -> Optional[str]:
        """The main result's ``text/plain`` (the last expression's value), or None."""
        for r in self.results:
            if r.is_main_result:
                return r.text
        return None

    @classmethod
    def _from_core(cls, raw: Mapping[str, Any]) -> Execution:
        err = raw["error"]
        return cls(
            results=[Result._from_core(r) for r in raw["results"]],
            logs=Logs(stdout=list(raw["stdout"]), stderr=list(raw["stderr"])),
            error=None if err is None else ExecutionError(err["name"], err["value"], err["traceback"]),
            execution_count=raw["execution_count"],
            duration=raw["duration"],
            timed_out=raw["timed_out"],
            kernel_restarted=raw["kernel_restarted"],
            out_of_memory=raw["out_of_memory"],
            output_truncated=raw["output_truncated"],
            driver=raw["driver"],
            network_events=list(NetworkEvent._list(raw.get("network_events", ()))),
        )

