"""The shape of a CycloneDX document as `builder diff` reads it from a registry: typed, with limits.

The document is checked as a whole (an object, `bomFormat`, a list of components, at most MAX_COMPONENTS);
each component on its own, so one odd entry (a version that is a number, a name that is a list) costs
itself, counted, never the document; an odd property costs only itself. A document whose `components` is
no list is no SBOM: read as one with no package, a diff would call every package removed.
"""

from __future__ import annotations

from typing import Annotated, Any

import pydantic
from pydantic import Field, StrictStr

from builder.registry.models import MAX_NAME_CHARS, MAX_TEXT_CHARS, Model

MAX_COMPONENTS = 50_000  # an image's OS and Python packages: a few thousand
MAX_PROPERTIES = 100

Name = Annotated[StrictStr, Field(max_length=MAX_NAME_CHARS)]
Text = Annotated[StrictStr, Field(max_length=MAX_TEXT_CHARS)]


class Document(Model):
    bom_format: Name | None = Field(None, alias="bomFormat")
    components: list[Any] = Field(default_factory=list, max_length=MAX_COMPONENTS)


class Component(Model):
    name: Name
    version: Name | None = None
    purl: Annotated[StrictStr, Field(max_length=4 * MAX_NAME_CHARS)] | None = None
    properties: list[Any] = Field(default_factory=list, max_length=MAX_PROPERTIES)

    def property(self, name: str) -> str | None:
        """A property's value; a property of another shape is no property (the package stays)."""
        return next((p["value"] for p in self.properties if isinstance(p, dict) and p.get("name") == name
                     and isinstance(p.get("value"), str) and len(p["value"]) <= MAX_TEXT_CHARS), None)


def component(value: object) -> Component | None:
    """One component, or None when it is not the shape a package has."""
    try:
        return Component.model_validate(value)
    except (pydantic.ValidationError, RecursionError):
        return None
