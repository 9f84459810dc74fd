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


class _FileCalls:
    """The checked arguments and the blocking call of each operation, shared by both twins."""

    def __init__(self, owner: Any) -> None:
        self._owner = owner  # the CodeBox / SyncCodeBox; its box is looked up at each call

    def _blocking(self, op: str, *args: Any) -> Callable[[], Any]:
        box = self._owner._live()

        def call() -> Any:
            with _not_found_as_file_error():
                return getattr(box, op)(*args)

        return call

    def _write(self, path: Any, data: Any, mode: int) -> Callable[[], None]:
        if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o7777:
            raise ValueError(f"mode must be permission bits from 0 to 0o7777, got {mode!r}")
        return self._blocking("write_file", _path(path), _data(data), mode)

    def _read(self, path: Any, max_bytes: Optional[int]) -> Callable[[], bytes]:
        return self._blocking("read_file", _path(path), _max_bytes(max_bytes))

    def _list(self, path: Any) -> Callable[[], List[EntryInfo]]:
        call = self._blocking("list_dir", _path(path))
        return lambda: [EntryInfo(*entry) for entry in call()]

    def _remove(self, path: Any) -> Callable[[], None]:
        return self._blocking("remove", _path(path))


class SyncFiles(_FileCalls):
    """``SyncCodeBox.files``: the blocking file calls."""

    def write(self, path: str, data: Data, *, mode: int = 0o644) -> None:
        """Writes ``data`` (str as UTF-8, or bytes) to ``path``, making parent directories.
        The file appears whole or not at all."""
        self._write(path, data, mode)()

    def read(self, path: str, *, max_bytes: Optional[int] = None) -> bytes:
        """The file's bytes. Over ``max_bytes`` (default: the box's disk size) it raises
        :class:`BoxLimitExceededError`. Symlinks, FIFOs and devices are refused."""
        return self._read(path, max_bytes)()

    def read_text(
        self, path: str, encoding: str = "utf-8", errors: str = "strict", *,
        max_bytes: Optional[int] = None,
    ) -> str:
        """The file decoded as text (``bytes.decode(encoding, errors)``)."""
        return self._read(path, max_bytes)().decode(encoding, errors)

    def list(self, path: str = ".") -> List[EntryInfo]:
        """The entries of a directory (not recursive; no "." or "..")."""
        return self._list(path)()

    def remove(self, path: str) -> None:
        """Removes a file, or a directory with everything in it; never follows a symlink.
        Refuses "/" (and "." and "..")."""
        self._remove(path)()


class Files(_FileCalls):
    """``CodeBox.files``: the file calls, as coroutines (each runs in a worker thread)."""

    async def write(self, path: str, data: Data, *, mode: int = 0o644) -> None:
        """Writes ``data`` (str as UTF-8, or bytes) to ``path``, making parent directories.
        The file appears whole or not at all."""
        await self._owner._call(self._write(path, data, mode))

    async def read(self, path: str, *, max_bytes: Optional[int] = None) -> bytes:
        """The file's bytes. Over ``max_bytes`` (default: the box's disk size) it raises
        :class:`BoxLimitExceededError`. Symlinks, FIFOs and devices are refused."""
        return await self._owner._call(self._read(path, max_bytes))

    async def read_text(
        self, path: str, encoding: str = "utf-8", errors: str = "strict", *,
        max_bytes: Optional[int] = None,
    ) -> str:
        """The file decoded as text (``bytes.decode(encoding, errors)``)."""
        return (await self._owner._call(self._read(path, max_bytes))).decode(encoding, errors)

    async def list(self, path: str = ".") -> List[EntryInfo]:
        """The entries of a directory (not recursive; no "." or "..")."""
        return await self._owner._call(self._list(path))

    async def remove(self, path: str) -> None:
        """Removes a file, or a directory with everything in it; never follows a symlink.
        Refuses "/" (and "." and "..")."""
        await self._owner._call(self._remove(path))
