"""Test and benchmark traffic stays on loopback: nothing is served on the docker0 bridge or any other address.

Builds run on the host's network (builder.buildkit.bake.override), so a wheel index or registry a test starts on
127.0.0.1 is reachable from a RUN step; the engine scripts/setup.sh starts has no bridge at all.

The primary check runs with the suite (tests/fakes/loopback.py): every bind, connect and sendto is checked, a
registry's config `addr:` is checked before it starts, an engine with a bridge fails the docker tests. The
lints here cover what a run does not reach: benchmarks, and code a run skips.
"""

from __future__ import annotations

import ast
import json
import re
import socket
from pathlib import Path

import pytest

from builder.buildkit import bake
from tests.fakes import loopback
from tests.fakes.checkout import ROOT
from tests.fakes.engine import bridges

SOURCES = sorted(p for p in [*(ROOT / "tests").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]
                 if p.name != Path(__file__).name)
SERVERS = {"HTTPServer", "ThreadingHTTPServer", "TCPServer", "ThreadingTCPServer", "WheelIndex", "create_server",
           "bind"}
LOOPBACK_RE = re.compile(r"^(127\.\d+\.\d+\.\d+|::1|localhost)$")
PASSED = {"host", "LOOPBACK"}
ADDR_RE = re.compile(r"(?:^|\n)[ \t]*addr:")  # a registry config's listen address, as YAML


def _host_argument(call: ast.Call) -> ast.expr | None:
    if not call.args:
        return None
    first = call.args[0]
    if isinstance(first, ast.Tuple) and first.elts:  # (host, port)
        return first.elts[0]
    return call.args[1] if len(call.args) > 1 and isinstance(call.func, ast.Name) and call.func.id == "WheelIndex" \
        else first


def test_every_server_a_test_or_benchmark_starts_binds_a_loopback_literal() -> None:
    bad = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name not in SERVERS or (name == "bind" and not (node.args and isinstance(node.args[0], ast.Tuple))):
                continue  # bind(path): an AF_UNIX socket
            host = _host_argument(node)
            if isinstance(host, ast.Constant) and isinstance(host.value, str) and LOOPBACK_RE.match(host.value):
                continue
            if (isinstance(host, ast.Name) and host.id in PASSED) or (isinstance(host, ast.Attribute)
                                                                       and host.attr in PASSED):
                continue  # a helper's parameter (its callers are checked here too) or the module's LOOPBACK
            bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)[:100]}")
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "LOOPBACK" for t in node.targets):
                assert isinstance(node.value, ast.Constant) and LOOPBACK_RE.match(str(node.value.value)), path
    assert bad == []


def _host_of(text: str) -> str:
    """`127.0.0.1:5000`, `127.0.0.1:` or `[::1]:5000` -> the host."""
    if text.startswith("["):
        return text[1:text.find("]")]
    return text.rsplit(":", 1)[0] if text.count(":") == 1 else text


def _loopback_start(node: ast.expr | None) -> bool:
    """A literal (or an f-string's literal start) that is a loopback address, e.g. f"127.0.0.1:{port}"."""
    if isinstance(node, ast.JoinedStr) and node.values:
        node = node.values[0]
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and \
        LOOPBACK_RE.match(_host_of(node.value)) is not None


def test_every_registry_config_a_test_or_benchmark_writes_listens_on_loopback() -> None:
    """What the run-time guard cannot see: a registry is another process. Its `addr:` is a loopback literal, or a
    name assigned a loopback f-string in the same file, or (tests/fakes/registries.py) checked by check_address
    before the registry starts."""
    bad = []
    for path in SOURCES:
        tree = ast.parse(path.read_text(), str(path))
        names = {t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) and _loopback_start(n.value)
                 for t in n.targets if isinstance(t, ast.Name)}
        checked = "check_address(" in path.read_text()
        inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
        for node in ast.walk(tree):
            if id(node) in inner:
                continue  # seen with its f-string
            parts = node.values if isinstance(node, ast.JoinedStr) else [node] if isinstance(node, ast.Constant) \
                else []
            for i, part in enumerate(parts):
                if not (isinstance(part, ast.Constant) and isinstance(part.value, str)
                        and ADDR_RE.search(part.value)):
                    continue
                rest = ADDR_RE.split(part.value, 1)[-1].strip()
                if rest:
                    ok = LOOPBACK_RE.match(_host_of(rest.split()[0])) is not None
                else:
                    after = parts[i + 1] if i + 1 < len(parts) else None
                    value = after.value if isinstance(after, ast.FormattedValue) else None
                    ok = checked or (isinstance(value, ast.Name) and value.id in names)
                if not ok:
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert bad == []


