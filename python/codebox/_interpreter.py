"""codebox.Interpreter: natural language in, an answer out, the model's code run in a box.

A thin layer over the C++ interpreter loop (``codebox::llm::Interpreter``): it talks to any
OpenAI-compatible Chat Completions server, lets the model run Python through a ``run_python``
tool (or, for servers without tools, a fenced code block with one repair turn), runs that code
as cells of one box's session per question (variables persist from step to step), saves the
images the cells show (charts), and returns the model's answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ._threads import _EXECUTOR
from ._values import _check_seconds, _core
from .errors import BoxError


@dataclass(frozen=True)
class Transcript:
    """Everything one ``ask`` did: the messages, each step's code and result, the answer."""

    task: str
    answer: str
    stop_reason: str
    """``"answer"``; ``"step_limit"`` (max_steps passed); ``"code_failed"`` (oneshot mode);
    ``"no_answer"`` (the model's last reply held neither an answer nor code)."""
    mode: str
    """The mode that produced the answer: ``"tools"`` or ``"oneshot"``."""
    driver: str
    """The isolation that ran the code."""
    model: str
    base_url: str
    steps: list[dict[str, Any]] = field(default_factory=list)
    """Each model turn: ``code``, the cell's ``result`` (stdout, stderr, text, results, error,
    ...), its ``images`` and latencies, as ``codebox ask --json`` prints them."""
    messages: list[dict[str, Any]] = field(default_factory=list)
    files_out: list[str] = field(default_factory=list)
    timings_ms: dict[str, int] = field(default_factory=dict)
    image_dir: str = ""
    """Where the images were saved (``output_dir``, or a temporary directory); "" if none."""
    stop_detail: str = ""
    """When there was no answer: what happened instead, in words."""

    @property
    def ok(self) -> bool:
        """True when the model gave an answer."""
        return self.stop_reason == "answer"

    @property
    def code(self) -> list[str]:
        """The cells that ran, in order."""
        return [s["code"] for s in self.steps if s.get("code")]

    @property
    def images(self) -> list[dict[str, Any]]:
        """Every image the cells returned, in order: ``path`` (None when it was left out),
        ``mime``, ``width`` and ``height`` (None when its header gave no believable size),
        ``bytes`` and, when something was wrong with it, ``note``."""
        return [image for s in self.steps for image in s.get("images", [])]

    def to_dict(self) -> dict[str, Any]:
        """The transcript as plain JSON-able data (it never holds the API key)."""
        return {
            "task": self.task, "answer": self.answer, "stop_reason": self.stop_reason,
            "mode": self.mode, "driver": self.driver, "model": self.model,
            "base_url": self.base_url, "steps": self.steps, "messages": self.messages,
            "files_out": self.files_out, "timings_ms": self.timings_ms,
            "image_dir": self.image_dir, "stop_detail": self.stop_detail,
        }

    @classmethod
    def from_json(cls, text: str) -> Transcript:
        d = json.loads(text)
        return cls(
            task=d.get("task", ""), answer=d.get("answer", ""),
            stop_reason=d.get("stop_reason", ""), mode=d.get("mode", ""),
            driver=d.get("driver", ""), model=d.get("model", ""), base_url=d.get("base_url", ""),
            steps=d.get("steps", []), messages=d.get("messages") or [],
            files_out=d.get("files_out", []), timings_ms=d.get("timings_ms", {}),
            image_dir=d.get("image_dir", ""), stop_detail=d.get("stop_detail", ""),
        )


class NoAnswerWarning(UserWarning):
    """:meth:`Interpreter.ask` ended without an answer (see ``transcript.stop_detail``)."""


