#!/usr/bin/env python3
"""The classic code interpreter: ask a model for code, run it in a box, print the result.

    OPENAI_API_KEY=sk-... python3 examples/interpreter.py "What is the 30th Fibonacci number?"

Uses only the Python standard library and codebox: urllib speaks the OpenAI-compatible Chat
Completions API (OpenAI, llama.cpp's llama-server, Ollama, vLLM, ...). The model gets one tool,
run_python; each call runs as a cell of one IPython session in the same disposable box
(variables and files persist between steps, as in Jupyter) and the result goes back to the
model until it answers. A server without tool support gets asked for a
```python block instead, which runs once, with one repair turn if it fails.

Environment: OPENAI_API_KEY (optional for local servers), OPENAI_BASE_URL (default
https://api.openai.com/v1), CODEBOX_MODEL (default gpt-4o-mini). The key stays on the host:
the box's environment is empty but for PATH, HOME and LANG.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import urllib.error
import urllib.request
from typing import Any

import codebox

SYSTEM_TOOLS = (
    "You answer questions by writing Python and running it with the run_python tool, in an "
    "isolated box with Python 3 and its standard library (no network). Each call runs in the "
    "same session: variables persist, and the value of the last expression is shown. When you "
    "have the result, answer briefly in plain text."
)
SYSTEM_ONESHOT = (
    "Answer with one Python 3 program in a ```python code block that prints the answer. "
    "It runs in an isolated box with the standard library and no network."
)
RUN_PYTHON_TOOL = {
    "type": "function",
    "function": {
        "name": "run_python",
        "description": "Run Python 3 code in the session; returns stdout, stderr, the last expression's value and any error.",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "The program."}},
            "required": ["code"],
        },
    },
}
OUTPUT_CAP = 8000  # characters of stdout/stderr sent back to the model per run


class ChatError(RuntimeError):
    """The model server refused or failed a request."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}" if status else message)
        self.status = status


