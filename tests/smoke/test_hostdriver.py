"""torch_smoke.hostdriver's units at their edges: the bounded first-line reader, which driver a /sys tree shows, the
module-version grammar, a version's place among AMD's releases and the verdict at each side of the range.

The rows are builder.core.drivers.driver_range's (builder/data/drivers.yaml, from AMD's "AMD GPU Driver (amdgpu) |
Supported ROCm versions" table): ROCm 7.2 is 6.4 (module 6.12.12), 30.10 (6.14.14), 30.20 (6.16.6), 30.30 (6.16.13),
31.30 (6.19.4, not listed for 7.2), 31.40 (6.19.14), 31.50 (module not known); ROCm 6.4 ends at 30.30. Verdicts seen
through diagnose() are in tests/smoke/test_diagnostics_host.py.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from builder.core.drivers import driver_range
from builder.smoke.torch_smoke import hostdriver
from builder.smoke.torch_smoke.hostdriver import HostDriver, Verdict
from tests.fakes.hangs import alarm


def table(line: str) -> dict[str, Any]:
    found = driver_range(line)
    assert found is not None, line
    return found


R72 = table("7.2")
R64 = table("6.4")
ROWS72 = R72["releases"]


# -- read_small and read_host_driver -----------------------------------------------------------------------------------

def test_read_small_gives_the_first_line_stripped_and_at_most_128_characters(tmp_path: Path) -> None:
    (tmp_path / "v").write_text("  6.16.13  \nsecond line\n")
    assert hostdriver.read_small(tmp_path / "v") == "6.16.13"
    (tmp_path / "v").write_text("7" * 129 + "\n")
    assert hostdriver.read_small(tmp_path / "v") == "7" * 128
    (tmp_path / "v").write_text("")
    assert hostdriver.read_small(tmp_path / "v") == ""


def test_read_small_reads_4096_bytes_and_no_more(tmp_path: Path) -> None:
    (tmp_path / "v").write_text(" " * 4095 + "x\n")
    assert hostdriver.read_small(tmp_path / "v") == "x"
    (tmp_path / "v").write_text(" " * 4096 + "x\n")  # the 4097th byte is never read
    assert hostdriver.read_small(tmp_path / "v") == ""


def test_read_small_never_opens_what_is_not_a_regular_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    with alarm(AssertionError("read_small waited on a FIFO")):
        assert hostdriver.read_small(tmp_path / "fifo") is None
    assert hostdriver.read_small(tmp_path / "dir") is None
    assert hostdriver.read_small(tmp_path / "missing") is None


def write(root: Path, path: str, text: str) -> None:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(text)


def test_a_version_file_is_amds_packaged_driver(tmp_path: Path) -> None:
    write(tmp_path, "sys/module/amdgpu/version", "6.19.14.31400000\n")
    write(tmp_path, "proc/sys/kernel/osrelease", "6.8.0-60-generic\n")
    assert hostdriver.read_host_driver(tmp_path) == HostDriver("packaged", "6.19.14.31400000")


def test_the_module_without_a_version_file_is_the_in_kernel_driver_named_by_the_kernel(tmp_path: Path) -> None:
    (tmp_path / "sys/module/amdgpu").mkdir(parents=True)
    assert hostdriver.read_host_driver(tmp_path) == HostDriver("in-kernel", "")
    write(tmp_path, "proc/sys/kernel/osrelease", "6.8.0-60-generic\n")
    assert hostdriver.read_host_driver(tmp_path) == HostDriver("in-kernel", "6.8.0-60-generic")
    os.mkfifo(tmp_path / "sys/module/amdgpu/version")  # planted: not waited on, not a version
    with alarm(AssertionError("read_host_driver waited on a FIFO")):
        assert hostdriver.read_host_driver(tmp_path).kind == "in-kernel"


def test_no_module_folder_is_no_driver(tmp_path: Path) -> None:
    write(tmp_path, "proc/sys/kernel/osrelease", "6.8.0-60-generic\n")
    assert hostdriver.read_host_driver(tmp_path) == HostDriver("none", "")


# -- the version grammar and place() -------------------------------------------------------------------------------

@pytest.mark.parametrize(("version", "code"), [("6.19.14.31400000", "31.40"), ("6.14.14.30100000", "30.10"),
                                               ("6.19.14.03150000", "3.15"), ("6.16.13", None),
                                               ("6.19.14.3140000", None), ("6.19.14.314000000", None), ("", None)])
def test_the_release_a_newer_package_appends_is_read_from_eight_digits(version: str, code: str | None) -> None:
    assert hostdriver.release_code(version) == code


@pytest.mark.parametrize(("version", "readable"), [
    ("6.16.13", True), ("9999.9999.999999", True), ("10000.1.1", False), ("6.10000.1", False),
    ("6.1.1000000", False), ("6.8.0-" + "a" * 64, True), ("6.8.0-" + "a" * 65, False), ("6.8", False),
    ("6.8.0 ", False), ("v6.8.0", False)])
def test_a_module_version_is_read_only_within_its_grammar(version: str, readable: bool) -> None:
    assert (hostdriver.place(version, ROWS72) is not None) is readable


@pytest.mark.parametrize(("version", "at"), [
    ("6.12.12", (0, 0)),  # the first row's own module
    ("6.12.1", (0, 0)),  # an earlier package of the same line is that release
    ("6.11.99", (-1, 0)),  # just before the first row
    ("6.16.1", (2, 2)), ("6.16.12", (2, 2)), ("6.16.13", (3, 3)),  # 30.20 up to 30.30's module, then 30.30
    ("6.17.0", (3, 4)),  # between 30.30 and 31.30
    ("6.99.0", (5, 7)),  # past the last known module: up to the end of the table
    ("6.19.14.31500000", (6, 6)),  # an appended release is looked up by its name, module or not
    ("6.19.14.31450000", (5, 6)),  # 31.45: between 31.40 and 31.50
    ("6.19.14.06000000", (-1, 0)),  # release 6.00: before 6.4
    ("6.19.14.32000000", (6, 7)),  # release 32.00: after every row
])
def test_a_version_is_placed_among_the_rows(version: str, at: tuple[int, int]) -> None:
    assert hostdriver.place(version, ROWS72) == (float(at[0]), float(at[1]))


# -- verdict ----------------------------------------------------------------------------------------------------------

def packaged(version: str) -> HostDriver:
    return HostDriver("packaged", version)


@pytest.mark.parametrize(("version", "driver", "status", "words"), [
    ("6.12.12", R72, "fits", "is AMD GPU Driver 6.4, supported with ROCm 7.2"),  # the oldest supported
    ("6.11.99", R72, "below", "older than the drivers ROCm 7.2 is supported with"),  # just below it
    ("6.19.14.31500000", R72, "fits", "is AMD GPU Driver 31.50"),  # the newest supported, known by its release
    ("6.19.14.31510000", R72, "above", "newer than the drivers AMD states ROCm 7.2 for"),  # just past it
    ("6.16.13", R64, "fits", "is AMD GPU Driver 30.30, supported with ROCm 6.4"),  # 6.4's newest
    ("6.17.0", R64, "above", "newer than the drivers AMD states ROCm 6.4 for"),  # just past it
    ("6.10.4", R64, "fits", "is AMD GPU Driver 6.3"),
    ("6.6.0", R64, "below", "older than the drivers ROCm 6.4 is supported with"),  # before 6.1's 6.7.0
    ("6.17.0", R72, "not-stated", "lies inside amdgpu 6.4.x-31.50.x"),  # after 30.30, before 31.30 (not listed)
    ("6.19.4", R72, "not-stated", "no row saying it supports ROCm 7.2"),  # 31.30: left out for 7.2
    ("6.25.1", R72, "not-stated", "newer than every driver of amdgpu 6.4.x-31.50.x whose module version is known"),
    ("six", R72, "unknown", "not a version this check can read"),
])
def test_the_verdict_at_each_side_of_the_range(version: str, driver: dict[str, object], status: str,
                                               words: str) -> None:
    found = hostdriver.verdict(packaged(version), driver)
    assert found.status == status and words in found.detail, found


def test_below_and_above_name_the_newest_supported_driver_as_the_fix() -> None:
    assert "AMD GPU Driver 31.50" in hostdriver.verdict(packaged("6.11.99"), R72).fix
    assert "AMD GPU Driver 30.30" in hostdriver.verdict(packaged("6.17.0"), R64).fix
    assert "newer ROCm line" in hostdriver.verdict(packaged("6.17.0"), R64).fix


def test_no_range_no_driver_in_kernel_and_an_unstated_line() -> None:
    assert hostdriver.verdict(packaged("6.16.13"), None).status == "unknown"
    assert hostdriver.verdict(packaged("6.16.13"), {}).status == "unknown"
    none = hostdriver.verdict(HostDriver("none", ""), R72)
    assert none.status == "no-driver" and "amdgpu-dkms 6.4.x-31.50.x for ROCm 7.2" in none.fix
    kernel = hostdriver.verdict(HostDriver("in-kernel", "6.8.0-60-generic"), R72)
    assert kernel.status == "in-kernel" and "kernel 6.8.0-60-generic" in kernel.detail
    assert "kernel ?" in hostdriver.verdict(HostDriver("in-kernel", ""), R72).detail
    unstated = hostdriver.verdict(packaged("6.16.13"), table("7.13"))
    assert unstated.status == "not-stated" and "recommends the latest AMDGPU driver" in unstated.detail


def test_rows_outside_the_release_grammar_are_dropped_not_crashed_on() -> None:
    hostile = {**R72, "releases": [{"release": "31.40; rm -rf /", "module": "6.19.14", "supported": True},
                                   {"release": "1234.5", "module": "6.19.14", "supported": True}, "not a row",
                                   *ROWS72]}
    assert hostdriver.verdict(packaged("6.19.14.31400000"), hostile).status == "fits"
    only_bad = {**R72, "releases": [{"release": "x", "module": "6.19.14", "supported": True}]}
    assert hostdriver.verdict(packaged("6.19.14"), only_bad).status == "not-stated"


@pytest.mark.parametrize(("status", "fits"), [("fits", True), ("below", False), ("above", False),
                                              ("not-stated", None), ("in-kernel", None), ("no-driver", None),
                                              ("unknown", None)])
def test_fits_is_decided_only_where_amds_table_decides(status: str, fits: bool | None) -> None:
    assert Verdict(status, "").fits is fits
