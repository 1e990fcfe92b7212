"""The engine side of one bench_row run: the row's shared stages (`builder stages`), its publish, and the numpy
bump a night sees, each timed and measured on the loop filesystem of the runner's size.

The row is one combination, and `builder stages` builds only what two combinations share: so the stages are
timed on the row beside its sibling ROCm line (rocm7.1: same OS and Python, its own index, as each ROCm line has
in production), which shares its OS base and nothing else, as the night's tree has a combination per ROCm line on
each OS. The sibling's own stages are never built (its index is never asked). Unlocked: the figure is the seconds
of an OS base stage built cold into the registry cache, the one the night model needs.

With a rebuild the row is locked first (`builder lock --base-registry`, OS packages unpinned: no snapshot archive
here): an unlocked index build of a bumped numpy has the same content hash and BuildKit key as before, so nothing
would rebuild. The bump is the real numpy under the next version (the stand-in torch computes with it), and the
second publish runs on a new, empty engine (a runner is cold every night; the first engine's data root is removed
from the loop filesystem first) that imports the first publish's cache from the registry, as bench_cold.py does.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.bench_scale import seed
from benchmarks.support import loopfs, rocmwheels, rowfigures
from benchmarks.support.countingproxy import CountingProxy
from benchmarks.support.freshengine import Engine, empty_engine
from benchmarks.support.localregistry import LocalRegistry
from benchmarks.support.scaleplumbing import FLAVORS, ROOT
from benchmarks.support.scalesupply import write_matrix
from benchmarks.support.wheelindex import WheelIndex
from testkit.synthwheels import rebrand

BUILDER = [sys.executable, "-m", "builder"]
BASE = "debian:12"
SIBLING = "rocm7.1"  # the ROCm line beside the row's rocm7.2 in builder stages' matrix


def sibling_lines(index_url: str) -> dict[str, str]:
    """The stages' matrix's platforms and indexes: the row's, and the sibling's own (never asked)."""
    return {SIBLING: index_url.replace("/simple", f"-{SIBLING}/simple"), "rocm7.2": index_url}


@dataclass(frozen=True)
class Options:
    families: list[str]
    budget: int
    by_family: bool = True
    stages: bool = False
    rebuild: bool = False
    row: rowfigures.Row | None = None


@dataclass(frozen=True)
class Publish:
    """One timed `builder publish`: its exit code, wall seconds, record, and the bytes sent to the registry."""

    returncode: int
    wall: float
    record: Path
    uploaded: int
    log: Path


@dataclass(frozen=True)
class Stages:
    """One timed `builder stages`: exit code, wall seconds, shared stages built and failed, bytes uploaded."""

    returncode: int
    wall: float
    built: int
    failed: int
    uploaded: int

    @property
    def per_stage(self) -> float | None:
        return self.wall / self.built if self.built else None


@dataclass(frozen=True)
class Outcome:
    figures: rowfigures.Figures
    stages: Stages | None = None
    rebuild: Publish | None = None
    rebuild_images: int = 0
    rebuild_published: int = 0
    notes: str = ""

    def ok(self) -> bool:
        """The publish finished: the run is one a model may cite (a failed stages or rebuild step only loses its
        own figures: failed())."""
        return self.figures.measured.returncode == 0

    def failed(self) -> list[str]:
        """The steps besides the publish that did not finish, as a note for the record."""
        steps = [("builder stages", self.stages), ("the rebuild's publish", self.rebuild)]
        return [f"{name} exited {step.returncode}: its figures left out" for name, step in steps
                if step is not None and step.returncode != 0]


class RunError(RuntimeError):
    """A step before the publish (lock, base push) failed: the run measures nothing."""


def stages_built(output: str) -> tuple[int, int]:
    """(built, failed) shared stages from `builder stages`' lines (`built KEY (...)`, `failed KEY (...)`)."""
    lines = [line.strip() for line in output.splitlines()]
    return sum(line.startswith("built ") for line in lines), sum(line.startswith("failed ") for line in lines)


