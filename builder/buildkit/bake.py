"""Stage 3: a build tree -> images in the engine, by `docker buildx bake`, BuildKit's log streamed live.

Images go through an OCI layout, then are loaded into the engine, or (the engine's own BuildKit) straight into
its store (builder.buildkit.export): layers whose file times the template set to 0 and a config dated
SOURCE_DATE_EPOCH, so the same inputs give the same manifest digest on any engine, whose containerd image store
keeps that digest as the image's ID. One bake builds every selected image,
so stages shared by several images (the OS base, torch, a runtime under its devel) are built once. BuildKit cancels
every target when one fails; so after a failed bake the targets that failed are set aside (read from the log) and the
rest are baked again, from cache: a failed image never blocks or taints another.

A step that reads the build context (a lock file or wheelhouse bind mount, a COPY) is a different BuildKit
vertex in each target, merged with its twins only by cache key, and that merge can lose a race: two targets
then run the same pip step at once and get two different layers (a devel image no longer starts with its
runtime's layers; two GPU families push the multi-GB torch layer twice). `waves` orders the targets so that
no two baked together would both build such a step: the later ones find it in the cache.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.buildkit.builders import CURRENT, BuildKit
from builder.buildkit.engine import EngineUnavailable
from builder.buildkit.export import Export, ExportError
from builder.core.safefs import replace_file
from builder.core.scratch import scratch_dir

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
    manifest_digest: str | None = None  # the OCI manifest's digest: what a push of this image must give
    streamed_bytes: int | None = None  # the archive streamed into the engine for it (blobs it lacked)
    blobs: tuple[str, ...] = ()  # its config's and layers' digests (a push mounts those the cache holds)


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


SOURCE_DATE_EPOCH = "0"  # a constant, never a commit's or a clock's time: unchanged inputs, unchanged layers
HOST = BuildKit(network="host")


def override(targets: dict[str, str], export: Export | None = None, network: str = "default") -> dict[str, Any]:
    """A second bake file for targets (-> their image names): each with export into its layout and, when asked
    (--build-network host), on the build host's network; the committed bake file stays as any engine builds it.
    Host networking is for engines without a bridge (scripts/setup.sh's: nothing a build reaches, a test's wheel
    index on loopback included, is ever served on docker0 or any other address), never the default."""
    network_key = {} if network == "default" else {"network": network}
    return {"target": {t: {**network_key, **(export.target(t, name) if export else {})}
                       for t, name in targets.items()}}


def host_network(bake_file: Path, folder: Path, targets: list[str] | None = None) -> list[str]:
    """Arguments that let a plain `docker buildx bake -f bake_file` of targets (default: all) run on an engine
    without a bridge (scripts/setup.sh's): an override file written into folder, and the entitlement it needs."""
    extra = folder / f"{bake_file.stem}.host-network.json"
    replace_file(extra, json.dumps(override(dict.fromkeys(targets or _tags(bake_file), ""), None,
                                            HOST.network)).encode())
    return ["--file", str(extra), *HOST.allow()]


Stage = tuple[str, bool]  # a stage of a target's chain (unique in the bake file), and whether it runs on the context


def waves(chains: dict[str, list[Stage]], exported: bool = False) -> list[list[str]]:
    """Targets (-> their stage chains, base first) in bake order: within a wave, a stage that runs a step on the
    build context is built by one target only; the others that need it wait for a later wave and take it from
    cache. Other stages are one vertex for every target and stay shared, unless the bake exports a registry cache
    (exported): each target's export uploads the layers of its chain, and two exports of one wave both find a
    large blob missing and both upload it (a runtime and its devel sent a 3 GB layer twice, bench_row at real
    size), so then every stage is built by one target of a wave and the next wave's exports find it there."""
    built: set[str] = set()
    pending = sorted(chains, key=lambda t: (len(chains[t]), t))  # runtimes before the devels over them
    out: list[list[str]] = []
    while pending:
        wave: list[str] = []
        later: list[str] = []
        claimed: set[str] = set()
        for target in pending:
            new = {stage for stage, racy in chains[target] if (racy or exported) and stage not in built}
            if new & claimed:
                later.append(target)
            else:
                wave.append(target)
                claimed |= new
        out.append(wave)
        built |= {stage for target in wave for stage, _ in chains[target]}
        pending = later
    return out


def bake(bake_file: Path, targets: list[str], on_line: OnLine = lambda target, line: None, cwd: Path | None = None,
         export: Export | None = None, no_cache: bool = False, images: bool = True, kit: BuildKit = CURRENT
         ) -> dict[str, BuildResult]:
    """Build targets of bake_file on kit's builder (into export's layout, then loaded into the engine under the
    targets' tags, or straight into the builder's engine without one; images=False: targets whose output is only
    BuildKit's cache); every target gets a result, none raises."""
    start = time.monotonic()
    results: dict[str, BuildResult] = {}
    pending = list(targets)
    while pending:
        run = _bake_once(bake_file, pending, on_line, cwd, export, no_cache, kit)
        if run.ok:
            tags = _tags(bake_file) if export is not None else {}
            for target in pending:
                results[target] = (_result(target, run.image_ids.get(target), tags.get(target) or [], export)
                                   if images else BuildResult(target, True))
            break
        suspects = [t for t in pending if t in run.failed]
        blamed = pending if len(pending) == 1 else suspects if len(suspects) == 1 else []
        if not blamed:
            # The log named no target, or several: when one target fails, BuildKit ends the others' steps with
            # errors of its own ("context canceled", "transport is closing", ...). Bake each suspect alone
            # rather than blame one without evidence; the others go on together.
            for target in suspects or pending:
                results.update(bake(bake_file, [target], on_line, cwd, export, no_cache, images, kit))
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


def _result(target: str, digest: str | None, refs: list[str], export: Export | None) -> BuildResult:
    """A built target's result: with an export, its image (named refs, the bake file's tags) taken from the
    layout (ID = the manifest digest)."""
    if digest is None:
        return BuildResult(target, False, error="bake finished without an image for this target")
    if export is None:
        return BuildResult(target, True, digest)
    try:
        taken = export.take(refs, digest)
    except ExportError as exc:
        return BuildResult(target, False, error=f"cannot load the built image: {exc}")
    return BuildResult(target, True, taken.image_id, manifest_digest=taken.manifest_digest,
                       streamed_bytes=taken.streamed if export.load else None, blobs=taken.blobs)


def _tags(bake_file: Path) -> dict[str, list[str]]:
    """target -> its tags in the bake file (the readable local ref, then the content-named one)."""
    try:
        data = json.loads(bake_file.read_text(encoding="utf-8"))
        return {t: [str(x) for x in v.get("tags") or []] for t, v in (data.get("target") or {}).items()}
    except (OSError, ValueError, AttributeError):
        return {}


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
        if target is None and len(self.targets) == 1 and _vertex(line):
            target = next(iter(self.targets))  # a bake of one target leaves its name out of the step names
        self.tail.append(line)
        if target is not None:
            self.tails.setdefault(target, deque(maxlen=LOG_TAIL_LINES)).append(line)
            found = _VERTEX_ERROR.match(line)
            if found and not _CANCELED.search(found.group(1)):  # cancelled because another target failed
                self.failed[target] = found.group(1)
        if line.startswith("ERROR: "):
            self.error = line.removeprefix("ERROR: ").strip()
        return target


def _bake_once(bake_file: Path, targets: list[str], on_line: OnLine, cwd: Path | None, export: Export | None,
               no_cache: bool, kit: BuildKit) -> _Run:
    run = _Run(set(targets))
    tags = _tags(bake_file)
    layout = export.layout if export is not None and export.writes_layout else None
    if layout is not None:  # buildx grants fs.write only on a folder that exists (`builder reproduce` names a new one)
        layout.mkdir(parents=True, exist_ok=True)
    with scratch_dir("rif-bake-") as tmp:
        metadata, extra = tmp / "metadata.json", tmp / "override.json"
        extra.write_text(json.dumps(override({t: (tags.get(t) or [t])[-1] for t in targets}, export, kit.network)))
        cmd = [*kit.buildx("bake"), "--file", str(bake_file), "--file", str(extra), "--progress", "plain",
               *kit.allow(), *(["--allow", f"fs.write={layout}"] if layout is not None else []),
               *(["--no-cache"] if no_cache else []), "--metadata-file", str(metadata), *targets]
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd,
                                    errors="replace", env=_environment())
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


def _environment() -> dict[str, str]:
    """SOURCE_DATE_EPOCH (bake hands it to BuildKit as a build argument): the caller's, else the constant."""
    return {**os.environ, "SOURCE_DATE_EPOCH": os.environ.get("SOURCE_DATE_EPOCH", SOURCE_DATE_EPOCH)}


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
