"""A box's network from Python: installing packages with pip through its egress proxy
(BoxLite's ``install_package`` / ``install_packages``) and its audit trail (``egress_log``).

Mixed into both box twins, each operation written once (_twins.py); kept apart from
``_box.py`` to keep that file short.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Sequence

from ._twins import Steps, Twins, twin
from ._values import ExecResult
from .errors import BoxError, BoxNetworkError

_DEFAULT_INSTALL_TIMEOUT = 300.0


def _install_call(live: Callable[[], Any], options: dict[str, Any], packages: Any,
                  index_url: Any, timeout: Any) -> Callable[[], ExecResult]:
    """Checks the arguments here, in the caller's thread, before the box (``live()``, which
    raises when it is not started); returns the blocking call."""
    if isinstance(packages, (str, bytes)) or not isinstance(packages, (list, tuple)):
        raise TypeError(
            f"packages must be a list of str (install_package takes one), got {packages!r}"
        )
    if not packages:
        raise ValueError("packages is empty: name at least one package to install")
    for name in packages:
        if not isinstance(name, str):
            raise TypeError(f"each package must be a str, got {type(name).__name__} {name!r}")
    if index_url is not None and not isinstance(index_url, str):
        raise TypeError(f"index_url must be a str or None, got {index_url!r}")
    if timeout is None:
        timeout = _DEFAULT_INSTALL_TIMEOUT
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if options["network"] == "none" and not options["allow_hosts"] and not options["secrets"]:
        raise BoxNetworkError(
            "install_package: this box has no network; create it with allow_hosts=[...] or "
            'network="allow" (the package index is then allowed for the install only)',
            "failed_precondition",
        )
    names = list(packages)
    box = live()

    def call() -> ExecResult:
        try:
            raw = box.install_packages(names, index_url or "", float(timeout))
        except BoxError as e:
            if e.code == "failed_precondition":  # no network policy, said by the box itself
                raise BoxNetworkError(str(e), e.code) from None
            raise
        return ExecResult._from_core(raw)

    return call


class _Network(Twins):
    """install_package(s) and egress_log of both box twins."""

    _options: dict[str, Any]
    _live: Callable[[], Any]

    @twin
    def install_package(self, name: str, *, index_url: str | None = None,
                        timeout: float | None = None) -> Steps[ExecResult]:
        """``pip install --user NAME`` in the box, through its egress proxy; see
        :meth:`install_packages`."""
        return (yield _install_call(self._live, self._options, [name], index_url, timeout))

    @twin
    def install_packages(self, names: Sequence[str], *, index_url: str | None = None,
                         timeout: float | None = None) -> Steps[ExecResult]:
        """Installs packages with pip in the box (``pip install --user``; later ``python3``
        and ``run_code`` cells import them) and returns pip's :class:`ExecResult`.

        The box needs a network policy (``allow_hosts=[...]``, or ``network="allow"`` /
        ``"open"``), else this raises :class:`BoxNetworkError`. ``index_url`` is pip's
        ``--index-url`` (default: the public Python package index); its host is allowed for
        this install only. A package pip cannot find, or a host the policy refuses, is a
        non-zero ``exit_code`` with pip's reason in ``stderr``. ``timeout``: seconds
        (default 300).
        """
        return (yield _install_call(self._live, self._options, names, index_url, timeout))

    @twin
    def set_network(self, allow_hosts: Sequence[str] | None = None, *,
                    network: str | None = None) -> Steps[str]:
        """The box's network from now on: ``allow_hosts`` (implies ``network="allow"``), or
        ``network="open"`` / ``"none"``; returns the box's new network description. New
        connections are judged by it at once, and open ones to a host it no longer allows are
        ended. A secret's hosts stay allowed unless ``network="none"`` without hosts.

        Needs the box's proxy channel, which only a box created with a network has: create it
        with ``network="allow"`` (no hosts: nothing reachable yet) to open it later; any
        other box raises :class:`BoxNetworkError`.

        ::

            box = CodeBox(network="allow")
            await box.set_network(["pypi.org", "files.pythonhosted.org"])
            await box.exec("pip", "install", "six")
            await box.set_network(network="none")
        """
        if isinstance(allow_hosts, (str, bytes)):
            raise TypeError(f"allow_hosts must be a list of str, got {allow_hosts!r}")
        hosts = list(allow_hosts or [])
        for host in hosts:
            if not isinstance(host, str):
                raise TypeError(f"each host must be a str, got {type(host).__name__} {host!r}")
        if network is not None and network not in ("none", "allow", "open"):
            raise ValueError(f'network must be "none", "allow" or "open", got {network!r}')
        mode = network or "allow"
        box = self._live()

        def call() -> str:
            try:
                return str(box.set_network(mode, hosts))
            except BoxError as e:
                if e.code == "failed_precondition":
                    raise BoxNetworkError(str(e), e.code) from None
                raise

        return (yield call)

    def egress_log(self) -> list[dict[str, Any]]:
        """Every connection the box opened through its egress proxy so far, oldest first (the
        last 1000): dicts with host, port, allowed, reason, address, bytes_up, bytes_down.
        Empty for a box without a network. (Not a coroutine, on a CodeBox either: a quick
        read, one request for a box on a server.)"""
        return list(self._live().egress_log())

    def egress_log_lines(self) -> str:
        """:meth:`egress_log` as JSON lines, one record a line (an audit export; a server's
        ``GET /v1/boxes/{id}/egress`` answers the same)."""
        return "".join(json.dumps(r, sort_keys=True) + "\n" for r in self.egress_log())
