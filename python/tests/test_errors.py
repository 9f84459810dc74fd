"""Errors: a box that cannot start says why; bad arguments fail before any box exists."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import codebox
from conftest import box_unavailable_reason


def _has_hardware_virtualization() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " vmx" in flags or " svm" in flags


def test_missing_image_names_the_build_command(tmp_path: Path) -> None:
    # An image with a recipe, in an empty store: not built yet.
    with pytest.raises(RuntimeError) as info:
        codebox.SyncCodeBox(image="python", home=str(tmp_path)).start()
    if "_codebox" in str(info.value):
        pytest.skip(str(info.value))
    assert "codebox image build" in str(info.value)
    assert isinstance(info.value, codebox.BoxError) and info.value.code


def test_missing_image_async(tmp_path: Path) -> None:
    async def main() -> None:
        async with codebox.CodeBox(image="python", home=str(tmp_path)):
            pass

    with pytest.raises(RuntimeError, match="codebox image build|_codebox"):
        asyncio.run(main())


def test_vm_without_kvm_and_without_emulation_says_why() -> None:
    if _has_hardware_virtualization():
        pytest.skip("this host has hardware virtualization: the vm driver may start here")
    with pytest.raises(RuntimeError) as info:
        codebox.SyncCodeBox(driver="vm", allow_emulation=False).start()
    msg = str(info.value).lower()
    if "_codebox" in msg:
        pytest.skip(msg)
    assert "kvm" in msg or "emulation" in msg or "virtualization" in msg, msg


def test_image_without_recipe_says_so(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="no-such-image|_codebox"):
        codebox.SyncCodeBox(image="no-such-image", home=str(tmp_path)).start()


def test_unknown_driver_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="driver"):
        codebox.SyncCodeBox(driver="docker").start()


def test_bad_options_fail_early() -> None:
    with pytest.raises(ValueError):
        codebox.SyncCodeBox(timeout=-1)
    with pytest.raises(ValueError):
        codebox.SyncCodeBox(memory_mib=1).start()


def test_not_started_box_says_how_to_start() -> None:
    b = codebox.SyncCodeBox()
    with pytest.raises(codebox.BoxClosedError, match="not started"):
        b.run("print(1)")


def test_exec_argument_checks() -> None:
    if box_unavailable_reason() is not None:
        pytest.skip(box_unavailable_reason() or "")
    with codebox.SyncCodeBox() as b:
        with pytest.raises(ValueError):
            b.exec()
        with pytest.raises(TypeError):
            b.exec("cat", stdin=123)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            b.exec("true", timeout=-2)


def test_zero_or_tiny_timeouts_are_errors_and_none_is_no_limit() -> None:
    # 0 or anything under 1 ms would round to 0 ms, which must never mean "no limit".
    for bad in (0, 0.0, 0.0004):
        with pytest.raises(ValueError, match="at least 0.001"):
            codebox.SyncCodeBox(timeout=bad)
        with pytest.raises(ValueError, match="at least 0.001"):
            codebox.SyncCodeBox(box_timeout=bad)
    if box_unavailable_reason() is not None:
        pytest.skip(box_unavailable_reason() or "")
    with codebox.SyncCodeBox(timeout=None, box_timeout=None) as b:
        assert b.run("import time; time.sleep(0.2); print('ok')") == "ok\n"
        with pytest.raises(ValueError, match="at least 0.001"):
            b.exec("true", timeout=0)
        r = b.exec("python3", "-c", "print('inf')", timeout=float("inf"))
        assert r.exit_code == 0 and r.stdout == "inf\n"


def test_huge_program_and_environment() -> None:
    if box_unavailable_reason() is not None:
        pytest.skip(box_unavailable_reason() or "")
    with pytest.raises(ValueError, match="BIG"):
        codebox.SyncCodeBox(env={"BIG": "x" * (2 << 20)}).start()
    with codebox.SyncCodeBox() as b:
        code = "x = 41\n" + "#" * (5 << 20) + "\nprint(x + 1)\n"
        assert b.run(code) == "42\n"
        with pytest.raises(ValueError, match="NUL"):
            b.exec("echo", "a\0b")


def test_a_lost_box_is_its_own_error_and_not_found_stays_plain() -> None:
    """box_lost (the box's server node is gone) is told from not_found (no such box)."""
    from codebox.errors import from_status

    lost = from_status("box_lost", "box b-0123456789abcdef.n2 lived on node n2, which is gone")
    assert isinstance(lost, codebox.BoxLostError)
    assert isinstance(lost, codebox.BoxError)
    assert lost.code == "box_lost"
    missing = from_status("not_found", "no box b-0123456789abcdef.n2")
    assert not isinstance(missing, codebox.BoxLostError)
    assert missing.code == "not_found"
