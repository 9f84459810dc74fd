"""codebox.Interpreter (the C++ interpreter loop) against the scripted fake OpenAI server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import codebox

pytestmark = pytest.mark.usefixtures("need_box")


def make(server, **kw) -> codebox.Interpreter:  # type: ignore[no-untyped-def]
    try:
        return codebox.Interpreter(model="fake-model", base_url=server.base_url, api_key="sk-test", **kw)
    except codebox.BoxError as e:
        if e.code == "unavailable":
            pytest.skip(str(e))
        raise


def test_tool_loop_answer_and_transcript(fake_openai) -> None:  # type: ignore[no-untyped-def]
    server = fake_openai("tool_then_answer")
    codes, results, texts = [], [], []
    interp = make(server, on_code=lambda i, c: codes.append((i, c)),
                  on_result=lambda i, r: results.append((i, r)), on_text=texts.append)
    answer = interp.ask("Sum 0..100")
    assert answer == "The sum of 0..100 is 5050."
    t = interp.transcript
    assert t is not None and t.ok and t.mode == "tools" and t.stop_reason == "answer"
    assert t.code == ["print(sum(range(101)))"]
    assert t.steps[0]["result"]["stdout"] == "5050\n"
    assert t.driver
    assert codes == [(1, "print(sum(range(101)))")]
    assert results[0][1].stdout == "5050\n" and isinstance(results[0][1], codebox.ExecResult)
    assert "5050" in "".join(texts)
    assert "sk-test" not in str(t.to_dict())


def test_oneshot_fallback(fake_openai) -> None:  # type: ignore[no-untyped-def]
    interp = make(fake_openai("no_tools_fenced"))
    interp.ask("2**10")
    assert interp.transcript is not None and interp.transcript.mode == "oneshot"
    assert "1024" in interp.transcript.answer or any(
        s.get("result", {}).get("stdout") == "1024\n" for s in interp.transcript.steps)


def test_input_files_persist_between_steps(fake_openai, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    scenario = "files_persist"
    data = tmp_path / "input.csv"
    data.write_text("a\nb\nc\n")
    interp = make(fake_openai(scenario), input_files=[data], output_dir=tmp_path / "out")
    assert interp.ask("count lines") == "The file has 3 lines."
    assert interp.transcript is not None
    assert interp.transcript.steps[0]["result"]["stdout"] == "saved\n", interp.transcript.steps[0]
    assert interp.transcript.steps[1]["result"]["stdout"].strip() == "3"
    assert (tmp_path / "out" / "result.txt").read_text() == "3"


def test_refused_key_raises_with_partial_transcript(fake_openai) -> None:  # type: ignore[no-untyped-def]
    interp = make(fake_openai("unauthorized"), max_retries=0)
    with pytest.raises(RuntimeError, match="(?i)key") as info:
        interp.ask("hi")
    assert isinstance(info.value, codebox.BoxError)
    assert info.value.transcript.task == "hi"  # type: ignore[attr-defined]


def test_callback_exception_is_raised(fake_openai) -> None:  # type: ignore[no-untyped-def]
    def boom(step: int, code: str) -> None:
        raise ValueError("from callback")

    interp = make(fake_openai("tool_then_answer"), on_code=boom)
    with pytest.raises(ValueError, match="from callback"):
        interp.ask("Sum 0..100")


def test_unknown_options() -> None:
    with pytest.raises(TypeError):
        codebox.Interpreter(not_an_option=1)
