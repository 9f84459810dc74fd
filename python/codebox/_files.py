"""``box.files``: files in a box's memory, for programs with no host file to copy.

::

    await box.files.write("data/in.csv", "x,y\\n1,2\\n")      # str (UTF-8) or bytes
    raw = await box.files.read("out.png")                      # bytes
    text = await box.files.read_text("report.md")
    for entry in await box.files.list("data"):                 # [EntryInfo(...)]
        print(entry.name, entry.type, entry.size)
    await box.files.remove("data")                             # a file, or a whole tree

Relative paths are under the box's workdir; ``write`` makes missing parent directories;
``remove`` never follows a symlink (one in the tree is removed itself, not what it points at).
A missing path raises :class:`BoxFileNotFoundError` (a FileNotFoundError).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Union

from ._twins import AsyncTwin, BlockingTwin, Steps, Twins, twin
from ._values import _not_found_as_file_error

Data = Union[str, bytes, bytearray, memoryview]


@dataclass(frozen=True)
class EntryInfo:
    """One entry of a box directory, as ``files.list`` reports it (the box's claim)."""

    name: str
    path: str
    """The directory listed (absolute) + "/" + name."""
    type: str
    """``"file"``, ``"dir"``, ``"symlink"`` or ``"other"`` (FIFO, socket, device)."""
    size: int
    mode: int
    """Permission bits (``0o644``)."""


def _path(path: Any) -> str:
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str):
        raise TypeError(f"a box path must be a str, got {type(path).__name__}")
    if not path:
        raise ValueError("a box path must not be empty ('.' is the workdir)")
    return path


def _data(data: Any) -> bytes:
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"files.write takes str or bytes, got {type(data).__name__}")


def _max_bytes(max_bytes: Optional[int]) -> int:
    if max_bytes is None:
        return 0
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0:
        raise ValueError(f"max_bytes must be a positive int, got {max_bytes!r}")
    return max_bytes


class _FileCalls(Twins):
    """The file operations, each written once as steps (_twins.py): :class:`SyncFiles` has
    them as blocking methods, :class:`Files` as coroutines."""

    def __init__(self, owner: Any) -> None:
        self._owner = owner  # the CodeBox / SyncCodeBox; its box is looked up at each call

    def _box_call(self, op: str, *args: Any) -> Callable[[], Any]:
        box = self._owner._live()

        def call() -> Any:
            with _not_found_as_file_error():
                return getattr(box, op)(*args)

        return call

    @twin
    def write(self, path: str, data: Data, *, mode: int = 0o644) -> Steps[None]:
        """Writes ``data`` (str as UTF-8, or bytes) to ``path``, making parent directories.
        The file appears whole or not at all."""
        if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o7777:
            raise ValueError(f"mode must be permission bits from 0 to 0o7777, got {mode!r}")
        yield self._box_call("write_file", _path(path), _data(data), mode)

    @twin
    def read(self, path: str, *, max_bytes: Optional[int] = None) -> Steps[bytes]:
        """The file's bytes. Over ``max_bytes`` (default: the box's disk size) it raises
        :class:`BoxLimitExceededError`. Symlinks, FIFOs and devices are refused."""
        return (yield self._box_call("read_file", _path(path), _max_bytes(max_bytes)))

    @twin
    def read_text(
        self, path: str, encoding: str = "utf-8", errors: str = "strict", *,
        max_bytes: Optional[int] = None,
    ) -> Steps[str]:
        """The file decoded as text (``bytes.decode(encoding, errors)``)."""
        data = yield from _FileCalls.read.body(self, path, max_bytes=max_bytes)
        return data.decode(encoding, errors)

    @twin
    def list(self, path: str = ".") -> Steps[List[EntryInfo]]:
        """The entries of a directory (not recursive; no "." or "..")."""
        call = self._box_call("list_dir", _path(path))
        return (yield lambda: [EntryInfo(*entry) for entry in call()])

    @twin
    def remove(self, path: str) -> Steps[None]:
        """Removes a file, or a directory with everything in it; never follows a symlink.
        Refuses "/" (and "." and "..")."""
        yield self._box_call("remove", _path(path))


class SyncFiles(_FileCalls, BlockingTwin):
    """``SyncCodeBox.files``: the blocking file calls."""


class Files(_FileCalls, AsyncTwin):
    """``CodeBox.files``: the file calls, as coroutines (each runs in a worker thread)."""
