"""builder.site.collect: build steps as the Dockerfile said them, the record row of a build, its Dockerfile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.core import tags
from builder.render.dockerfile import bake_target
from builder.site.collect import _bake_target_file, _best_row, _dockerfile, _step  # the package's __init__ names

# its function collect, which hides the module of that name
from builder.site.records import RecordRow

A, B = "sha256:" + "a" * 64, "sha256:" + "b" * 64


@pytest.mark.parametrize(("created_by", "step"), [
    ("/bin/sh -c #(nop)  ENV PATH=/opt/venv/bin", "ENV PATH=/opt/venv/bin"),
    ("|2 PY=3.12 TORCH=2.13.0 /bin/sh -c pip install torch", "RUN pip install torch"),
    ("/bin/sh -c apt-get update", "RUN apt-get update"),
    ("RUN /bin/sh -c echo # buildkit", "RUN /bin/sh -c echo # buildkit"),
    ("  COPY a b  ", "COPY a b"),
])
def test_a_history_step_reads_as_its_dockerfile_line(created_by: str, step: str) -> None:
    assert _step(created_by) == step


def row(finished: str, digest: str | None = A, **fields: object) -> RecordRow:
    return RecordRow("t1", "pytorch", ("t1",), str(fields.pop("state", "published")), finished, digest=digest,
                     content_hash="sha256:c", **fields)  # type: ignore[arg-type]


def test_the_newest_row_of_the_same_digest_wins_and_takes_what_it_lacks_from_older_ones() -> None:
    rows = [row("1", image_bytes=5, published_at="1"), row("2", state="skipped"), row("3", digest=B, image_bytes=9)]
    best = _best_row(rows, "t1", A, "sha256:c")
    assert best is not None and (best.finished, best.state, best.image_bytes, best.published_time) == (
        "2", "skipped", 5, "1")


def test_a_build_not_pushed_is_matched_by_its_content_hash_and_gets_no_push_time() -> None:
    best = _best_row([row("1", digest=None, state="validated", published_at="1")], "t1", A, "sha256:c")
    assert best is not None and best.state == "validated" and best.published_time is None
    assert _best_row([row("1", digest=None)], "t1", A, "sha256:other") is None
    assert _best_row([row("1", digest=B)], "t1", A, "sha256:c") is None


def bake(directory: Path, tag: str, dockerfile: str, content_hash: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "docker-bake.json").write_text(json.dumps({"target": {bake_target(tag): {
        "dockerfile": dockerfile, "target": "runtime", "labels": {tags.HASH_LABEL: content_hash}}}}))


def test_the_dockerfile_of_exactly_this_content_is_chosen_and_a_path_out_is_refused(tmp_path: Path) -> None:
    tag = "cpu_debian12_py3.11_torch2.13.0_runtime"
    first, second = tmp_path / "first", tmp_path / "second"
    for directory, content_hash in ((first, "sha256:old"), (second, "sha256:new")):
        bake(directory, tag, f"{tag}/Dockerfile", content_hash)
        (directory / tag).mkdir()
        (directory / tag / "Dockerfile").write_text(f"FROM {content_hash}\n")
    found = _dockerfile([first, second], [tag], "sha256:new")
    assert found == ("FROM sha256:new\n", f"{second / tag / 'Dockerfile'} (target runtime)", "sha256:new")
    assert _dockerfile([first, second], [tag], "sha256:unknown") is not None  # else the first found
    bake(first, tag, "../secret/Dockerfile", "sha256:x")
    assert _bake_target_file(first, tag) is None
    assert _dockerfile([first], ["not a tag!"], None) is None
