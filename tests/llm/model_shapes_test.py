#!/usr/bin/env python3
"""The ask loop against every reply shape of tests/llm/scenarios/shapes/ (what llama.cpp,
Ollama, vLLM and LM Studio send with small local models), through each place it runs:
`codebox ask` plain and with --json, and POST /v1/ask of `codebox serve` (JSON and the event
stream the playground's chat reads). Python's Interpreter has the same scenarios in
python/tests/test_interpreter.py. Each answer must carry the value the box computed (the
scripted model quotes the stdout of the last tool result it was sent), the transcript must
show each call and its result, thinking must never be printed as the answer or run, and a
reply with no answer must exit 1 saying what came back. Last, the local-server commands of
docs/interpreter.md run as written, but for the base URL, against the shapes each server sends.

usage: model_shapes_test.py PATH/TO/codebox   (exit 77 = skipped, with the reason printed)
"""
import concurrent.futures
import json
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import tempfile
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cli"))
from cli_test_util import require_box  # noqa: E402

CODEBOX = os.path.abspath(sys.argv[1])
FAKE_SERVER = os.path.join(HERE, "fake_openai_server.py")
SHAPES = os.path.join(HERE, "scenarios", "shapes")
DOC = os.path.join(HERE, "..", "..", "docs", "interpreter.md")
VALUE = str(sum(i * i for i in range(1, 2025)) % 10007)  # what the scenarios' code prints
ANSWERING = sorted(name[:-5] for name in os.listdir(SHAPES)
                   if name.endswith(".json") and name != "no_answer.json"
                   and not name.startswith("limit_"))  # limits: python/tests/test_interpreter.py
# Text that must never reach an answer: call markup, and the scenarios' thinking.
LEAKS = ["<tool_call>", "[TOOL_CALLS]", "[ARGS]", "<|python_tag|>", '"name"', "THOUGHT-MARKER",
         "THOUGHT-RAN", "<think>"]
# The shapes each local server of docs/interpreter.md sends (what it documents, with and
# without a tool parser for the model's template).
SERVERS = {
    "llama.cpp": ["openai", "hermes", "think_tags", "ignore_stream"],
    "Ollama": ["object_args", "reasoning_field", "fence_bare"],
    "vLLM": ["openai", "hermes", "mistral", "python_tag", "reasoning_field"],
    "LM Studio": ["openai", "bare_json", "mistral_args", "fence_py"],
}


def fail(what, detail=""):
    raise SystemExit(f"FAIL: {what}\n{detail}")


def task(scenario):
    return f"[scenario:{scenario}] What is the sum of the squares of 1..2024, modulo 10007?"


