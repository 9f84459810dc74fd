# codebox's code-interpreter kernel: runs cells in one IPython namespace and reports what each
# gave as JSON lines (docs/kernel.md). Started by the host as `python3 -c <this source>`; the
# host reads this process's original stdout (moved to a private fd) and writes requests to its
# original stdin (moved likewise). Cell code runs in this process, so nothing here is trusted
# by the host: it checks every line.
import base64
import codecs
import json
import os
import re
import select
import signal
import sys
import threading

PROTOCOL = 1
CHUNK = 65536
DIAG = None  # the kernel's original stderr, for its own last words


def _private(fd):
    # A copy only this process holds (os.dup is close-on-exec): subprocesses never get it.
    return os.dup(fd)


class Channel:
    """The host's side: requests in on one fd, messages out on another, one JSON a line."""

    def __init__(self, in_fd, out_fd):
        self.in_fd, self.out_fd = in_fd, out_fd
        self.lock = threading.Lock()
        self.buf = b""
        self.pending = None  # a request parsed but not yet handed out (an interrupt came)

    def send(self, **msg):
        line = (json.dumps(msg, ensure_ascii=True, default=str) + "\n").encode("ascii")
        # An interrupt must not cut a line in half (the host would kill the kernel for it):
        # SIGINT waits while the main thread writes.
        main = threading.current_thread() is threading.main_thread()
        if main:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            with self.lock:
                view = memoryview(line)
                while view:
                    view = view[os.write(self.out_fd, view):]
        finally:
            if main:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    def receive(self):
        """The next request, or None at end of input. KeyboardInterrupt may escape (an
        interrupt while no cell runs); no request is lost to it."""
        if self.pending is None:
            # Pieces are joined once the line is whole: a large cell costs no quadratic
            # copying. An interrupt while waiting keeps what was read (it stays in self.buf).
            pieces = [self.buf] if self.buf else []
            self.buf = b""
            try:
                while not pieces or b"\n" not in pieces[-1]:
                    data = os.read(self.in_fd, 1 << 20)
                    if not data:
                        return None
                    pieces.append(data)
            except BaseException:
                self.buf = b"".join(pieces)
                raise
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            try:
                line, self.buf = b"".join(pieces).split(b"\n", 1)
                self.pending = json.loads(line)
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        request, self.pending = self.pending, None
        return request


class Capture:
    """Fds 1 and 2 point at pipes read by one thread, so output of the cell and of its
    subprocesses streams to the host while the cell runs."""

    def __init__(self, channel):
        self.channel = channel
        self.cell_id = 0
        self.max_line = 1 << 24
        self.pipes = {}  # read end -> [name, decoder]
        self.ends = {}  # 1, 2 -> (st_dev, st_ino) of the pipe they should be
        self.wake_r, self.wake_w = os.pipe()
        self.ensure()
        self.drained = threading.Event()
        self.drain_asked = False
        threading.Thread(target=self._loop, daemon=True, name="codebox-capture").start()

    def ensure(self):
        """Points fds 1 and 2 at capture pipes again if a cell closed or replaced them."""
        for fd in (1, 2):  # closed ones first take a placeholder, so new pipes land above 2
            try:
                os.fstat(fd)
            except OSError:
                null = os.open(os.devnull, os.O_WRONLY)
                if null != fd:
                    os.dup2(null, fd)
                    os.close(null)
        for fd, name in ((1, "stdout"), (2, "stderr")):
            try:
                st = os.fstat(fd)
                if (st.st_dev, st.st_ino) == self.ends.get(fd):
                    continue
            except OSError:
                pass
            r, w = os.pipe()
            os.dup2(w, fd)
            os.close(w)
            os.set_blocking(r, False)
            st = os.fstat(fd)
            self.ends[fd] = (st.st_dev, st.st_ino)
            self.pipes[r] = [name, codecs.getincrementaldecoder("utf-8")("replace")]
            os.write(self.wake_w, b"x")
        for attr, fd in (("stdout", 1), ("stderr", 2)):
            stream = getattr(sys, attr)
            if stream is None or getattr(stream, "closed", True):
                setattr(sys, attr, open(fd, "w", buffering=1, encoding="utf-8",
                                        errors="backslashreplace", closefd=False))

    def _read(self, fd, budget):
        name, decoder = self.pipes[fd]
        got = 0
        while got < budget:
            try:
                data = os.read(fd, CHUNK)
            except BlockingIOError:
                break
            except OSError:
                data = b""
            if not data:
                self.pipes.pop(fd)  # every writer closed its end: nothing more will come
                os.close(fd)
                break
            got += len(data)
            text = decoder.decode(data)
            if text and self.cell_id:
                self.channel.send(type="stream", id=self.cell_id, name=name, text=text)
            elif text and DIAG is not None:
                # Before the first cell (warnings of IPython's start): the kernel's own words.
                os.write(DIAG, text[-4096:].encode("utf-8", "replace"))
        return got

    def _loop(self):
        while True:
            fds = list(self.pipes) + [self.wake_r]
            ready, _, _ = select.select(fds, [], [])
            for fd in ready:
                if fd == self.wake_r:
                    os.read(self.wake_r, 64)
                elif fd in self.pipes:
                    self._read(fd, 4 * CHUNK)
            if self.drain_asked:
                # Everything written before the request is in the pipes: read to empty (bounded,
                # so a subprocess that never stops writing cannot hold the cell open).
                for fd in list(self.pipes):
                    self._read(fd, 64 * CHUNK)
                self.drain_asked = False
                self.drained.set()

    def drain(self):
        """Returns once what this process wrote to fds 1 and 2 so far has been sent."""
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        self.drained.clear()
        self.drain_asked = True
        os.write(self.wake_w, b"x")
        self.drained.wait(2.0)


