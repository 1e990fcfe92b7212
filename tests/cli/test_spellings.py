"""builder.cli.spellings: the old spellings of publish's modes still work for one release, each with a one-line
notice on stderr naming the new command; none of them is an option of `publish` (nor listed in its --help)."""

from __future__ import annotations

import io
import json
import re

import pytest
import typer
from typer.testing import CliRunner

from builder.cli import spellings, stages
from builder.cli.app import app
from testkit.scripted_registry import Start
from testkit.stored_registry import Store
from tests.fakes import consoles
from tests.fakes.checkout import builder_cli
from tests.fakes.elsewhere import EXAMPLE, elsewhere

VALUED = frozenset({"--matrix", "-m", "--registry", "--match", "--cell", "--builder", "--format", "--record"})
__all__ = ["elsewhere"]  # the fixture, used by name


@pytest.fixture
def said(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    return consoles.capture(monkeypatch, "err")


@pytest.mark.parametrize(("args", "command", "rest"), [
    (["-m", "m.yaml", "--plan", "--format", "json"], "plan", ["-m", "m.yaml", "--format", "json"]),
    (["--dry-run", "--registry", "r/ns"], "plan", ["--registry", "r/ns"]),
    (["--shared-stages", "--registry", "r/ns", "--cell", "a"], "stages", ["--cell", "a"]),
    (["--shared-stages", "--registry=r/ns", "--gpu"], "stages", []),
    (["--plan", "--gpu", "--builder", "b", "--match", "x*"], "plan", ["--match", "x*"]),
    (["--plan", "--no-push"], "plan", ["--no-push"]),  # no option of plan: refused by it, as the clash was
    (["-q", "--cell", "a"], "publish", ["--cell", "a"]),
])
def test_an_old_spelling_is_the_new_command_with_one_notice(args: list[str], command: str, rest: list[str],
                                                            said: io.StringIO) -> None:
    assert spellings.route(args, VALUED) == (command, rest)
    lines = said.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("notice: `builder publish ") and "next release" in lines[0]
    assert f"`builder {command}`" in lines[0]


@pytest.mark.parametrize(("args", "command", "rest", "notices"), [
    (["--release", "--cell", "a"], "publish", ["--by-family", "--cell", "a"], 1),
    (["--cell", "a", "--release", "--release"], "publish", ["--cell", "a", "--by-family", "--by-family"], 1),
    (["-q", "--release"], "publish", ["--by-family"], 2),  # two old spellings: a notice each
    (["--plan", "--release"], "plan", [], 1),  # an option plan ignored, dropped with it as before
])
def test_an_old_option_name_is_the_new_name_with_one_notice(args: list[str], command: str, rest: list[str],
                                                            notices: int, said: io.StringIO) -> None:
    assert spellings.route(args, VALUED) == (command, rest)
    lines = said.getvalue().splitlines()
    assert len(lines) == notices and all(line.startswith("notice: ") and "next release" in line for line in lines)
    renamed = "notice: `builder publish --release` is now `builder publish --by-family`"
    assert sum(line.startswith(renamed) for line in lines) == (command == "publish")


def test_publish_release_runs_publish_by_family_with_the_notice(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[object] = []

    def run(todo: object, options: object, *rest: object) -> int:
        seen.append(options)
        return 0

    monkeypatch.setattr("builder.cli.publish.runs.run", run)
    result = CliRunner().invoke(app, ["publish", "-m", str(EXAMPLE), "--registry", "127.0.0.1:1/ns", "--release"])
    assert result.exit_code == 0, result.output
    (options,) = seen
    assert options.bake.by_family is True  # type: ignore[attr-defined]
    assert result.stderr.count("notice:") == 1
    assert "`builder publish --release` is now `builder publish --by-family`" in result.stderr


@pytest.mark.parametrize("args", [
    ["--match", "--plan"],  # a value, not the flag
    ["--match", "--release"],  # a value, not the old option
    ["--cell", "a", "--", "--plan"],
    ["--no-push", "--registry", "r/ns"],
    ["--plan", "--shared-stages"],  # two modes at once: publish refuses both as unknown
])
def test_what_spells_nothing_old_is_publish_unchanged_and_silent(args: list[str], said: io.StringIO) -> None:
    assert spellings.route(args, VALUED) == ("publish", args)
    assert said.getvalue() == ""


@pytest.mark.usefixtures("elsewhere")
@pytest.mark.parametrize("old", [["publish", "--plan"], ["publish", "--dry-run"], ["publish", "--plan", "-q"]])
def test_publish_plan_prints_what_plan_prints_plus_the_notice(old: list[str], server: Start) -> None:
    scripted = server(Store().answer)
    args = ["-m", str(EXAMPLE), "--registry", f"{scripted.address}/rocm", "--format", "json"]
    new = CliRunner().invoke(app, ["plan", *args])
    then = CliRunner().invoke(app, [*old, *args])
    assert new.exit_code == then.exit_code == 0, then.output
    assert json.loads(then.stdout) == json.loads(new.stdout) and new.stderr == ""
    assert then.stderr.count("notice:") == 1 and "`builder plan`" in then.stderr


def test_publish_shared_stages_runs_stages_with_its_options(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[object] = []

    def run_stages(todo: object, options: object) -> int:
        seen.append(options)
        return 0

    monkeypatch.setattr(stages, "run_stages", run_stages)
    result = CliRunner().invoke(app, ["publish", "-m", str(EXAMPLE), "--registry", "r.io/ns", "--cache-registry",
                                      "r.io/ns", "--shared-stages", "--compression", "zstd"])
    assert result.exit_code == 0, result.output
    (options,) = seen
    assert options.compression == "zstd" and options.cache.ref == "r.io/ns/buildcache"  # type: ignore[attr-defined]
    assert "`builder publish --shared-stages` is now `builder stages`" in result.stderr


@pytest.mark.parametrize(("command", "own", "others"), [
    ("publish", {"--no-push", "--gpu", "--apptainer", "--by-family", "--progress", "--compression", "--record"},
     {"--plan", "--shared-stages", "--dry-run", "--quiet", "--release", "--format", "--move-tags", "--runner",
      "--runner-disk"}),
    ("plan", {"--format", "--move-tags", "--runner", "--runner-disk", "--record", "--registry"},
     {"--plan", "--no-push", "--gpu", "--apptainer", "--by-family", "--release", "--compression", "--builder",
      "--progress"}),
    ("stages", {"--cache-registry", "--compression", "--runner", "--runner-disk", "--builder", "--build-network"},
     {"--registry", "--record", "--no-push", "--gpu", "--by-family", "--release", "--format", "--move-tags",
      "--progress"}),
])
def test_each_option_is_only_on_its_command_and_its_help(command: str, own: set[str], others: set[str]) -> None:
    params = typer.main.get_command(app).commands[command].params  # type: ignore[attr-defined]
    names = {name for p in params for name in p.opts}
    assert own <= names and not names & others, names & others
    listed = set(re.findall(r"^\W+(--[a-z-]+)", builder_cli(command, "--help").stdout, re.M))  # the options' rows
    assert own <= listed and not listed & others, listed & others
