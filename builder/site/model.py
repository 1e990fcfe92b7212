"""What the catalog knows about one published image, and sizes for people."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from builder.core import tags
from builder.core.facts import gfx_families
from builder.site.records import RecordRow
from builder.validate.runner import Check

MAX_PAGE_LAYERS = 200  # a real image has at most ~125 layers (Docker's overlay limit)


@dataclass(frozen=True)
class Layer:
    step: str  # the build step that made it, as the image's history has it
    size: int | None  # compressed, from the manifest


@dataclass(frozen=True)
class GpuFamily:
    name: str
    targets: tuple[str, ...]
    gpus: tuple[str, ...]
    complete: bool  # the image carries every target of the family
    present: tuple[str, ...]  # the family's targets the image carries


FIXED_EPOCH = "1970-01-01T00:00:00Z"


def built_time(created: str | None) -> str:
    """The config's creation time, said for what it is: reproducible builds fix it (SOURCE_DATE_EPOCH=0)."""
    if created is None:
        return "unknown"
    if created.rstrip("Z").removesuffix(".000000000").startswith("1970-01-01T00:00:00"):
        return (f"{FIXED_EPOCH} (fixed for reproducible builds: SOURCE_DATE_EPOCH=0 gives the same inputs the same "
                "digest; see Published for when it was pushed)")
    return created


@dataclass
class Published:
    """One manifest in the registry, as the tags that point at it share it."""

    digest: str
    labels: dict[str, str]
    compressed_bytes: int | None
    created: str | None
    platform: str
    layers: list[Layer]

    @property
    def shown_layers(self) -> list[Layer]:
        """The layers a page lists: at most MAX_PAGE_LAYERS (a page's size has a cap; it says what it left out)."""
        return self.layers[:MAX_PAGE_LAYERS]

    @property
    def layers_left_out(self) -> str | None:
        if len(self.layers) <= MAX_PAGE_LAYERS:
            return None
        return f"layers: first {MAX_PAGE_LAYERS} of {len(self.layers):,} shown"


