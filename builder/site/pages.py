"""Render the catalog: HTML (autoescaped) and Markdown (every value escaped) pages, the chart, the files."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import time
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import jinja2
from markupsafe import Markup, escape

from builder.core import safefs, tags
from builder.core.errors import usage_error
from builder.render.dockerfile import template_dir
from builder.site.model import Catalog, ImageEntry, human_size
from builder.site.records import CHART_WIDTH, CHECK_STATUSES, MARKER, REFERENCES
from builder.validate.runner import Check

MAX_MARKER_BYTES = 4 << 20
SITE_FILES = frozenset({"index.html", "index.md", "records.json"})  # besides images/<repository>/<tag>.{html,md}
PAGE_RE = re.compile(r"images/(?:[a-z0-9][a-z0-9._-]*/)+[A-Za-z0-9_][A-Za-z0-9_.-]*\.(?:html|md)")

# -- rendering ------------------------------------------------------------------------------------------------

class Verbatim(str):
    """Text a Markdown template prints as it is (it built it safely itself: a fenced block, a URL)."""


MD_SPECIAL = re.compile(r"[\\`*\[\]<>|~]|&(?=#?\w+;)|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def md_escape(value: object) -> str:
    """Plain text in Markdown: no markup, no HTML, no line break that would end a table row or heading."""
    if isinstance(value, Verbatim):
        return str(value)
    text = "" if value is None else str(value)
    text = re.sub(r"[\r\n\t]+", " ", text)
    return MD_SPECIAL.sub(lambda m: "\\" + m.group(), text)


def md_fence(text: str, lang: str = "") -> Verbatim:
    """A fenced code block longer than any backtick run inside it: its content can never close it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return Verbatim(f"{fence}{lang}\n{text.rstrip()}\n{fence}")


def md_url(path: str) -> Verbatim:
    return Verbatim(urllib.parse.quote(path, safe="/:#?&=%~+@"))


@dataclass(frozen=True)
class Bar:
    label: str
    size: int
    width: int  # px
    kind: str  # ours | amd
    href: str = ""
    note: str = ""
    image: ImageEntry | None = None


def chart(catalog: Catalog, kind: str) -> list[Bar]:
    """Bars of one size (compressed or installed): AMD's published sizes first, then each image's."""
    refs = [r for r in REFERENCES if r.kind == kind]
    ours = [(i, i.published.compressed_bytes if kind == "compressed" else i.installed_bytes) for i in catalog.images]
    scale = max([r.size_bytes for r in REFERENCES] + [size or 0 for _, size in ours])

    def width(size: int) -> int:
        return max(1, round(CHART_WIDTH * size / scale))

    bars = [Bar(r.label, r.size_bytes, width(r.size_bytes), "amd", r.url, r.source) for r in refs]
    bars += [Bar(i.tag, size, width(size), "ours", image=i) for i, size in ours if size]
    return bars


def wrap_tag(tag: object) -> Markup:
    """A long tag that may break after its underscores (each part escaped)."""
    return Markup("_<wbr>").join(escape(part) for part in str(tag).split("_"))


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _environments() -> tuple[jinja2.Environment, jinja2.Environment]:
    loader = jinja2.FileSystemLoader(template_dir() / "site")
    html = jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined,
                              trim_blocks=True, lstrip_blocks=True)
    md = jinja2.Environment(loader=loader, autoescape=False, undefined=jinja2.StrictUndefined,
                            trim_blocks=True, lstrip_blocks=True, finalize=md_escape)
    for env in (html, md):
        env.globals.update(human_size=human_size, references=REFERENCES, CHECK_STATUSES=CHECK_STATUSES,
                           content_hash_label=tags.HASH_LABEL)
    html.filters["wbr"] = wrap_tag
    html.filters["basename"] = lambda path: Path(str(path)).name
    md.filters.update(fence=md_fence, url=md_url)
    return html, md


def _assets() -> tuple[str, str]:
    folder = template_dir() / "site"
    return (folder / "site.css").read_text(encoding="utf-8"), (folder / "filter.js").read_text(encoding="utf-8")


def _csp(style: str, script: str | None) -> str:
    scripts = _csp_hash(script) if script is not None else "'none'"
    return (f"default-src 'none'; style-src {_csp_hash(style)}; script-src {scripts}; img-src data:; "
            "base-uri 'none'; form-action 'none'")


def _counts(checks: Iterable[Check]) -> str:
    names = {"pass": "passed", "fail": "failed", "warn": "warnings", "skip": "skipped", "info": "info"}
    checks = list(checks)
    if not checks:
        return "not recorded"
    counts = {s: sum(c.status == s for c in checks) for s in names}
    return ", ".join(f"{n} {names[s]}" for s, n in counts.items() if n) or f"{len(checks)} checks"


PAGE_FAULTS = (ValueError, TypeError, KeyError, AttributeError, ArithmeticError, RecursionError, MemoryError)
class PageDropped(ValueError):
    """A page not written, and why (past its size cap, past the deadline)."""