class Chat:
    """A minimal Chat Completions client (non-streaming) on urllib."""

    def __init__(self, base_url: str, api_key: str, model: str, timeout: float = 120.0) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key = api_key
        self.model = model
        self.timeout = timeout

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
        """One turn; returns the assistant message."""
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if tools:
            body["tools"] = tools
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, json.dumps(body).encode(), headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                reply = json.load(response)
        except urllib.error.HTTPError as e:
            text = e.read().decode("utf-8", "replace")
            try:
                text = json.loads(text)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                pass
            raise ChatError(e.code, text) from None
        except (urllib.error.URLError, TimeoutError, OSError) as e:
            raise ChatError(0, f"cannot reach {self.url}: {e}") from None
        try:
            return reply["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise ChatError(0, f"not a chat completion: {str(reply)[:200]}") from None


def stdout_of(e: codebox.Execution) -> str:
    """What the cell printed, then its last expression's value (as a notebook shows them)."""
    return "".join(e.logs.stdout) + (e.text + "\n" if e.text else "")


def result_for_model(e: codebox.Execution) -> str:
    error = e.error and {"name": e.error.name, "value": e.error.value,
                         "traceback": e.error.traceback[-OUTPUT_CAP:]}
    return json.dumps({
        "stdout": "".join(e.logs.stdout)[-OUTPUT_CAP:], "stderr": "".join(e.logs.stderr)[-OUTPUT_CAP:],
        "result": (e.text or "")[-OUTPUT_CAP:], "error": error, "timed_out": e.timed_out,
    })


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run_code(box: codebox.SyncCodeBox, code: str, step: int) -> codebox.Execution:
    log(f"--- step {step}: running\n{code.rstrip()}")
    e = box.run_code(code)
    status = "timed out" if e.timed_out else f"raised {e.error.name}" if e.error else "ok"
    shown = stdout_of(e) + "".join(e.logs.stderr) + (e.error.traceback if e.error else "")
    log(f"--- {status} in {e.duration:.2f} s ({e.driver})\n{shown}".rstrip())
    return e


def fenced_code(text: str) -> str | None:
    m = re.search(r"```(?:python|py)?[ \t]*\n(.*?)```", text or "", re.S)
    return m.group(1) if m else None


def ask_with_tools(chat: Chat, box: codebox.SyncCodeBox, task: str, system: str, max_steps: int) -> str:
    """The tool loop; returns the model's answer. ChatError(400) when tools are refused."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": task}]
    for step in range(1, max_steps + 1):
        message = chat.complete(messages, [RUN_PYTHON_TOOL])
        calls = message.get("tool_calls") or []
        if not calls:
            code = fenced_code(message.get("content") or "") if step == 1 else None
            if code is not None:  # a model that wrote a block instead of calling the tool
                return stdout_of(run_code(box, code, step))
            return message.get("content") or ""
        messages.append({"role": "assistant", "content": message.get("content"), "tool_calls": calls})
        for call in calls:
            fn = call.get("function", {})
            if fn.get("name") != "run_python":
                content = json.dumps({"error": "the only tool is run_python; nothing ran"})
            else:
                try:
                    code = json.loads(fn.get("arguments") or "{}")["code"]
                except (ValueError, KeyError, TypeError):
                    code = None
                if isinstance(code, str):
                    content = result_for_model(run_code(box, code, step))
                else:
                    content = json.dumps({"error": 'arguments must be JSON {"code": "..."}; nothing ran'})
            messages.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": content})
    return f"(no answer after {max_steps} steps)"


def ask_oneshot(chat: Chat, box: codebox.SyncCodeBox, task: str) -> str:
    """For servers without tools: a ```python block, run, one repair turn; returns its output."""
    messages = [{"role": "system", "content": SYSTEM_ONESHOT}, {"role": "user", "content": task}]
    for step in (1, 2):
        message = chat.complete(messages, None)
        code = fenced_code(message.get("content") or "")
        if code is None:
            return message.get("content") or ""
        e = run_code(box, code, step)
        if e.error is None:
            return stdout_of(e)
        messages += [
            {"role": "assistant", "content": message.get("content") or ""},
            {"role": "user", "content": f"It failed:\n{e.error.traceback[-OUTPUT_CAP:]}\nSend the fixed program."},
        ]
    return stdout_of(e) + "".join(e.logs.stderr) + e.error.traceback


def ask(chat: Chat, box: codebox.SyncCodeBox, task: str, system: str = SYSTEM_TOOLS, max_steps: int = 8) -> str:
    """Tools first; oneshot when the server refuses them."""
    try:
        return ask_with_tools(chat, box, task, system, max_steps)
    except ChatError as e:
        if e.status not in (400, 422):
            raise
        log(f"--- the server refused tools ({e}); asking for a code block instead")
        return ask_oneshot(chat, box, task)


def chat_from_environment(args: argparse.Namespace) -> Chat:
    return Chat(
        base_url=args.base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1",
        api_key=os.environ.get("OPENAI_API_KEY", ""),
        model=args.model or os.environ.get("CODEBOX_MODEL") or "gpt-4o-mini",
    )


def add_common_arguments(parser: argparse.ArgumentParser, image: str) -> None:
    parser.add_argument("--model", help="model name (default: $CODEBOX_MODEL or gpt-4o-mini)")
    parser.add_argument("--base-url", help="server (default: $OPENAI_BASE_URL or the OpenAI API)")
    parser.add_argument("--image", default=image, help=f"box image (default: {image})")
    parser.add_argument("--max-steps", type=int, default=8)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("task", nargs="*", help="the question (default: read from stdin)")
    add_common_arguments(parser, "python")
    args = parser.parse_args()
    task = " ".join(args.task) or sys.stdin.read().strip()
    if not task:
        parser.error("give a task")
    chat = chat_from_environment(args)
    try:
        with codebox.SyncCodeBox(image=args.image) as box:
            print(ask(chat, box, task, max_steps=args.max_steps).rstrip())
    except ChatError as e:
        print(f"interpreter: the model server failed: {e}", file=sys.stderr)
        return 1
    except RuntimeError as e:  # codebox.BoxError: the box could not start or failed
        print(f"interpreter: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
