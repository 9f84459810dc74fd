#!/usr/bin/env python3
"""Data analysis in a box: a CSV in, a question, an answer and a chart out.

    OPENAI_API_KEY=sk-... python3 examples/data_analysis.py [data.csv] \\
        [--question "Which month had the highest revenue?"] [--out charts/]

Without a CSV it uses examples/data/sales.csv (two years of a made-up shop's monthly revenue,
units and ad spend). The model works in a code-interpreter session of a box (codebox's
Interpreter): the CSV is copied in as /data/<name>, each step it runs is a cell of the same
Python session (a DataFrame loaded in step 1 is still there in step 2), and every chart it
shows with plt.show() comes back as a PNG saved in --out (chart-1.png, ...; default: a fresh
temporary directory, printed). The box image defaults to python-data (numpy, pandas,
matplotlib: `codebox image build python-data`). The API key stays on the host.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import codebox

DEFAULT_CSV = Path(__file__).resolve().parent / "data" / "sales.csv"
DEFAULT_QUESTION = (
    "Which month had the highest revenue, and how does revenue relate to ad spend? "
    "Plot revenue by month."
)


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def show_step(step: int, s: dict[str, Any]) -> None:
    """Progress on stderr: how each cell ended and the charts it made."""
    r = s.get("result") or {}
    error = r.get("error")
    status = f"raised {error['name']}" if error else ("timed out" if r.get("timed_out") else "ok")
    log(f"--- step {step}: {status} in {r.get('duration_ms', 0)} ms")
    for image in s.get("images", []):
        if image["path"]:
            log(f"--- chart: {image['path']} ({image['width']}x{image['height']})")
        else:
            log(f"--- an image was left out: {image.get('note', '')}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", nargs="?", type=Path, default=DEFAULT_CSV,
                        help=f"the table (default: {DEFAULT_CSV.name})")
    parser.add_argument("--question", default=DEFAULT_QUESTION)
    parser.add_argument("--out", type=Path, help="where charts go (default: a temporary directory)")
    parser.add_argument("--model", help="model name (default: $CODEBOX_MODEL or gpt-4o-mini)")
    parser.add_argument("--base-url", help="server (default: $OPENAI_BASE_URL or the OpenAI API)")
    parser.add_argument("--image", default="python-data", help="box image (default: python-data)")
    parser.add_argument("--max-steps", type=int, default=8)
    args = parser.parse_args()

    if not args.csv.is_file():
        print(f"data_analysis: no CSV file at {args.csv}; give one as the first argument",
              file=sys.stderr)
        return 2
    head = "\n".join(args.csv.read_text(errors="replace").splitlines()[:3])
    task = f"{args.question}\n\nThe table is /data/{args.csv.name}; it begins:\n{head}"

    interp = codebox.Interpreter(
        model=args.model, base_url=args.base_url, max_steps=args.max_steps,
        input_files=[args.csv], output_dir=args.out,
        on_code=lambda step, code: log(f"--- step {step}: running\n{code.rstrip()}"),
        on_result=show_step, on_notice=lambda text: log(f"--- {text}"),
        image=args.image, memory_mib=1024, timeout=120,
    )
    try:
        answer = interp.ask(task)
    except RuntimeError as e:  # codebox.BoxError: the model server or the box failed (says why)
        print(f"data_analysis: {e}", file=sys.stderr)
        return 1
    print(answer.rstrip())
    charts = [i["path"] for i in interp.transcript.images if i["path"]] if interp.transcript else []
    if not charts:
        log("--- the model made no chart")
    return 0 if interp.transcript and interp.transcript.ok else 1


if __name__ == "__main__":
    sys.exit(main())