def _fatal(channel, kind, message):
    channel.send(type="fatal", kind=kind, message=message)
    os._exit(3)


BINARY = ("image/png", "image/jpeg", "application/pdf")
_BASE64 = re.compile(r"[A-Za-z0-9+/=\r\n]*")


def _clean(data, max_line):
    """The bundle as the host takes it: str values (binary types base64, application/json as
    JSON text), the largest dropped until the line fits the host's cap."""
    out, truncated = {}, False
    for mime, value in (data or {}).items():
        mime = str(mime)
        try:
            if mime == "application/json":
                value = json.dumps(value, ensure_ascii=True, default=str)
            elif isinstance(value, bytes):
                if mime in BINARY:
                    value = base64.b64encode(value).decode("ascii")
                else:
                    value = value.decode("utf-8", "replace")
            elif mime in BINARY and isinstance(value, str):
                value = value.strip()
                # A value that is not base64 (display(raw=True) of a bad bundle) is dropped
                # here: the host would take it for a broken kernel and restart it.
                if not _BASE64.fullmatch(value):
                    continue
        except Exception:
            continue
        if isinstance(value, str):
            out[mime] = value
    # Escaping may make a value up to 6 times longer; be conservative.
    while out and sum(len(k) + len(v) * 6 for k, v in out.items()) > max_line - 4096:
        del out[max(out, key=lambda k: len(out[k]))]
        truncated = True
    return out, truncated


def _cut(text, limit=100000):
    return text if len(text) <= limit else text[:limit] + "\n[... cut by the kernel]"


def _light_ipython():
    """Imports IPython's package lazily: its __init__ pulls in the terminal front end
    (prompt_toolkit, jedi: over half of IPython's import time) that a kernel never uses. The
    package is a stub until something asks for one of its attributes (IPython.embed,
    IPython.version_info), which runs the real __init__ into it then."""
    import importlib.util
    import types

    spec = importlib.util.find_spec("IPython")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("No module named 'IPython'")
    pkg = types.ModuleType("IPython")
    pkg.__spec__, pkg.__file__, pkg.__package__ = spec, spec.origin, "IPython"
    pkg.__path__ = list(spec.submodule_search_locations)

    def full(name):
        del pkg.__getattr__
        with open(spec.origin, "rb") as f:
            exec(compile(f.read(), spec.origin, "exec"), pkg.__dict__)
        return getattr(pkg, name)

    pkg.__getattr__ = full
    sys.modules["IPython"] = pkg
    from IPython.core.getipython import get_ipython

    pkg.get_ipython = get_ipython  # what IPython's own modules import from the package


def _make_shell(channel, capture):
    _light_ipython()
    # IPython's completer imports jedi when it can (~100 ms); a kernel completes nothing.
    # Blocked during the start only: cells may import jedi.
    jedi_blocked = "jedi" not in sys.modules
    if jedi_blocked:
        sys.modules["jedi"] = None
    try:
        return _new_shell(channel, capture)
    finally:
        if jedi_blocked:
            del sys.modules["jedi"]


