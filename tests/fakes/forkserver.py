"""Runs of the `builder` console entry point, forked from a server that has imported its libraries once.

A run of `python -m builder ...` spent about 1.4 s of its 1.5 s importing modules (typer, rich, pydantic, docker,
requests, jinja2, the package's pydantic models ...): most of the fast tier's time, over some 700 runs. The
server (one per test process, started on first use) imports what a run imports, except the command-line layer
(`builder.cli`: its consoles read the terminal and the environment when made) and the tests, and forks one
child per run. The child takes the run's arguments, working directory, environment and standard streams, puts
the working directory first on sys.path as `python -m` does, imports `builder.cli` fresh, runs `builder` as
`__main__` and exits as Python exits (atexit handlers, flushed streams, the SystemExit code): a new process,
whose changes die with it. No module of the package reads the environment when imported (only when called).

A run the server cannot stand in for exactly goes to a real subprocess instead: an environment whose interpreter
settings (PYTHON* but PYTHONPATH, LANG, LC_*) differ from the server's, or a working directory with a `builder`
package of its own (a copy of the checkout, which `python -m builder` would import instead).
RIF_TEST_FORK=0 turns it off. Forked runs share the server's str hash seed (PYTHONHASHSEED), as runs with that
variable set do.

The server is also run as a script: `python forkserver.py SOCKET PARENT_PID`.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import locale
import os
import resource
import runpy
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_MESSAGE = 1 << 20
# What decides how an interpreter starts (before any code runs): a run whose values differ is not forked.
INTERPRETER_VARS = ("PYTHON", "LANG", "LC_")
# Modules that read the environment when imported: left to each run to import.
IMPORTED_PER_RUN = ("typer.rich_utils", "builder.cli", "builder.__main__")


# -- the server ------------------------------------------------------------------------------------------------

def libraries() -> list[str]:
    """The modules a `builder` process imports, but its command-line layer's (asked of a real process once)."""
    code = "import builder.cli.app, json, sys; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    names: list[str] = json.loads(out)
    return [n for n in names if n.split(".")[0] not in ("tests", "testkit", "__main__")
            and not n.startswith(IMPORTED_PER_RUN)]


def serve(path: str, parent: int) -> None:
    for name in libraries():
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    sys.stdout.flush()
    sys.stderr.flush()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    listener.settimeout(5)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the waiters are reaped by the kernel
    while os.getppid() == parent:  # the test process is gone: so is its server
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            wait_for_run(conn)
        conn.close()
    shutil.rmtree(os.path.dirname(path), ignore_errors=True)


def wait_for_run(conn: socket.socket) -> None:
    """The waiter: forks the run, tells the client its pid, then its exit code as subprocess gives it."""
    conn.settimeout(None)
    message, fds, _, _ = socket.recv_fds(conn, MAX_MESSAGE, 3)
    request = json.loads(message)
    pid = os.fork()
    if pid == 0:
        conn.close()
        run(request, fds)
    for fd in fds:
        os.close(fd)
    conn.send(json.dumps({"pid": pid}).encode())
    _, status = os.waitpid(pid, 0)
    conn.send(json.dumps({"code": os.waitstatus_to_exitcode(status)}).encode())
    os._exit(0)


