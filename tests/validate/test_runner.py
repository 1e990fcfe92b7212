"""builder.validate.runner: the validation reports (junit from testinfra, torch-smoke's JSON) parsed into checks."""

from __future__ import annotations

import json

from builder.validate.runner import parse_junit, parse_smoke

JUNIT = """<testsuites><testsuite>
<testcase classname="t" name="test_ok[docker://abc]"/>
<testcase classname="t" name="test_bad[docker://abc]"><failure message="AssertionError: torch 2.13.0 is
installed, the cell expects 2.12.0">trace</failure></testcase>
<testcase classname="t" name="test_skipped"><skipped message="n/a"/></testcase>
<testcase classname="t" name="test_err"><error message="fixture broke">trace</error></testcase>
</testsuite></testsuites>"""


def test_parse_junit_maps_outcomes() -> None:
    checks = {c.name: c for c in parse_junit(JUNIT)}
    assert checks["ok"].status == "pass"
    assert checks["bad"].status == "fail"
    assert checks["bad"].detail.startswith("AssertionError: torch 2.13.0 is installed")
    assert checks["skipped"].status == "skip"
    assert checks["err"].status == "fail" and checks["err"].detail == "fixture broke"


def test_parse_smoke_report_and_exit_code() -> None:
    report = {"results": [{"name": "import", "status": "pass", "detail": "ok", "fix": ""},
                          {"name": "gpu", "status": "skip", "detail": "no GPU", "fix": ""}]}
    assert [c.status for c in parse_smoke(json.dumps(report), "", 0)] == ["pass", "skip"]
    # A non-zero exit with no failed check (e.g. --require-gpu without a GPU) is still a failure.
    assert parse_smoke(json.dumps(report), "", 3)[-1].status == "fail"
    garbage = parse_smoke("Traceback ...", "ModuleNotFoundError: torch", 1)
    assert garbage[0].status == "fail" and "ModuleNotFoundError" in garbage[0].detail
