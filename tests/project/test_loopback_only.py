"""Test and benchmark traffic stays on loopback: nothing is served on the docker0 bridge or any other address.

Builds run on the host's network (builder.build.bake.override), so a wheel index or registry a test starts on
127.0.0.1 is reachable from a RUN step; the engine scripts/setup.sh starts has no bridge at all.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from builder.build import bake
from tests.conftest import ROOT

SOURCES = sorted(p for p in [*(ROOT / "tests").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]
                 if p.name != Path(__file__).name)
SERVERS = {"HTTPServer", "ThreadingHTTPServer", "TCPServer", "ThreadingTCPServer", "WheelIndex", "create_server"}
LOOPBACK_RE = re.compile(r"^(127\.\d+\.\d+\.\d+|::1|localhost)$")
PASSED = {"host", "LOOPBACK"}


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
            if name not in SERVERS:
                continue
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


def test_nothing_looks_up_the_bridge_and_builds_use_the_host_network() -> None:
    for path in SOURCES:
        text = path.read_text()
        assert "docker0" not in text.replace("never on docker0", "").replace("on docker0 or", ""), path
        assert 'networks.get("bridge")' not in text, path
    assert json.dumps(bake.override({"t": "n"})) == '{"target": {"t": {"network": "host"}}}'
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert '"bridge": "none"' in setup and '"iptables": false' in setup
