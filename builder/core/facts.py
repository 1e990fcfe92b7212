"""What the factory knows about OS releases and AMD GPU families, read from package data files.

The facts live in builder/data/*.yaml (each with its source) so they can be reviewed and updated
without touching code.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict

ALL_TARGETS = "all"  # the gfx "family" of an image that carries every target its wheels were built for


def torch_minor(version: str) -> str:
    """`2.13.0` -> `2.13`: the torch release line compat.yaml keys its data by."""
    return ".".join(version.split(".")[:2])


class SnapshotSource(BaseModel):
    """One archive of a dated snapshot service: `{archive}/{timestamp}/dists/{suite}/{component}/...`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    archive: str
    suites: tuple[str, ...]
    components: tuple[str, ...] = ("main",)


class OsRelease(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    distro: str
    codename: str
    python: str
    family: str  # its OS family: a key of builder.core.osfamilies.FAMILIES (the module's NAME)
    base: str
    rocm_since: str
    snapshot: tuple[SnapshotSource, ...] = ()  # where `builder lock` pins its OS packages (apt only)


class GfxFamily(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    targets: tuple[str, ...]
    gpus: tuple[str, ...]
    official_since: str | None


# libyaml's parser (PyYAML's C binding) with the safe constructor: the same data as yaml.safe_load, parsed about 10x
# faster; the package's data files are 100 KB that every `builder` command reads (0.9 s of a `builder matrix` in pure
# Python). A PyYAML built without libyaml falls back to the pure-Python parser.
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def package_data(name: str) -> object:
    """One of the package's own data files (builder/data/NAME), parsed: trusted input, shipped with the code."""
    text = resources.files("builder").joinpath("data", name).read_text(encoding="utf-8")
    return yaml.load(text, Loader=_LOADER)  # a safe loader: CSafeLoader or SafeLoader


def _load(name: str) -> dict[str, object]:
    data = package_data(name)
    assert isinstance(data, dict), name
    return data


@cache
def os_releases() -> dict[str, OsRelease]:
    return {name: OsRelease.model_validate(v) for name, v in _load("os.yaml").items()}


@cache
def gfx_families() -> dict[str, GfxFamily]:
    return {name: GfxFamily.model_validate(v) for name, v in _load("gfx.yaml").items()}


class PytorchWheels(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    rocm: tuple[str, ...]
    gfx: tuple[str, ...]
    gfx_min_rocm: dict[str, str] = {}  # targets only compiled into the wheels of newer ROCm indexes
    gfx_per_rocm: dict[str, tuple[str, ...]] = {}  # an index built another way (rocm7.14 on TheRock: no gfx900)
    sdk: dict[str, str | None] = {}  # index -> the ROCm patch release its wheels were built on (7.2 -> 7.2.1)

    def targets(self, rocm: str | None) -> tuple[str, ...]:
        """The targets compiled into this torch's wheels for one ROCm index."""
        from packaging.version import Version

        if rocm is not None and rocm in self.gfx_per_rocm:
            return self.gfx_per_rocm[rocm]
        return tuple(t for t in self.gfx if rocm is None or t not in self.gfx_min_rocm
                     or Version(rocm) >= Version(self.gfx_min_rocm[t]))


IndexKind = Literal["per-family", "multi-arch", "whl-next"]


class PerFamilyRelease(BaseModel):
    """A per-family release of a multi-arch line (7.13 shipped both): ROCm/rockrel's release_portable_linux_pytorch_
    wheels.yml ran once per family of its choice list, with its own torch refs and Python matrix."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    families: tuple[str, ...]
    torch: tuple[str, ...]
    python: tuple[str, ...]
    index_dirs: dict[str, str] = {}
    exclude_targets: dict[str, tuple[str, ...]] = {}


class LineTorch(BaseModel):
    """What a TheRock line built of one torch minor, exactly (its wheels' public versions), and where that was read."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    torch: str | None  # None: not verified at any source; no cell of that minor is built on the line
    torchvision: str | None = None  # None: the paired default (torch 2.9.1 -> 0.24.1) was not contradicted
    torchaudio: str | None = None  # may carry a pre-release or 4th part: 2.7.1a0, 2.11.0.2
    source: str  # repository + path + commit (or URL) of the line's own file that names these versions


class TheRockRelease(BaseModel):
    """One release of TheRock's own ROCm line (7.13, 7.14, 10.0: never pytorch.org's 7.1/7.2)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: str  # version.json's rocm-version: the wheels' local version is +rocm<version>
    # What torch.version.hip may report, major.minor, first the HIP the release ships: pytorch#166336 made it the
    # ROCm version, pytorch#168097 the HIP version again; where the wheel's torch is not known, both are accepted.
    hip: tuple[str, ...]
    torch: tuple[str, ...]  # torch minors it builds wheels for
    python: tuple[str, ...]
    index: IndexKind  # where its stable wheels are: one index per family, whl-multi-arch, or whl-next
    families: tuple[str, ...] = ()  # per-family lines: the families whose index it published to
    # per-family lines: the folder of the index when TheRock named the family otherwise at that tag (7.12 published
    # gfx90a's wheels under whl/gfx90a/, the family gfx.yaml calls gfx90a-dcgpu)
    index_dirs: dict[str, str] = {}
    # torch minor -> the exact torch and companions the line built (7.10 built torch 2.9 as 2.9.1 beside torchvision
    # 0.24.0): TheRock builds ROCm's fork of a release branch as it stood when the line was cut, and its companions at
    # the commits that branch pins, not pytorch.org's newest patch releases
    torch_versions: dict[str, LineTorch] = {}
    exclude_targets: dict[str, tuple[str, ...]] = {}  # torch minor -> targets it builds no wheels of
    prerelease: bool = False  # branched, not tagged: its wheels are release candidates, not on the stable index
    admit: str | None = None  # a prerelease line: what would admit it to production (--explain says it)
    per_family: PerFamilyRelease | None = None  # a multi-arch line's per-family release beside it (7.13)

    def view(self, gfx: str | None, minor: str) -> TheRockRelease:
        """The release as one cell meets it: a multi-arch line's per-family release where that serves the gfx
        family's torch minor (AMD installs torch 2.11.0+rocm7.13.0 from whl/gfx1151/), else the line itself."""
        extra = self.per_family
        if extra is None or gfx not in extra.families or minor not in extra.torch:
            return self
        return self.model_copy(update={"index": "per-family", "families": extra.families, "torch": extra.torch,
                                       "python": extra.python, "index_dirs": extra.index_dirs,
                                       "exclude_targets": extra.exclude_targets, "per_family": None})

    def serves_torch(self, minor: str) -> bool:
        return minor in self.torch or (self.per_family is not None and minor in self.per_family.torch)

    @property
    def local(self) -> str:
        return f"rocm{self.version}"

    @property
    def device_extras(self) -> bool:
        """Multi-arch indexes split kernels into per-target device packages (`torch[device-gfx942]`); a
        per-family index serves the family's own wheel, with no extras to ask for."""
        return self.index != "per-family"


class TorchMinor(BaseModel):
    """One torch minor release line: its companions, Pythons and wheels per channel."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    torchvision: str
    torchaudio: str
    python: tuple[str, ...]
    pytorch: PytorchWheels
    companion_patch_offset: int = 0  # torch 2.0.x paired with torchvision 0.15.(x+1)


class AmdApt(BaseModel):
    """AMD's apt repository of ROCm releases: where a pytorch.org devel image gets its SDK."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key_url: str
    key_fingerprint: str
    repo: str  # with {rocm}
    packages: tuple[str, ...]
    suites: dict[str, str]  # OS -> the repository's suite for it


class TorchReleaseRecord(BaseModel):
    """A published torch release: when, and the page that shows it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    published: str  # YYYY-MM-DD, the first upload
    source: str


class Compat(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    torch: dict[str, TorchMinor]
    torch_releases: dict[str, TorchReleaseRecord] = {}  # every torch version a cell may ask for, each cited
    therock: dict[str, TheRockRelease]  # by its ROCm line, the label its images carry (rocm7.14)
    therock_dev_only_targets: tuple[str, ...] = ()
    whl_next_sub_families: tuple[str, ...] = ()  # sub-family device packages on whl-next (amd-torch-device-gfx115x)
    amd_apt: AmdApt
    indexes: dict[str, str]

    def therock_index(self, release: TheRockRelease, family: str | None) -> str:
        """The index that serves a TheRock release's wheels; a per-family index needs the family's name."""
        url = self.indexes[f"therock-{release.index}"]
        if release.index != "per-family":
            return url
        return url.format(family=release.index_dirs.get(family, family) if family else "")


@cache
def compat() -> Compat:
    # `x-` keys hold YAML anchors the entries share (one cited build, many lines), not data of their own
    return Compat.model_validate({k: v for k, v in _load("compat.yaml").items() if not k.startswith("x-")})


class FamilyCi(BaseModel):
    """One linux entry of TheRock's amdgpu_family_matrix.py at a line's commit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    runner: str | None  # test-runs-on; None: no GPU runs TheRock's tests of it
    pytorch: bool = True  # False where the entry says expect_pytorch_failure


class ReleaseWorkflow(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    ref: str
    commit: str
    families: tuple[str, ...]  # rockrel's amdgpu_family choice list: asked for, not proof of a build


class TheRockBuild(BaseModel):
    """A TheRock line's own target list and family matrix (therock_builds.yaml, copied at `commit`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ref: str
    commit: str
    targets: tuple[str, ...]
    families: dict[str, tuple[str, ...]]
    family_matrix: dict[str, FamilyCi]
    release_workflow: ReleaseWorkflow | None = None

    def members(self, name: str) -> tuple[str, ...] | None:
        """The targets the build gives a family (a target is a family of itself); None where it defines none."""
        if name in self.families:
            return self.families[name]
        return (name,) if name in self.targets else None

    def source(self) -> str:
        return f"ROCm/TheRock cmake/therock_amdgpu_targets.cmake @ {self.ref} ({self.commit[:8]})"


@cache
def therock_builds() -> dict[str, TheRockBuild]:
    lines = _load("therock_builds.yaml")["lines"]
    assert isinstance(lines, dict)
    return {line: TheRockBuild.model_validate(v) for line, v in lines.items()}
