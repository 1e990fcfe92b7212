"""benchmarks/support/stagecount.py: which stages a bake executed, from BuildKit's plain log (bench_stages.py's
count)."""

from __future__ import annotations

from benchmarks.support import stagecount
from builder.render.contenthash import stage_chains
from builder.render.sharedstages import key_of

ROOT_USER = ("FROM debian:12 AS base\nRUN apt-get install python3\nRUN groupadd video\n"
             "FROM base AS torch\nRUN pip install torch\nFROM torch AS runtime-a\nRUN install cell.json\n")
OTHER_USER = ROOT_USER.replace("RUN groupadd video", "RUN groupadd video && useradd rif").replace("runtime-a",
                                                                                                  "runtime-b")


def key(text: str, stage: str) -> str:
    return key_of(stage_chains(text)[stage].text)


def test_run_steps_count_and_steps_from_cache_do_not() -> None:
    lines = [(None, "#1 [internal] load build definition from Dockerfile"),
             ("a", "#5 [a base 1/3] FROM docker.io/library/debian:12@sha256:" + "e" * 64),
             ("a", "#6 [a base 2/3] RUN apt-get install python3"), ("a", "#6 CACHED"),
             ("a", "#7 [a base 3/3] RUN groupadd video"),
             ("a", "#7 sha256:" + "4" * 64 + " 26.43MB / 26.43MB 0.1s done"),  # imported from the registry
             ("a", "#7 extracting sha256:" + "4" * 64 + " 4.1s done"), ("a", "#7 DONE 4.4s"),
             ("a", "#8 [a torch 1/1] RUN pip install torch"), ("a", "#8 0.512 Successfully installed torch"),
             ("a", "#8 DONE 1.2s"),
             ("a", "#9 [a runtime-a 1/1] RUN install cell.json"), ("a", "#9 DONE 0.1s")]  # silent, but it ran
    assert stagecount.executed(lines, {"a": ROOT_USER}) == {key(ROOT_USER, "torch"), key(ROOT_USER, "runtime-a")}


def test_step_numbers_restart_per_bake_and_a_one_target_bake_leaves_its_name_out() -> None:
    lines = [("a", "#6 [base 3/3] RUN groupadd video"), ("a", "#6 CACHED"),
             ("b", "#6 [base 3/3] RUN groupadd video && useradd rif"), ("b", "#6 DONE 0.3s")]
    assert stagecount.executed(lines, {"a": ROOT_USER, "b": OTHER_USER}) == {key(OTHER_USER, "base")}


def test_distinct_stages_are_counted_by_what_they_are_made_of() -> None:
    dockerfiles = {"a": ROOT_USER, "a2": ROOT_USER, "b": OTHER_USER}
    found = stagecount.distinct(dockerfiles, {"a": "runtime-a", "a2": "runtime-a", "b": "runtime-b"})
    assert len(found) == 6  # two bases, two torch stages, two runtimes: a2 is a again
