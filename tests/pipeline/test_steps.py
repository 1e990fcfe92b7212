"""builder.pipeline.steps: each step of an image's run returns its result, which builder.pipeline.lifecycle
assembles into the image's record (`recorded` here), with fakes for the engine and the registry
 (the steps against a real engine: tests/pipeline/test_lifecycle.py, tests/e2e)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from docker.errors import ImageNotFound

from builder.buildkit.bake import BuildResult
from builder.core import tags
from builder.pipeline import lifecycle, steps
from builder.pipeline.options import ValidateOptions
from builder.publish.record import Attached, Failed, ImageReport, Inventoried, Result
from builder.registry.client import Manifest
from builder.registry.errors import RegistryError
from builder.render import lockrecord
from builder.validate import sbom
from builder.validate.runner import Check, ValidationResult

HASH = "sha256:" + "c" * 64
JOB: Any = SimpleNamespace(tag="t1", repository="pytorch", tags=["t1"], content_hash=HASH,
                           immutable_tag=tags.immutable_tag("t1", HASH), rendered=object(), local_image="x", expect={},
                           labels={})
PUBLISHED = Manifest(body=b"{}", media_type="application/vnd.oci.image.manifest.v1+json", digest="sha256:" + "d" * 64)
QUIET = ValidateOptions()


class Engine:
    """images.get answers with an image of the given id for the refs it holds."""

    def __init__(self, held: dict[str, str]) -> None:
        self.images = self
        self.held = held
        self.asked: list[str] = []

    def get(self, ref: str) -> Any:
        self.asked.append(ref)
        if ref not in self.held:
            raise ImageNotFound(ref)
        return SimpleNamespace(id=self.held[ref])


@pytest.fixture(autouse=True)
def sizes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(steps, "installed_bytes", lambda client, image_id: 42)


def recorded(*results: Result) -> ImageReport:
    """The image's record as lifecycle assembles it from these results, in order, stopping at a failure."""
    report = lifecycle.planned(JOB)
    for result in results:
        report = lifecycle.assemble(report, result)
        if report.failed:
            break
    return report


def test_a_baked_image_is_taken_with_its_size_and_log() -> None:
    r = recorded(steps.take_build(Engine({}), JOB, BuildResult("t", True, "sha256:1", 3.0, log_tail=["done"])))
    assert (r.state, r.image_id, r.image_bytes, r.build_seconds, r.log_tail) == ("built", "sha256:1", 42, 3.0,
                                                                                   ("done",))


def test_a_failed_bake_fails_the_image_and_a_hash_mismatch_says_the_lock_is_broken() -> None:
    r = recorded(steps.take_build(Engine({}), JOB, BuildResult("t", False, error="exit 1")))
    assert r.failed and (r.failed_stage, r.failure) == ("build", "build: exit 1")
    mismatch = BuildResult("t", False, error="exit 1", log_tail=[f"ERROR: THESE PACKAGES {steps.HASH_MISMATCH}."])
    r = recorded(steps.take_build(Engine({}), JOB, mismatch))
    assert r.failed and r.failure == f"build: {steps.LOCK_BROKEN}"


def test_without_a_bake_the_image_is_found_by_its_content_name_or_fails() -> None:
    engine = Engine({steps.content_ref(JOB): "sha256:2"})
    r = recorded(steps.take_build(engine, JOB, None))
    assert not r.failed and (r.image_id, r.image_bytes) == ("sha256:2", 42)
    assert engine.asked == [tags.local_ref("pytorch", tags.immutable_tag("t1", HASH))]
    pushed: Any = SimpleNamespace(**{**JOB.__dict__, "rendered": None})
    r = recorded(steps.take_build(Engine({}), pushed, None))
    assert r.failed_stage == "build" and r.failure is not None and r.failure.startswith("build: no local image x")