def test_nothing_looks_up_the_bridge_and_the_tests_build_on_the_host_network() -> None:
    for path in SOURCES:
        text = path.read_text()
        assert "docker0" not in text.replace("never on docker0", "").replace("on docker0 or", ""), path
        assert 'networks.get("bridge")' not in text, path
    assert json.dumps(bake.override({"t": "n"}, None, "host")) == '{"target": {"t": {"network": "host"}}}'
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert '"bridge": "none"' in setup and '"iptables": false' in setup
    assert "export RIF_BUILD_NETWORK=${RIF_BUILD_NETWORK:-host}" in setup  # its engine's builds: host network
    assert 'os.environ.setdefault("RIF_BUILD_NETWORK", "host")' in (ROOT / "tests" / "conftest.py").read_text()


# -- the run-time guard (tests/fakes/loopback.py), the primary check: every bind and connect of the suite --------

GUARDED = '''
import socket

import pytest

from tests.fakes.loopback import check_address


def test_bind_every_interface():
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))


def test_bind_the_empty_host():
    with socket.socket() as s:
        s.bind(("", 0))


def test_connect_off_loopback_even_when_the_error_is_caught():
    with socket.socket() as s:
        s.settimeout(0.01)
        try:
            s.connect(("192.0.2.1", 9))
        except Exception:
            pass


def test_connect_ex_off_loopback():
    with socket.socket() as s:
        s.connect_ex(("10.255.255.1", 9))


def test_sendto_off_loopback():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"x", ("192.0.2.1", 9))


def test_create_connection_off_loopback():
    with pytest.raises(Exception):
        socket.create_connection(("192.0.2.1", 9), timeout=0.01)


def test_a_registry_config_on_every_interface():
    check_address(":5000", "registry.yml")


def test_loopback_and_unix_sockets_pass():
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("localhost", port)), socket.socket() as other:
            other.connect_ex(("127.0.0.2", port))  # refused: nothing listens there, but it is loopback
    with socket.socket(socket.AF_UNIX) as unix:
        unix.bind("\\0rif-loopback-guard")  # an abstract name: a path under tmp_path is too long
    a, b = socket.socketpair()
    a.close(), b.close()
    check_address("127.0.0.1:5000", "registry.yml")
'''


def test_the_guard_fails_every_test_that_binds_or_connects_off_loopback(pytester: pytest.Pytester,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makepyfile(test_guarded=GUARDED)
    result = pytester.runpytest_subprocess("-p", "tests.fakes.loopback", "-p", "no:cacheprovider", "-rA")
    outcomes = {line.split()[1].split("::")[-1]: line.split()[0] for line in result.outlines
                if line.startswith(("PASSED ", "FAILED ", "ERROR "))}
    assert outcomes == {
        "test_bind_every_interface": "FAILED", "test_bind_the_empty_host": "FAILED",
        "test_connect_off_loopback_even_when_the_error_is_caught": "FAILED", "test_connect_ex_off_loopback": "FAILED",
        "test_sendto_off_loopback": "FAILED", "test_create_connection_off_loopback": "FAILED",
        "test_a_registry_config_on_every_interface": "FAILED", "test_loopback_and_unix_sockets_pass": "PASSED"}
    assert "192.0.2.1" in result.stdout.str() and "off loopback" in result.stdout.str()


@pytest.mark.parametrize(("family", "address", "ok"), [
    (socket.AF_INET, ("127.0.0.1", 80), True), (socket.AF_INET, ("127.8.9.10", 80), True),
    (socket.AF_INET6, ("::1", 80, 0, 0), True), (socket.AF_INET6, ("::ffff:127.0.0.1", 80, 0, 0), True),
    (socket.AF_INET, ("localhost", 80), True), (socket.AF_UNIX, "/run/docker.sock", True),
    (socket.AF_INET, ("0.0.0.0", 80), False), (socket.AF_INET, ("", 80), False),
    (socket.AF_INET6, ("::", 80, 0, 0), False), (socket.AF_INET, ("10.0.0.1", 80), False),
    (socket.AF_INET, ("172.17.0.1", 80), False), (socket.AF_INET6, ("fe80::1%lo", 80, 0, 0), False),
    (socket.AF_INET, ("example.invalid", 80), False),
])
def test_the_guard_allows_loopback_and_unix_sockets_only(family: int, address: object, ok: bool) -> None:
    assert loopback.allowed(family, address) is ok


def test_the_guard_is_on_in_this_suite() -> None:
    with socket.socket() as s, pytest.raises(loopback.OffLoopback, match="off loopback"):
        s.bind(("0.0.0.0", 0))
    assert loopback.taken() == ["socket.bind(('0.0.0.0', 0)) off loopback (family <AddressFamily.AF_INET: 2>)"]


def test_an_engine_with_any_bridge_network_is_refused_before_a_docker_test_runs() -> None:
    """The engine half of the guard (tests/fakes/engine.py docker_client): containers a test starts reach nothing
    but loopback only on an engine whose networks are host and none."""
    engine = [{"Name": "host", "Driver": "host"}, {"Name": "none", "Driver": "null"}]
    assert bridges(engine) == []
    assert bridges([*engine, {"Name": "bridge", "Driver": "bridge"},
                             {"Name": "ci", "Driver": "macvlan"}]) == ["bridge", "ci"]
