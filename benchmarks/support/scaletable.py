"""The ROCm-scale benchmark's figures (bench_scale.py): the table of old layout against new, and the notes
under it."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from benchmarks.support.localregistry import Image
from benchmarks.support.rocmwheels import WheelSet
from benchmarks.support.scaleplumbing import Layout, size, union_bytes
from benchmarks.support.scalesupply import Supply
from benchmarks.support.scaletiming import Timing

# ---------------------------------------------------------------- figures


@dataclass(frozen=True)
class Row:
    figure: str
    old: str
    new: str
    target: str
    old_met: bool | None
    new_met: bool | None


def missing_bytes(image: Image, present: Image) -> int:
    """What pulling image transfers when present is already there: its layers present does not have."""
    have = present.digests()
    return sum({layer.digest: layer.size for layer in image.layers if layer.digest not in have}.values())


def device_bytes(new: Layout, family: str) -> int:
    """A family's device layer(s), from the new layout where they are layers of their own."""
    return sum(layer.size for layer in new.images[f"{family}-runtime"].layers if "[device-" in layer.created_by)


def ratio(num: float, den: float) -> str:
    return f"{num / den:.3f}x ({size(num)} / {size(den)})" if den else "n/a"


def rows(old: Layout, new: Layout, families: list[str], timed: Timing | None) -> list[Row]:
    a, b = families[0], families[1]
    devices = {f: device_bytes(new, f) for f in families}
    result = [Row("peak store during build / final images", ratio(old.peak, old.final), ratio(new.peak, new.final),
                  "<= 1.15x", old.peak <= 1.15 * old.final, new.peak <= 1.15 * new.final)]
    result += pair_rows(old, new, a) + family_rows(old, new, families, devices, b)
    result.append(downloads_row(old, new))
    result.append(Row("re-pushed after numpy update / pair bytes", pct(old.repush, old.pair_bytes),
                      pct(new.repush, new.pair_bytes), "< 5%", old.repush < 0.05 * old.pair_bytes,
                      new.repush < 0.05 * new.pair_bytes))
    worst = {name: max(lay.floors.values(), key=lambda f: f.ratio) for name, lay in (("old", old), ("new", new))}
    result.append(Row(f"size over the floor, {a} runtime / devel", floor_text(old), floor_text(new), "< 3%",
                      worst["old"].ratio < 0.03, worst["new"].ratio < 0.03))
    if timed is not None:
        builder, plain = statistics.median(timed.builder), statistics.median(timed.plain)
        result.append(Row("builder build / plain bake, warm (median)", "n/a (no bake)",
                          f"{timed.ratio:.3f}x ({builder:.2f} s / {plain:.2f} s)", "<= 1.05x", None,
                          timed.ratio <= 1.05))
    return result


def no_old(table: list[Row]) -> list[Row]:
    """The table of a run without the old layout (--skip-old): its column says so."""
    return [replace(r, old="(not run)", old_met=None) for r in table]


def pct(num: int, den: int) -> str:
    return f"{num / den:.2%} ({size(num)} / {size(den)})" if den else "n/a"


def pair_rows(old: Layout, new: Layout, family: str) -> list[Row]:
    """Pair storage / (runtime + devel's own), devel's own = devel - runtime; devel pull after runtime / own."""
    def figures(lay: Layout) -> tuple[int, int, int]:
        rt, dv = lay.images[f"{family}-runtime"], lay.images[f"{family}-devel"]
        return union_bytes([rt, dv]), dv.size, missing_bytes(dv, rt)

    (os_, oi, op), (ns, ni, np_) = figures(old), figures(new)
    oown = old.images[f"{family}-devel"].size - old.images[f"{family}-runtime"].size
    nown = new.images[f"{family}-devel"].size - new.images[f"{family}-runtime"].size
    return [Row(f"registry, {family} runtime+devel / (runtime + devel own)", ratio(os_, oi), ratio(ns, ni),
                "<= 1.02x", os_ <= 1.02 * oi, ns <= 1.02 * ni),
            Row("devel pull with runtime present / devel own", ratio(op, oown), ratio(np_, nown),
                "own only (<= 1.02x)", op <= 1.02 * oown, np_ <= 1.02 * nown)]


