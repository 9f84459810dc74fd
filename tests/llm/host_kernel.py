#!/usr/bin/env python3
"""A stand-in for the box's code-interpreter kernel, for llm_interpreter_test's "host" runs.

IPython cells in one namespace, on the host, with no isolation at all: it runs only the code of
codebox's own scenario files. Reads one JSON object per line on stdin ({"code": "..."}) and
answers each with one JSON line on stdout, shaped like codebox::Execution:
{"stdout": [...], "stderr": [...], "results": [{"data": {...}, "is_main_result": bool}],
 "error": {"name", "value", "traceback"} | null, "execution_count": n}.
Output is caught at the Python level (sys.stdout), which is all the scenarios need.
"""
import io
import json
import os
import sys

from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config


def main():
    protocol = os.fdopen(os.dup(1), "w")
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config, colors="NoColor")
    cell = {}

    def text(value):
        return value if isinstance(value, str) else json.dumps(value)

    def publish(data, metadata=None, source=None, *, transient=None, update=False, **kw):
        cell["results"].append({"data": {k: text(v) for k, v in data.items()},
                                "is_main_result": False})

    def main_result(format_dict, md_dict=None):
        cell["results"].append({"data": {k: text(v) for k, v in format_dict.items()},
                                "is_main_result": True})

    def traceback(etype, evalue, stb):
        cell["traceback"] = "\n".join(stb)

    shell.display_pub.publish = publish
    shell.displayhook.write_format_data = main_result
    shell.displayhook.write_output_prompt = lambda: None
    shell.displayhook.finish_displayhook = lambda: None
    shell._showtraceback = traceback

    for line in sys.stdin:
        code = json.loads(line)["code"]
        cell.clear()
        cell["results"] = []
        out, err = io.StringIO(), io.StringIO()
        sys.stdout, sys.stderr = out, err
        try:
            result = shell.run_cell(code, store_history=True)
        finally:
            sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        exc = result.error_before_exec or result.error_in_exec
        error = None
        if exc is not None:
            error = {"name": type(exc).__name__, "value": str(exc),
                     "traceback": cell.get("traceback", "")}
        reply = {"stdout": [out.getvalue()] if out.getvalue() else [],
                 "stderr": [err.getvalue()] if err.getvalue() else [],
                 "results": cell["results"], "error": error,
                 "execution_count": shell.execution_count - 1}
        protocol.write(json.dumps(reply) + "\n")
        protocol.flush()


if __name__ == "__main__":
    main()
