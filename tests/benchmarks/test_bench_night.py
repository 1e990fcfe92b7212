"""bench_night.py's model of a night (issue 37): `--quick` runs as docs/benchmarks.md writes the command, from a
folder outside the checkout, and prints every scenario, the inputs with their sources (each build, stage, signing
and install figure naming the recorded run it came from) and the quiet night against the 5-minute target; its quiet
lock refresh (a real pip, a loopback index answering 304) resolves nothing again. The model's rules are checked on
their own below."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from benchmarks.support import nightmodel
from benchmarks.support.nightmodel import Figure, Inputs, Scenario
from tests.fakes.checkout import ROOT


def test_the_quick_night_prints_the_model_and_a_quiet_refresh_that_resolves_nothing(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_night.py"), "--quick"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    quiet = re.search(r"quiet [\d.]+ s \(8 workers\): (\d+) steps resolved again, (\d+) requests to the index, "
                      r"(\d+) of them conditional and answered 304; numpy's page changed: [\d.]+ s, (\d+) steps", out)
    assert quiet, out
    resolved, requests, answered_304, changed = map(int, quiet.groups())
    assert resolved == 0 and requests == answered_304 > 0 and changed >= 1
    for night in ("quiet (nothing new)", "one device wheel of ", "numpy bump (every image)", "new base digest (",
                  "full cold publish"):
        assert f"| {night}" in out
    assert "TODO" not in out and "PLACEHOLDER" not in out.upper()  # every figure measured, taken from a run, or assumed
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| (\w+_s) \| [\d.]+ \| (.*) \|$", out, re.M)}
    assert re.search(r"the largest row \(30 images\) at real size, \d+ s, on the line through 1/2 \(\d+ s: "
                     r"`python benchmarks/bench_row.py --scale 2`", rows["build_image_s"]), rows["build_image_s"]
    assert "--rebuild" in rows["rebuild_image_s"] and "numpy bump" in rows["rebuild_image_s"]
    assert "builder stages" in rows["stage_s"] and "--stages" in rows["stage_s"]
    assert all("benchmarks/bench_sign.py" in rows[k] for k in ("sign_call_s", "sign_digest_s"))
    assert all("bench_night.py" in rows[k] for k in ("install_uncached_s", "install_cached_s"))  # its last full run
    assert re.search(r"quiet night: \d+ runner-minutes .*; target 5: ratio [\d.]+ \((met|MISSED)\)", out)
    assert all(name in out for name in vars(inputs()))


def inputs(**given: float) -> Inputs:
    figures = {name: Figure(given.get(name, 0.0), "test") for name in Inputs.__dataclass_fields__}
    return Inputs(**figures)


def scenario(rows: int = 0, images: int = 0, stages: int = 0, resolved: int = 0) -> Scenario:
    return Scenario("night", 30.0, rows, images, stages, False, resolved, 100)


def test_a_quiet_night_is_the_plan_and_the_lock_refresh_each_billed_by_the_whole_minute() -> None:
    i = inputs(job_start_s=10, install_cached_s=10, lock_quiet_s=50)
    assert nightmodel.jobs(scenario(), i) == {"lock-refresh": 70, "plan": 50}
    assert nightmodel.minutes(scenario(), i) == 3  # 70 s: 2 minutes, 50 s: 1
    assert [nightmodel.billed(s) for s in (0, 1, 60, 61)] == [0, 1, 1, 2]


def test_before_the_lock_refresh_resolved_every_step_and_the_stages_job_ran_on_two_rows() -> None:
    i = inputs(lock_step_s=6, lock_quiet_s=50)
    assert nightmodel.jobs(scenario(), i, before=True)["lock-refresh"] == 600
    assert "stages" in nightmodel.jobs(scenario(rows=2, images=2), i, before=True)
    assert "stages" not in nightmodel.jobs(scenario(rows=2, images=2), i)
    assert "stages" in nightmodel.jobs(scenario(rows=2, images=2, stages=1), i)


def test_signing_takes_one_call_per_fifty_digests_where_it_took_one_per_digest() -> None:
    i = inputs(sign_call_s=3, sign_digest_s=1)
    assert nightmodel.jobs(scenario(rows=1, images=120), i)["sign"] == 3 * 3 + 120
    assert nightmodel.jobs(scenario(rows=1, images=120), i, before=True)["sign"] == 120 * 3 + 120
