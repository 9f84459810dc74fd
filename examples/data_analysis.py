#!/usr/bin/env python3
"""Data analysis in a box: copy a CSV in, let the model analyse it, copy a chart out.

    OPENAI_API_KEY=sk-... python3 examples/data_analysis.py [data.csv] \\
        [--question "Which column correlates most with mpg?"] [--chart chart.png]

Without a CSV it uses a small table of the DABench set beside the checkout
(../shared/data/eval/dabench_tables/auto-mpg.csv from the repository root). The box image
defaults to python-data (numpy, pandas, matplotlib: `codebox image build python-data`). The
model's code reads /work/data.csv and saves its chart as /work/chart.png, which is copied back.
Standard library and codebox only; the chat loop is examples/interpreter.py's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import codebox
from interpreter import ChatError, add_common_arguments, ask, chat_from_environment, log

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CSV = REPO / ".." / "shared" / "data" / "eval" / "dabench_tables" / "auto-mpg.csv"
DEFAULT_QUESTION = (
    "Describe this table in a few sentences: its columns, their ranges, and the most notable "
    "relationship between two columns. Make one chart that shows that relationship."
)
SYSTEM = (
    "You are a data analyst. You run Python with the run_python tool in an isolated box "
    "(Python 3, numpy, pandas and matplotlib when the image has them; no network). The data "
    "is the CSV file /work/data.csv. Look at it before you analyse it. Save exactly one chart "
    "as /work/chart.png (matplotlib: plt.savefig('/work/chart.png')). When done, answer in "
    "plain text with the numbers that support your answer."
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", nargs="?", type=Path, help=f"the table (default: {DEFAULT_CSV})")
    parser.add_argument("--question", default=DEFAULT_QUESTION)
    parser.add_argument("--chart", type=Path, default=Path("chart.png"), help="where the chart goes")
    add_common_arguments(parser, "python-data")
    args = parser.parse_args()

    csv = args.csv or DEFAULT_CSV
    if not csv.is_file():
        hint = "" if args.csv else " (the default table lives beside the checkout, in ../shared/data/)"
        print(f"data_analysis: no CSV file at {csv}{hint}; give one as the first argument", file=sys.stderr)
        return 2
    head = csv.read_text(errors="replace").splitlines()[:3]
    task = f"{args.question}\n\nThe file /work/data.csv ({csv.name}) begins:\n" + "\n".join(head)

    chat = chat_from_environment(args)
    try:
        with codebox.SyncCodeBox(image=args.image, memory_mib=1024, timeout=120) as box:
            box.copy_in(csv, "/work/data.csv")
            answer = ask(chat, box, task, system=SYSTEM, max_steps=args.max_steps)
            if box.exec("test", "-f", "/work/chart.png").exit_code == 0:
                box.copy_out("/work/chart.png", args.chart)
                log(f"--- chart saved to {args.chart}")
            else:
                log("--- the model made no chart (/work/chart.png does not exist)")
    except ChatError as e:
        print(f"data_analysis: the model server failed: {e}", file=sys.stderr)
        return 1
    except RuntimeError as e:  # codebox.BoxError: e.g. the image is not built (says how)
        print(f"data_analysis: {e}", file=sys.stderr)
        return 1
    print(answer.rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
