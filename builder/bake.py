"""Stage 3: a build tree -> images in the engine, by `docker buildx bake`, BuildKit's log streamed live.

One bake builds every selected image, so stages shared by several images (the OS base, torch, a runtime
under its devel) are built once. BuildKit cancels every target when one fails; so after a failed bake the
targets that failed are set aside (read from the log) and the rest are baked again, from cache: a failed
image never blocks or taints another.

A step that reads the build context (a lock file or wheelhouse bind mount, a COPY) is a different BuildKit
vertex in each target, merged with its twins only by cache key, and that merge can lose a race: two targets
then run the same pip step at once and get two different layers (a devel image no longer starts with its
runtime's layers; two GPU families push the multi-GB torch layer twice). `waves` orders the targets so that
no two baked together would both build such a step: the later ones find it in the cache.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import Version

from builder.dockerapi import EngineUnavailable
from builder.scratch import scratch_dir

LOG_TAIL_LINES = 40
BUILDX_HINT = ("docker buildx is missing: run `bash scripts/setup.sh` (it puts Debian trixie's docker-buildx into "
               "~/.docker/cli-plugins) or install the docker-buildx-plugin package")
_VERTEX = re.compile(r"^#(\d+) \[([A-Za-z0-9_-]+)[ \]]")
_VERTEX_LINE = re.compile(r"^#(\d+) ")
_VERTEX_ERROR = re.compile(r"^#\d+ ERROR: (.*)")
_CANCELED = re.compile(r"\bcontext canceled\b|\bcanceled\b", re.IGNORECASE)
_ERROR_BLOCK = re.compile(r"^ > \[([A-Za-z0-9_-]+) ")

OnLine = Callable[[str | None, str], None]  # (bake target, or None for lines of the whole bake; line)


class BuildxUnavailable(EngineUnavailable):
    """No buildx plugin: the build engine is BuildKit, driven by bake."""


@dataclass
class BuildResult:
    target: str
    ok: bool
    image_id: str | None = None
    seconds: float = 0.0
    error: str | None = None
    log_tail: list[str] = field(default_factory=list)


def require_buildx() -> str:
    """buildx's version line; BuildxUnavailable (one line saying how to get it) without it."""
    try:
        proc = subprocess.run(["docker", "buildx", "version"], capture_output=True, text=True, timeout=60,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildxUnavailable(f"{BUILDX_HINT} ({exc})") from exc
    if proc.returncode != 0:
        raise BuildxUnavailable(BUILDX_HINT)
    return proc.stdout.strip()


@dataclass(frozen=True)
class Builder:
    """What the current buildx builder can do: detected from `docker buildx inspect`, never assumed."""

    driver: str
    buildkit: Version | None

    @property
    def loads_itself(self) -> bool:
        """The docker driver builds into dockerd's image store; others must be told to load the result."""
        return self.driver == "docker"

    @property
    def rewrites_timestamps(self) -> bool:
        """BuildKit 0.13+ rewrites file times to SOURCE_DATE_EPOCH: the same layers, byte for byte, each rebuild."""
        return self.buildkit is not None and self.buildkit >= Version("0.13")

    @property
    def attests(self) -> bool:
        """SBOM and provenance attestations: BuildKit 0.11+, and an image store that keeps them (not the
        classic docker one, which images loaded for validation go to)."""
        return not self.loads_itself and self.buildkit is not None and self.buildkit >= Version("0.11")

    def bake_args(self) -> list[str]:
        output = ["type=docker"] if not self.loads_itself else []
        if self.rewrites_timestamps and output:
            output.append("rewrite-timestamp=true")
        args = ["--set", "*.output=" + ",".join(output)] if output else []
        if self.attests:
            args += ["--set", "*.attest=type=sbom", "--set", "*.attest=type=provenance,mode=max"]
        return args


def parse_inspect(text: str) -> Builder:
    driver = re.search(r"^Driver:\s*(\S+)", text, re.MULTILINE)
    version = re.search(r"^\s*BuildKit(?: version)?:\s*v?(\d+\.\d+(?:\.\d+)?)", text, re.MULTILINE)
    return Builder(driver.group(1) if driver else "docker", Version(version.group(1)) if version else None)


def current_builder() -> Builder:
    try:
        proc = subprocess.run(["docker", "buildx", "inspect"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return Builder("docker", None)
    return parse_inspect(proc.stdout)


Stage = tuple[str, bool]  # a stage of a target's chain (unique in the bake file), and whether it runs on the context


def waves(chains: dict[str, list[Stage]]) -> list[list[str]]:
    """Targets (-> their stage chains, base first) in bake order: within a wave, a stage that runs a step on the
    build context is built by one target only; the others that need it wait for a later wave and take it from
    cache. Other stages are one vertex for every target and stay shared."""
    built: set[str] = set()
    pending = sorted(chains, key=lambda t: (len(chains[t]), t))  # runtimes before the devels over them
    out: list[list[str]] = []
    while pending:
        wave: list[str] = []
        later: list[str] = []
        claimed: set[str] = set()
        for target in pending:
            new = {stage for stage, racy in chains[target] if racy and stage not in built}
            if new & claimed:
                later.append(target)
            else:
                wave.append(target)
                claimed |= new
        out.append(wave)
        built |= {stage for target in wave for stage, _ in chains[target]}
        pending = later
    return out


def bake(bake_file: Path, targets: list[str], on_line: OnLine = lambda target, line: None,
         cwd: Path | None = None, builder: Builder | None = None) -> dict[str, BuildResult]:
    """Build targets of bake_file into the engine; every target gets a result, none raises."""
    builder = builder or current_builder()
    start = time.monotonic()
    results: dict[str, BuildResult] = {}
    pending = list(targets)
    while pending:
        run = _bake_once(bake_file, pending, on_line, cwd, builder)
        if run.ok:
            for target in pending:
                image_id = run.image_ids.get(target)
                results[target] = BuildResult(target, image_id is not None, image_id, error=None if image_id else
                                              "bake finished without an image for this target")
            break
        suspects = [t for t in pending if t in run.failed]
        blamed = pending if len(pending) == 1 else suspects if len(suspects) == 1 else []
        if not blamed:
            # The log named no target, or several: when one target fails, BuildKit ends the others' steps with
            # errors of its own ("context canceled", "transport is closing", ...). Bake each suspect alone
            # rather than blame one without evidence; the others go on together.
            for target in suspects or pending:
                results.update(bake(bake_file, [target], on_line, cwd, builder))
            pending = [t for t in pending if t not in results]
            continue
        for target in blamed:
            results[target] = BuildResult(target, False, error=run.failed.get(target) or run.error or
                                          "the build failed", log_tail=list(run.tails.get(target) or run.tail))
        pending = [t for t in pending if t not in blamed]
    seconds = round(time.monotonic() - start, 3)
    for result in results.values():
        result.seconds = seconds
    return results


@dataclass
class _Run:
    """One `docker buildx bake` call, read line by line: who logged what, who failed and why."""

    targets: set[str]
    ok: bool = False
    image_ids: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # target -> its error line
    error: str | None = None
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=LOG_TAIL_LINES))
    tails: dict[str, deque[str]] = field(default_factory=dict)
    vertices: dict[str, str] = field(default_factory=dict)  # BuildKit's step number -> its target

    def read(self, line: str) -> str | None:
        target = _target_of(line, self.vertices, self.targets)
        self.tail.append(line)
        if target is not None:
            self.tails.setdefault(target, deque(maxlen=LOG_TAIL_LINES)).append(line)
            found = _VERTEX_ERROR.match(line)
            if found and not _CANCELED.search(found.group(1)):  # cancelled because another target failed
                self.failed[target] = found.group(1)
        if line.startswith("ERROR: "):
            self.error = line.removeprefix("ERROR: ").strip()
        return target


def _bake_once(bake_file: Path, targets: list[str], on_line: OnLine, cwd: Path | None, builder: Builder) -> _Run:
    run = _Run(set(targets))
    with scratch_dir("rif-bake-") as tmp:
        metadata = tmp / "metadata.json"
        cmd = ["docker", "buildx", "bake", "--file", str(bake_file), "--progress", "plain",
               "--metadata-file", str(metadata), *builder.bake_args(), *targets]
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd,
                                    errors="replace", env=_environment(builder))
        except OSError as exc:
            run.error = f"cannot run docker buildx: {exc}"
            return run
        try:
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = raw.rstrip("\n")
                on_line(run.read(line), line)
            run.ok = proc.wait() == 0
        finally:
            if proc.poll() is None:  # Ctrl-C, SIGTERM: the build stops with the run
                proc.kill()
                proc.wait()
        run.image_ids = _image_ids(metadata) if run.ok else {}
    return run


