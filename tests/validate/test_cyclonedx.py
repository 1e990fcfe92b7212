"""builder.validate.cyclonedx: an odd component or property costs itself, never the document."""

from __future__ import annotations

from typing import Any

import pytest

from builder.registry import models
from builder.validate import cyclonedx


def test_a_component_of_a_packages_shape_is_read() -> None:
    found = cyclonedx.component({"name": "six", "version": "1.0", "purl": "pkg:pypi/six@1.0", "type": "library"})
    assert found is not None and (found.name, found.version, found.purl) == ("six", "1.0", "pkg:pypi/six@1.0")


@pytest.mark.parametrize("value", [
    {"name": ["a"]}, {"name": "six", "version": 1}, {"version": "1"}, "six", None,
    {"name": "x" * (models.MAX_NAME_CHARS + 1)},
    {"name": "six", "properties": [{}] * (cyclonedx.MAX_PROPERTIES + 1)},
])
def test_a_component_of_another_shape_is_none(value: Any) -> None:
    assert cyclonedx.component(value) is None


def test_a_property_of_another_shape_is_no_property() -> None:
    found = cyclonedx.component({"name": "six", "properties": [
        "junk", {"name": "a", "value": 1}, {"name": "b", "value": "x" * (models.MAX_TEXT_CHARS + 1)},
        {"name": "a", "value": "kept"}]})
    assert found is not None
    assert (found.property("a"), found.property("b"), found.property("c")) == ("kept", None, None)


def test_the_document_caps_its_components() -> None:
    assert models.parse(cyclonedx.Document, b'{"bomFormat": "CycloneDX"}', "x").components == []
    too_many = b'{"components": [' + b",".join([b"1"] * (cyclonedx.MAX_COMPONENTS + 1)) + b"]}"
    with pytest.raises(models.ShapeError):
        models.parse(cyclonedx.Document, too_many, "x")