def _new_shell(channel, capture):
    from IPython.core.displayhook import DisplayHook
    from IPython.core.displaypub import DisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    class Hook(DisplayHook):
        # The value of a cell's last expression: its bundle is the main result.
        def start_displayhook(self):
            pass

        def write_output_prompt(self):
            pass

        def write_format_data(self, format_dict, md_dict=None):
            capture.drain()
            data, cut = _clean(format_dict, capture.max_line)
            channel.send(type="display", id=capture.cell_id, main=True, data=data, truncated=cut)

        def finish_displayhook(self):
            pass

    class Publisher(DisplayPublisher):
        def publish(self, data, metadata=None, source=None, *, transient=None, update=False,
                    **kwargs):
            capture.drain()
            data, cut = _clean(data, capture.max_line)
            channel.send(type="display", id=capture.cell_id, main=False, data=data, truncated=cut)

        def clear_output(self, wait=False):
            pass

    class Shell(InteractiveShell):
        # `!cmd` writes to fds 1 and 2 (captured), not through a pty (which adds "\r").
        system = InteractiveShell.system_raw

        def _showtraceback(self, etype, evalue, stb):
            capture.drain()
            try:
                value = str(evalue)
            except Exception as e:  # a __str__ that raises
                value = "<unprintable %s: %s>" % (type(evalue).__name__, type(e).__name__)
            name = getattr(etype, "__name__", str(etype))
            channel.send(type="error", id=capture.cell_id, name=_cut(name, 1000),
                         value=_cut(value), traceback=_cut("\n".join(map(str, stb))
                                                          if isinstance(stb, list) else str(stb)))

    c = Config()
    c.HistoryManager.enabled = False
    c.HistoryAccessor.enabled = False
    c.InteractiveShell.colors = "NoColor"
    c.InteractiveShell.autocall = 0
    c.InteractiveShell.autoindent = False
    c.InlineBackend.print_figure_kwargs = {"bbox_inches": None}
    return Shell.instance(config=c, displayhook_class=Hook, display_pub_class=Publisher)


def main():
    channel = Channel(_private(0), _private(1))
    global DIAG
    DIAG = diag = _private(2)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # cells (and their subprocesses) never read the host's requests
    os.close(null)
    capture = Capture(channel)
    # Whole lines, as they are printed: PYTHONUNBUFFERED (the box's default) would otherwise
    # make print() two writes, its text and its newline, and a cell's output two chunks.
    sys.stdout.reconfigure(line_buffering=True, write_through=False)
    sys.stderr.reconfigure(line_buffering=True, write_through=False)
    if os.environ.get("MPLBACKEND", "").startswith("module://matplotlib_inline"):
        import importlib.util

        if importlib.util.find_spec("matplotlib_inline") is None:
            os.environ["MPLBACKEND"] = "Agg"  # an image without it: charts go to files only
    try:
        shell = _make_shell(channel, capture)
    except ImportError as e:
        _fatal(channel, "no_ipython", "python3 -c 'import IPython' failed: %s" % e)
    except Exception as e:
        os.write(diag, ("codebox kernel: %r\n" % (e,)).encode("utf-8", "replace"))
        _fatal(channel, "start_failed", "the IPython shell did not start: %r" % (e,))
    from IPython.core.release import version

    channel.send(type="ready", protocol=PROTOCOL, pid=os.getpid(), ipython=version)

    while True:
        try:
            request = channel.receive()
        except KeyboardInterrupt:
            continue  # an interrupt that came while no cell ran
        if request is None or request.get("type") == "shutdown":
            break
        if request.get("type") != "execute":
            continue
        cell_id = request.get("id", 0)
        count = shell.execution_count
        try:
            capture.cell_id = cell_id
            capture.max_line = int(request.get("max_line", 1 << 24))
            capture.ensure()
            # A cell may have replaced the SIGINT handler: each cell can be interrupted again.
            signal.signal(signal.SIGINT, signal.default_int_handler)
            shell.run_cell(request.get("code", ""), store_history=True)
        except KeyboardInterrupt:
            # Came outside the user's code (before it, or in IPython's bookkeeping): still
            # this cell's.
            channel.send(type="error", id=cell_id, name="KeyboardInterrupt", value="",
                         traceback="KeyboardInterrupt")
        except SystemExit:
            pass  # IPython reports `exit()` in a cell itself; the kernel stays
        while True:
            try:
                capture.drain()
                channel.send(type="done", id=cell_id, execution_count=count)
                break
            except KeyboardInterrupt:
                continue  # a late interrupt must not lose the cell's end
    os._exit(0)


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        # The kernel's own failure: its last words go to its original stderr, which the host
        # quotes when it reports the kernel's death.
        import traceback
        last_words = traceback.format_exc()[-2000:].encode("utf-8", "replace")
        os.write(DIAG if DIAG is not None else 2, last_words)
        os._exit(70)
