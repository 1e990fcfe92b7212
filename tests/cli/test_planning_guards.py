"""`builder plan`'s guards (issue 53, "Plans and rows"): `--format github` prints no row when the registry could
not decide an image (a workflow would start building from a partial plan), exiting 1 and naming the image;
`--runner-disk` sizes the rows of a plan (or the parts `builder stages` shares) and is no option of `publish`
(exit 2, before any work).

The registry is the scripted loopback one holding manifests in memory (testkit/stored_registry.py), refusing
the manifests of one image where a test says so."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from builder.cli.app import app
from builder.core import tags
from testkit.scripted_registry import Reply, Seen, Start, oci_error
from testkit.stored_registry import Store, publish_all
from tests.fakes.elsewhere import EXAMPLE, elsewhere
from tests.publish.test_planner import example_jobs

__all__ = ["elsewhere"]  # the fixture, used by name
pytestmark = pytest.mark.usefixtures("elsewhere")  # every test: the default --record in its folder, no engine


def publish(*args: str, command: str = "publish") -> tuple[int, str, str]:
    result = CliRunner().invoke(app, [command, "-m", str(EXAMPLE), *args], env={"COLUMNS": "300", "NO_COLOR": "1"})
    return result.exit_code, result.stdout, " ".join(result.output.split())


def test_github_rows_are_printed_only_when_every_image_was_decided(server: Start) -> None:
    store = Store()
    _, devel = example_jobs()
    refused = {*devel.tags, tags.immutable_tag(devel.tag, devel.content_hash)}

    def answer(seen: Seen) -> Reply:
        ref = seen.path.split("?")[0].rsplit("/manifests/", 1)
        return oci_error(403, "DENIED", "no") if len(ref) == 2 and ref[1] in refused else store.answer(seen)

    scripted = server(answer)
    code, stdout, output = publish("--format", "github", "--registry", f"{scripted.address}/rocm", command="plan")
    assert code == 1, output
    assert stdout.strip() == "" and '"include"' not in output
    assert f"plan failed {devel.tag}" in output
    decided = server(Store().answer)
    code, stdout, output = publish("--format", "github", "--registry", f"{decided.address}/rocm", command="plan")
    assert code == 0, output
    assert {t for r in json.loads(stdout)["include"] for t in r["cells"].split()} >= {devel.tag}


@pytest.mark.parametrize("args", [[], ["--no-push"], ["--by-family"]])
def test_runner_disk_is_no_option_of_publish(args: list[str]) -> None:
    code, _, output = publish("--registry", "127.0.0.1:1/ns", "--runner-disk", "60G", *args)
    assert code == 2, output
    assert "No such option: --runner-disk" in output


def test_runner_disk_with_plan_sizes_the_rows(server: Start) -> None:
    scripted = server(Store().answer)
    code, stdout, output = publish("--format", "github", "--runner-disk", "60G", "--registry",
                                   f"{scripted.address}/rocm", command="plan")
    assert code == 0, output
    rows = json.loads(stdout)["include"]
    assert rows and all(0 < r["peak_disk"] <= 60 << 30 for r in rows)



def table_row(stdout: str, tag: str) -> list[str]:
    """The cells of the table's row of this image (rich draws `│ a │ b │`)."""
    [line] = [line for line in stdout.splitlines() if line.startswith("│") and f" {tag} " in line]
    return [cell.strip() for cell in line.strip().strip("│").split("│")]


def test_the_text_plan_is_a_table_of_every_image_its_state_and_the_counts(server: Start) -> None:
    runtime, devel = todo = example_jobs()
    store = Store()
    registry = f"{server(store.answer).address}/rocm"
    code, stdout, output = publish("--registry", registry, command="plan")
    assert code == 0, output
    assert f"plan: publish to {registry}" in stdout
    assert [table_row(stdout, j.tag)[:2] for j in todo] == [[runtime.tag, "would-build"], [devel.tag, "would-build"]]
    assert "plan: 2 to build, 0 to re-tag, 0 unchanged" in stdout
    publish_all(store, todo)
    code, stdout, output = publish("--registry", registry, command="plan")
    assert code == 0, output
    assert [table_row(stdout, j.tag)[1] for j in todo] == ["would-skip", "would-skip"]
    assert "plan: 0 to build, 0 to re-tag, 2 unchanged" in stdout
    store.manifests["rocm/pytorch:latest"] = store.manifests[f"rocm/pytorch:{devel.tag}"]
    code, stdout, output = publish("--registry", registry, command="plan")
    assert code == 0, output
    assert "  would move latest" in stdout and "plan: 0 to build, 1 to re-tag, 1 unchanged" in stdout
    code, stdout, output = publish("--registry", registry, "--move-tags", command="plan")
    assert code == 0, output
    assert stdout.startswith(f"publish to {registry}") and "\n  moved latest\n" in stdout
    assert "plan: 0 to build, 1 to re-tag (moved), 1 unchanged" in stdout