def family_rows(old: Layout, new: Layout, families: list[str], devices: dict[str, int], second: str) -> list[Row]:
    """Three family runtimes / (common + device layers), common = mean(image - its device bytes); second
    family's pull after the first / its device bytes."""
    def figures(lay: Layout) -> tuple[int, int, int]:
        runtimes = [lay.images[f"{f}-runtime"] for f in families]
        common = statistics.mean(img.size - devices[f] for img, f in zip(runtimes, families, strict=True))
        return union_bytes(runtimes), int(common + sum(devices.values())), missing_bytes(runtimes[1], runtimes[0])

    (os_, oi, op), (ns, ni, np_) = figures(old), figures(new)
    dev = devices[second]
    return [Row("registry, 3 family runtimes / (common + device layers)", ratio(os_, oi), ratio(ns, ni),
                "<= 1.05x", os_ <= 1.05 * oi, ns <= 1.05 * ni),
            Row(f"pull of {second} with {families[0]} present / its device", ratio(op, dev), ratio(np_, dev),
                "device only (<= 1.05x)", op <= 1.05 * dev, np_ <= 1.05 * dev)]


def downloads_row(old: Layout, new: Layout) -> Row:
    def text(lay: Layout) -> str:
        if not lay.downloads:
            return "0 (no index)"
        return f"max {max(lay.downloads.values())} over {len(lay.downloads)} wheels"

    return Row("wheel downloads per distinct wheel, all runs", text(old), text(new), "once per wheel",
               max(old.downloads.values(), default=0) <= 1, max(new.downloads.values(), default=0) <= 1)


def floor_text(lay: Layout) -> str:
    return " / ".join(f"{f.ratio:.2%}" for f in lay.floors.values())


def print_table(table: list[Row]) -> None:
    widths = [max(len(getattr(r, name)) for r in table) for name in ("figure", "old", "new", "target")]
    head = ("figure", "old layout", "new layout", "target")
    widths = [max(w, len(h)) for w, h in zip(widths, head, strict=True)]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + "  met old/new")
    for r in table:
        cells = (r.figure, r.old, r.new, r.target)
        met = "/".join("-" if m is None else ("yes" if m else "NO") for m in (r.old_met, r.new_met))
        print("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + "  " + met)


def print_notes(old: Layout | None, new: Layout, supply: Supply, wheels: WheelSet, timed: Timing | None) -> None:
    names = {w.filename: f"{w.project} {w.version}" for w in wheels.wheels}
    for lay in (new,) if old is None else (old, new):
        counts = ", ".join(f"{names.get(f, f)}: {n}" for f, n in sorted(lay.downloads.items()))
        print(f"downloads, {lay.name}: {counts or 'none'}")
        print(f"phases, {lay.name}: " + ", ".join(f"{k} {v:.0f} s" for k, v in lay.seconds.items()))
        for note in lay.notes:
            print(f"{lay.name}: {note}")
        print(f"floor, {lay.name}: " + "; ".join(
            f"{k}: image {size(f.image)}, base {size(f.base)}, venv {size(f.venv)}, packages {size(f.packages)}, "
            f"over {size(f.over)}" for k, f in lay.floors.items()))
    if timed is not None:
        print(f"timing runs (s): builder {[round(x, 2) for x in timed.builder]}, plain "
              f"{[round(x, 2) for x in timed.plain]}, first builder build {timed.cold:.1f} ({timed.source}); "
              "`builder --version` "
              f"(interpreter + imports) {statistics.median(timed.startup):.2f} s")
    for note in supply.notes:
        print(note)
