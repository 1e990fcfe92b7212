"""The CLI's contract: every subcommand documented, exit 2 on bad input before anything is built or pushed."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.matrices import ONE_CPU
from tests.fakes.checkout import DATA, ROOT, builder_cli

COMMANDS = ["matrix", "render", "build", "plan", "stages", "publish", "test", "push", "base", "wheelhouse"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_subcommand_explains_itself(command: str) -> None:
    proc = builder_cli(command, "--help")
    assert proc.returncode == 0
    assert "Usage:" in proc.stdout and len(proc.stdout) > 200


def test_every_command_is_registered_in_the_order_help_lists_them() -> None:
    """The commands live in their group's module (builder/cli/<group>.py); app.py registers them, in this order."""
    from typer.testing import CliRunner

    from builder.cli.app import app

    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    listed = result.output.split("Commands")[1].splitlines()
    # A command's row starts at the border; a wrapped line of its help is indented past it.
    assert [line.split()[1] for line in listed if line.startswith("│ ") and not line.startswith("│  ")] == [
        "matrix", "render", "build", "plan", "stages", "publish", "push", "test", "base", "prune", "lock", "wheelhouse",
        "catalog", "diff", "reproduce", "which"]


def test_bad_matrix_exits_2_naming_file_line_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(ONE_CPU + "  flavour: [runtime]\n")
    for command in (["matrix"], ["render", "--out", str(tmp_path / "out")], ["build"], ["wheelhouse"]):
        proc = builder_cli(*command, "--matrix", str(bad))
        assert proc.returncode == 2, command
        assert f"{bad}:5: matrix.flavour: unknown key" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_error_text_with_brackets_is_printed_verbatim(tmp_path: Path) -> None:
    """Problems quote regexes like [a-z_]; the console must not eat them as markup."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("user: 'root;id'\n" + ONE_CPU)
    proc = builder_cli("matrix", "--matrix", str(bad))
    assert proc.returncode == 2
    assert "'root;id' is not allowed here: it should match pattern '^[a-z_][a-z0-9_-]{0,31}$'" in proc.stderr


def test_every_kind_of_matrix_problem_is_reported_in_one_run(tmp_path: Path) -> None:
    m = tmp_path / "m.yaml"
    m.write_text("matrix:\n  os: [ubuntu-24.04]\n  platform: [rocm7.2]\n  torch: ['2.13.0']\n  gfx: [all]\n"
                 "exclude:\n  - {os: debian-12}\ninclude:\n"
                 "  - {os: ubuntu-24.04, platform: rocm6.4, torch: '2.13.0', gfx: all}\n"
                 "  - {os: ubuntu-24.04, platform: cpu, torch: '2.13.0', gfx: all}\n")
    proc = builder_cli("matrix", "--matrix", str(m))
    assert proc.returncode == 2
    assert f"{m}:7: exclude[0]: matches no cell" in proc.stderr  # an exclude problem
    assert f"{m}:10: include[1].gfx: a cpu cell has no gfx family" in proc.stderr  # a cell problem
    assert f"{m}:9: include[0]: torch 2.13 has no wheels for ROCm 6.4" in proc.stderr  # a compatibility problem


INSECURE_COMMANDS = [["publish", "--matrix", str(DATA / "e2e.yaml"), "--registry", "reg.lan:5000/ns"],
                     ["plan", "--matrix", str(DATA / "e2e.yaml"), "--registry", "reg.lan:5000/ns"],
                     ["stages", "--matrix", str(DATA / "e2e.yaml"), "--cache-registry", "reg.lan:5000/ns"],
                     ["build", "--matrix", str(DATA / "e2e.yaml"), "--push", "--registry", "reg.lan:5000/ns"],
                     ["push", "some-image", "--registry", "reg.lan:5000/ns"],
                     ["catalog", "--registry", "reg.lan:5000/ns", "--out", "never-written"]]


@pytest.mark.parametrize("command", INSECURE_COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize("value", ["user:hunter2@reg.lan:5000", "https://reg.lan:5000", "reg.lan:5000/ns",
                                   "Reg.lan:5000"])
def test_every_registry_command_checks_insecure_registry_when_parsed(command: list[str], value: str) -> None:
    proc = builder_cli(*command, "--insecure-registry", "reg.lan:5000", "--insecure-registry", value)
    assert proc.returncode == 2, proc.stderr
    assert "--insecure-registry" in proc.stderr and "Traceback" not in proc.stderr
    assert "hunter2" not in proc.stdout + proc.stderr  # nothing after an '@' is ever repeated
    assert not (ROOT / "never-written").exists()
