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


# Charts ----------------------------------------------------------------------------------------
# A matplotlib figure shown in a cell also comes as CHART_MIME: what it draws, as data (type,
# title, axes, elements), for programs that read a chart instead of looking at its PNG (E2B's
# `result.chart`). Read from the figure's artists; anything not understood is left out, and a
# figure that cannot be read has no chart (never an error in the cell).
CHART_MIME = "application/vnd.codebox.chart+json"
_MAX_CHART_POINTS = 10000


def _num(v):
    try:
        f = float(v)
        return f if f == f and abs(f) != float("inf") else None
    except Exception:
        return None


def _text(t):
    s = t.get_text() if t is not None else ""
    return s or None


def _axis_values(ax, which, values):
    """Numbers, or ISO dates on a date axis."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    try:
        import matplotlib.dates as mdates

        if isinstance(axis.get_major_formatter(), (mdates.AutoDateFormatter, mdates.DateFormatter,
                                                   mdates.ConciseDateFormatter)):
            return [mdates.num2date(v).isoformat() for v in values], "datetime"
    except Exception:
        pass
    return [_num(v) for v in values], axis.get_scale()


def _ticks(ax, which):
    axis = ax.xaxis if which == "x" else ax.yaxis
    values, scale = _axis_values(ax, which, list(axis.get_ticklocs()))
    return values, [t.get_text() for t in axis.get_ticklabels()], scale


def _base(ax, kind):
    return {"type": kind, "title": _text(ax.title), "elements": []}


def _two_d(ax, kind):
    chart = _base(ax, kind)
    chart.update(x_label=_text(ax.xaxis.label), y_label=_text(ax.yaxis.label), x_unit=None,
                 y_unit=None)
    return chart


def _label(artist, i):
    label = artist.get_label() or ""
    return label if label and not label.startswith("_") else "series %d" % i


def _is_box(line):
    """A boxplot's box when it is drawn as a line: a closed rectangle of five points."""
    x, y = line.get_xdata(), line.get_ydata()
    return len(x) == 5 and _num(x[0]) == _num(x[4]) and _num(y[0]) == _num(y[4])


def _segments(lines):
    """Two-point lines split into vertical and horizontal ones: a boxplot's pieces."""
    vertical, horizontal = [], []
    for line in lines:
        x, y = line.get_xdata(), line.get_ydata()
        if _is_box(line):
            continue
        if len(x) != 2:
            return None
        if _num(x[0]) == _num(x[1]):
            vertical.append((_num(x[0]), sorted((_num(y[0]), _num(y[1])))))
        elif _num(y[0]) == _num(y[1]):
            horizontal.append(((_num(x[0]) + _num(x[1])) / 2, _num(y[0])))
    return vertical, horizontal


def _box_chart(ax, lines, fliers):
    split = _segments(lines)
    if not split or not split[0] or not split[1]:
        return None
    vertical, horizontal = split
    chart = _two_d(ax, "box_and_whisker")
    names = {round(v, 6): t for v, t in zip(*_ticks(ax, "x")[:2])}
    by_x = {}
    for x, (lo, hi) in vertical:
        by_x.setdefault(round(x, 6), []).append((lo, hi))
    for x, whiskers in sorted(by_x.items()):
        if len(whiskers) != 2:
            return None
        (low, q1), (q3, high) = sorted(whiskers)
        medians = [y for hx, y in horizontal if round(hx, 6) == x and q1 <= y <= q3]
        outliers = [_num(v) for f in fliers if round(_num(f.get_xdata()[0]) or 0, 6) == x
                    for v in f.get_ydata()] if fliers else []
        chart["elements"].append({"label": names.get(x) or str(x), "min": low, "first_quartile": q1,
                                  "median": medians[0] if medians else None,
                                  "third_quartile": q3, "max": high, "outliers": outliers})
    return chart


