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

# The model's two steps for data_analysis.py, standard library only (the python image): step 1
# loads the table into `rows`, step 2 uses `rows` (state kept between cells) and shows a chart
# (a PNG made by hand, since this image has no matplotlib).
LOAD_CODE = r"""
import csv, glob
path = glob.glob('/data/*.csv')[0]
rows = list(csv.DictReader(open(path)))
print('rows', len(rows))
"""
CHART_CODE = r"""
import struct, zlib
from IPython.display import Image, display
def chunk(kind, data):
    return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))
width, height = len(rows), 10
raw = b''.join(b'\x00' + b'\x10\x80\xf0' * width for _ in range(height))
display(Image(data=b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', width, height, 8, 2, 0, 0, 0))
              + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b'')))
max(rows, key=lambda r: float(r['revenue']))['month']
"""
# The same flow with the real libraries of the python-data image.
PANDAS_LOAD_CODE = "import pandas as pd\ndf = pd.read_csv('/data/sales.csv')\ndf.describe()"
PANDAS_CHART_CODE = (
    "import matplotlib.pyplot as plt\ndf.plot(x='month', y='revenue')\nplt.show()\n"
    "df.loc[df['revenue'].idxmax(), 'month']"
)


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


def analysis_scenario(tmp_path: Path, answer: str, *cells: str) -> Path:
    replies: list[dict] = [
        {"message": {"content": "", "tool_calls": [
            {"name": "run_python", "arguments": json.dumps({"code": code})}]}}
        for code in cells
    ]
    replies.append({"message": {"content": answer}})
    path = tmp_path / "analysis.json"
    path.write_text(json.dumps({"replies": replies}))
    return path


def tool_results(server) -> list[dict]:  # type: ignore[no-untyped-def]
    """The tool results the model got, from the last request."""
    messages = server.requests()[-1]["body"]["messages"]
    return [json.loads(m["content"]) for m in messages if m["role"] == "tool"]


@pytest.mark.parametrize("own_csv", [True, False], ids=["given-csv", "default-csv"])
def test_data_analysis_example(fake_openai, tmp_path: Path, own_csv: bool) -> None:  # type: ignore[no-untyped-def]
    if own_csv:
        csv = tmp_path / "cars.csv"
        csv.write_text("month,revenue\n2024-01,20\n2024-02,30\n2024-03,25\n")
        args, rows, best = [str(csv)], 3, "2024-02"
    else:
        args, rows, best = [], 24, "2024-12"
    server = fake_openai(analysis_scenario(tmp_path, "The best month is as shown.", LOAD_CODE,
                                           CHART_CODE))
    out = tmp_path / "out"
    p = run_example("data_analysis.py", [*args, "--image", "python", "--out", str(out)],
                    server.base_url, tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "The best month is as shown."
    load, chart = tool_results(server)
    assert load["stdout"] == f"rows {rows}\n" and load["error"] is None
    # Step 2 used `rows` from step 1, and its last expression is the result.
    assert chart["error"] is None, chart["error"]
    assert chart["result"] == repr(best)
    assert chart["images"] == [f"[image/png {rows}x10 saved as chart-1.png]"]
    png = (out / "chart-1.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert f"--- chart: {out / 'chart-1.png'} ({rows}x10)" in p.stderr
    # The model was told where the table is and shown its head.
    task = server.requests()[0]["body"]["messages"][1]["content"]
    assert "/data/" in task and "month,revenue" in task


def test_data_analysis_example_with_pandas_and_matplotlib(fake_openai, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    reason = image_unavailable("python-data")
    if reason:
        pytest.skip(f"no python-data box here (codebox image build python-data): {reason}")
    server = fake_openai(analysis_scenario(tmp_path, "December 2024 was best.", PANDAS_LOAD_CODE,
                                           PANDAS_CHART_CODE))
    out = tmp_path / "out"
    p = run_example("data_analysis.py", ["--out", str(out)], server.base_url, tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "December 2024 was best."
    describe, chart = tool_results(server)
    assert describe["error"] is None and "mean" in describe["result"], describe
    assert chart["error"] is None, chart["error"]
    assert chart["result"] == "'2024-12'"
    assert len(chart["images"]) == 1 and "saved as chart-1.png" in chart["images"][0]
    png = (out / "chart-1.png").read_bytes()
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert width > 100 and height > 100
    assert f"[image/png {width}x{height} saved as chart-1.png]" == chart["images"][0]


def image_unavailable(image: str) -> str | None:
    """None when a box of `image` starts here, else why not."""
    try:
        with codebox.SyncCodeBox(image=image) as box:
            box.run("pass")
    except RuntimeError as e:
        return str(e)
    return None


def test_data_analysis_example_missing_csv(tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, str(EXAMPLES / "data_analysis.py"), str(tmp_path / "none.csv")],
        env=example_env("http://127.0.0.1:9/v1"), capture_output=True, text=True, timeout=60,
    )
    assert p.returncode == 2 and "no CSV file" in p.stderr
