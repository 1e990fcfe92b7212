"""Pure logic of the stages: apt source parsing, wheelhouse commands, validation report parsing."""

from __future__ import annotations

import json
from pathlib import Path

from builder import baseimage, wheelhouse
from builder.matrix import load_matrix
from builder.validate import parse_junit, parse_smoke
from tests.conftest import DATA

DEB822 = """Types: deb
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
"""


def test_host_mirror_reads_deb822_sources(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(DEB822)
    assert baseimage.host_mirror("debian", tmp_path) == "http://mirror.example/debian"
    assert baseimage.host_mirror("ubuntu", tmp_path) is None


def test_host_mirror_reads_one_line_sources(tmp_path: Path) -> None:
    (tmp_path / "sources.list").write_text(
        "# comment\ndeb-src http://src.example/ubuntu noble main\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://archive.example/ubuntu/ noble main universe\n")
    assert baseimage.host_mirror("ubuntu", tmp_path) == "http://archive.example/ubuntu/"


def test_wheelhouse_downloads_per_python_and_index(tmp_path: Path) -> None:
    cells = load_matrix(DATA / "golden.yaml")  # therock rocm7.2 py3.12, cpu py3.11, pytorch rocm7.1 py3.10
    commands = wheelhouse.download_commands(cells, tmp_path, None, use_pip_config=False)
    assert len(commands) == 3
    by_python = {c[c.index("--python-version") + 1]: c for c in commands}
    rocm = by_python["3.12"]
    assert rocm[rocm.index("--index-url") + 1] == "https://repo.amd.com/rocm/whl-multi-arch/"
    assert rocm[-4:] == ["numpy", "torch[device-gfx942]==2.9.1", "torchaudio==2.9.1",
                         "torchvision[device-gfx942]==0.24.1"]
    assert "--only-binary=:all:" in rocm and "manylinux_2_28_x86_64" in rocm
    cpu = by_python["3.11"]
    assert cpu[cpu.index("--index-url") + 1] == "https://mirror.example.org/whl/cpu"
    assert cpu[-2:] == ["numpy", "torch==2.13.0"]
    local = wheelhouse.download_commands(cells, tmp_path, None, use_pip_config=True)
    assert all("--index-url" not in c for c in local)


JUNIT = """<testsuites><testsuite>
<testcase classname="t" name="test_ok[docker://abc]"/>
<testcase classname="t" name="test_bad[docker://abc]"><failure message="AssertionError: torch 2.13.0 is
installed, the cell expects 2.12.0">trace</failure></testcase>
<testcase classname="t" name="test_skipped"><skipped message="n/a"/></testcase>
<testcase classname="t" name="test_err"><error message="fixture broke">trace</error></testcase>
</testsuite></testsuites>"""


def test_parse_junit_maps_outcomes() -> None:
    checks = {c.name: c for c in parse_junit(JUNIT)}
    assert checks["ok"].status == "pass"
    assert checks["bad"].status == "fail"
    assert checks["bad"].detail.startswith("AssertionError: torch 2.13.0 is installed")
    assert checks["skipped"].status == "skip"
    assert checks["err"].status == "fail" and checks["err"].detail == "fixture broke"


def test_parse_smoke_report_and_exit_code() -> None:
    report = {"results": [{"name": "import", "status": "pass", "detail": "ok", "fix": ""},
                          {"name": "gpu", "status": "skip", "detail": "no GPU", "fix": ""}]}
    assert [c.status for c in parse_smoke(json.dumps(report), "", 0)] == ["pass", "skip"]
    # A non-zero exit with no failed check (e.g. --require-gpu without a GPU) is still a failure.
    assert parse_smoke(json.dumps(report), "", 3)[-1].status == "fail"
    garbage = parse_smoke("Traceback ...", "ModuleNotFoundError: torch", 1)
    assert garbage[0].status == "fail" and "ModuleNotFoundError" in garbage[0].detail
