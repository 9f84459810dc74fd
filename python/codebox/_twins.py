"""Each box operation written once, as steps, and made into both twins' methods.

An operation's body is a generator: it checks its arguments, yields the blocking call (a
function of no arguments, run without the GIL by the C++ core), gets its outcome back, and
returns the result::

    @twin
    def copy_in(self, host_path: str, box_path: str) -> Steps[None]:
        \"\"\"Copies ...\"\"\"
        yield self._copy_call("in", host_path, box_path)

A class that derives from :class:`BlockingTwin` (:class:`SyncCodeBox`) gets a plain method
of it, which runs each step inline; one that derives from :class:`AsyncTwin` (:class:`CodeBox`)
a coroutine, which awaits each step in a worker thread (:data:`_EXECUTOR`: the event loop
never stalls), or as the step's :class:`Awaited` says. The arguments are checked where the
body runs up to its first step: in the caller's thread for the blocking twin, on the event
loop when the coroutine is awaited. Both methods have the body's name, signature (returning
what the steps return) and docstring, in which ``{await}`` reads ``await `` for the coroutine
and nothing for the blocking call.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import types
from typing import (
    Any,
    Awaitable,
    Callable,
    ClassVar,
    Coroutine,
    Generator,
    Generic,
    Optional,
    TypeVar,
    Union,
    overload,
)

from ._threads import _EXECUTOR

T = TypeVar("T")


class Awaited:
    """A step that the coroutine twin awaits its own way, not just in a worker thread:
    ``awaiter(call)`` (a start destroys its box when cancelled, a close is shielded, a cell is
    interrupted). The blocking twin runs ``call()``, as for any step."""

    def __init__(self, call: Callable[[], Any], awaiter: Callable[[Any], Awaitable[Any]]) -> None:
        self.call = call
        self.awaiter = awaiter


Step = Union[Callable[[], Any], Awaited]
Steps = Generator[Step, Any, T]
"""What an operation's body is: a generator of steps, returning the operation's result."""


class twin(Generic[T]):
    """Marks a method of a :class:`Twins` base as an operation written as steps."""

    def __init__(self, body: Callable[..., Steps[T]]) -> None:
        self.body = body

    # What a type checker sees of the methods made: a blocking call, or a coroutine, giving T.
    @overload
    def __get__(self, obj: None, owner: Any) -> twin[T]: ...
    @overload
    def __get__(self, obj: BlockingTwin, owner: Any) -> Callable[..., T]: ...
    @overload
    def __get__(self, obj: AsyncTwin, owner: Any) -> Callable[..., Coroutine[Any, Any, T]]: ...

    def __get__(self, obj: Any, owner: Any) -> Any:
        """The operation itself, from the class that defines it (``_Base.exec.body``); a twin
        class has its own method of it instead."""
        if obj is None:
            return self
        raise TypeError(f"{owner.__name__} is neither a BlockingTwin nor an AsyncTwin")

    def method(self, cls: type, blocking: bool) -> Callable[..., Any]:
        """The operation as a method of ``cls``, blocking or a coroutine."""
        shared = self.body
        # The body is copied, so that a wrong argument is reported as cls's method's.
        body = types.FunctionType(shared.__code__, shared.__globals__, shared.__name__,
                                  shared.__defaults__, shared.__closure__)
        body.__kwdefaults__ = shared.__kwdefaults__
        body.__qualname__ = f"{cls.__qualname__}.{shared.__name__}"

        def blocking_method(self: Any, *args: Any, **kwargs: Any) -> Any:
            return _never_suspends(_drive(body(self, *args, **kwargs), _inline))

        async def coroutine(self: Any, *args: Any, **kwargs: Any) -> Any:
            return await _drive(body(self, *args, **kwargs), _in_worker)

        method: Callable[..., Any] = blocking_method if blocking else coroutine
        functools.update_wrapper(method, shared)
        method.__qualname__ = body.__qualname__
        method.__doc__ = (shared.__doc__ or "").replace("{await}", "" if blocking else "await ")
        signature = inspect.signature(shared)
        result = _result(signature.return_annotation, cls)
        setattr(method, "__signature__", signature.replace(return_annotation=result))
        method.__annotations__ = {**shared.__annotations__, "return": result}
        return method


class Twins:
    """A base of classes made of :class:`twin` operations: ``class SyncX(X, BlockingTwin)``
    gets each as a blocking method, ``class X(X, AsyncTwin)`` as a coroutine."""

    _blocking: ClassVar[Optional[bool]] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls._blocking is None:
            return  # a base of operations
        seen: set[str] = set()
        for klass in cls.__mro__:
            for name, value in vars(klass).items():
                if name not in seen:  # the first in the MRO, as attribute lookup finds it
                    seen.add(name)
                    if isinstance(value, twin):
                        setattr(cls, name, value.method(cls, cls._blocking))

    def _loop(self) -> Optional[asyncio.AbstractEventLoop]:
        """Where callbacks are sent: the running event loop for the coroutine twin; None for
        the blocking twin, whose callbacks run on the thread that the C++ core calls them on."""
        return None if self._blocking else asyncio.get_running_loop()


class BlockingTwin(Twins):
    """A class with each :class:`twin` operation of its bases as a blocking method."""

    _blocking = True


class AsyncTwin(Twins):
    """A class with each :class:`twin` operation of its bases as a coroutine."""

    _blocking = False


async def _drive(steps: Steps[T], run: Callable[[Step], Awaitable[Any]]) -> T:
    """Runs an operation's body: each step it yields goes through ``run``, and what that gives
    back goes into the body, until the body returns."""
    outcome = None
    while True:
        try:
            step = steps.send(outcome)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        outcome = await run(step)


async def _inline(step: Step) -> Any:
    """The blocking twin's way to run a step: right here, so :func:`_drive` never suspends."""
    return step.call() if isinstance(step, Awaited) else step()


def _in_worker(step: Step) -> Awaitable[Any]:
    """The coroutine twin's way to run a step: in a worker thread, unless it says otherwise."""
    if isinstance(step, Awaited):
        return step.awaiter(step.call)
    return asyncio.get_running_loop().run_in_executor(_EXECUTOR, step)


def _never_suspends(coroutine: Coroutine[Any, Any, T]) -> T:
    """The result of a coroutine that never waits for anything, run without an event loop."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coroutine.close()
    raise RuntimeError("a blocking step suspended")  # _inline never does


def _result(annotation: Any, cls: type) -> Any:
    """What the method returns, from its body's ``Steps[X]`` (``Self``: the class)."""
    if isinstance(annotation, str) and annotation.startswith("Steps[") and annotation.endswith("]"):
        annotation = annotation[len("Steps["):-1]
        return cls.__name__ if annotation == "Self" else annotation
    return annotation
