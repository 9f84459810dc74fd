"""codebox: run untrusted, model-written code in disposable isolated boxes.

::

    import asyncio, codebox

    async def main():
        async with codebox.CodeBox() as box:          # destroyed when the block ends
            print(await box.run("print(6 * 7)"))       # "42\\n"
            r = await box.exec("python3", "-c", "import sys; sys.exit(3)")
            print(r.exit_code, r.stdout, r.stderr)
            await box.run_code("x = 21")                # a stateful session (IPython)
            print((await box.run_code("x * 2")).text)   # "42"
            await box.files.write("in.csv", "a,b\\n1,2\\n")

    asyncio.run(main())

    with codebox.SyncCodeBox() as box:                 # the blocking twin
        box.run("print('hi')")

    codebox.Interpreter(model="gpt-4o-mini").ask("What is 2**100?")

Errors are :class:`BoxError` (a RuntimeError) with the reason and what to do; ``run`` past its
timeout raises :class:`BoxTimeoutError` (a TimeoutError), ``exec`` reports ``timed_out``.
"""

from ._box import CodeBox, SyncCodeBox
from ._execution import Execution, ExecutionError, Logs, Result
from ._files import EntryInfo, Files, SyncFiles
from ._host import HostDescription, describe_host
from ._values import BoxInfo, ExecResult, NetworkEvent, ProcessInfo
from ._interpreter import Interpreter, NoAnswerWarning, Transcript
from .errors import (
    BoxClosedError,
    BoxError,
    BoxFileNotFoundError,
    BoxInvalidArgumentError,
    BoxKernelUnavailableError,
    BoxLimitExceededError,
    BoxLostError,
    BoxNetworkError,
    BoxTimeoutError,
)

__version__ = "0.1.0"

__all__ = [
    "BoxClosedError",
    "BoxError",
    "BoxFileNotFoundError",
    "BoxInfo",
    "BoxInvalidArgumentError",
    "BoxKernelUnavailableError",
    "BoxLimitExceededError",
    "BoxLostError",
    "BoxNetworkError",
    "BoxTimeoutError",
    "CodeBox",
    "EntryInfo",
    "ExecResult",
    "NetworkEvent",
    "ProcessInfo",
    "Execution",
    "ExecutionError",
    "Files",
    "HostDescription",
    "Interpreter",
    "Logs",
    "NoAnswerWarning",
    "Result",
    "SyncCodeBox",
    "SyncFiles",
    "Transcript",
    "describe_host",
]
