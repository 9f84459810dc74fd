"""``describe_host()``: what this host can do for codebox, as ``codebox doctor`` prints it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._values import _core


@dataclass(frozen=True)
class HostDescription:
    """Drivers, limits, image stores and images on this host (``codebox::DescribeHost``)."""

    jail: dict[str, Any]
    """usable, detail, root, user_namespaces(+_detail), cgroup_version (0, 1, 2),
    cgroup_controllers, cgroup_missing and cgroup_hint (how to get the missing ones)."""
    vm: dict[str, Any]
    """kvm_usable, kvm_detail, tcg_usable, tcg_detail, qemu (path, "" when not found)."""
    driver_usable: bool
    """Whether the driver asked for (auto: any) can run here."""
    driver: str
    """What it resolves to: "jail" or "vm"; "" when none can run."""
    driver_reason: str
    """Why that driver, or why none."""
    limits: list[dict[str, Any]]
    """Per limit of a box with these options: name, enforced, detail (how, or why not)."""
    stores: list[dict[str, Any]]
    """Image stores in search order: path, kind ("explicit", "user", "system"), writable."""
    images: list[dict[str, Any]]
    """Per recipe: name, built, id, store, detail (when not built: the command to build it)."""


def describe_host(**options: Any) -> HostDescription:
    """Probes this host (starts no box). ``options`` are CodeBox's: ``driver``, ``memory_mib``,
    ``cpus``, ``home``, ... decide which driver and limits are described."""
    return HostDescription(**_core().describe_host(**options))
