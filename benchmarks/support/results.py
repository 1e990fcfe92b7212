"""The benchmarks' measured runs, kept in the repository: benchmarks/results/<bench>.json.

A model (bench_night's night in runner-minutes) takes its inputs from runs a benchmark measured, not from constants
copied out of a doc: each run a benchmark finishes is appended here with when, on which commit, with which command
line and under what load it ran, and the model names the run each figure came from. The files are committed, so a
reader can re-run the command and compare; they are read back through one bounded reader (a hand-edited or
truncated file is an error naming the file, never a silent figure).
"""

from __future__ import annotations

import datetime
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

FOLDER = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
LIMIT = 4 << 20  # bytes of one results file: thousands of runs; more is not ours
RUNS_KEPT = 200  # the oldest runs of a benchmark go first beyond this


class Run(BaseModel):
    """One finished run of a benchmark: its figures by name (seconds, bytes, ratios) and how it was run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    date: str = Field(max_length=40)  # UTC, ISO 8601
    commit: str = Field(max_length=40)
    command: str = Field(max_length=1000)
    load: tuple[float, float]  # the 1-minute load average at the start and at the end
    cores: int = Field(ge=1)
    figures: dict[str, float] = Field(max_length=200)
    notes: str = Field(default="", max_length=2000)

    def cite(self) -> str:
        """How a model names this run: enough to find it in the file and to run it again."""
        load = f"load {self.load[0]:.1f}-{self.load[1]:.1f}" if any(self.load) else "load not recorded"
        how = "transcribed, " if self.notes.startswith("transcribed") else ""
        return f"`{self.command}` ({how}{self.date[:10]}, {self.commit[:10]}, {load} on {self.cores} cores)"


class Runs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    runs: list[Run] = Field(max_length=RUNS_KEPT)


class ResultsError(Exception):
    """A results file that is not what record() writes."""


def path_of(bench: str, folder: Path = FOLDER) -> Path:
    if not bench.isidentifier():
        raise ValueError(f"{bench!r}: a benchmark's name is its module's (bench_row)")
    return folder / f"{bench}.json"


def load(bench: str, folder: Path = FOLDER) -> list[Run]:
    """Every recorded run of `bench`, oldest first; none when it has never been recorded."""
    path = path_of(bench, folder)
    try:
        with path.open("rb") as handle:
            data = handle.read(LIMIT + 1)
    except FileNotFoundError:
        return []
    if len(data) > LIMIT:
        raise ResultsError(f"{path}: over {LIMIT} bytes; not a results file this project writes")
    try:
        return Runs.model_validate_json(data).runs
    except ValidationError as error:
        raise ResultsError(f"{path}: {error}") from None


def latest(bench: str, *needed: str, folder: Path = FOLDER) -> Run | None:
    """The newest run of `bench` that measured every figure named."""
    return next((r for r in reversed(load(bench, folder)) if all(n in r.figures for n in needed)), None)


def record(bench: str, figures: dict[str, float], load_at_start: float, notes: str = "",
           folder: Path = FOLDER, argv: list[str] | None = None) -> Run:
    """Appends a finished run (atomic replace: a run cut short leaves the file as it was)."""
    run = Run(date=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), commit=_commit(),
              command=shlex.join(["python", *(sys.argv if argv is None else argv)]),
              load=(round(load_at_start, 2), round(os.getloadavg()[0], 2)), cores=os.cpu_count() or 1,
              figures={k: float(v) for k, v in figures.items()}, notes=notes)
    runs = [*load(bench, folder), run][-RUNS_KEPT:]
    path = path_of(bench, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(Runs(runs=runs).model_dump(mode="json"), indent=1) + "\n"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return run


def _commit() -> str:
    """The checkout's HEAD, with a + when the tree has changes (the run measured more than the commit)."""
    root = FOLDER.parents[1]
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=False).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, check=False).stdout.strip()
    return head[:39] + "+" if dirty else head