MAX_PAGE_BYTES = 4 << 20  # one image's page: a few hundred layers and checks are ~200 kB; past this it is not written


def render_pages(catalog: Catalog, ends: float | None = None) -> dict[str, str]:
    """Every file of the site, by its path under the site (no I/O but reading the templates).

    An image whose page cannot be rendered (data no check foresaw, past MAX_PAGE_BYTES, or past the command's
    deadline `ends`, a time.monotonic()) is taken out of the catalog with a warning, and the rest rendered
    again without it: it costs its page, not the site. A manifest several tags share is rendered once, on its
    first tag's page; the others' pages point there."""
    html, md = _environments()
    style, script = _assets()
    common = {"catalog": catalog, "style": Markup(style), "counts": _counts}
    _share_pages(catalog.images)
    while True:
        files: dict[str, str] = {}
        bad = []
        for image in catalog.images:
            try:
                files.update(_page(html, md, common, image, style, ends))
            except PAGE_FAULTS as exc:
                bad.append(image)
                catalog.warnings.append(f"{image.reference}:{image.tag}: page not rendered ({_why(exc)}): no page")
        if not bad:
            break
        catalog.images = [i for i in catalog.images if i not in bad]
        _share_pages(catalog.images)
    files["index.html"] = html.get_template("index.html").render(
        **common, script=Markup(script), csp=_csp(style, script), root="",
        compressed=chart(catalog, "compressed"), installed=chart(catalog, "installed"))
    files["index.md"] = md.get_template("index.md").render(**common)
    merged = [i.record.as_json() for i in catalog.images if i.record] + [r.as_json() for r in catalog.failed]
    files["records.json"] = json.dumps({"registry": catalog.registry, "complete": True, "finished": catalog.generated,
                                        "images": merged}, indent=1) + "\n"
    return files


def _share_pages(images: list[ImageEntry]) -> None:
    """Tags of one repository on one manifest: the image's own tag (its label) holds the page, else the first
    by name; the others point at it."""
    first: dict[tuple[str, str], str] = {}
    for image in sorted(images, key=lambda i: (i.tag != i.published.labels.get(tags.TAG_LABEL), i.tag)):
        holder = first.setdefault((image.repository, image.digest), image.tag)
        image.same_as = holder if holder != image.tag else None


def _page(html: jinja2.Environment, md: jinja2.Environment, common: dict[str, object], image: ImageEntry,
          style: str, ends: float | None) -> dict[str, str]:
    if ends is not None and time.monotonic() > ends:
        raise PageDropped("the command's deadline passed")
    root = "../" * image.page.count("/")
    kind = "alias" if image.same_as else "image"
    page = html.get_template(f"{kind}.html").render(**common, image=image, csp=_csp(style, None), root=root)
    twin = md.get_template(f"{kind}.md").render(**common, image=image, root=root)
    size = max(len(page), len(twin))
    if size > MAX_PAGE_BYTES:
        raise PageDropped(f"{size:,} characters, over the {MAX_PAGE_BYTES:,} a page may take")
    return {image.page + ".html": page, image.page + ".md": twin}


def _why(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, PageDropped) else type(exc).__name__


def write_site(out: Path, files: dict[str, str]) -> list[Path]:
    """Write the files; a catalog written there before is replaced, nothing else in out is ever touched.

    The marker's names are data from disk: only names a catalog writes (is_site_file) are removed, relative
    and inside out, a link is removed (never what it names), and files are written without following links
    (builder.core.safefs): a marker that names `.git/config` or `CNAME` removes nothing."""
    marker = out / MARKER
    if out.exists() and not out.is_dir():
        raise usage_error("--out", f"{out} is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (marker.is_file() and not marker.is_symlink()):
        raise usage_error("--out", f"{out} is not empty and holds no catalog written by builder: give an empty "
                                   "or new directory")
    try:
        listed = json.loads(safefs.read_regular(marker, MAX_MARKER_BYTES)).get("files", []) \
            if marker.is_file() else []
    except (OSError, ValueError, AttributeError, RecursionError):
        listed = []
    previous = listed if isinstance(listed, list) else []
    try:
        for name in previous:
            if isinstance(name, str) and name not in files and is_site_file(name):
                safefs.remove_inside(out, name)
        written = [safefs.write_inside(out, name, _utf8(text)) for name, text in sorted(files.items())]
        safefs.write_inside(out, MARKER, (json.dumps({"files": sorted(files)}, indent=1) + "\n").encode())
    except OSError as exc:
        raise usage_error("--out", f"cannot write the catalog into {out}: {exc}") from None
    return written


def is_site_file(name: str) -> bool:
    """A name render_pages gives a file: the index, the records, an image's page."""
    return name in SITE_FILES or (PAGE_RE.fullmatch(name) is not None and ".." not in name.split("/"))


def _utf8(text: str) -> bytes:
    """A page as UTF-8. A registry's or a record's JSON may hold a lone surrogate ("\\udcff"), which no UTF-8
    encodes: it is written as that escape, visible, not a crash of the whole site."""
    return text.encode("utf-8", errors="backslashreplace")
