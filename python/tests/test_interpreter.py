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
    assert t.steps[0]["result"]["error"] is None and t.steps[0]["images"] == []
    assert t.driver
    assert codes == [(1, "print(sum(range(101)))")]
    # on_result gets the step as the transcript has it.
    assert results == [(1, t.steps[0])]
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


def test_variables_persist_between_steps(fake_openai) -> None:  # type: ignore[no-untyped-def]
    server = fake_openai("state_persists")
    interp = make(server)
    assert interp.ask("x") == "x + 1 is 43."
    t = interp.transcript
    assert t is not None
    assert t.steps[0]["result"]["stdout"] == "x is set\n"
    # Step 2 is only "x + 1": x survived from step 1, and its value is the cell's result.
    assert t.steps[1]["result"]["error"] is None, t.steps[1]["result"]["error"]
    assert t.steps[1]["result"]["text"] == "43"
    tool = json.loads(server.requests()[-1]["body"]["messages"][-1]["content"])
    assert tool["result"] == "43"


def test_chart_is_saved_and_listed(fake_openai, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = fake_openai("chart_image")
    out = tmp_path / "out"
    interp = make(server, output_dir=out)
    interp.ask("make a chart")
    t = interp.transcript
    assert t is not None and t.image_dir == str(out)
    [image] = t.images
    assert image == {"path": str(out / "chart-1.png"), "mime": "image/png", "width": 64,
                     "height": 48, "bytes": (out / "chart-1.png").stat().st_size}
    assert (out / "chart-1.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    messages = server.requests()[1]["body"]["messages"]
    tool = json.loads(messages[-1]["content"])
    assert tool["images"] == ["[image/png 64x48 saved as chart-1.png]"]


def test_images_default_to_a_temporary_directory(fake_openai) -> None:  # type: ignore[no-untyped-def]
    notices: list[str] = []
    interp = make(fake_openai("chart_image"), on_notice=notices.append)
    interp.ask("make a chart")
    t = interp.transcript
    assert t is not None and t.image_dir
    try:
        assert Path(t.image_dir).name.startswith("codebox-ask-")
        assert any(t.image_dir in n for n in notices), notices
        assert t.images[0]["path"] == str(Path(t.image_dir) / "chart-1.png")
    finally:
        import shutil

        shutil.rmtree(t.image_dir, ignore_errors=True)


def test_hostile_images_are_left_out_with_a_note(fake_openai, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    interp = make(fake_openai("hostile_images"), output_dir=tmp_path / "out")
    assert interp.ask("show images") == "Done."
    images = interp.transcript.images  # type: ignore[union-attr]
    assert [i["path"] is not None for i in images] == [False, True, False, False, False]
    assert "base64" in images[0]["note"]
    assert images[1]["width"] is None and images[1]["height"] is None
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["chart-1.png"]


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


def test_the_system_prompt_says_which_hosts_the_box_reaches(fake_openai) -> None:  # type: ignore[no-untyped-def]
    server = fake_openai("tool_then_answer")
    make(server, allow_hosts=["pypi.org", "files.pythonhosted.org"]).ask("Sum 0..100")
    system = server.requests()[0]["body"]["messages"][0]
    assert system["role"] == "system"
    assert "only these hosts" in system["content"], system
    assert "pypi.org, files.pythonhosted.org" in system["content"]
    assert "%pip install --user" in system["content"]
    plain = fake_openai("tool_then_answer")
    make(plain).ask("Sum 0..100")
    assert "without network access" in plain.requests()[0]["body"]["messages"][0]["content"]


SHAPES = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "tests" / "llm" / "scenarios"
                                 / "shapes").glob("*.json")
                if p.stem != "no_answer" and not p.stem.startswith("limit_"))
SHAPES_VALUE = str(sum(i * i for i in range(1, 2025)) % 10007)  # what the scenarios' code prints


@pytest.mark.parametrize("shape", SHAPES)
def test_every_reply_shape_gives_the_boxs_value(fake_openai_shapes, shape: str) -> None:  # type: ignore[no-untyped-def]
    """tests/llm/scenarios/shapes: calls written into the content, arguments as objects, no
    ids, thinking, a JSON body for a streamed request, fences, a 503: the answer is the value
    the box printed (the scripted model quotes its last tool result), never markup or
    thinking, which goes to on_thinking."""
    texts: list[str] = []
    thoughts: list[str] = []
    interp = make(fake_openai_shapes, image="python", on_text=texts.append,
                  on_thinking=thoughts.append)
    answer = interp.ask(f"[scenario:{shape}] the sum of the squares of 1..2024 modulo 10007")
    t = interp.transcript
    assert t is not None and t.ok, t and t.to_dict()
    assert SHAPES_VALUE in answer and SHAPES_VALUE in "".join(texts)
    for leak in ("<tool_call>", "[TOOL_CALLS]", "<|python_tag|>", "THOUGHT", "<think>"):
        assert leak not in answer and leak not in "".join(texts), (leak, texts)
    assert all("THOUGHT-RAN" not in code for code in t.code)
    if "think" in shape or "reasoning" in shape:
        assert "THOUGHT-MARKER" in "".join(thoughts)
    calls = [c["id"] for m in t.messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    assert calls == [m["tool_call_id"] for m in t.messages if m["role"] == "tool"]


def test_a_reply_with_no_answer_warns_and_says_why(fake_openai_shapes) -> None:  # type: ignore[no-untyped-def]
    interp = make(fake_openai_shapes, image="python")
    with pytest.warns(codebox.NoAnswerWarning, match="token limit"):
        answer = interp.ask("[scenario:no_answer] anything")
    t = interp.transcript
    assert answer == "" and t is not None and not t.ok
    assert t.stop_reason == "no_answer" and "token limit" in t.stop_detail


def test_one_message_runs_at_most_32_calls(fake_openai_shapes) -> None:  # type: ignore[no-untyped-def]
    """40 calls in one message: 32 run, in order, in one session; the other 8 are each answered
    with an error, not run."""
    interp = make(fake_openai_shapes, image="python")
    answer = interp.ask("[scenario:limit_too_many_calls] count")
    t = interp.transcript
    assert t is not None and t.ok and answer == "The cells counted to 32."
    assert len(t.code) == 32
    results = [json.loads(m["content"]) for m in t.messages if m["role"] == "tool"]
    assert len(results) == 40
    assert all("at most 32 calls" in r.get("error", "") for r in results[32:])


def test_a_refused_connection_reaches_the_model_with_what_to_do(fake_openai) -> None:  # type: ignore[no-untyped-def]
    """The scripted model's second reply says EXPECTATION FAILED unless the tool result it was
    sent holds the network event (tests/llm/scenarios/network_refused.json)."""
    server = fake_openai("network_refused")
    interp = make(server, allow_hosts=["allowed.example.org"])
    answer = interp.ask("Load the CSV from blocked.example.org")
    assert "EXPECTATION FAILED" not in answer, answer
    assert answer.startswith("blocked.example.org is not allowed"), answer
    sent = server.requests()[1]["body"]["messages"][-1]["content"]
    result = json.loads(sent)
    [event] = result["network_events"]
    assert event["host"] == "blocked.example.org" and event["port"] == 80, event
    assert event["rule"] == "not_allowed" and "retrying will not help" in event["hint"], event
    assert "allowlist" in event["message"], event
