"""`builder matrix`: the cells as a table, JSON or GitHub rows, --match and --explain, and its usage errors."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from testkit.matrices import ONE_CPU
from tests.fakes.checkout import DATA, ROOT, builder_cli


def test_matrix_json_lists_resolved_cells() -> None:
    proc = builder_cli("matrix", "--matrix", str(DATA / "e2e.yaml"), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["tag"] for r in rows] == ["cpu_debian12_py3.11_torch2.13.0_runtime",
                                        "cpu_debian12_py3.11_torch2.13.0_devel",
                                        "cpu_debian12_py3.11_torch2.13.0_broken"]
    assert rows[0]["python"] == "3.11" and rows[0]["rocm"] is None
    assert rows[2]["expect_torch"] == "2.12.0"


def test_unknown_format_is_bad_input() -> None:
    proc = builder_cli("matrix", "--matrix", str(DATA / "e2e.yaml"), "--format", "xml")
    assert proc.returncode == 2 and "unknown format" in proc.stderr


def test_github_format_is_one_line_of_strategy_matrix_json_one_row_per_combination() -> None:
    whole = builder_cli("matrix", "--matrix", "matrix.yaml", "--format", "github", "--runner-disk", "10T")
    assert whole.returncode == 0, whole.stderr
    assert whole.stdout.count("\n") == 1
    rows = json.loads(whole.stdout)["include"]
    assert len(rows) == 37 and sum(r["images"] for r in rows) == 214
    assert len({t for r in rows for t in r["cells"].split()}) == 214
    assert set(rows[0]) == {"group", "groups", "cells", "images", "os", "platform", "python", "torch", "channel",
                            "peak_disk", "runner"}
    assert all(r["groups"] == r["group"] for r in rows), "one combination per row while they fit"
    jobs = []
    for shard in ("1/2", "2/2"):
        proc = builder_cli("matrix", "--matrix", "matrix.yaml", "--format", "github", "--shard", shard,
                           "--runner-disk", "10T")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.count("\n") == 1
        jobs += json.loads(proc.stdout)["include"]
    assert sorted(j["group"] for j in jobs) == sorted(r["group"] for r in rows)
    assert builder_cli("matrix", "--format", "github", "--shard", "3/2").returncode == 2


def test_match_selects_cells_by_glob() -> None:
    proc = builder_cli("matrix", "--matrix", "matrix.yaml", "--format", "json", "--match", "cpu_*_runtime")
    assert [c["tag"] for c in json.loads(proc.stdout)] == [
        "cpu_ubuntu24.04_py3.12_torch2.14.1_runtime", "cpu_ubuntu22.04_py3.10_torch2.14.1_runtime",
        "cpu_debian12_py3.11_torch2.14.1_runtime", "cpu_debian13_py3.13_torch2.14.1_runtime"]


def test_explain_lists_every_dropped_cell_with_its_reason(tmp_path: Path) -> None:
    m = tmp_path / "m.yaml"
    m.write_text("matrix:\n  os: [ubuntu-24.04]\n  platform: [rocm7.2, rocm6.4]\n  torch: ['2.13.0']\n"
                 "  gfx: [all]\nexclude:\n  - {platform: rocm7.2}\n")
    proc = builder_cli("matrix", "--matrix", str(m), "--explain")
    assert proc.returncode == 2  # everything dropped: nothing to build is an error, with the reason
    assert "no cells that can be built" in proc.stderr
    m.write_text("matrix:\n  os: [ubuntu-24.04]\n  platform: [rocm7.2, rocm6.4]\n  torch: ['2.13.0']\n"
                 "  gfx: [all]\n  flavor: [runtime, devel]\nexclude:\n  - {flavor: devel}\n")
    proc = builder_cli("matrix", "--matrix", str(m), "--explain")
    assert proc.returncode == 0, proc.stderr
    assert "rocm7.2_ubuntu24.04_py3.12_torch2.13.0_all_runtime" in proc.stdout
    assert ("channel-wheels: torch 2.13 has no wheels for ROCm 6.4 on the pytorch.org index; it has 7.1, 7.2"
            in proc.stdout)
    assert "exclude[0]: excluded by the matrix (line 8)" in proc.stdout
    # one line per distinct reason with its count and an example tag, then the count per rule
    assert "2 cells: rocm7.2_ubuntu24.04_py3.12_torch2.13.0_all_devel and 1 more" in proc.stdout
    assert "1 cell: rocm6.4_ubuntu24.04_py3.12_torch2.13.0_all_runtime\n" in proc.stdout
    assert proc.stdout.rstrip().endswith(
        "cells dropped per rule (a cell may break several): exclude[0] 2, channel-wheels 1")
    data = json.loads(builder_cli("matrix", "--matrix", str(m), "--explain", "--format", "json").stdout)
    assert [c["tag"] for c in data["cells"]] == ["rocm7.2_ubuntu24.04_py3.12_torch2.13.0_all_runtime"]
    assert {(d["tag"], d["rule"]) for d in data["dropped"]} == {
        ("rocm6.4_ubuntu24.04_py3.12_torch2.13.0_all_runtime", "channel-wheels"),
        ("rocm7.2_ubuntu24.04_py3.12_torch2.13.0_all_devel", "exclude[0]"),
        ("rocm6.4_ubuntu24.04_py3.12_torch2.13.0_all_devel", "exclude[0]")}


def test_overridden_include_is_listed_with_the_maintainers_reason(tmp_path: Path) -> None:
    m = tmp_path / "m.yaml"
    m.write_text(ONE_CPU + "include:\n"
                 "  - {os: ubuntu-24.04, platform: rocm6.4, torch: '2.13.0', gfx: all,\n"
                 "     override: {reason: 'nightly wheels exist on our mirror'}}\n")
    proc = builder_cli("matrix", "--matrix", str(m))
    assert proc.returncode == 0, proc.stderr
    assert "breaks channel-wheels" in proc.stdout and "built because: nightly wheels exist on our mirror" in proc.stdout
    data = json.loads(builder_cli("matrix", "--matrix", str(m), "--explain", "--format", "json").stdout)
    assert data["overridden"][0]["override"] == "nightly wheels exist on our mirror"


@pytest.mark.parametrize(("args", "option"), [
    (["--shard", "1/2"], "--shard"), (["--format", "json", "--shard", "1/2"], "--shard"),
    (["--format", "github", "--explain"], "--explain"), (["--format", "yaml"], "--format")])
def test_options_that_do_not_apply_are_command_line_errors(args: list[str], option: str) -> None:
    proc = builder_cli("matrix", "--matrix", str(DATA / "e2e.yaml"), *args)
    assert proc.returncode == 2
    assert f"(command line): {option}:" in proc.stderr and "e2e.yaml" not in proc.stderr


def test_the_cell_table_stays_readable_at_80_columns() -> None:
    from rich.console import Console

    from builder.cli import console
    from builder.cli.matrix import print_cells
    from builder.matrix.expand import expand_matrix

    recording = Console(width=80, file=io.StringIO(), record=True)
    original = console.out
    console.out = recording
    try:
        print_cells(expand_matrix(ROOT / "matrix.yaml"), "matrix.yaml")
    finally:
        console.out = original
    rows = [line for line in recording.export_text().splitlines() if line.startswith("│")]
    assert rows and all(len(line) <= 80 for line in rows)
    first_lines = [line for line in rows if "│ pytorch │" in line or "│ therock │" in line]
    assert len(first_lines) == 214  # every cell shows its channel, torch, companions and user: no blank cells


def test_a_match_that_selects_nothing_is_bad_input_with_the_closest_tags() -> None:
    typo = "cpu_debian12_py3.11_torch2.13.0_runtme"
    proc = builder_cli("matrix", "--matrix", str(DATA / "e2e.yaml"), "--match", typo)
    assert proc.returncode == 2
    assert "matches no cell" in proc.stderr and "closest tags: cpu_debian12_py3.11_torch2.13.0_runtime" in proc.stderr
    assert builder_cli("matrix", "--matrix", str(DATA / "e2e.yaml"), "--match", "^cpu.*$").returncode == 2  # no regex


def test_a_match_naming_a_gfx_target_says_which_family_holds_it() -> None:
    proc = builder_cli("matrix", "--matrix", "matrix.yaml", "--match", "*gfx942*")
    assert proc.returncode == 2
    assert "gfx942 is a target of family gfx94X-dcgpu" in proc.stderr


def test_runner_disk_splits_the_largest_combinations_and_every_row_fits_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from builder.cli.app import app
    from builder.publish import sizes

    # Where a split can help (a wave's new bytes at 0.4 of what they install: tests/publish/test_rows_guards.py says
    # why), TheRock 10.0's 30-image rows peak at about 35.6 GiB: 35G splits them.
    monkeypatch.setattr(sizes, "NEW_FACTOR", 0.4)
    proc = CliRunner().invoke(app, ["matrix", "--matrix", str(ROOT / "matrix.yaml"), "--format", "github",
                                    "--runner-disk", "35G", "--runner", "big-disk", "--match", "rocm10.0_*"])
    assert proc.exit_code == 0, proc.output
    found = json.loads(proc.stdout)["include"]
    assert all(isinstance(r["peak_disk"], int) and r["peak_disk"] <= 35 << 30 for r in found)
    assert {r["runner"] for r in found} == {"big-disk"}
    assert len(found) > 8 and sum(r["images"] for r in found) == 144
    assert max(r["images"] for r in found) < 30, "the 30-image combinations are split"


@pytest.mark.parametrize("size", ["60", "6 0G", "60GB2", "-1G", "0", "60P", "1.5G", "G", "六十G", "9" * 17])
def test_a_runner_disk_that_is_no_size_is_bad_input_naming_the_option(size: str) -> None:
    proc = builder_cli("matrix", "--matrix", "matrix.yaml", "--format", "github", "--runner-disk", size)
    if size == "60":  # plain bytes are a size: 60 bytes, which no image fits
        assert proc.returncode == 2 and "alone needs" in proc.stderr
        return
    assert proc.returncode == 2 and "--runner-disk" in proc.stderr and "is not a size" in proc.stderr, proc.stderr


def test_an_image_no_runner_disk_holds_is_bad_input_naming_it_and_the_runner_it_needs() -> None:
    proc = builder_cli("matrix", "--matrix", "matrix.yaml", "--format", "github", "--runner-disk", "20G")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "alone needs" in proc.stderr and "larger runner" in proc.stderr and "_devel" in proc.stderr


def test_runner_disk_belongs_to_the_github_format() -> None:
    proc = builder_cli("matrix", "--matrix", "matrix.yaml", "--format", "json", "--runner-disk", "60G")
    assert proc.returncode == 2 and "--runner-disk" in proc.stderr