def _environment(builder: Builder) -> dict[str, str]:
    """Where timestamps are rewritten: SOURCE_DATE_EPOCH (bake hands it to BuildKit) from the caller, else
    the checkout's last commit."""
    env = dict(os.environ)
    if builder.rewrites_timestamps and "SOURCE_DATE_EPOCH" not in env:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            proc = subprocess.run(["git", "log", "-1", "--format=%ct"], capture_output=True, text=True, timeout=10,
                                  check=False)
            if proc.returncode == 0 and proc.stdout.strip().isdigit():
                env["SOURCE_DATE_EPOCH"] = proc.stdout.strip()
    return env


def _vertex(line: str) -> str:
    found = _VERTEX_LINE.match(line)
    return found.group(1) if found else ""


def _target_of(line: str, vertices: dict[str, str], targets: set[str]) -> str | None:
    """Which target a plain-progress line belongs to: `#N [target stage k/n]` names it, later `#N` lines
    carry only the number, and an error summary quotes it as ` > [target stage k/n]`."""
    step = _VERTEX.match(line)
    if step and step.group(2) in targets:
        vertices[step.group(1)] = step.group(2)
        return step.group(2)
    quoted = _ERROR_BLOCK.match(line)
    if quoted and quoted.group(1) in targets:
        return quoted.group(1)
    number = _vertex(line)
    return vertices.get(number) if number else None


def _image_ids(metadata: Path) -> dict[str, str]:
    """target -> image ID, from bake's metadata file (the docker exporter's containerimage.digest)."""
    try:
        data = json.loads(metadata.read_text())
    except (OSError, ValueError):
        return {}
    return {t: str(v["containerimage.digest"]) for t, v in data.items()
            if isinstance(v, dict) and v.get("containerimage.digest")}
