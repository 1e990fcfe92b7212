"""Synthetic wheels of ROCm's size and shape, for the ROCm-scale benchmark (bench_scale.py).

TheRock splits a ROCm torch environment into a part every GPU shares (torch and `rocm[libraries]`) and a
per-target device package that `torch[device-gfxNNN]` pulls. These wheels copy that shape with made-up
bytes: pip installs them like real ones (METADATA, WHEEL, RECORD with hashes), and their payload compresses
about `ratio` times under gzip: a fraction 1/ratio of each chunk random, the rest one random block repeated (by
default 2x; 2.7 is the cited installed/compressed ratio of real ROCm wheels, builder/data/sizes.yaml; 1 is all
random, incompressible). A layer of them costs the engine, the registry and the network what a real one would;
nothing in them runs.

Generating gigabytes is slow on a small machine, so a set is written once per size under a cache folder
and reused; the payload comes from os.urandom in 1 MiB chunks (never a Python loop per byte). The wheel files
themselves are written by testkit/synthwheels.py, the one writer of synthetic wheels (tests use it too).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from testkit import synthwheels

TORCH_VERSION = "2.13.0"
LOCAL_VERSION = "rocm7.2"  # torch's local version label, as on a ROCm index
COMMON = "rif-synth-rocm-libraries"  # the device-independent part torch depends on
COMMON_VERSION = "1.0"
NUMPY_VERSIONS = ("2.4.90", "2.4.91")  # the small dependency, and the update the benchmark bumps it to
CHUNK = 1 << 20
FILE_LIMIT = 256 << 20  # one payload file per 256 MiB, as a package of many shared libraries would have
ZIP_LEVEL = 1  # deflate level of the wheels: the ratio of this payload hardly depends on it, the time does


@dataclass(frozen=True)
class Sizes:
    """Installed (uncompressed) payload bytes of each synthetic package."""

    common: int
    device: int
    torch: int
    numpy: int

    def key(self) -> str:
        """The cache folder of one size set: another size never reuses these wheels."""
        return "-".join(f"{name}{value >> 20}m" for name, value in asdict(self).items())


@dataclass(frozen=True)
class Spec:
    """One wheel to write: its project, version, payload size and metadata lines."""

    project: str
    version: str
    payload: int
    requires: tuple[str, ...] = ()
    extras: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (extra, the requirements it adds)
    top: str = ""  # the import package its files go under
    ratio: float = 2.0  # installed / gzip-compressed bytes of the payload (1.0: all random, incompressible)
    init: bytes = b""  # its package's __init__.py (a stand-in's code), else a line with its version
    extra: tuple[tuple[str, bytes], ...] = ()  # more files (path in the wheel, bytes)

    @property
    def filename(self) -> str:
        return f"{self.project.replace('-', '_')}-{self.version}-py3-none-any.whl"

    @property
    def dist_info(self) -> str:
        return f"{self.project.replace('-', '_')}-{self.version}.dist-info"


@dataclass(frozen=True)
class Wheel:
    """A written wheel, as the index serves it."""

    project: str
    version: str
    path: Path
    size: int  # bytes of the .whl file
    sha256: str
    installed: int  # payload bytes once installed

    @property
    def filename(self) -> str:
        return self.path.name


@dataclass
class WheelSet:
    """Every synthetic wheel of one size set, and which of them the benchmark's scenarios use."""

    folder: Path
    wheels: list[Wheel]
    devices: dict[str, str] = field(default_factory=dict)  # gfx target -> device project

    def by_project(self, project: str) -> list[Wheel]:
        return [w for w in self.wheels if w.project == project]

    def numpy(self, index: int) -> Wheel:
        return next(w for w in self.wheels if w.project == "numpy" and w.version == NUMPY_VERSIONS[index])


def device_project(target: str) -> str:
    return f"rif-synth-device-{target}"


def specs(sizes: Sizes, targets: list[str], ratio: float = 2.0,
          torch_files: tuple[tuple[str, bytes], ...] = ()) -> list[Spec]:
    """torch depends on the common package and offers one `device-<target>` extra per target, as TheRock's does."""
    extras = tuple((f"device-{t}", (f"{device_project(t)}=={COMMON_VERSION}",)) for t in targets)
    requires = (f"{COMMON}=={COMMON_VERSION}",)
    found = [Spec("torch", f"{TORCH_VERSION}+{LOCAL_VERSION}", sizes.torch, requires, extras, "torch",
                  init=dict(torch_files).get("torch/__init__.py", b""),
                  extra=tuple(f for f in torch_files if f[0] != "torch/__init__.py")),
             Spec(COMMON, COMMON_VERSION, sizes.common, top="rif_synth_rocm_libraries")]
    found += [Spec(device_project(t), COMMON_VERSION, sizes.device, top=f"rif_synth_device_{t}") for t in targets]
    found += [Spec("numpy", v, sizes.numpy, top="numpy") for v in NUMPY_VERSIONS]
    return [replace(s, ratio=ratio) for s in found]


