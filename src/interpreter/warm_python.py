# The waiting python3 of a prewarmed box (Box::Prewarm; the host side is warm_python.cc), run
# as `python3 -c <this file>`. It finishes its start-up, says so, and waits on stdin for one
# program, which it then runs as `python3 -c PROGRAM` would have: as __main__, sys.argv ['-c'],
# the traceback of an uncaught exception without a frame of this waiter and exit code 1,
# SystemExit(n) -> n. It imports nothing: sys and os are loaded at start-up anyway, so the
# program finds sys.modules as a cold python3 leaves it.
#
# On stdin, from the host:
#   "<N>\n", then a header of N bytes: fields separated by NUL bytes (none of them can hold
#   one): the program's size in bytes, "1" when the program has stdin ("0": /dev/null), the
#   working directory, then name, value, name, value... (the program's whole environment);
#   then the program's bytes; then, when it has stdin, the program's stdin up to its end.
# On stdout, written raw before the program runs (the host strips both and checks them):
#   READY once start-up is over, ACK once the program has been read (before that, the host may
#   still run the program elsewhere: this waiter died before it took it).
def _codebox_warm():
    import os
    import sys

    READY = b"\0codebox-warm:ready\0"
    ACK = b"\0codebox-warm:ack\0"
    main = sys.modules["__main__"].__dict__

    def read_exact(n):
        chunks = []
        while n > 0:
            chunk = os.read(0, min(n, 1 << 20))
            if not chunk:
                os._exit(0)  # the host went away without handing a program over
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    os.write(1, READY)
    digits = b""
    while not digits.endswith(b"\n"):
        if len(digits) > 12:
            os._exit(2)
        digits += read_exact(1)
    fields = read_exact(int(digits)).split(b"\0")
    code = read_exact(int(fields[0]))
    os.write(1, ACK)

    # The exec's environment and directory, as the agent would have set them for a cold one;
    # the environment set anew, in the host's order, so os.environ lists it as a cold one does.
    os.environb.clear()
    for name, value in zip(fields[3::2], fields[4::2]):
        os.environb[name] = value
    try:
        os.chdir(fields[2])
    except OSError as e:
        os.write(2, b"codebox-agent: chdir " + fields[2] + b": " +
                 os.strerror(e.errno).encode() + b"\n")
        os._exit(127)
    if fields[1] == b"0":
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        # sys.stdin was made on the pipe (not seekable, and its FileIO remembers): made anew
        # on /dev/null as the interpreter's start-up makes it.
        old = sys.stdin
        buffer = open(0, "rb", closefd=False)
        buffer.raw.name = "<stdin>"
        sys.stdin = sys.__stdin__ = type(old)(buffer, old.encoding, old.errors, "\n",
                                              old.line_buffering, old.write_through)
        sys.stdin.mode = "r"
        del old, buffer

    source = os.fsdecode(code)  # as python3 decodes its -c argument
    del code, fields, digits
    sys.orig_argv = ["python3", "-c", source]
    main.pop("_codebox_warm", None)  # the program's globals are a cold one's
    try:
        program = compile(source, "<string>", "exec")
        del source
        exec(program, main)
    except SystemExit:
        raise  # the interpreter handles it exactly as for a cold program
    except BaseException as e:
        tb = e.__traceback__.tb_next  # the program's own frames (none for a SyntaxError)
        e.__traceback__ = tb
        sys.last_type, sys.last_value, sys.last_traceback = type(e), e, tb
        hook = getattr(sys, "excepthook", None)
        try:
            if hook is None:
                raise RuntimeError("lost sys.excepthook")
            hook(type(e), e, tb)
        except BaseException as hook_error:
            print("Error in sys.excepthook:", file=sys.stderr)
            sys.__excepthook__(type(hook_error), hook_error, hook_error.__traceback__)
            print("\nOriginal exception was:", file=sys.stderr)
            sys.__excepthook__(type(e), e, tb)
        if isinstance(e, KeyboardInterrupt):
            # As the interpreter ends after an uncaught KeyboardInterrupt: finish (threads,
            # atexit, flush), then die by SIGINT.
            del e, tb
            if "threading" in sys.modules:
                sys.modules["threading"]._shutdown()
            import atexit
            import signal
            atexit._run_exitfuncs()
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except BaseException:
                    pass
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        raise SystemExit(1)


_codebox_warm()