def test_an_sbom_that_cannot_be_made_fails_the_image(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(client: object, image_id: str, name: str) -> sbom.Sbom:
        raise sbom.SbomError("dpkg-query failed")
    monkeypatch.setattr(sbom, "generate", refuse)
    stages: list[str] = []
    made = steps.make_sbom(Engine({}), JOB, "sha256:1", stages.append)
    assert isinstance(made, Failed)
    r = recorded(made)
    assert stages == ["sbom"] and r.failed and r.failure == "sbom: dpkg-query failed"


class Target:
    def __init__(self, attach_error: RegistryError | None = None, has: bool = False) -> None:
        self.error, self.has = attach_error, has
        self.api = SimpleNamespace(address="r.io")

    def repository(self, name: str) -> str:
        return f"ns/{name}"

    def attach_sbom(self, image: str, manifest: Manifest, document: sbom.Sbom) -> Attached:
        if self.error:
            raise self.error
        return Attached(kind="sbom", artifact="sha256:" + "a" * 64)

    def has_sbom(self, image: str, manifest: Manifest) -> bool:
        return self.has


def test_an_sbom_that_cannot_be_attached_fails_the_image_and_names_where_it_was_pushed() -> None:
    r = recorded(steps.attach(JOB, Target(RegistryError("denied")), PUBLISHED, None, lambda s: None))  # type: ignore[arg-type]
    assert r.failed and r.digest == PUBLISHED.digest and r.failure is not None
    assert r.failure.startswith(f"sbom: cannot attach the SBOM to r.io/ns/pytorch@{PUBLISHED.digest}")
    assert not recorded(steps.attach(JOB, Target(), PUBLISHED, None, lambda s: None)).failed  # type: ignore[arg-type]


def test_repair_makes_an_sbom_only_from_the_very_image_published(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(steps, "make_sbom", lambda *args: pytest.fail("no SBOM is made"))
    assert list(steps.repair_sbom(Engine({}), JOB, Target(has=True), PUBLISHED, lambda s: None)) == []  # type: ignore[arg-type]
    assert list(steps.repair_sbom(Engine({}), JOB, Target(), PUBLISHED, lambda s: None)) == []  # type: ignore[arg-type]
    other = Engine({steps.content_ref(JOB): "sha256:" + "e" * 64})
    assert list(steps.repair_sbom(other, JOB, Target(), PUBLISHED, lambda s: None)) == []  # type: ignore[arg-type]
    monkeypatch.setattr(steps, "make_sbom", lambda *args: Failed(stage="sbom", why="sbom: no"))
    same = Engine({steps.content_ref(JOB): PUBLISHED.digest})
    assert recorded(*steps.repair_sbom(same, JOB, Target(), PUBLISHED, lambda s: None)).failed  # type: ignore[arg-type]


def test_validation_fails_the_image_or_records_its_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    checks = [Check("smoke", "torch", "fail", "no torch")]
    monkeypatch.setattr(steps, "validate_image", lambda *args, **kwargs: ValidationResult("x", checks, 1.23456))
    monkeypatch.setattr(steps, "_facts", lambda client, image_id: FACTS)
    r = recorded(steps.validate(Engine({}), JOB, "sha256:1", QUIET, lambda s: None))
    assert r.failed and (r.failed_stage, r.validation, r.validate_seconds, r.packages) == ("validate", tuple(checks),
                                                                                           1.235, ())
    checks[0] = Check("smoke", "torch", "pass")
    validated = steps.validate(Engine({}), JOB, "sha256:1", QUIET, lambda s: None)
    r = recorded(validated)
    assert (r.state, r.packages) == ("validated", ("numpy==2.4.6", "torch==2.13.0+cpu"))  # the facts' Python side
    assert validated.facts == FACTS


# The shape of builder.validate.sbom.inspect's answer (its _SCRIPT, run in a container of the example's runtime
# image): the OS family's inventory lines and each distribution of the venv.
FACTS = {"os": {"ID": "debian", "VERSION_ID": "12"},
         "os_packages": {"type": "deb", "lines": "libc6 2.36-9+deb12u13 amd64\nzlib1g 1:1.2.13.dfsg-1 amd64"},
         "python": [{"name": "torch", "version": "2.13.0+cpu", "record_sha256": "a" * 64},
                    {"name": "numpy", "version": "2.4.6", "record_sha256": "b" * 64}]}


def test_the_sbom_is_made_from_the_facts_validation_read_without_a_container(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sbom, "generate", lambda *args: pytest.fail("no second container is asked for"))
    made = steps.make_sbom(Engine({}), JOB, "sha256:1", lambda s: None, FACTS)
    assert isinstance(made, Inventoried)
    assert [(p.ecosystem, p.name) for p in made.sbom.packages] == [("deb", "libc6"), ("deb", "zlib1g"),
                                                                  ("pypi", "numpy"), ("pypi", "torch")]
    unread = steps.make_sbom(Engine({}), JOB, "sha256:1", lambda s: None, "python3 in x exited 1: no venv")
    assert isinstance(unread, Failed) and unread.why == "sbom: python3 in x exited 1: no venv"


class LockTarget(Target):
    """Records the lock records attached, and which artifact types were asked for."""

    def __init__(self, attach_error: RegistryError | None = None, has: bool = False) -> None:
        super().__init__(attach_error, has)
        self.attached: list[lockrecord.Recorded] = []
        self.asked: list[str] = []

    def attach_lock(self, image: str, manifest: Manifest, recorded: lockrecord.Recorded) -> Attached:
        if self.error:
            raise self.error
        self.attached.append(recorded)
        return Attached(kind="lock", artifact="sha256:" + "f" * 64)

    def has_referrer(self, image: str, manifest: Manifest, artifact_type: str) -> bool:
        self.asked.append(artifact_type)
        return self.has


LOCKS = {"base.txt": "# rif-lock {}\ndebian:12@sha256:" + "0" * 64 + "\n"}
LOCKED: Any = SimpleNamespace(**{**vars(JOB), "rendered": SimpleNamespace(lock_files=LOCKS)})
UNLOCKED: Any = SimpleNamespace(**{**vars(JOB), "rendered": SimpleNamespace(lock_files={})})


def test_a_locked_image_gets_its_lock_attached_and_an_unlocked_one_nothing() -> None:
    target, stages = LockTarget(), []
    r = recorded(*steps.attach_lock(LOCKED, target, PUBLISHED, stages.append))  # type: ignore[arg-type]
    assert target.attached == [lockrecord.Recorded(LOCKS)] and stages == ["attach lock"] and r.lock_artifact
    for job in (UNLOCKED, SimpleNamespace(**{**vars(JOB), "rendered": None})):
        assert list(steps.attach_lock(job, target, PUBLISHED, stages.append)) == []  # type: ignore[arg-type]
    assert len(target.attached) == 1 and stages == ["attach lock"]


def test_a_lock_that_cannot_be_attached_fails_the_image_before_any_tag_moves() -> None:
    r = recorded(*steps.attach_lock(LOCKED, LockTarget(RegistryError("denied")), PUBLISHED, lambda s: None))  # type: ignore[arg-type]
    assert r.failed_stage == "push" and r.digest == PUBLISHED.digest and r.failure is not None
    assert r.failure.startswith(f"push: cannot attach the lock record to r.io/ns/pytorch@{PUBLISHED.digest}")


def test_repair_attaches_the_lock_to_a_published_locked_image_that_has_none() -> None:
    has, lacks = LockTarget(has=True), LockTarget()
    assert not recorded(*steps.repair_lock(LOCKED, has, PUBLISHED, lambda s: None)).failed  # type: ignore[arg-type]
    assert not recorded(*steps.repair_lock(LOCKED, lacks, PUBLISHED, lambda s: None)).failed  # type: ignore[arg-type]
    assert (has.attached, lacks.attached) == ([], [lockrecord.Recorded(LOCKS)])
    assert has.asked == [lockrecord.MEDIA_TYPE]
    unlocked = LockTarget()
    assert list(steps.repair_lock(UNLOCKED, unlocked, PUBLISHED, lambda s: None)) == []  # type: ignore[arg-type]
    assert unlocked.asked == [] and unlocked.attached == []  # an unlocked image: not even asked
