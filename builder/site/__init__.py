"""The catalog of published images: a static site, one page per image with a Markdown twin, and an index.

What users of AMD's images ask (where is the Dockerfile, why is the image 54 GB, what is in it, does it run on
my GPU) is answered per image from two sources: the registry (its tags, each tag's manifest and config:
labels, layer sizes, build history) and the run records every command writes (builder/publish/record.py: installed
size, the smoke-test report). The site is plain files: no external resource, the index filters with a little
inline script, so it works offline, from file:// and on GitHub Pages.

Everything that comes from a registry or a record is data: HTML pages are rendered with Jinja2 autoescaping on,
Markdown pages escape every value (code blocks are fenced longer than any backtick run inside), tags that are
not valid tags get no page, and a Content-Security-Policy allows only the site's own inline script and style.
"""


from __future__ import annotations

import time
from pathlib import Path

from builder.core.errors import COMMAND_LINE, InputError, Problem
from builder.publish.promote import Target
from builder.registry.address import check_registry
from builder.site.collect import collect
from builder.site.model import Catalog
from builder.site.pages import is_site_file, md_escape, md_fence, render_pages, write_site
from builder.site.records import DEFAULT_REPOSITORY, REPOSITORY_RE, RecordRow, RegistryReader, load_records

DEADLINE_S = 3600.0  # every registry read of one catalog, together: thousands of tags, each a few requests

__all__ = ["Catalog", "InputError", "build_catalog", "collect", "is_site_file", "load_records", "md_escape",
           "md_fence", "render_pages", "repositories_of", "write_site"]


def repositories_of(rows: list[RecordRow], given: list[str] | None) -> list[str]:
    """--repository names, else those the records name, else the factory's default image name."""
    names = list(given or []) or sorted({r.repository for r in rows}) or [DEFAULT_REPOSITORY]
    bad = [n for n in names if not REPOSITORY_RE.fullmatch(n)]
    if bad:
        raise InputError([Problem(COMMAND_LINE, None, "--repository", f"{n!r} is not a repository name")
                          for n in bad])
    return names


def build_catalog(registry: str, out: Path, records: list[Path] | None = None,
                  repositories: list[str] | None = None, images_dirs: list[Path] | None = None,
                  reader: RegistryReader | None = None, insecure: frozenset[str] = frozenset(),
                  ) -> tuple[Catalog, list[Path]]:
    """`builder catalog`: read the registry (plain HTTP only if loopback or named insecure), write the site."""
    registry = check_registry(registry)
    ends = time.monotonic() + DEADLINE_S  # reading and rendering together: a page is no free work
    if reader is None:
        reader = Target.of(registry, insecure=insecure).api.until(DEADLINE_S)
    rows, warnings = load_records(records or [])
    names = repositories_of(rows, repositories)
    dirs = [*(images_dirs or []), Path("images")]
    catalog = collect(reader, registry, names, rows, dirs)
    catalog.warnings[:0] = warnings
    return catalog, write_site(out, render_pages(catalog, ends))
