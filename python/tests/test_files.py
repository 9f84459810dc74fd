"""box.files against real boxes: binary-safe round trips, listing, removal, errors, both twins
(skipped, with the reason, where no box can start)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random

import pytest

import codebox

pytestmark = pytest.mark.usefixtures("need_box")


def test_every_byte_value_and_a_large_file_round_trip(box: codebox.SyncCodeBox) -> None:
    all_bytes = bytes(range(256))
    box.files.write("bin/all.bin", all_bytes)
    assert box.files.read("bin/all.bin") == all_bytes
    # What box code reads is what was written, and the other way round.
    r = box.exec("python3", "-c", "d = open('bin/all.bin', 'rb').read(); print(d == bytes(range(256)))")
    assert r.stdout == "True\n"
    box.exec("python3", "-c", "open('rev.bin', 'wb').write(bytes(range(255, -1, -1)))")
    assert box.files.read("/work/rev.bin") == all_bytes[::-1]

    big = random.Random(7).randbytes(3 * 1024 * 1024 + 17)
    box.files.write("big.bin", big)
    assert box.files.read("big.bin") == big


def test_text_is_utf8_and_read_text_decodes(box: codebox.SyncCodeBox) -> None:
    box.files.write("t.txt", "héllo ✓\n")
    assert box.files.read("t.txt") == "héllo ✓\n".encode()
    assert box.files.read_text("t.txt") == "héllo ✓\n"
    box.files.write("latin.txt", "café".encode("latin-1"))
    assert box.files.read_text("latin.txt", encoding="latin-1") == "café"
    with pytest.raises(UnicodeDecodeError):
        box.files.read_text("latin.txt")
    assert box.files.read_text("latin.txt", errors="replace") == "caf\ufffd"
    box.files.write("bytearray.bin", bytearray(b"ab"))
    assert box.files.read("bytearray.bin") == b"ab"


def test_list_reports_entries(box: codebox.SyncCodeBox) -> None:
    box.files.write("d/a.csv", "x,y\n1,2\n", mode=0o640)
    box.exec("sh", "-c", "mkdir d/sub && ln -s /etc/passwd d/link")
    entries = {e.name: e for e in box.files.list("d")}
    assert set(entries) == {"a.csv", "sub", "link"}
    a = entries["a.csv"]
    assert isinstance(a, codebox.EntryInfo)
    assert (a.path, a.type, a.size, a.mode) == ("/work/d/a.csv", "file", 8, 0o640)
    assert entries["sub"].type == "dir" and entries["link"].type == "symlink"
    assert "d" in {e.name for e in box.files.list()}  # default: the workdir
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.size = 1  # type: ignore[misc]


def test_remove_a_file_a_tree_and_never_a_symlinks_target(box: codebox.SyncCodeBox) -> None:
    box.exec("sh", "-c", "mkdir -p /tmp/outside && echo keep > /tmp/outside/keep && "
                         "mkdir -p tree/a/b && echo x > tree/a/b/x && ln -s /tmp/outside tree/a/out")
    box.files.write("single.txt", "1")
    box.files.remove("single.txt")
    box.files.remove("tree")
    assert box.exec("ls", "-A", "/work").stdout == ""
    assert box.files.read_text("/tmp/outside/keep") == "keep\n"


def test_missing_paths_raise_file_not_found(box: codebox.SyncCodeBox) -> None:
    for call in (lambda: box.files.read("nope"), lambda: box.files.list("nope"),
                 lambda: box.files.remove("nope")):
        with pytest.raises(codebox.BoxFileNotFoundError) as info:
            call()
        assert isinstance(info.value, FileNotFoundError)
        assert "/work/nope" in str(info.value)


def test_limits_and_bad_arguments(box: codebox.SyncCodeBox) -> None:
    box.files.write("k.bin", b"k" * 4096)
    with pytest.raises(codebox.BoxLimitExceededError):
        box.files.read("k.bin", max_bytes=4095)
    assert len(box.files.read("k.bin", max_bytes=4096)) == 4096
    with pytest.raises(codebox.BoxInvalidArgumentError):
        box.files.remove("/")
    with pytest.raises(TypeError):
        box.files.write("x", 42)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        box.files.write("", "x")
    with pytest.raises(ValueError):
        box.files.read("k.bin", max_bytes=0)
    with pytest.raises(ValueError):
        box.files.write("x", "x", mode=0o10000)
    # Reading a symlink is refused: it would be read in the box, not followed to the host's.
    box.exec("ln", "-s", "/etc/hostname", "link")
    with pytest.raises(codebox.BoxError):
        box.files.read("link")


def test_the_async_files_api() -> None:
    async def main() -> None:
        async with codebox.CodeBox(timeout=20) as box:
            data = os.urandom(100_000)
            await box.files.write("a/b.bin", data)
            assert await box.files.read("a/b.bin") == data
            assert [e.name for e in await box.files.list("a")] == ["b.bin"]
            await box.files.write("a/t.txt", "text")
            assert await box.files.read_text("a/t.txt") == "text"
            await box.files.remove("a")
            with pytest.raises(FileNotFoundError):
                await box.files.read("a/b.bin")
            # Many at once, from one loop.
            await asyncio.gather(*(box.files.write(f"m/{i}", str(i)) for i in range(20)))
            texts = await asyncio.gather(*(box.files.read_text(f"m/{i}") for i in range(20)))
            assert texts == [str(i) for i in range(20)]
        with pytest.raises(codebox.BoxClosedError):
            await box.files.read("m/1")

    asyncio.run(main())