def run(request: dict[str, object], fds: list[int]) -> None:
    """The run itself: never returns; its SystemExit (or exception) ends this process as it ends `python -m`."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    cwd, env, args, limits = str(request["cwd"]), request["env"], request["args"], request["limits"]
    assert isinstance(env, dict) and isinstance(args, list) and isinstance(limits, dict)
    set_limits(limits)  # as a preexec_fn would set them, before the package's code runs
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:1] = [os.getcwd(), *extra]
    sys.argv = ["-m", *args]
    runpy.run_module("builder", run_name="__main__", alter_sys=True)
    raise SystemExit(0)


def set_limits(limits: Mapping[str, int] | None) -> None:
    """Resource limits ({"RLIMIT_AS": bytes}), soft and hard, in this process: a forked run's or a preexec_fn's."""
    for name, value in (limits or {}).items():
        resource.setrlimit(getattr(resource, name), (value, value))


# -- the client ------------------------------------------------------------------------------------------------

class Server:
    """One test process's server: started on first use, gone with the test process."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="rif-fork-")
        self.path = os.path.join(self.dir, "socket")
        self.env = dict(os.environ)
        with open(os.path.join(self.dir, "server.log"), "wb") as log:  # what a server that failed said
            self.process = subprocess.Popen([sys.executable, __file__, self.path, str(os.getpid())], cwd=ROOT,
                                            stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        self.ready = False
        self.owner = os.getpid()
        atexit.register(self.close)

    def close(self) -> None:
        if os.getpid() != self.owner:  # a forked child of the test process inherits the handler, not the server
            return
        with contextlib.suppress(OSError):
            self.process.kill()
            self.process.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def alive(self) -> bool:
        return self.process.poll() is None

    def connect(self) -> socket.socket:
        deadline_s = 120.0
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        while not self.ready:
            if self.process.poll() is not None:
                log = Path(self.dir, "server.log").read_text(errors="replace")
                raise RuntimeError(f"the fork server exited with {self.process.returncode}: {log}")
            try:
                conn.connect(self.path)
                self.ready = True
                return conn
            except (FileNotFoundError, ConnectionRefusedError):
                deadline_s -= 0.05
                if deadline_s <= 0:
                    raise
                threading.Event().wait(0.05)
        conn.connect(self.path)
        return conn

    def stands_in(self, cwd: Path, env: Mapping[str, str]) -> bool:
        def interpreter(e: Mapping[str, str]) -> dict[str, str]:
            return {k: v for k, v in e.items() if k.startswith(INTERPRETER_VARS) and k != "PYTHONPATH"}
        own_package = (cwd / "builder").is_dir() and cwd.resolve() != ROOT
        return not own_package and interpreter(env) == interpreter(self.env)

    def run(self, args: Sequence[str], cwd: Path, env: Mapping[str, str], timeout: float | None,
            limits: Mapping[str, int], stdin: int | None) -> tuple[int, bytes, bytes]:
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, self.connect() as conn:
            request = json.dumps({"args": list(args), "cwd": str(cwd), "env": dict(env), "limits": dict(limits)})
            if stdin is None:
                stdin = sys.stdin.fileno() if _usable_stdin() else devnull()
            socket.send_fds(conn, [request.encode()], [stdin, out.fileno(), err.fileno()])
            pid = json.loads(conn.recv(MAX_MESSAGE))["pid"]
            conn.settimeout(timeout)
            try:
                code = json.loads(conn.recv(MAX_MESSAGE))["code"]
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                raise subprocess.TimeoutExpired(["builder", *args], timeout or 0) from None
            out.seek(0)
            err.seek(0)
            return int(code), out.read(), err.read()


_SERVERS: dict[int, Server] = {}
_DEVNULL: list[int] = []
_STARTING = threading.Lock()  # a test's threads may start runs at once (tests/hostile/test_bad_matrix.py)


def _usable_stdin() -> bool:
    try:
        os.fstat(sys.stdin.fileno())
        return True
    except (OSError, ValueError, AttributeError):
        return False


def devnull() -> int:
    """One read-only descriptor of /dev/null for the process: a run's stdin where it should read nothing."""
    if not _DEVNULL:
        _DEVNULL.append(os.open(os.devnull, os.O_RDONLY))
    return _DEVNULL[0]


def server() -> Server | None:
    if os.environ.get("RIF_TEST_FORK", "1") == "0" or not hasattr(socket, "send_fds"):
        return None
    pid = os.getpid()
    with _STARTING:
        if pid not in _SERVERS or not _SERVERS[pid].alive():  # a server killed under a test: another
            _SERVERS[pid] = Server()
    return _SERVERS[pid]


def text(data: bytes) -> str:
    """As subprocess decodes a captured stream with text=True."""
    encoding = locale.getpreferredencoding(False)
    return data.decode(encoding).replace("\r\n", "\n").replace("\r", "\n")


def builder(args: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None, check: bool,
            timeout: float | None, limits: Mapping[str, int] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m builder ARGS` as subprocess.run(..., capture_output=True, text=True) gives it."""
    proc = builder_bytes(args, cwd=cwd, env=env, timeout=timeout, limits=limits)
    result = subprocess.CompletedProcess(proc.args, proc.returncode, text(proc.stdout), text(proc.stderr))
    if check:
        result.check_returncode()
    return result


def builder_bytes(args: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None, timeout: float | None,
                  limits: Mapping[str, int] | None = None,
                  stdin: int | None = None) -> subprocess.CompletedProcess[bytes]:
    """`python -m builder ARGS` as subprocess.run(..., capture_output=True) gives it; limits: resource limits
    (RLIMIT_AS: bytes) set in the run's process before it runs the package's code, as a preexec_fn does."""
    command = [sys.executable, "-m", "builder", *args]
    environ = dict(os.environ if env is None else env)
    forked = server()
    if forked is None or not forked.stands_in(cwd, environ):
        return subprocess.run(command, capture_output=True, cwd=cwd, env=env, timeout=timeout, stdin=stdin,
                              preexec_fn=(lambda: set_limits(limits)) if limits else None, check=False)
    code, out, err = forked.run(list(args), cwd, environ, timeout, limits or {}, stdin)
    return subprocess.CompletedProcess(command, code, out, err)


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
