"""`builder plan` (builder.cli.planning): options checked first, the plan's counts, the workflow's rows."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builder.cli import planning
from builder.cli.app import app
from builder.core.errors import InputError
from builder.pipeline.jobs import Job, by_combination, matrix_jobs
from builder.publish import rows, sizes
from builder.publish.planner import Decision
from builder.render.sources import WheelSource
from testkit.matrices import cpu_matrix, write_matrix
from testkit.scripted_registry import Reply, Seen, Start, oci_error
from testkit.stored_registry import MANIFEST_TYPE, Store, publish_all
from tests.fakes.checkout import DATA, ROOT
from tests.fakes.elsewhere import EXAMPLE, elsewhere
from tests.publish.test_planner import example_jobs

__all__ = ["elsewhere"]  # the fixture, used by name
pytestmark = pytest.mark.usefixtures("elsewhere")  # every test: the default --record in its folder, no engine


def test_usage_errors_name_the_option() -> None:
    for args, option in ((["--format", "xml"], "--format"), (["--shard", "3/2"], "--shard"),
                         (["--runner-disk", "lots"], "--runner-disk"), (["--no-push"], "No such option: --no-push"),
                         (["--gpu"], "No such option: --gpu"), (["--compression", "zstd"], "No such option")):
        proc = CliRunner().invoke(app, ["plan", "-m", str(ROOT / "examples/local.yaml"), "--registry",
                                        "127.0.0.1:1/x", *args])
        assert proc.exit_code == 2 and option in proc.output, (args, proc.output)


@pytest.mark.parametrize("fmt", ["xml", "", "JSON", "text "])
def test_check_format_refuses_an_unknown_format(fmt: str) -> None:
    with pytest.raises(InputError) as exc:
        planning.check_format(fmt)
    assert exc.value.problems[0].key == "--format"


def test_check_format_passes_the_formats_of_a_plan() -> None:
    for fmt in planning.FORMATS:
        planning.check_format(fmt)


@pytest.fixture(scope="module")
def todo() -> list[Job]:
    return matrix_jobs(DATA / "golden.yaml", None, None, WheelSource())  # three combinations


def test_counts_every_action(todo: list[Job]) -> None:
    decisions = [Decision(todo[0], "build", "new"), Decision(todo[1], "skip", "same"),
                 Decision(todo[0], "error", "down")]
    assert planning.counts(decisions) == {"build": 1, "move-tags": 0, "skip": 1, "error": 1}


def test_github_rows_are_the_combinations_with_an_image_to_build_with_all_their_images(todo: list[Job]) -> None:
    combinations = by_combination(todo)
    first = next(iter(combinations))
    decisions = [Decision(j, "build" if j is combinations[first][0] else "skip", "") for j in todo]
    rows = json.loads(planning.github(decisions))["include"]
    assert [r["group"] for r in rows] == [first]
    assert sorted(rows[0]["cells"].split()) == sorted(j.tag for j in combinations[first])
    assert json.loads(planning.github([Decision(j, "skip", "") for j in todo])) == {"include": []}


# -- error paths and hostile answers (issue 39) ----------------------------------------
# `builder publish --plan`'s error paths, in process against a scripted registry (no engine): an image the
# registry could not decide exits 1 and is named; a tag move the registry refuses under --move-tags is that
# image's error (exit 1), never dropped; whatever a registry answers (status, headers, body), it ends as that
# image's error.


def plan(address: str, *extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["plan", "-m", str(EXAMPLE), "--registry", f"{address}/rocm",
                                      *extra], env={"COLUMNS": "300", "NO_COLOR": "1"})
    return result.exit_code, " ".join(result.output.split())


def faulty(store: Store, job: Job, reply: Reply) -> Callable[[Seen], Reply]:
    """The store's answers, except reply for every manifest request about job's tags."""
    names = {*job.tags, job.immutable_tag}

    def answer(seen: Seen) -> Reply:
        ref = seen.path.split("?")[0].rsplit("/manifests/", 1)
        return reply if len(ref) == 2 and ref[1] in names else store.answer(seen)
    return answer


def test_an_image_the_registry_cannot_decide_exits_1_and_is_named(server: Start) -> None:
    store = Store()
    runtime, devel = example_jobs()
    scripted = server(faulty(store, devel, oci_error(403, "DENIED", "no")))
    code, output = plan(scripted.address)
    assert code == 1, output
    assert f"plan failed {devel.tag}" in output and f"plan failed {runtime.tag}" not in output
    record = {i["tag"]: i["state"] for i in json.loads(Path("publish-record.json").read_text())["images"]}
    assert record == {runtime.tag: "would-build", devel.tag: "failed"}


@pytest.mark.parametrize("fmt", ["text", "json", "github"])
def test_every_format_exits_1_on_an_undecided_image(server: Start, fmt: str) -> None:
    store = Store()
    _, devel = example_jobs()
    scripted = server(faulty(store, devel, oci_error(403, "DENIED", "no")))
    code, output = plan(scripted.address, "--format", fmt)
    assert code == 1, output


def test_a_refused_move_is_that_image_s_error(server: Start) -> None:
    store = Store()
    runtime, devel = todo = example_jobs()
    publish_all(store, todo)
    store.manifests["rocm/pytorch:latest"] = store.manifests[f"rocm/pytorch:{devel.tag}"]

    def refuse_puts(seen: Seen) -> Reply:
        return oci_error(403, "DENIED", "tags are frozen") if seen.method == "PUT" else store.answer(seen)
    scripted = server(refuse_puts)
    code, output = plan(scripted.address, "--move-tags")
    assert code == 1, output
    assert f"plan failed {runtime.tag}" in output and "moving latest" in output
    record = {i["tag"]: i["state"] for i in json.loads(Path("publish-record.json").read_text())["images"]}
    assert record[runtime.tag] == "failed"
    assert store.digest("rocm/pytorch", "latest") == store.digest("rocm/pytorch", devel.tag)  # nothing moved


BIG = 1 << 40
REPLIES: list[Reply] = [
    (418, {}, b""), (400, {}, b"\xff\xfe"), (403, {"Content-Type": "application/json"}, b'{"errors": 7}'),
    (404, {"Content-Type": "application/json"}, b'{"errors": [{"code": ' + b"[" * 5000 + b"]}"),
    (301, {}, b""), (302, {"Location": "ftp://127.0.0.1/x"}, b""), (307, {"Location": "\x7f://"}, b""),
    (401, {"WWW-Authenticate": "Bearer realm"}, b""), (401, {"WWW-Authenticate": "Bogus \x01"}, b""),
    (401, {"WWW-Authenticate": 'Bearer realm="file:///etc/passwd"'}, b""), (401, {}, b""),
    (429, {"Retry-After": "99999999999999999999"}, b""), (503, {"Retry-After": "-1"}, b""),
    (500, {}, b"x" * 100_000),
    (200, {"Content-Type": MANIFEST_TYPE}, b"not json"), (200, {"Content-Type": MANIFEST_TYPE}, b"[]"),
    (200, {"Content-Type": MANIFEST_TYPE}, b'{"schemaVersion": 2, "config": 5, "layers": "x"}'),
    (200, {"Content-Type": "text/html"}, b"<html>"),
    (200, {"Content-Type": MANIFEST_TYPE, "Content-Length": "-5"}, b""),
    (200, {"Content-Type": MANIFEST_TYPE, "Docker-Content-Digest": "sha256:" + "0" * 64}, b"{}"),
    (200, {"Content-Type": MANIFEST_TYPE, "Docker-Content-Digest": "md5:\x00"}, b"{}"),
    (200, {"Content-Type": MANIFEST_TYPE}, b'{"schemaVersion": 2, "config": {"digest": "sha256:' + b"c" * 64
     + b'", "size": ' + str(BIG).encode() + b'}, "layers": []}'),
]


@pytest.mark.parametrize("reply", REPLIES, ids=[f"{i}-{r[0]}" for i, r in enumerate(REPLIES)])
def test_whatever_the_registry_answers_is_that_image_s_error(server: Start, reply: Reply) -> None:
    store = Store()
    runtime, devel = example_jobs()
    scripted = server(faulty(store, devel, reply))
    code, output = plan(scripted.address)
    assert code in (0, 1), output
    assert "unexpected" not in output and "Traceback" not in output
    assert f"plan failed {runtime.tag}" not in output  # the other image is decided as ever


def plan_rows(address: str, disk: str, tmp_path: Path, *extra: str) -> tuple[int, str]:
    proc = CliRunner().invoke(app, ["plan", "-m", str(ROOT / "matrix.yaml"), "--registry", f"{address}/empty",
                                    "--format", "github", "--runner-disk", disk,
                                    "--record", str(tmp_path / "record.json"), *extra])
    return proc.exit_code, proc.output


def test_the_plan_of_an_empty_registry_packs_rows_by_the_runner_disk(server: Start, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sizes, "NEW_FACTOR", 0.4)  # where a split can help: tests/publish/test_rows_guards.py says why
    scripted = server(Store().answer)
    code, output = plan_rows(scripted.address, "10T", tmp_path, "--match", "rocm10.0_*")
    assert code == 0, output
    whole = json.loads(output)["include"]
    assert len(whole) == 8 and all(r["groups"] == r["group"] for r in whole), "the whole combinations"
    # Then TheRock 10.0's 30-image rows peak at about 35.6 GiB (builder.publish.sizes): 35G splits them.
    code, output = plan_rows(scripted.address, "35G", tmp_path, "--match", "rocm10.0_*")
    assert code == 0, output
    split = json.loads(output)["include"]
    assert all(isinstance(r["peak_disk"], int) and r["peak_disk"] <= 35 << 30 for r in split)
    assert len(split) > len(whole) and max(r["images"] for r in split) < max(r["images"] for r in whole)
    assert sorted(t for r in split for t in r["cells"].split()) == sorted(t for r in whole for t in r["cells"].split())


def test_an_image_to_build_over_the_runner_disk_fails_the_plan_naming_it(server: Start, tmp_path: Path) -> None:
    store = Store()
    scripted = server(store.answer)
    code, output = plan_rows(scripted.address, "20G", tmp_path)
    assert code == 2 and "alone needs" in output and "larger runner" in output and "_all_devel" in output
    # Published already, the same images need no row: a quiet night plans whatever the budget.
    publish_all(store, matrix_jobs(ROOT / "matrix.yaml", None, None, WheelSource()), "empty")
    code, output = plan_rows(scripted.address, "20G", tmp_path)
    assert code == 0 and json.loads(output)["include"] == [], output
    proc = CliRunner().invoke(app, ["publish", "-m", str(ROOT / "examples/local.yaml"), "--registry",
                                    "127.0.0.1:1/x", "--runner-disk", "60G"])
    assert proc.exit_code == 2 and "No such option: --runner-disk" in proc.output


def test_the_rows_of_a_split_combination_are_what_shared_stages_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sizes, "NEW_FACTOR", 0.4)  # where a split can help: tests/publish/test_rows_guards.py says why
    todo = matrix_jobs(ROOT / "matrix.yaml", None, "rocm10.0_*", WheelSource())
    parts = planning.row_of(todo, rows.Runner(disk=35 << 30))  # under the 30-image rows' 35.6 GiB (at 0.4)
    assert set(parts) == {j.tag for j in todo}
    assert len(set(parts.values())) > len(by_combination(todo)), "some combination is split"
    assert set(planning.row_of(todo, rows.Runner(disk=10 << 40)).values()) == set(by_combination(todo))


def test_the_plan_record_lists_the_shared_stages_the_cache_registry_lacks(server: Start, tmp_path: Path) -> None:
    """publish.yml starts its `stages` job only for these: two combinations over one OS base share it until the
    cache registry holds it, then nothing is left for a first wave to build."""
    store = Store()
    scripted = server(store.answer)
    matrix = write_matrix(tmp_path, cpu_matrix("'2.13.0'", "'2.12.0'"))

    def stages() -> list[str]:
        result = CliRunner().invoke(app, ["plan", "-m", str(matrix), "--registry",
                                          f"{scripted.address}/rocm", "--cache-registry", f"{scripted.address}/rocm",
                                          "--format", "github"])
        assert result.exit_code == 0, result.output
        shared = json.loads(Path("publish-record.json").read_text())["shared_stages"]
        assert shared["cache"] == f"{scripted.address}/rocm/buildcache"
        keys: list[str] = shared["to_build"]
        return keys

    missing = stages()
    assert missing and all(k.startswith("stage-") for k in missing)
    store.publish("rocm/buildcache", missing[0], "")
    assert stages() == missing[1:]
    for key in missing[1:]:
        store.publish("rocm/buildcache", key, "")
    assert stages() == []
