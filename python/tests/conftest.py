"""Shared fixtures: import paths, a probe that a box can start here, and a process counter."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable, Iterator

import pytest

REPO = Path(__file__).resolve().parents[2]

# Make the package importable without scripts/setup's .pth (e.g. PYTHONPATH-less runs from a
# developer build); the .pth, when present, already did this.
for path in (REPO / "python", *(Path(p) for p in os.environ.get("CODEBOX_PYTHON_BUILD", "").split(":") if p)):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import codebox  # noqa: E402

_probe: str | None = None
_probed = False


def box_unavailable_reason() -> str | None:
    """None when a default box starts here, else the RuntimeError's message (probed once)."""
    global _probe, _probed
    if not _probed:
        _probed = True
        try:
            with codebox.SyncCodeBox() as box:
                box.run("pass")
        except RuntimeError as e:
            _probe = str(e)
    return _probe


@pytest.fixture(autouse=True)
def no_box_left_from_earlier_tests() -> Iterator[None]:
    """Every test starts with none of this process's box processes alive (a box torn down in
    the background by an earlier test must be gone by then), so counts compare cleanly."""
    assert wait_no_box_processes(0) == 0, "box processes of an earlier test are still alive"
    yield


@pytest.fixture
def need_core() -> None:
    """Options are checked by the C++ extension: without it, say so and skip."""
    from codebox._values import _core

    try:
        _core()
    except codebox.BoxError as e:
        pytest.skip(str(e))


@pytest.fixture
def need_box() -> None:
    """Skips the test, with the reason, when no box driver can run on this host."""
    reason = box_unavailable_reason()
    if reason is not None:
        if os.environ.get("CODEBOX_TESTS_REQUIRE_BOX") == "1":
            pytest.fail(f"no box can start (CODEBOX_TESTS_REQUIRE_BOX=1): {reason}")
        pytest.skip(f"no box can start here: {reason}")


@pytest.fixture
def box(need_box: None) -> Iterator[codebox.SyncCodeBox]:
    with codebox.SyncCodeBox(timeout=20) as b:
        yield b


# /proc/PID/comm keeps 15 characters: codebox-vm-keeper shows as codebox-vm-keep.
BOX_PROCESS_NAMES = {"codebox-jail", "codebox-agent", "codebox-vm-keep", "qemu-system-x86"}


def box_processes() -> list[int]:
    """PIDs of box processes (jail supervisor, agent, QEMU) descending from this process.

    Only our own descendants count: other programs on the machine may run boxes meanwhile.
    """
    parent: dict[int, int] = {}
    name: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        parent[int(entry)] = int(fields[1])
        name[int(entry)] = comm
    me = os.getpid()
    found = []
    for pid, comm in name.items():
        if comm not in BOX_PROCESS_NAMES:
            continue
        p, hops = parent.get(pid, 0), 0
        while p > 1 and p != me and hops < 64:
            p, hops = parent.get(p, 0), hops + 1
        if p == me:
            found.append(pid)
    return found


def wait_no_box_processes(baseline: int, seconds: float = 10.0) -> int:
    """Polls until at most `baseline` box processes remain; returns the last count."""
    import time

    deadline = time.monotonic() + seconds
    while True:
        n = len(box_processes())
        if n <= baseline or time.monotonic() > deadline:
            return n
        time.sleep(0.05)


FAKE_SERVER = REPO / "tests" / "llm" / "fake_openai_server.py"
SCENARIOS = REPO / "tests" / "llm" / "scenarios"


class FakeOpenAI:
    """tests/llm/fake_openai_server.py on an ephemeral port, replaying one scenario (or, with
    source="--scenarios", answering each task from the scenario of the directory it names)."""

    def __init__(self, scenario: Path, log: Path, source: str = "--script") -> None:
        import subprocess

        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, str(FAKE_SERVER), source, str(scenario), "--log", str(log),
             "--max-seconds", "300"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            self.close()
            raise RuntimeError(f"fake server did not start: {line!r}")
        self.base_url = f"http://127.0.0.1:{int(line.split()[1])}/v1"

    def requests(self) -> list[dict]:
        import json

        if not self.log.exists():
            return []
        return [json.loads(l) for l in self.log.read_text().splitlines() if l.strip()]

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()  # the server exits when its stdin closes
        try:
            self.proc.wait(timeout=5)
        except Exception:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def fake_openai(tmp_path: Path) -> Iterator[Callable[[str | Path], FakeOpenAI]]:
    """fake_openai(scenario) -> a running fake server; a name means tests/llm/scenarios/NAME.json."""
    if not FAKE_SERVER.exists():
        pytest.skip(f"{FAKE_SERVER} is missing (it comes with the interpreter loop, src/llm)")
    servers: list[FakeOpenAI] = []

    def start(scenario: str | Path) -> FakeOpenAI:
        path = Path(scenario)
        if not path.is_absolute() and not path.exists():
            path = SCENARIOS / f"{scenario}.json"
        server = FakeOpenAI(path, tmp_path / f"requests-{len(servers)}.jsonl")
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.close()


@pytest.fixture(scope="module")
def fake_openai_shapes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeOpenAI]:
    """One stateless fake server for tests/llm/scenarios/shapes: "[scenario:NAME]" in a task
    picks the scenario."""
    if not FAKE_SERVER.exists():
        pytest.skip(f"{FAKE_SERVER} is missing (it comes with the interpreter loop, src/llm)")
    server = FakeOpenAI(SCENARIOS / "shapes", tmp_path_factory.mktemp("shapes") / "requests.jsonl",
                        source="--scenarios")
    yield server
    server.close()
