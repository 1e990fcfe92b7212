"""Image references as Docker reads them: what `builder test IMAGE` and `builder push IMAGE` may name.

The grammar is distribution/reference's (regexp.go at commit 00a09fa3799203fc887e667b0d82142ee831939a:
`[domain[:port]/]path[:tag][@digest]`, lower-case path components, a tag of at most 128 word characters, a name of
at most 255 characters: reference.go's NameTotalLengthMax), so a value is checked before it reaches an engine call
(`../../containers/abc` would otherwise be sent as the path `/images/../../containers/abc/json`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from builder.core.errors import usage_error
from builder.core.text import printable

MAX_NAME = 255  # distribution/reference's NameTotalLengthMax
MAX_SHOWN = 200  # a refused value is echoed cut to this many characters

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_NAME = rf"(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_COMPONENT}(?:/{_COMPONENT})*)"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
REFERENCE_RE = re.compile(rf"(?P<name>{_NAME})(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?", re.ASCII)
PATH_RE = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*", re.ASCII)
IMAGE_ID_RE = re.compile(r"(?:sha256:)?[0-9a-f]{64}")  # a full image ID: the engine's own name, never pulled


@dataclass(frozen=True)
class Reference:
    """A parsed reference: name (with its registry when it names one), tag and digest as written."""

    name: str
    domain: str | None
    tag: str | None
    digest: str | None

    @property
    def pullable(self) -> bool:
        """Whether a registry could serve it: a full image ID is only ever the engine's."""
        return IMAGE_ID_RE.fullmatch(str(self)) is None and IMAGE_ID_RE.fullmatch(self.name) is None

    @property
    def registry(self) -> str:
        """The registry it is pulled from, as Docker decides: a first component with a `.` or `:`, or localhost;
        else Docker Hub."""
        return self.domain or "docker.io"

    def pull_args(self) -> tuple[str, str]:
        """(repository, tag or digest) as the engine's pull takes them: by digest when given one, else the tag,
        else `latest`, as `docker run` pulls."""
        return self.name, self.digest or self.tag or "latest"

    @staticmethod
    def _is_host(first: str) -> bool:
        return "." in first or ":" in first or first == "localhost"

    def __str__(self) -> str:
        return self.name + (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")


def shown(value: str) -> str:
    """A value from outside for one line of an error: printable, cut to MAX_SHOWN characters."""
    cut = value if len(value) <= MAX_SHOWN else value[:MAX_SHOWN] + f"... ({len(value)} characters)"
    return printable(cut)


def parse(value: str, option: str = "IMAGE") -> Reference:
    """The reference value names; a usage error (exit 2) naming option when it is none."""
    found = REFERENCE_RE.fullmatch(value) if len(value) <= 2 * MAX_NAME + 200 else None
    if found is None:
        raise usage_error(option, f"{shown(value)!r} is not an image reference "
                                  "([REGISTRY[:PORT]/]NAME[:TAG][@DIGEST], lower-case name)")
    if len(found["name"]) > MAX_NAME:
        raise usage_error(option, f"{shown(value)!r}: the repository name is longer than {MAX_NAME} characters")
    domain = found["domain"]
    if domain is not None and not Reference._is_host(domain):  # `org/image`: a path, not a registry
        domain = None
        if PATH_RE.fullmatch(found["name"]) is None:  # `UPPER/case`: a path component in upper case
            raise usage_error(option, f"{shown(value)!r} is not an image reference (a repository name is lower case)")
    return Reference(name=found["name"], domain=domain, tag=found["tag"], digest=found["digest"])
