"""builder.pipeline.options: a run's settings by concern; the registry target lives in the push's part alone."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, fields

import pytest

from builder.pipeline.options import BakeOptions, Options, PushOptions, ValidateOptions
from builder.publish.promote import Target


def test_by_default_a_run_validates_and_pushes_nowhere() -> None:
    options = Options()
    assert options.validate == ValidateOptions() and options.push is None and options.bake == BakeOptions()


def test_the_registry_target_is_the_push_s_alone() -> None:
    typed = {part: {f.name: str(f.type) for f in fields(part)} for part in (BakeOptions, ValidateOptions)}
    assert not any("Target" in t for names in typed.values() for t in names.values()), typed
    assert {f.name: str(f.type) for f in fields(PushOptions)}["target"] == "Target"
    with pytest.raises(TypeError):
        PushOptions()  # type: ignore[call-arg]  # no push without somewhere to push


def test_options_are_frozen_and_take_keywords() -> None:
    with pytest.raises(TypeError):
        BakeOptions(None)  # type: ignore[misc]
    options = PushOptions(target=Target.__new__(Target), no_push=True)
    with pytest.raises(FrozenInstanceError):
        options.no_push = False  # type: ignore[misc]