class Interpreter:
    """Ask a model a question; the code it writes runs in a disposable box.

    ::

        interp = codebox.Interpreter(model="gpt-4o-mini", image="python-data",
                                     input_files=["sales.csv"], output_dir="charts")
        print(interp.ask("Plot monthly revenue from /data/sales.csv"))
        interp.transcript.code      # the cells the model ran
        interp.transcript.images    # [{"path": "charts/chart-1.png", "width": 640, ...}]

    Args:
        model, base_url, api_key: the Chat Completions server; each None falls back to
            CODEBOX_MODEL, OPENAI_BASE_URL, OPENAI_API_KEY, then gpt-4o-mini on the OpenAI
            API. The key never enters the box.
        mode: ``"tools"`` (a run_python tool), ``"oneshot"`` (a fenced code block, one repair
            turn) or ``"auto"`` (tools, falling back to oneshot where the server has none).
        max_steps: model turns allowed in tools mode.
        input_files: host files copied into the box as ``/data/<name>`` before the first step.
        output_dir: where the images the cells return are saved (``chart-1.png``, ...; None: a
            fresh temporary directory, named through on_notice), and where the files the code
            left in the box's workdir are copied afterwards.
        on_text, on_code, on_result, on_notice: progress callbacks (streamed answer text;
            ``(step, code)`` before a cell runs; ``(step, step_dict)`` after, the step as in
            :attr:`Transcript.steps`, its images saved; retries/fallbacks and where images go).
            They run in the thread that called ask; an exception in one is raised by ask.
        on_thinking: the model's thinking (``<think>`` blocks, ``reasoning_content``) as it
            comes; never part of the answer, never run.
        **box_options: as for :class:`CodeBox` (image, memory_mib, timeout, driver, ...).

    One box per ``ask``: its cells share one Python session, so variables and files persist
    between the steps of one question, and nothing after it.
    """

    def __init__(
        self,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        mode: str = "auto",
        max_steps: int = 8,
        *,
        stream: bool = True,
        request_timeout: float = 120.0,
        max_retries: int = 4,
        system_prompt: str | None = None,
        input_files: Iterable[str | os.PathLike[str]] = (),
        output_dir: str | os.PathLike[str] | None = None,
        on_text: Callable[[str], Any] | None = None,
        on_code: Callable[[int, str], Any] | None = None,
        on_result: Callable[[int, dict[str, Any]], Any] | None = None,
        on_notice: Callable[[str], Any] | None = None,
        on_thinking: Callable[[str], Any] | None = None,
        **box_options: Any,
    ) -> None:
        _check_seconds(request_timeout, "request_timeout")
        core = _core()
        box = core.box_options(box_options)  # checked against the schema, as CodeBox's
        if not getattr(core, "HAS_INTERPRETER", False):
            raise BoxError("this build of codebox has no interpreter loop (src/llm was not built)", "unavailable")
        llm = {
            "model": model, "base_url": base_url, "api_key": api_key, "mode": mode,
            "max_steps": max_steps, "stream": stream, "request_timeout": request_timeout,
            "max_retries": max_retries, "system_prompt": system_prompt,
            "input_files": [os.fspath(f) for f in input_files],
            "output_dir": os.fspath(output_dir) if output_dir else None,
        }
        result_cb = None
        if on_result is not None:
            def result_cb(step: int, step_json: str) -> None:
                on_result(step, json.loads(step_json))
        self._core = core.Interpreter(llm, box, on_text, on_code, result_cb, on_notice, on_thinking)
        self.transcript: Transcript | None = None
        """The transcript of the last ask (partial when it raised)."""

    def ask(self, task: str) -> str:
        """Asks the model; returns its answer (the whole story is in :attr:`transcript`).

        Raises :class:`BoxError` (a RuntimeError) when the conversation could not go on: the
        server refused the key or the model, was unreachable, or the box failed; the exception's
        ``transcript`` attribute holds what happened until then. Code that fails is not an
        error: the model sees it and may repair it. A conversation that ends without an answer
        (the step limit, a program still failing, a reply with neither an answer nor code)
        returns "" and warns with :class:`NoAnswerWarning`, naming what came back.
        """
        try:
            self.transcript = Transcript.from_json(self._core.ask(task))
        except BoxError as e:
            self.transcript = Transcript.from_json(self._core.partial_json())
            e.transcript = self.transcript  # type: ignore[attr-defined]
            raise
        if not self.transcript.ok:
            # No answer is never a silent "": the warning says what came back instead.
            warnings.warn("codebox: no answer (%s): %s" % (self.transcript.stop_reason,
                          self.transcript.stop_detail), NoAnswerWarning, stacklevel=2)
        return self.transcript.answer

    async def ask_async(self, task: str) -> str:
        """:meth:`ask` in a worker thread, for asyncio programs (one ask at a time)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(_EXECUTOR, self.ask, task)


__all__ = ["Interpreter", "NoAnswerWarning", "Transcript"]