def _builder(*args: str, cwd: Path, env: dict[str, str], log: Path) -> subprocess.CompletedProcess[str]:
    with log.open("a") as out:
        out.write(f"$ builder {' '.join(args)}\n")
        out.flush()
        return subprocess.run([*BUILDER, *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=out, text=True,
                              check=False)


def _env(engine: Engine, tmp: Path) -> dict[str, str]:
    return {**os.environ, "DOCKER_HOST": engine.host, "RIF_BUILD_NETWORK": "host", "TMPDIR": str(tmp)}


@dataclass
class Session:
    """The run's host side: registry behind the counting proxy, the wheel index, the matrix, the lock tree."""

    mount: Path
    work: Path
    wheels: rocmwheels.WheelSet
    numpy: rocmwheels.Wheel
    options: Options
    registry: LocalRegistry = field(init=False)
    index: WheelIndex = field(init=False)
    proxy: CountingProxy = field(init=False)

    @property
    def namespace(self) -> str:
        return f"{self.proxy.address}/bench"

    @property
    def tree(self) -> Path | None:
        return self.work / "tree" if self.options.rebuild else None

    def locks(self) -> list[str]:
        return ["--locks", str(self.tree)] if self.tree is not None else []

    def lock(self, env: dict[str, str], update: bool) -> None:
        """Lock the row against the index, base from the registry's mirror; pip's HTTP cache under work/ (the
        host's own stays as it was)."""
        env = {**env, "XDG_CACHE_HOME": str(self.work / "pip-cache")}
        done = _builder("lock", "--matrix", str(self.work / "matrix.yaml"), "--out", str(self.tree),
                        "--base-registry", f"{self.registry.address}/mirror", "--apt-snapshot", "off",
                        *(["--update"] if update else []), cwd=self.work, env=env, log=self.work / "lock.log")
        if done.returncode != 0:
            raise RunError(f"builder lock failed ({done.returncode}): {self.work / 'lock.log'}\n{done.stdout[-2000:]}")

    def push_base(self, engine: Engine) -> None:
        """debian:12 into the registry's mirror/ (straight to it: not counted as the row's upload)."""
        ref = f"{self.registry.address}/mirror/debian:12"
        for cmd in (["tag", BASE, ref], ["push", "-q", ref]):
            done = subprocess.run(["docker", "-H", engine.host, *cmd], capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise RunError(f"docker {' '.join(cmd)}: {done.stderr.strip()[-500:]}")

    def bump_numpy(self) -> rocmwheels.Wheel:
        """The real numpy again as NUMPY_VERSIONS[1], shown beside the old one (an index keeps old releases)."""
        folder = self.work / "numpy-bump"
        folder.mkdir()
        path = rebrand(self.numpy.path, rocmwheels.NUMPY_VERSIONS[1], folder)
        data = path.read_bytes()
        wheel = rocmwheels.Wheel("numpy", rocmwheels.NUMPY_VERSIONS[1], path, len(data),
                                 hashlib.sha256(data).hexdigest(), len(data))
        self.index.wheels[wheel.filename] = wheel
        self.index.show(wheel)
        return wheel

    def stages(self, env: dict[str, str]) -> Stages:
        """`builder stages` as the workflow's stages job runs it before the rows: shared stages into the cache."""
        matrix = self.work / "stages-matrix.yaml"
        write_matrix(matrix, self.options.families, list(FLAVORS), self.index.url,
                     lines_of=sibling_lines(self.index.url))
        sent = self.proxy.sent
        t0 = time.perf_counter()
        # --runner-disk: the plan's row split, not this disk (the sibling's images, planned from the channel's cited
        # sizes, need more than the default runner; as largest_row asks `builder matrix`)
        done = _builder("stages", "--matrix", str(matrix), "--cache-registry", self.namespace, "--runner-disk", "10T",
                        cwd=ROOT, env=env, log=self.work / "stages.log")
        found = Stages(done.returncode, time.perf_counter() - t0, *stages_built(done.stdout), self.proxy.sent - sent)
        print(done.stdout[-1500:], f"builder stages: exit {found.returncode}, {found.built} built, {found.failed} "
              f"failed, {found.wall:.0f} s", sep="\n", flush=True)
        return found

    def publish(self, env: dict[str, str], name: str) -> Publish:
        record, log = self.work / f"{name}.json", self.work / f"{name}.log"
        sent = self.proxy.sent
        t0 = time.perf_counter()
        with log.open("wb") as out:
            done = subprocess.run([*BUILDER, "publish", "--matrix", str(self.work / "matrix.yaml"), *self.locks(),
                                   "--registry", self.namespace, "--cache-registry", self.namespace, "--record",
                                   str(record), "--progress", "plain",
                                   *(["--by-family"] if self.options.by_family else [])],
                                  cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
        wall = time.perf_counter() - t0
        print(log.read_text(errors="replace")[-3000:] if done.returncode else f"{name}: done", flush=True)
        return Publish(done.returncode, wall, record, self.proxy.sent - sent, log)


@contextmanager
def serving(mount: Path, work: Path, wheels: rocmwheels.WheelSet, numpy: rocmwheels.Wheel,
            options: Options) -> Iterator[Session]:
    session = Session(mount, work, wheels, numpy, options)
    session.registry = LocalRegistry(work / "registry")
    session.index = WheelIndex([*wheels.wheels, numpy], "127.0.0.1", "rr" + uuid.uuid4().hex[:10])
    session.registry.start()
    try:
        session.proxy = CountingProxy(session.registry.address)
        try:
            session.index.start()
            for wheel in wheels.wheels:  # NumPy: the real one (the stand-in computes with it), not a synthetic one
                session.index.show(wheel, wheel.project != "numpy")
            session.index.show(numpy)
            write_matrix(work / "matrix.yaml", options.families, list(FLAVORS), session.index.url)
            yield session
        finally:
            session.proxy.close()
            session.index.stop()
    finally:
        session.registry.stop()


def run(mount: Path, work: Path, wheels: rocmwheels.WheelSet, numpy: rocmwheels.Wheel,
        options: Options) -> Outcome:
    empty = loopfs.used_bytes(mount)
    with serving(mount, work, wheels, numpy, options) as session:
        with empty_engine(mount / "engine") as engine:
            seed(engine)
            (mount / "tmp").mkdir()
            env = _env(engine, mount / "tmp")
            if options.rebuild:
                session.push_base(engine)
                session.lock(env, update=False)
            stages = session.stages(env) if options.stages else None
            before = loopfs.used_bytes(mount)
            sampler = loopfs.Sampler(mount).start()
            first = session.publish(env, "publish")
            peak = sampler.stop()
            subprocess.run(["docker", "-H", engine.host, "buildx", "prune", "-af"], capture_output=True, check=False)
            final = loopfs.used_bytes(mount)
            held = subprocess.run(["docker", "-H", engine.host, "images", "-q", "--no-trunc"], capture_output=True,
                                  text=True, check=False).stdout.split()
        figures = rowfigures.collect(rowfigures.Measured(
            returncode=first.returncode, record=first.record, registry=session.registry, uploaded=first.uploaded,
            wall=first.wall, budget=options.budget, empty=empty, before=before, peak=peak, final=final,
            held=frozenset(held)), options.row)
        if not (options.rebuild and first.returncode == 0):
            return Outcome(figures, stages)
        try:
            second = rebuild(session)
        except RunError as error:  # the cold publish's figures still stand
            print(f"the rebuild did not run: {error}", flush=True)
            return Outcome(figures, stages, notes=f"--rebuild did not run: {str(error)[:300]}")
        rows = json.loads(second.record.read_text())["images"] if second.record.is_file() else []
        return Outcome(figures, stages, second, len(rows), sum(1 for r in rows if r.get("digest")))


def rebuild(session: Session) -> Publish:
    """numpy bumped and locked again, then the row published on a new empty engine importing the cache."""
    mount = session.mount
    shutil.rmtree(mount / "engine", ignore_errors=True)
    shutil.rmtree(mount / "tmp", ignore_errors=True)
    print(f"first engine removed: {loopfs.used_bytes(mount) / 1e9:.3f} GB used on the loop filesystem", flush=True)
    bumped = session.bump_numpy()
    with empty_engine(mount / "engine2") as engine:
        seed(engine)
        (mount / "tmp").mkdir()
        env = _env(engine, mount / "tmp")
        session.lock(env, update=True)
        assert session.tree is not None
        pinned = [p for p in session.tree.rglob("*.txt") if f"numpy=={bumped.version}" in p.read_text()]
        if not pinned:
            raise RunError(f"the lock --update did not pin numpy {bumped.version}: {session.tree}")
        return session.publish(env, "rebuild")