@dataclass
class ImageEntry:
    """One readable tag of the registry: one page of the catalog."""

    tag: str
    repository: str
    reference: str  # HOST/NS/REPO
    published: Published
    immutable_tag: str | None = None
    also_tagged: list[str] = field(default_factory=list)  # other tags on the same digest (latest, aliases)
    earlier: list[str] = field(default_factory=list)  # immutable tags of older builds of this tag
    record: RecordRow | None = None
    dockerfile: str | None = None
    dockerfile_source: str | None = None
    dockerfile_hash: str | None = None  # the content hash the bake file gives the Dockerfile's target
    same_as: str | None = None  # another tag of this manifest whose page holds it: this one's page points there

    @property
    def dockerfile_matches(self) -> bool | None:
        """Whether the committed Dockerfile rendered exactly this image (its content hash); None: cannot tell."""
        if self.dockerfile is None:
            return None
        theirs, ours = self.dockerfile_hash, self.published.labels.get(tags.HASH_LABEL)
        return None if theirs is None or ours is None else theirs == ours

    @property
    def digest(self) -> str:
        return self.published.digest

    def label(self, name: str) -> str | None:
        value = self.published.labels.get(tags.LABEL_PREFIX + name)
        return None if value in (None, "", "none") else value

    @property
    def driver_range(self) -> str:
        """The host's kernel driver the image needs (label amdgpu-driver, builder/data/drivers.yaml)."""
        value = self.published.labels.get(tags.LABEL_PREFIX + "amdgpu-driver")
        if self.label("platform") == "cpu" or value == "none":
            return "none needed (CPU only)"
        if value is None:
            return "not recorded (built before images carried it)"
        if value == "not stated":
            return "not stated by AMD for this ROCm line"
        return f"AMD GPU Driver {value} (amdgpu-dkms); `builder which` checks a host"

    @property
    def page(self) -> str:
        """The page's path under the site, without its extension."""
        return f"images/{self.repository}/{self.tag}"

    @property
    def rocm(self) -> str:
        return self.label("rocm") or ("CPU" if self.label("platform") == "cpu" else "unknown")

    @property
    def os(self) -> str:
        return self.label("os") or "unknown"

    @property
    def gfx_targets(self) -> tuple[str, ...]:
        value = self.label("gfx-targets")
        return tuple(t for t in value.split(",") if t) if value else ()

    @property
    def gpu_families(self) -> list[GpuFamily]:
        """Known families the image's targets belong to: complete ones run on its GPUs, partial ones are noted."""
        own, targets, found = self.label("gfx-family"), set(self.gfx_targets), []
        for name, gfx in gfx_families().items():
            present = tuple(t for t in gfx.targets if t in targets)
            if present or name == own:
                found.append(GpuFamily(name, gfx.targets, gfx.gpus, set(gfx.targets) <= targets, present))
        return found

    @property
    def gpus(self) -> list[str]:
        """GPUs this image has kernels for (families it carries completely)."""
        return [g for f in self.gpu_families if f.complete for g in f.gpus]

    @property
    def installed_bytes(self) -> int | None:
        return self.record.image_bytes if self.record else None

    @property
    def checks(self) -> tuple[Check, ...]:
        return self.record.validation if self.record else ()

    @property
    def pull(self) -> str:
        return f"docker pull {self.reference}:{self.tag}"

    @property
    def pull_by_digest(self) -> str:
        return f"docker pull {self.reference}@{self.digest}"

    @property
    def run(self) -> str:
        ref = f"{self.reference}:{self.tag}"
        if self.label("platform") == "cpu":
            return f"docker run -it --rm {ref}"
        return ("docker run -it --rm --device=/dev/kfd --device=/dev/dri --group-add video \\\n"
                f'  --group-add "$(getent group render | cut -d: -f3)" {ref}')

    @property
    def apptainer(self) -> str:
        """HPC clusters (docs/hpc.md): pull a SIF once, run it as yourself; --rocm gives the GPUs (your own render
        and video groups open them: Apptainer has no --group-add)."""
        sif = f"{self.reference.rsplit('/', 1)[-1]}_{self.tag}.sif"
        rocm = "" if self.label("platform") == "cpu" else " --rocm"
        return f"apptainer pull {sif} docker://{self.reference}:{self.tag}\napptainer exec{rocm} {sif} python"

    @property
    def smoke(self) -> str:
        return self.run.replace(f"{self.reference}:{self.tag}", f"{self.reference}:{self.tag} torch-smoke")

    @property
    def smoke_line(self) -> str:
        return self.smoke.replace("\\\n  ", "")

    @property
    def facts(self) -> list[tuple[str, str]]:
        """The page's summary table, in one place for the HTML and the Markdown page."""
        record = self.record
        rows = [
            ("Image", f"{self.reference}:{self.tag}"),
            ("Digest", self.digest),
            ("Immutable tag", self.immutable_tag or "not found in the registry"),
            ("Also tagged", ", ".join(self.also_tagged) or "-"),
            ("Compressed size (pull)", human_size(self.published.compressed_bytes)),
            ("Installed size (on disk)", human_size(self.installed_bytes) if self.installed_bytes
             else "not recorded (no run record of this build)"),
            ("Published", record.published_time if record and record.published_time
             else "not recorded (no run record of its push)"),
            ("Built", built_time(self.published.created)),
            ("Platform", self.published.platform),
            ("OS", self.os),
            ("Python", self.label("python") or "unknown"),
            ("PyTorch", self.label("torch") or "unknown"),
            ("torchvision", self.label("torchvision") or "not installed"),
            ("torchaudio", self.label("torchaudio") or "not installed"),
            ("ROCm", self.rocm),
            ("GPU family", self.label("gfx-family") or "-"),
            ("gfx targets", ", ".join(self.gfx_targets) or "none (CPU only)"),
            ("Host driver (amdgpu)", self.driver_range),
            ("Wheel channel", self.label("channel") or "unknown"),
            ("Flavor", self.label("flavor") or "unknown"),
            ("Default user", self.label("user") or "unknown"),
            ("Content hash", self.published.labels.get(tags.HASH_LABEL) or "unknown"),
        ]
        if record is not None:
            rows.append(("Run record", f"{record.state}, {record.finished or 'unknown time'}"))
        return rows

    @property
    def search_text(self) -> str:
        words = [self.tag, *self.also_tagged, self.os, self.rocm, *self.gpus, *self.gfx_targets,
                 self.label("torch") or "", self.label("flavor") or "", self.label("gfx-family") or ""]
        return " ".join(words).lower()


@dataclass
class Catalog:
    registry: str  # HOST/NAMESPACE
    images: list[ImageEntry]
    failed: list[RecordRow]  # images whose newest record says they failed and that the registry lacks
    generated: str
    warnings: list[str] = field(default_factory=list)

    @property
    def oses(self) -> list[str]:
        return sorted({i.os for i in self.images})

    @property
    def rocms(self) -> list[str]:
        return sorted({i.rocm for i in self.images}, key=_version_key, reverse=True)

    @property
    def gpu_options(self) -> list[tuple[str, str]]:
        """(GPU, its family's targets) for the GPU filter."""
        seen: dict[str, str] = {}
        for image in self.images:
            for gfx in image.gpu_families:
                if gfx.complete:
                    for gpu in gfx.gpus:
                        seen.setdefault(gpu, ", ".join(gfx.targets))
        return sorted(seen.items(), key=lambda kv: kv[0].lower())


def _version_key(value: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"[0-9]{1,9}", value)) or (-1,)  # a label is data: no 5000-digit int


def human_size(n: int | None) -> str:
    """Decimal units, as registries and `docker images` report them."""
    if n is None:
        return "unknown"
    for unit, scale, digits in (("GB", 1e9, 2), ("MB", 1e6, 0), ("kB", 1e3, 0)):
        if n >= scale:
            return f"{n / scale:.{digits}f} {unit}"
    return f"{n} B"