def start_fake_model(log):
    proc = subprocess.Popen([sys.executable, FAKE_SERVER, "--scenarios", SHAPES, "--log", log,
                             "--max-seconds", "900"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    ready, _, _ = select.select([proc.stdout], [], [], 20)
    line = proc.stdout.readline() if ready else ""
    if not line.startswith("PORT "):
        fail(f"the fake model server did not start: {line!r}")
    return proc, f"http://127.0.0.1:{int(line.split()[1])}/v1"


def ask(url, *args, env=None):
    argv = [CODEBOX, "ask", "--local", "--base-url", url, "--model", "fake-model", "--driver",
            "jail", "--image", "python", *args]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                       env=env)
    return r


def check_no_leak(text, where):
    for leak in LEAKS:
        if leak in text:
            fail(f"{where}: {leak!r} reached the answer", text)


def check_transcript(t, scenario, where):
    """Each call of the model has its step and its tool result, in order."""
    if VALUE not in t["answer"]:
        fail(f"{where}: the answer lacks {VALUE}", json.dumps(t, indent=1)[:4000])
    check_no_leak(t["answer"], where)
    ran = [s for s in t["steps"] if s.get("code")]
    if not ran or any("result" not in s for s in ran):
        fail(f"{where}: no step ran code, or one has no result", json.dumps(t["steps"])[:3000])
    if any("THOUGHT-RAN" in s["code"] for s in ran):
        fail(f"{where}: code from the thinking ran")
    # Two calls in one message, but for a fence and <|python_tag|> source (one program each).
    expected = 1 if scenario.startswith("fence_") or scenario == "python_tag" else 2
    if len(ran) < expected:
        fail(f"{where}: {len(ran)} cells ran, {expected} expected", json.dumps(t["steps"])[:3000])
    if scenario.endswith("_repair") and not any(
            (s["result"].get("error") or {}).get("name") == "NameError" for s in ran):
        fail(f"{where}: the failing first cell is not in the transcript")
    if "thinking" in scenario or "reasoning" in scenario:
        if not any("THOUGHT-MARKER" in s.get("thinking", "") for s in t["steps"]):
            fail(f"{where}: the thinking is not in the steps", json.dumps(t["steps"])[:3000])
    messages = t.get("messages")
    if messages is None:  # /v1/ask's summary has no messages
        return
    asked = [c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    if asked != answered or len(set(asked)) != len(asked):
        fail(f"{where}: tool calls {asked} were answered as {answered}")
    for m in messages:
        if m["role"] == "assistant":
            check_no_leak(m.get("content") or "", where + " (assistant message sent back)")


def check_cli_shape(url, scenario):
    r = ask(url, task(scenario))
    where = f"codebox ask ({scenario})"
    if r.returncode != 0 or VALUE not in r.stdout:
        fail(f"{where}: exit {r.returncode}, expected 0 and {VALUE} on stdout",
             f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    check_no_leak(r.stdout, where)
    r = ask(url, "--json", task(scenario))
    if r.returncode != 0:
        fail(f"{where} --json: exit {r.returncode}", r.stderr)
    check_transcript(json.loads(r.stdout), scenario, where + " --json")


def each(function, *args, cases=None):
    """function(*args, case) for every case (default: every answering scenario), a few at a
    time (each waits on its box and its model far more than it computes)."""
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for future in [pool.submit(function, *args, c) for c in (cases or ANSWERING)]:
            future.result()  # the first failure raises


def check_cli(url):
    each(check_cli_shape, url)
    # A reply with nothing to use is not an exit-0 silence.
    r = ask(url, task("no_answer"))
    if r.returncode != 1 or "token limit" not in r.stderr or "THOUGHT" in r.stdout:
        fail(f"no_answer: exit {r.returncode}, expected 1 and what came back on stderr",
             f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    r = ask(url, "--json", task("no_answer"))
    t = json.loads(r.stdout)
    if r.returncode != 1 or t["stop_reason"] != "no_answer" or "token limit" not in t["stop_detail"]:
        fail("no_answer --json", r.stdout)
    print(f"ok: codebox ask, plain and --json, {len(ANSWERING)} shapes and no_answer")


def post(base, path, body, accept="application/json"):
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "Accept": accept})
    with urllib.request.urlopen(request, timeout=120) as response:
        return response.read().decode()


def events(text):
    """(event, data) of a server-sent-events body."""
    out = []
    for block in text.split("\n\n"):
        name, data = "message", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if data:
            out.append((name, json.loads("\n".join(data))))
    return out


def check_http(url, work):
    log = open(os.path.join(work, "serve.log"), "w")
    serve = subprocess.Popen([CODEBOX, "serve", "--listen", "127.0.0.1:0", "--driver", "jail",
                              "--image", "python", "--model", "fake-model", "--base-url", url],
                             stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        ready, _, _ = select.select([serve.stdout], [], [], 60)
        line = serve.stdout.readline() if ready else ""
        if "listening on " not in line:
            fail(f"codebox serve did not start: {line!r}")
        base = "http://" + line.split("listening on ")[1].split(";")[0].strip()
        def ask_http(scenario):
            summary = json.loads(post(base, "/v1/ask", {"task": task(scenario)}))
            check_transcript(summary, scenario, f"POST /v1/ask ({scenario})")
        each(ask_http)
        summary = json.loads(post(base, "/v1/ask", {"task": task("no_answer")}))
        if summary["stop_reason"] != "no_answer" or "token limit" not in summary["stop_detail"]:
            fail("POST /v1/ask (no_answer)", json.dumps(summary))
        # The playground's chat: the words stream without markup or thinking, which comes as
        # its own events.
        for scenario in ("think_tags", "hermes", "ignore_stream", "bare_json_repair"):
            got = events(post(base, "/v1/ask", {"task": task(scenario)}, "text/event-stream"))
            text = "".join(d["text"] for e, d in got if e == "text")
            answer = [d for e, d in got if e == "answer"]
            where = f"POST /v1/ask streamed ({scenario})"
            check_no_leak(text, where)
            if not answer or VALUE not in answer[0]["text"]:
                fail(f"{where}: no answer event with {VALUE}", json.dumps(got)[:3000])
            thinking = "".join(d["text"] for e, d in got if e == "thinking")
            if scenario == "think_tags" and "THOUGHT-MARKER" not in thinking:
                fail(f"{where}: no thinking event", json.dumps(got)[:3000])
        print(f"ok: POST /v1/ask, {len(ANSWERING)} shapes, no_answer, and 4 streamed")
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=60)
        except subprocess.TimeoutExpired:
            serve.kill()


def documented_commands():
    """{server: (OPENAI_BASE_URL, codebox ask argv)} from docs/interpreter.md's local servers."""
    with open(DOC) as f:
        doc = f.read()
    section = doc.split("## With a local server", 1)[1].split("\n## ", 1)[0]
    found = {}
    for name in SERVERS:
        part = section.split(f"**{name}", 1)
        if len(part) < 2:
            fail(f"docs/interpreter.md has no **{name}** quick start")
        block = re.search(r"```\n(.*?)```", part[1], re.S).group(1)
        base = re.search(r"export OPENAI_BASE_URL=(\S+)", block).group(1)
        command = next(line for line in block.splitlines() if line.startswith("codebox ask"))
        found[name] = (base, shlex.split(command))
    return found


def check_docs(url):
    commands = documented_commands()
    for name, (base, _) in commands.items():
        if not re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", base):
            fail(f"docs/interpreter.md: {name}'s OPENAI_BASE_URL {base} is not a local /v1 URL")

    def run(case):
        name, scenario = case
        # The documented command as written, but for the base URL (the scripted server's) and
        # the task (which names the scenario), on a jail box of the python image.
        env = dict(os.environ, OPENAI_BASE_URL=url)
        args = [CODEBOX, *commands[name][1][1:-1], "--local", "--driver", "jail", "--image",
                "python", task(scenario)]
        r = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env,
                           stdin=subprocess.DEVNULL)
        if r.returncode != 0 or VALUE not in r.stdout:
            fail(f"docs/interpreter.md, {name} ({scenario}): {shlex.join(args)}: exit "
                 f"{r.returncode}", f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}")

    each(run, cases=[(name, s) for name, shapes in SERVERS.items() for s in shapes])
    print(f"ok: the quick starts of {', '.join(SERVERS)} against their shapes")


def main():
    require_box(CODEBOX, "python")
    work = tempfile.mkdtemp(prefix="model_shapes_test.")
    model, url = start_fake_model(os.path.join(work, "model.jsonl"))
    try:
        check_cli(url)
        check_http(url, work)
        check_docs(url)
    finally:
        model.stdin.close()
        model.wait(timeout=20)


if __name__ == "__main__":
    main()
