"""builder.site.records: a run record read as data from outside: every field checked, a bad row costs itself."""

from __future__ import annotations

import json
from pathlib import Path

from builder.site.records import DEFAULT_REPOSITORY, MAX_ROW_WARNINGS, RecordRow, load_records, parse_record
from builder.validate.runner import Check

DIGEST = "sha256:" + "a" * 64


def test_a_row_keeps_fields_of_their_type_and_drops_the_others() -> None:
    [row] = parse_record({"finished": "2026-11-02T00:00:00Z", "registry": "r.io/ns", "images": [{
        "tag": "t1", "tags": ["t1", 7], "state": "published", "digest": "sha256:short", "image_bytes": -1,
        "compressed_bytes": True, "build_seconds": float("nan"), "content_hash": 5,
        "validation": [{"suite": "smoke", "name": "torch", "status": "pass", "detail": None}, "junk"],
        "packages": ["six==1.0", {"name": "torch", "version": "2.13.0"}, {"name": 1}]}]}, "r.json")
    assert row == RecordRow("t1", DEFAULT_REPOSITORY, ("t1",), "published", "2026-11-02T00:00:00Z", "r.io/ns",
                            validation=(Check("smoke", "torch", "pass"),), packages=("six==1.0", "torch==2.13.0"),
                            source="r.json")
    assert parse_record({"images": [{"tag": "t", "digest": DIGEST, "image_bytes": 5}]}, "r")[0].digest == DIGEST


def test_a_row_that_is_no_image_row_is_skipped_with_a_warning() -> None:
    warnings: list[str] = []
    rows = parse_record({"images": [{"tag": ""}, "x", {"tag": "t", "repository": "../../x"}, {"tag": "ok"}]}, "r.json",
                        warnings)
    assert [r.tag for r in rows] == ["ok"]
    assert warnings == ["r.json: images[0]: no tag: row skipped", "r.json: images[1]: not an object: row skipped",
                        "r.json: images[2]: repository '../../x' is not a repository name: row skipped"]


def test_a_million_bad_rows_are_not_a_million_warnings() -> None:
    warnings: list[str] = []
    parse_record({"images": [1] * (MAX_ROW_WARNINGS + 5)}, "r.json", warnings)
    assert len(warnings) == MAX_ROW_WARNINGS + 1 and warnings[-1] == "r.json: 5 more rows skipped"


def test_published_time_is_the_push_time_or_a_published_rows_own() -> None:
    row = RecordRow("t", "pytorch", (), "skipped", "2026-11-02")
    assert row.published_time is None
    assert RecordRow("t", "pytorch", (), "published", "2026-11-02").published_time == "2026-11-02"
    assert RecordRow("t", "pytorch", (), "skipped", "x", published_at="2026-11-01").published_time == "2026-11-01"


def test_a_row_reads_back_from_its_json() -> None:
    row = RecordRow("t", "pytorch", ("t",), "published", "2026-11-02", digest=DIGEST, image_bytes=5,
                    validation=(Check("s", "n", "pass"),), packages=("six==1.0",))
    [again] = parse_record({"images": [row.as_json()]}, "r")
    assert again == RecordRow("t", "pytorch", ("t",), "published", "2026-11-02", digest=DIGEST, image_bytes=5,
                              validation=(Check("s", "n", "pass"),), packages=("six==1.0",), source="r",
                              published_at="2026-11-02")


def test_load_records_reads_a_folders_json_files_and_warns_for_the_rest(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.json").write_text(json.dumps({"images": [{"tag": "a"}]}))
    (tmp_path / "b.json").write_text(json.dumps({"images": [{"tag": "b"}]}))
    (tmp_path / "not.json").write_text('{"images": 3}')
    (tmp_path / "link.json").symlink_to(tmp_path / "b.json")
    (tmp_path / "notes.txt").write_text("x")
    rows, warnings = load_records([tmp_path])
    assert sorted(r.tag for r in rows) == ["a", "b"]
    assert warnings == [f"{tmp_path / 'not.json'}: skipped: not a run record (no `images` list)"]