def check_ratio(ratio: float) -> float:
    """A payload's installed/compressed ratio: 1 (all random) or more, finite."""
    if not (math.isfinite(ratio) and 1.0 <= ratio <= 1000.0):
        raise ValueError(f"{ratio!r}: an installed/compressed ratio is a number from 1 (incompressible) to 1000")
    return ratio


def ratio_key(ratio: float) -> str:
    """The cache folder's suffix for a ratio: another ratio never reuses these wheels (2, the default, and 1 keep
    the names earlier runs gave them)."""
    return {2.0: "", 1.0: "-random"}.get(ratio, f"-ratio{ratio:g}")


def ensure(cache_root: Path, sizes: Sizes, targets: list[str], ratio: float = 2.0,
           torch_files: tuple[tuple[str, bytes], ...] = ()) -> WheelSet:
    """The wheel set for these sizes, written now only if an earlier run has not left it complete; torch_files
    (path in the wheel, bytes) replace or join torch's own (a stand-in)."""
    code = hashlib.sha256(b"".join(name.encode() + data for name, data in torch_files)).hexdigest()[:8]
    stand_in = f"-torch{code}" if torch_files else ""
    folder = cache_root / (sizes.key() + ratio_key(check_ratio(ratio)) + stand_in)
    manifest = folder / "wheels.json"
    wanted = specs(sizes, targets, ratio, torch_files)
    if manifest.is_file():
        known = _read_manifest(manifest)
        if {w.filename for w in known} == {s.filename for s in wanted} and all(w.path.is_file() for w in known):
            return WheelSet(folder, known, {t: device_project(t) for t in targets})
    folder.mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        wheels = list(pool.map(write_wheel, wanted, [folder] * len(wanted)))
    manifest.write_text(json.dumps([{**asdict(w), "path": str(w.path)} for w in wheels], indent=1))
    return WheelSet(folder, wheels, {t: device_project(t) for t in targets})


def _read_manifest(path: Path) -> list[Wheel]:
    try:
        rows = json.loads(path.read_text())
        return [Wheel(**{**row, "path": Path(row["path"])}) for row in rows]
    except (OSError, ValueError, TypeError, KeyError):
        return []


def write_wheel(spec: Spec, folder: Path) -> Wheel:
    """Write one wheel (to a .part file first, so an interrupted run never leaves a wheel that looks whole)."""
    final = folder / spec.filename
    meta = synthwheels.metadata(spec.project, spec.version, list(spec.requires),
                                {extra: list(reqs) for extra, reqs in spec.extras},
                                "synthetic package of rocm-image-factory's ROCm-scale benchmark")
    init = spec.init or f'__version__ = "{spec.version}"\n'.encode()
    files = [(f"{spec.top}/__init__.py", [init]), *payload_files(spec), *((n, [data]) for n, data in spec.extra),
             (f"{spec.dist_info}/METADATA", [meta]), (f"{spec.dist_info}/WHEEL", [synthwheels.WHEEL_FILE])]
    part = synthwheels.write(final.with_suffix(".part"), spec.dist_info, files, level=ZIP_LEVEL)
    part.rename(final)
    return Wheel(spec.project, spec.version, final, final.stat().st_size, _sha256(final), spec.payload)


def payload_files(spec: Spec) -> Iterator[tuple[str, Iterator[bytes]]]:
    """The payload in files of at most FILE_LIMIT, under the package's lib/, as shared libraries would be."""
    left, index = spec.payload, 0
    while left > 0:
        size = min(left, FILE_LIMIT)
        yield f"{spec.top}/lib/libsynth{index:03d}.so", payload_chunks(size, spec.ratio)
        left, index = left - size, index + 1


def payload_chunks(size: int, ratio: float = 2.0) -> Iterator[bytes]:
    """1 MiB chunks: 1/ratio of each os.urandom (incompressible), the rest one random 4 KiB block repeated
    (deflate's 32 KiB window finds it: it compresses away); ratio 1: all os.urandom."""
    pattern = os.urandom(4096) * (CHUNK // 4096)
    left = size
    while left > 0:
        n = min(CHUNK, left)
        random_part = min(n, round(n / ratio))
        yield os.urandom(random_part) + pattern[: n - random_part]
        left -= n


def achieved_ratio(ratio: float, sample: int = 16 * CHUNK) -> float:
    """What gzip (level 6, BuildKit's default for layers) makes of `sample` bytes of this ratio's payload:
    installed / compressed, the figure a run prints beside the one it asked for."""
    data = b"".join(payload_chunks(sample, ratio))
    return len(data) / len(gzip.compress(data, compresslevel=6, mtime=0))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK * 8):
            digest.update(chunk)
    return digest.hexdigest()
