"""builder.publish.record: one result per image, and the run record every command writes."""

from __future__ import annotations

import json
from pathlib import Path

from builder.pipeline import lifecycle
from builder.publish.record import Failed, ImageReport, write
from builder.validate.runner import Check


def report(**fields: object) -> ImageReport:
    return ImageReport(tag="t1", repository="pytorch", tags=["t1", "latest"], immutable_tag="t1-abc",  # type: ignore[arg-type]
                       content_hash="sha256:" + "1" * 64, **fields)


def test_fail_records_the_stage_and_why() -> None:
    r = report()
    assert not r.failed
    r = lifecycle.assemble(r, Failed(stage="push", why="denied"))  # the record is assembled, never changed
    assert r.failed and (r.state, r.failed_stage, r.failure) == ("failed", "push", "denied")


def test_the_json_row_names_the_failed_checks_only() -> None:
    r = report(validation=[Check("smoke", "torch", "pass"), Check("image", "apt", "fail", "lists left")])
    assert r.failed_checks == [r.validation[1]]
    row = r.as_json()
    assert row["failed_checks"] == ["image/apt: lists left"]
    assert row["tag"] == "t1" and row["validation"][1] == {"suite": "image", "name": "apt", "status": "fail",
                                                          "detail": "lists left", "fix": ""}


def test_write_records_every_image_whether_or_not_the_run_finished(tmp_path: Path) -> None:
    path = tmp_path / "new" / "record.json"
    write(path, [report(), report(state="skipped")], "127.0.0.1:5000/ns", finished=False)
    data = json.loads(path.read_text())
    assert (data["registry"], data["complete"]) == ("127.0.0.1:5000/ns", False)
    assert [i["state"] for i in data["images"]] == ["planned", "skipped"]
    assert data["finished"].endswith("Z")
