"""CodeBox and SyncCodeBox against a codebox server (`codebox serve` on a unix socket in a temp
dir, started here as a subprocess): exec, run, run_code with its callbacks, restart, interrupt,
files and copies, with the same checks as the local tests. Skipped, with the reason, when the
server binary is not built or cannot start a box."""

from __future__ import annotations

import asyncio
import http.client
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

import codebox

REPO = Path(__file__).resolve().parents[2]
BINARY = Path(os.environ.get("CODEBOX_BIN", REPO / "build" / "release" / "bin" / "codebox"))


@pytest.fixture(autouse=True)
def no_box_left_from_earlier_tests() -> Iterator[None]:
    """The server's boxes are its own (and descend from this process through it): the local
    tests' process count does not apply here."""
    yield


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=2)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(2)
        self.sock.connect(self._path)


def _healthy(path: str) -> bool:
    try:
        conn = _UnixConnection(path)
        conn.request("GET", "/healthz")
        return conn.getresponse().status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    if not BINARY.exists():
        pytest.skip(f"the codebox CLI is not built at {BINARY} (ninja -C build/release codebox)")
    help_text = subprocess.run([str(BINARY), "serve", "--help"], capture_output=True, text=True)
    if help_text.returncode != 0:
        pytest.skip(f"{BINARY} has no `serve` command: {help_text.stderr.strip()[:200]}")
    tmp = tempfile.mkdtemp(prefix="codebox-remote-py-")
    sock = os.path.join(tmp, "codebox.sock")
    log = open(os.path.join(tmp, "serve.log"), "w")
    proc = subprocess.Popen([str(BINARY), "serve", "--listen", f"unix:{sock}"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not _healthy(sock):
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.skip("codebox serve did not come up: " +
                            Path(tmp, "serve.log").read_text()[-500:])
            time.sleep(0.05)
        address = f"unix:{sock}"
        try:
            with codebox.SyncCodeBox(server=address) as probe:
                probe.run("pass")
        except codebox.BoxError as e:
            pytest.skip(f"the server cannot start a box here: {e}")
        yield address
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def box(server: str) -> Iterator[codebox.SyncCodeBox]:
    with codebox.SyncCodeBox(server=server, timeout=60) as b:
        yield b


def test_exec_and_run(box: codebox.SyncCodeBox) -> None:
    assert box.run("print(6 * 7)") == "42\n"
    r = box.exec("python3", "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)")
    assert (r.exit_code, r.stdout, r.stderr) == (3, "out\n", "err\n")
    assert r.driver == box.info.driver and r.driver
    r = box.exec("sh", "-c", "echo $A:$(pwd); cat", env={"A": "1"}, cwd="/tmp", stdin="piped")
    assert r.stdout == "1:/tmp\npiped"
    r = box.exec("sleep", "10", timeout=0.5)
    assert r.timed_out and not r.ok
    with pytest.raises(codebox.BoxTimeoutError):
        box.run("import time; time.sleep(10)", timeout=0.5)


def test_exec_streams_to_callbacks_in_order(box: codebox.SyncCodeBox) -> None:
    seen: list[tuple[str, str]] = []
    r = box.exec("sh", "-c", "echo a; echo b >&2; sleep 0.2; echo c",
                 on_stdout=lambda t: seen.append(("out", t)),
                 on_stderr=lambda t: seen.append(("err", t)))
    assert r.stdout == "a\nc\n" and r.stderr == "b\n"
    assert "".join(t for k, t in seen if k == "out") == "a\nc\n"
    assert "".join(t for k, t in seen if k == "err") == "b\n"


def test_a_raising_callback_stops_the_exec(box: codebox.SyncCodeBox) -> None:
    class Stop(Exception):
        pass

    def boom(_: str) -> None:
        raise Stop()

    start = time.monotonic()
    with pytest.raises(Stop):
        box.exec("sh", "-c", "echo go; sleep 30", on_stdout=boom)
    assert time.monotonic() - start < 20
    assert box.run("print('still usable')") == "still usable\n"


def test_run_code_session_state_results_and_errors(box: codebox.SyncCodeBox) -> None:
    box.run_code("x = 21")
    e = box.run_code("print('hello')\nx * 2")
    assert e.text == "42" and "".join(e.logs.stdout) == "hello\n"
    e = box.run_code("1 / 0")
    assert e.error is not None and e.error.name == "ZeroDivisionError"
    assert box.run_code("x").text == "21"


def test_run_code_callbacks_in_order(box: codebox.SyncCodeBox) -> None:
    seen: list[str] = []
    e = box.run_code("print('a')\ndisplay(5)\nprint('b')\n7",
                     on_stdout=lambda t: seen.append("out:" + t),
                     on_result=lambda r: seen.append("result:" + str(r.text)))
    assert e.text == "7"
    assert [s for s in seen if s.startswith("result:")] == ["result:5", "result:7"]
    assert "".join(s[4:] for s in seen if s.startswith("out:")) == "a\nb\n"


def test_restart_forgets_and_interrupt_stops_a_cell(box: codebox.SyncCodeBox) -> None:
    box.run_code("kept = 1")
    box.restart()
    e = box.run_code("kept")
    assert e.error is not None and e.error.name == "NameError"

    box.interrupt()  # nothing runs: nothing happens
    started = threading.Event()
    timer = threading.Thread(target=lambda: (started.wait(20), time.sleep(0.3), box.interrupt()))
    timer.start()
    e = box.run_code("import time\nprint('go', flush=True)\nwhile True: time.sleep(0.05)",
                     on_stdout=lambda t: started.set())
    timer.join()
    assert e.error is not None and e.error.name == "KeyboardInterrupt"
    assert box.run_code("1 + 1").text == "2"


def test_files_round_trip_list_and_remove(box: codebox.SyncCodeBox) -> None:
    data = bytes(range(256)) * 100
    box.files.write("d/all.bin", data, mode=0o640)
    assert box.files.read("d/all.bin") == data
    assert box.exec("python3", "-c", "print(len(open('d/all.bin','rb').read()))").stdout == "25600\n"
    box.exec("sh", "-c", "mkdir d/sub && ln -s /etc/passwd d/link")
    entries = {e.name: e for e in box.files.list("d")}
    assert set(entries) == {"all.bin", "sub", "link"}
    assert (entries["all.bin"].path, entries["all.bin"].type, entries["all.bin"].size,
            entries["all.bin"].mode) == ("/work/d/all.bin", "file", 25600, 0o640)
    assert entries["link"].type == "symlink"
    box.files.remove("d")
    with pytest.raises(codebox.BoxFileNotFoundError):
        box.files.read("d/all.bin")
    box.files.write("big", b"x" * 4096)
    with pytest.raises(codebox.BoxLimitExceededError):
        box.files.read("big", max_bytes=100)


def test_copy_in_and_out(box: codebox.SyncCodeBox, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("A")
    (src / "sub" / "b.txt").write_text("B")
    box.copy_in(src, "in")
    assert box.exec("cat", "in/a.txt", "in/sub/b.txt").stdout == "AB"
    box.copy_in(src / "a.txt", "single.txt")
    assert box.files.read("single.txt") == b"A"
    box.exec("sh", "-c", "mkdir -p out/deep && echo x > out/deep/x && echo y > out/y")
    box.copy_out("out", tmp_path / "back")
    assert (tmp_path / "back" / "deep" / "x").read_text() == "x\n"
    assert (tmp_path / "back" / "y").read_text() == "y\n"
    box.copy_out("out/y", tmp_path / "y.txt")
    assert (tmp_path / "y.txt").read_text() == "y\n"
    with pytest.raises(codebox.BoxLimitExceededError):
        box.copy_out("out", tmp_path / "limited", max_bytes=1)
    assert not (tmp_path / "limited" / "y").exists()


def test_async_api_against_the_server(server: str) -> None:
    async def main() -> None:
        async with codebox.CodeBox(server=server) as b:
            outs = await asyncio.gather(*(b.run(f"print({i})") for i in range(4)))
            assert outs == [f"{i}\n" for i in range(4)]
            seen: list[str] = []
            e = await b.run_code("print('x')\n3", on_stdout=seen.append)
            assert e.text == "3" and "".join(seen) == "x\n"
            await b.files.write("f", b"1")
            assert await b.files.read("f") == b"1"

    asyncio.run(main())


def test_codebox_server_variable(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEBOX_SERVER", server)
    with codebox.SyncCodeBox() as b:
        assert b.run("print('via env')") == "via env\n"


def test_the_server_rule_without_a_server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CODEBOX_SERVER", "ftp://nowhere")
    with pytest.raises(codebox.BoxError, match="CODEBOX_SERVER"):
        codebox.SyncCodeBox().start()
    # local=True never asks a server (the malformed variable is not even read).
    with pytest.raises(codebox.BoxError) as e:
        codebox.SyncCodeBox(local=True, image="no-such-image-here").start()
    assert "no-such-image-here" in str(e.value)
    with pytest.raises(TypeError):
        codebox.SyncCodeBox(local="yes")
    # A server that is named but not there: unavailable, naming it.
    monkeypatch.delenv("CODEBOX_SERVER")
    with pytest.raises(codebox.BoxError, match="nobody.sock"):
        codebox.SyncCodeBox(server=f"unix:{tmp_path}/nobody.sock").start()


def test_after_close_calls_fail_and_close_is_idempotent(server: str) -> None:
    b = codebox.SyncCodeBox(server=server).start()
    b.close()
    b.close()
    with pytest.raises(codebox.BoxClosedError):
        b.run("1")