def _axes_chart(ax):
    import matplotlib.collections as mcollections
    import matplotlib.container as mcontainer
    import matplotlib.patches as mpatches

    wedges = [p for p in ax.patches if isinstance(p, mpatches.Wedge)]
    if wedges:
        chart = _base(ax, "pie")
        for i, w in enumerate(wedges):
            chart["elements"].append({"label": _label(w, i), "angle": _num(w.theta2 - w.theta1),
                                      "radius": _num(w.r)})
        return chart
    bars = [c for c in ax.containers if isinstance(c, mcontainer.BarContainer)]
    if bars:
        chart = _two_d(ax, "bar")
        names = dict(zip([round(v, 6) for v in ax.get_xticks()],
                         [t.get_text() for t in ax.get_xticklabels()]))
        for i, container in enumerate(bars):
            group = _label(container, i)
            for rect in container:
                x = _num(rect.get_x() + rect.get_width() / 2)
                chart["elements"].append({"label": names.get(round(x or 0, 6)) or str(x),
                                          "group": group, "value": _num(rect.get_height())})
        return chart
    lines = [l for l in ax.get_lines() if l.get_visible()]
    drawn = [l for l in lines if l.get_linestyle() not in ("None", "", " ")]
    markers = [l for l in lines if l.get_linestyle() in ("None", "", " ")]
    if len(drawn) >= 5 and all(len(l.get_xdata()) == 2 or _is_box(l) for l in drawn):
        box = _box_chart(ax, drawn, markers)
        if box:
            return box
    scatters = [c for c in ax.collections if isinstance(c, mcollections.PathCollection)]
    kind = "scatter" if scatters and not drawn else "line" if drawn else None
    if kind is None:
        return None
    chart = _two_d(ax, kind)
    for which in ("x", "y"):
        ticks, labels, scale = _ticks(ax, which)
        chart[which + "_ticks"], chart[which + "_tick_labels"] = ticks, labels
        chart[which + "_scale"] = scale
    series = scatters if kind == "scatter" else drawn
    for i, artist in enumerate(series):
        if kind == "scatter":
            xy = artist.get_offsets()
            xs, ys = [p[0] for p in xy], [p[1] for p in xy]
        else:
            xs, ys = list(artist.get_xdata()), list(artist.get_ydata())
        xs, ys = xs[:_MAX_CHART_POINTS], ys[:_MAX_CHART_POINTS]
        xs = _axis_values(ax, "x", xs)[0]
        ys = _axis_values(ax, "y", ys)[0]
        chart["elements"].append({"label": _label(artist, i), "points": [list(p) for p in zip(xs, ys)]})
    return chart


def _chart_of(figure):
    try:
        charts = [c for c in (_axes_chart(ax) for ax in figure.get_axes() if ax.get_visible()) if c]
        if not charts:
            return None
        if len(charts) == 1:
            return json.dumps(charts[0], default=str)
        suptitle = getattr(figure, "_suptitle", None)
        return json.dumps({"type": "superchart", "title": _text(suptitle), "elements": charts},
                          default=str)
    except Exception:
        return None


def _add_chart_formatter(shell):
    from IPython.core.formatters import BaseFormatter
    from traitlets import Unicode

    class ChartFormatter(BaseFormatter):
        format_type = Unicode(CHART_MIME)
        print_method = Unicode("_repr_codebox_chart_")

        def pop(self, typ, *default):
            # The inline backend, as it starts, pops Figure from every formatter (to set up its
            # own image formats); this one keeps it.
            if (getattr(typ, "__module__", None), getattr(typ, "__name__", None)) == \
                    ("matplotlib.figure", "Figure"):
                return default[0] if default else None
            return super().pop(typ, *default)

    formatter = ChartFormatter(parent=shell.display_formatter)
    shell.display_formatter.formatters[CHART_MIME] = formatter
    formatter.for_type_by_name("matplotlib.figure", "Figure", _chart_of)


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
    shell = Shell.instance(config=c, displayhook_class=Hook, display_pub_class=Publisher)
    _add_chart_formatter(shell)
    return shell


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
