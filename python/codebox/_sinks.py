"""Streaming callbacks (``on_stdout``, ``on_stderr``, ``on_result``) on their way from C++.

The C++ thread that receives a box's output calls a :class:`_Sink` with the GIL held, once per
piece. Without an event loop (the blocking twin) the user's callback runs right there, on that
thread. With one (the asyncio API) the piece is queued to the loop with
``call_soon_threadsafe``: the callback runs on the loop's thread, in order, and before the
awaiting call resumes, since the call's own result is queued to the loop after the last piece.

The first exception a callback raises is kept, and ``on_error`` is called once; the sink then
answers False to C++, which ends an exec (its processes are killed; a cell is interrupted
through ``on_error``), and :func:`_raise_first_error` hands the exception to the caller of
``exec`` / ``run_code``.
"""

from __future__ import annotations

import asyncio
import codecs
from typing import Any, Callable, Optional


class _Sink:
    def __init__(
        self,
        fn: Callable[[Any], Any],
        loop: Optional[asyncio.AbstractEventLoop],
        convert: Callable[[Any], Any],
        what: str,
        on_error: Optional[Callable[[], None]] = None,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"{what} must be callable (or None), got {type(fn).__name__}")
        self._fn = fn
        self._loop = loop
        self._convert = convert
        self._on_error = on_error
        self.error: Optional[BaseException] = None

    def __call__(self, raw: Any) -> bool:
        """Called by C++ with the GIL held; False stops the exec or cell."""
        if self.error is not None:
            return False
        value = self._convert(raw)
        if value is None or value == "":
            return True
        if self._loop is None:
            self._deliver(value)
        else:
            self._loop.call_soon_threadsafe(self._deliver, value)
        return self.error is None

    def _deliver(self, value: Any) -> None:
        if self.error is not None:
            return  # nothing after the callback failed
        try:
            self._fn(value)
        except BaseException as e:  # noqa: BLE001 - handed to the caller, whatever it is
            self.error = e
            if self._on_error is not None:
                self._on_error()


class _TextSink(_Sink):
    """A byte stream as text: decoded as UTF-8 piece by piece (a character cut between two
    pieces is whole in the second; undecodable bytes become U+FFFD, as in ExecResult)."""

    def __init__(
        self, fn: Callable[[str], Any], loop: Any, what: str,
        on_error: Optional[Callable[[], None]] = None,
    ) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        super().__init__(fn, loop, self._decoder.decode, what, on_error)

    def end(self) -> None:
        """Delivers what the decoder still holds (an incomplete last character), in the
        caller's thread, once the call has returned (and so after every queued piece)."""
        rest = self._decoder.decode(b"", final=True)
        if rest:
            self._deliver(rest)


def _text_sink(
    fn: Any, loop: Any, what: str, on_error: Optional[Callable[[], None]] = None
) -> Optional[_TextSink]:
    return None if fn is None else _TextSink(fn, loop, what, on_error)


def _sink(
    fn: Any, loop: Any, convert: Callable[[Any], Any], what: str,
    on_error: Optional[Callable[[], None]] = None,
) -> Optional[_Sink]:
    return None if fn is None else _Sink(fn, loop, convert, what, on_error)


def _end(*sinks: Optional[_Sink]) -> None:
    for s in sinks:
        if isinstance(s, _TextSink):
            s.end()


def _raise_first_error(*sinks: Optional[_Sink]) -> None:
    for s in sinks:
        if s is not None and s.error is not None:
            raise s.error
