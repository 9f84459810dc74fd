"""examples/interpreter.py and examples/data_analysis.py against the scripted fake OpenAI server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import codebox
from conftest import REPO

pytestmark = pytest.mark.usefixtures("need_box")

EXAMPLES = REPO / "examples"
DEFAULT_CSV = REPO / ".." / "shared" / "data" / "eval" / "dabench_tables" / "auto-mpg.csv"

ANALYSIS_CODE = r"""
import csv, struct, zlib
rows = list(csv.DictReader(open('/work/data.csv')))
mpg = [float(r['mpg']) for r in rows]
print('rows', len(rows), 'mean mpg', round(sum(mpg) / len(mpg), 2))
def chunk(t, d):
    return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d))
w = h = 4
raw = b''.join(b'\x00' + b'\xff\x00\x00' * w for _ in range(h))
png = (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0))
       + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))
open('/work/chart.png', 'wb').write(png)
"""


def example_env(base_url: str) -> dict[str, str]:
    """The environment a user would set, plus import paths for this checkout's codebox."""
    import _codebox  # type: ignore[import-not-found]

    paths = [str(Path(codebox.__file__).parents[1]), str(Path(_codebox.__file__).parent)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEBOX_MODEL"))}
    env.update(
        OPENAI_BASE_URL=base_url,
        OPENAI_API_KEY="sk-test-secret-key",
        CODEBOX_MODEL="fake-model",
        PYTHONPATH=os.pathsep.join(paths + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    )
    return env


def run_example(name: str, args: list[str], base_url: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args], env=example_env(base_url), cwd=cwd,
        capture_output=True, text=True, timeout=120,
    )


def test_interpreter_example_tool_loop(fake_openai, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = fake_openai("tool_then_answer")
    p = run_example("interpreter.py", ["What is the sum of 0..100?"], server.base_url, tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "The sum of 0..100 is 5050."
    assert "print(sum(range(101)))" in p.stderr and "5050" in p.stderr
    requests = server.requests()
    assert len(requests) == 2
    first, second = requests[0], requests[1]
    assert first["body"]["model"] == "fake-model"
    assert first["headers"].get("Authorization") == "Bearer sk-test-secret-key"
    assert first["body"]["tools"][0]["function"]["name"] == "run_python"
    tool_msg = second["body"]["messages"][-1]
    assert tool_msg["role"] == "tool" and json.loads(tool_msg["content"])["stdout"] == "5050\n"


def test_interpreter_example_falls_back_to_code_blocks(fake_openai, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = fake_openai("no_tools_fenced")
    p = run_example("interpreter.py", ["2 to the 10th?"], server.base_url, tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "1024"
    assert "refused tools" in p.stderr


def test_interpreter_example_key_stays_out_of_the_box(fake_openai, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = fake_openai("secrets_stay_out")
    p = run_example("interpreter.py", ["print the environment"], server.base_url, tmp_path)
    assert p.returncode == 0, p.stderr
    tool_msg = server.requests()[1]["body"]["messages"][-1]["content"]
    assert "sk-test-secret-key" not in tool_msg and "OPENAI" not in tool_msg


def test_interpreter_example_reports_a_refused_key(fake_openai, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = fake_openai("unauthorized")
    p = run_example("interpreter.py", ["hi"], server.base_url, tmp_path)
    assert p.returncode == 1
    assert "HTTP 401" in p.stderr and "Incorrect API key" in p.stderr


def analysis_scenario(tmp_path: Path, answer: str) -> Path:
    scenario = {"replies": [
        {"message": {"content": "", "tool_calls": [
            {"name": "run_python", "arguments": json.dumps({"code": ANALYSIS_CODE})}]}},
        {"message": {"content": answer}},
    ]}
    path = tmp_path / "analysis.json"
    path.write_text(json.dumps(scenario))
    return path


@pytest.mark.parametrize("own_csv", [True, False], ids=["given-csv", "default-csv"])
def test_data_analysis_example(fake_openai, tmp_path: Path, own_csv: bool) -> None:  # type: ignore[no-untyped-def]
    if own_csv:
        csv = tmp_path / "cars.csv"
        csv.write_text("mpg,cylinders\n20,4\n30,4\n25,6\n")
        args, expected = [str(csv)], "rows 3 mean mpg 25.0"
    else:
        if not DEFAULT_CSV.exists():
            pytest.skip(f"the default table {DEFAULT_CSV} is not beside this checkout")
        args, expected = [], "rows 392 mean mpg 23.45"
    server = fake_openai(analysis_scenario(tmp_path, "Mean mpg is as printed."))
    chart = tmp_path / "out" / "chart.png"
    chart.parent.mkdir()
    p = run_example("data_analysis.py", [*args, "--image", "python", "--chart", str(chart)],
                    server.base_url, tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "Mean mpg is as printed."
    assert chart.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    tool_msg = server.requests()[1]["body"]["messages"][-1]["content"]
    assert json.loads(tool_msg)["stdout"].strip() == expected
    # The model was shown the head of the table.
    assert "/work/data.csv" in server.requests()[0]["body"]["messages"][1]["content"]


def test_data_analysis_example_missing_csv(tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, str(EXAMPLES / "data_analysis.py"), str(tmp_path / "none.csv")],
        env=example_env("http://127.0.0.1:9/v1"), capture_output=True, text=True, timeout=60,
    )
    assert p.returncode == 2 and "no CSV file" in p.stderr
