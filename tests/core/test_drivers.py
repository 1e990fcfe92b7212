"""builder/data/drivers.yaml: AMD's driver/ROCm table as the factory reads it, and every ROCm line the factory builds
either has a stated range or says why not (never a guess)."""

from __future__ import annotations

from packaging.version import Version

from builder.core import drivers, facts
from builder.core.drivers import driver_range, range_text, rocm_line


def test_releases_and_their_module_versions_rise_together() -> None:
    table = drivers.drivers()
    modules = [Version(r.module) for r in table.releases if r.module]
    assert modules == sorted(modules) and len(set(modules)) == len(modules)
    assert [r.release for r in table.releases][-3:] == ["31.30", "31.40", "31.50"]


def test_every_line_the_factory_builds_has_a_range_or_a_reason() -> None:
    table = drivers.drivers()
    lines = {rocm_line(r) for minor in facts.compat().torch.values() for r in minor.pytorch.rocm}
    lines |= {rocm_line(line) for line in facts.compat().therock}
    for line in sorted(lines, key=Version):
        assert table.supported(str(line)) or str(line) in table.not_stated, line
        assert not (table.supported(str(line)) and str(line) in table.not_stated), line


def test_amds_rows_as_published() -> None:
    # ROCm/amdgpu-docs compatibility-matrix.rst: "30.30.x", "6.3.x, 6.4.x, 7.0.x, 7.1.x, 7.2.x, 7.14.x, 10.0.0"
    row = next(r for r in drivers.drivers().releases if r.release == "30.30")
    assert row.rocm == ("6.3", "6.4", "7.0", "7.1", "7.2", "7.14", "10.0") and row.module == "6.16.13"
    assert range_text("7.2") == "6.4.x-31.50.x" and range_text("5.4") == "5.3.x-5.6.x"
    assert range_text("7.12") == "not stated"


def test_a_cell_carries_its_span_with_the_releases_inside_it_marked() -> None:
    found = driver_range("7.2")
    assert found is not None
    assert [(r["release"], r["supported"]) for r in found["releases"]] == [
        ("6.4", True), ("30.10", True), ("30.20", True), ("30.30", True), ("31.30", False), ("31.40", True),
        ("31.50", True)]
    assert found["source"].startswith("https://instinct.docs.amd.com/") and found["not_stated"] is None
    therock = driver_range("7.11")
    assert therock is not None and therock["range"] is None and therock["releases"] == []
    assert "therock-7.11" in therock["not_stated"]
    assert driver_range(None) is None
