"""Exceptions raised by codebox.

Every error of a box is a :class:`BoxError`, itself a :class:`RuntimeError`, carrying the
C++ Status code (``"not_found"``, ``"unavailable"``, ...) in :attr:`BoxError.code` and its
message, which says what failed and what to do. A few also derive from the built-in class a
Python programmer would catch: a timeout is a :class:`TimeoutError`, a missing file a
:class:`FileNotFoundError`, a bad option a :class:`ValueError`.
"""

from __future__ import annotations


class BoxError(RuntimeError):
    """A box could not start, or could not do what was asked."""

    def __init__(self, message: str, code: str = "unknown") -> None:
        super().__init__(message)
        self.code = code


class BoxClosedError(BoxError):
    """The box was used after its ``with`` block ended (or after :meth:`close`)."""


class BoxTimeoutError(BoxError, TimeoutError):
    """A wall-clock limit passed: ``run()``'s code timed out, or the box's lifetime ended."""


class BoxFileNotFoundError(BoxError, FileNotFoundError):
    """A path given to ``copy_in`` / ``copy_out`` (or an image) does not exist."""


class BoxInvalidArgumentError(BoxError, ValueError):
    """An option or argument is not valid."""


class BoxKernelUnavailableError(BoxError):
    """``run_code`` cannot start its kernel in this box: the image lacks IPython (or Python).
    The message names the image and what to use instead."""


class BoxNetworkError(BoxError):
    """A call needs a network the box was not given: ``install_package`` on a box made
    without ``allow_hosts=[...]`` or ``network="allow"``/``"open"``."""


class BoxLostError(BoxError):
    """The box lived on a ``codebox serve`` node (a replica of a cluster) that is gone, does not
    answer or has restarted since: the box ended with it. Make a new box. Told from a box that
    was never there or was destroyed (a plain BoxError with code ``"not_found"``)."""


class BoxLimitExceededError(BoxError):
    """What a box sent passed a host-side limit (a copied-out file or listing too large)."""


_BY_CODE: dict[str, type[BoxError]] = {
    "closed": BoxClosedError,
    "deadline_exceeded": BoxTimeoutError,
    "failed_precondition": BoxKernelUnavailableError,
    "invalid_argument": BoxInvalidArgumentError,
    "limit_exceeded": BoxLimitExceededError,
    "box_lost": BoxLostError,
}


def from_status(code: str, message: str) -> BoxError:
    """Returns the exception for a failed C++ Status (called by the extension module)."""
    # "not_found" stays a plain BoxError here: a missing image is a start failure, caught as
    # RuntimeError; copy_in / copy_out turn a missing path into BoxFileNotFoundError.
    return _BY_CODE.get(code, BoxError)(message, code)
