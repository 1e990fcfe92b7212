"""Every variant registry held against its Protocol (builder/core/osfamilies, builder/core/channels): each module a
registry lists has every member of the interface, of the declared kind (a function with the declared parameters,
a value of the declared type), under the name it is listed by; every module in a registry's folder is listed; and
the names the rest of the factory validates with (the ChannelName Literal, os.yaml's families) are the registry's.

A new OS family or channel fails here until it is one module, its row in the registry and its data row
(docs/architecture.md, "Adding an OS family or a wheel channel"). mypy holds the same modules to the same Protocols
statically where the registries list them."""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, get_args

import pytest

from builder.core import channels, osfamilies
from builder.core.channels.base import WheelChannel
from builder.core.osfamilies.base import OsFamily

REGISTRIES: dict[str, tuple[Mapping[str, Any], type[Any], types.ModuleType]] = {
    "osfamilies": (osfamilies.FAMILIES, OsFamily, osfamilies),
    "channels": (channels.CHANNELS, WheelChannel, channels),
}
CASES = [(registry, name) for registry, (listed, _, _) in REGISTRIES.items() for name in sorted(listed)]


def protocol_members(protocol: type[Any]) -> tuple[dict[str, Any], dict[str, Callable[..., Any]]]:
    """The protocol's data members (name -> type) and its methods (name -> function)."""
    hints = typing.get_type_hints(protocol, vars(inspect.getmodule(protocol)))
    methods = {n: f for n, f in vars(protocol).items() if inspect.isfunction(f) and not n.startswith("_")}
    return hints, methods


def _is(value: object, hint: Any) -> bool:
    """value is of the declared type (the kinds the interfaces use: str, bool, tuple[str, ...], X | None,
    Callable, a dataclass)."""
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        return any(_is(value, arm) for arm in get_args(hint))
    if hint is type(None):
        return value is None
    if origin is tuple:
        return isinstance(value, tuple) and all(isinstance(v, str) for v in value)
    if origin is not None and origin.__module__ == "collections.abc":  # Callable[...]
        return callable(value)
    return isinstance(value, hint)


@pytest.mark.parametrize(("registry", "name"), CASES)
def test_every_listed_module_answers_every_member_of_its_protocol(registry: str, name: str) -> None:
    listed, protocol, _ = REGISTRIES[registry]
    module = listed[name]
    data, methods = protocol_members(protocol)
    assert name == module.NAME, f"{registry}: {name} is listed under another name than its NAME"
    for member, hint in data.items():
        assert hasattr(module, member), f"{registry}.{name}: no {member}"
        assert _is(getattr(module, member), hint), f"{registry}.{name}.{member} is not {hint}"
    for member, declared in methods.items():
        found = getattr(module, member, None)
        assert inspect.isfunction(found), f"{registry}.{name}: {member} is not a function"
        wanted = [p for p in inspect.signature(declared).parameters if p != "self"]
        assert list(inspect.signature(found).parameters) == wanted, f"{registry}.{name}.{member}{wanted}"


@pytest.mark.parametrize("registry", sorted(REGISTRIES))
def test_every_module_of_a_registry_folder_is_listed(registry: str) -> None:
    listed, _, package = REGISTRIES[registry]
    folder = Path(package.__file__ or "").parent
    modules = {p.stem for p in folder.glob("*.py")} - {"__init__", "base"}
    assert modules == {m.__name__.rpartition(".")[2] for m in listed.values()}


def test_the_channel_names_validated_everywhere_are_the_registry_s() -> None:
    assert get_args(channels.ChannelName) == tuple(channels.CHANNELS)
    assert channels.DEFAULT in channels.CHANNELS


@pytest.mark.parametrize("of", [osfamilies.of, channels.of])
def test_an_unknown_name_is_refused_naming_the_known_ones(of: Callable[[str], object]) -> None:
    with pytest.raises(KeyError, match="known: "):
        of("conda")
