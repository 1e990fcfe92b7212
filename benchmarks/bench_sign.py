"""cosign's signing and attaching, timed (issue 49): what one `cosign sign` call costs and what each digest in it
adds, measured for bench_night's sign_call_s and sign_digest_s (publish-cells.yml's sign job: up to 50 digests a call).

Debian's cosign (sid's 3.x; production runs v3.0.6) signs new images in a loopback registry of its own, key-based
and offline (benchmarks/support/signing.py says how): k digests signed one call each (k = 1, 5, 20) and k digests
in one call (k = 1, 5, 20, 50), each --repeats times, in turns so a change of load falls on every size alike. A
least-squares line through the one-call runs gives call_s (its intercept: the fixed cost of a call) and digest_s
(its slope: each digest's signature made and attached); the call-per-digest runs then check the line on runs it was
not fitted to, and a fit over both kinds (seconds = calls x call_s + digests x digest_s) gives call_s_both and
digest_s_both, a call's cost seen where it repeats. cosign 3 decrypts its key once per digest (support/signing.py),
which keyless signing does not do: the run also times that decryption (`cosign public-key --key` less `cosign
version`), and digest_less_key_s is digest_s without it. The registry must hold a signature for every digest
signed (its referrers tag) and `cosign verify --key` must accept a signed image and refuse an unsigned one, or
the run fails and records nothing.

What a keyless signature adds on a runner is not here: the OIDC token exchange, the Fulcio certificate, the Rekor
entry and the TUF trusted root are network round trips to Sigstore that this machine cannot reach.

    python benchmarks/bench_sign.py [--repeats 3] [--refresh] [--mirror URL] [--suite sid]
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.support import cosigndeb, results, signing
from benchmarks.support.localregistry import LocalRegistry
from builder.registry.client import RegistryClient

PER_DIGEST = (1, 5, 20)  # digests signed one call each
ONE_CALL = (1, 5, 20, 50)  # digests signed in one call: 50 is publish-cells.yml's batch
ONE = "one call"
EACH = "a call per digest"
KEY_LOADS = 5  # `cosign version` and `cosign public-key --key` runs, in turns


@dataclass(frozen=True)
class Run:
    """k digests signed in `mode`: the calls' wall and CPU seconds added up."""

    mode: str
    k: int
    calls: int
    wall_s: float
    cpu_s: float


@dataclass(frozen=True)
class Fit:
    """seconds = call_s + digest_s * k, by least squares; residuals: measured minus the line, run by run."""

    call_s: float
    digest_s: float
    residuals: tuple[float, ...]

    @property
    def rms_s(self) -> float:
        return math.sqrt(sum(r * r for r in self.residuals) / len(self.residuals))

    @property
    def max_s(self) -> float:
        return max(abs(r) for r in self.residuals)

    def of(self, mode: str, k: int) -> float:
        """What the line says k digests cost: one call, or k calls of one digest each."""
        return self.call_s + self.digest_s * k if mode == ONE else k * (self.call_s + self.digest_s)


def fit(points: Sequence[tuple[int, float]]) -> Fit:
    """The least-squares line through (k, seconds); it needs two sizes of k at least."""
    if len({k for k, _ in points}) < 2:
        raise ValueError("a line needs runs of two sizes of k at least")
    ks, seconds = [float(k) for k, _ in points], [s for _, s in points]
    slope, intercept = statistics.linear_regression(ks, seconds)
    return Fit(intercept, slope, tuple(s - (intercept + slope * k) for k, s in points))


def fit_both(runs: Sequence[Run]) -> Fit:
    """seconds = calls * call_s + digests * digest_s by least squares over every run, both kinds: a call's cost
    seen where it repeats (k calls of one digest), not only as the one-call line's intercept, which scatter can
    push below zero. Two unknowns, so its normal equations are solved as they stand."""
    cc = sum(r.calls * r.calls for r in runs)
    cd = sum(r.calls * r.k for r in runs)
    dd = sum(r.k * r.k for r in runs)
    det = cc * dd - cd * cd
    if det == 0:
        raise ValueError("calls and digests rise together in every run: the two costs cannot be told apart")
    cy, dy = sum(r.calls * r.wall_s for r in runs), sum(r.k * r.wall_s for r in runs)
    call_s, digest_s = (dd * cy - cd * dy) / det, (cc * dy - cd * cy) / det
    return Fit(call_s, digest_s, tuple(r.wall_s - (r.calls * call_s + r.k * digest_s) for r in runs))


def images_needed(repeats: int, per_digest: Sequence[int] = PER_DIGEST, one_call: Sequence[int] = ONE_CALL) -> int:
    """New digests the runs sign, and one more left unsigned for verify to refuse."""
    return repeats * (sum(per_digest) + sum(one_call)) + 1


def measure(cosign: signing.Cosign, refs: list[str], repeats: int, per_digest: Sequence[int] = PER_DIGEST,
            one_call: Sequence[int] = ONE_CALL) -> list[Run]:
    """Every size in turn, repeats times, each on digests never signed before (taken from refs in order)."""
    todo = iter(refs)
    runs = []
    for _ in range(repeats):
        for k in one_call:
            call = cosign.sign([next(todo) for _ in range(k)])
            runs.append(Run(ONE, k, 1, call.wall_s, call.cpu_s))
        for k in per_digest:
            calls = [cosign.sign([next(todo)]) for _ in range(k)]
            runs.append(Run(EACH, k, k, sum(c.wall_s for c in calls), sum(c.cpu_s for c in calls)))
    return runs


def table(runs: Sequence[Run], wall: Fit) -> list[str]:
    """One line per mode and k: the median of its runs, their range, per digest, and the line's figure."""
    lines = ["| mode | digests | calls | runs | wall s (median) | min-max s | s per digest | cpu s (median) "
             "| line s | measured/line |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for mode in (ONE, EACH):
        for k in sorted({r.k for r in runs if r.mode == mode}):
            same = [r for r in runs if r.mode == mode and r.k == k]
            wall_s = statistics.median(r.wall_s for r in same)
            line_s = wall.of(mode, k)
            lines.append(f"| {mode} | {k} | {same[0].calls} | {len(same)} | {wall_s:.3f} | "
                         f"{min(r.wall_s for r in same):.3f}-{max(r.wall_s for r in same):.3f} | {wall_s / k:.3f} | "
                         f"{statistics.median(r.cpu_s for r in same):.3f} | {line_s:.3f} | {wall_s / line_s:.2f} |")
    return lines


def key_load(pairs: Sequence[tuple[signing.Call, signing.Call]]) -> tuple[float, float]:
    """cosign's start (median of `cosign version`) and its key's decryption (median of public-key less version)."""
    start_s = statistics.median(v.wall_s for v, _ in pairs)
    return start_s, statistics.median(k.wall_s for _, k in pairs) - start_s


def figures(runs: Sequence[Run], wall: Fit, cpu: Fit, key: tuple[float, float]) -> dict[str, float]:
    """What the run records: the line's two figures and how well it holds, in wall and in CPU seconds, and the
    fit over both kinds of run."""
    each = [r for r in runs if r.mode == EACH]
    both = fit_both(runs)
    per_call_s = sum(r.wall_s for r in each) / sum(r.calls for r in each)
    start_s, key_s = key
    return {"call_s": round(wall.call_s, 4), "digest_s": round(wall.digest_s, 4),
            "call_s_both": round(both.call_s, 4), "digest_s_both": round(both.digest_s, 4),
            "rms_residual_s_both": round(both.rms_s, 4), "process_s": round(start_s, 4), "key_load_s": round(key_s, 4),
            "digest_less_key_s": round(wall.digest_s - key_s, 4),
            "rms_residual_s": round(wall.rms_s, 4), "max_residual_s": round(wall.max_s, 4),
            "call_cpu_s": round(cpu.call_s, 4), "digest_cpu_s": round(cpu.digest_s, 4),
            "one_digest_call_s": round(per_call_s, 4),
            "one_digest_call_over_line": round(per_call_s / (wall.call_s + wall.digest_s), 3),
            "digests_signed": float(sum(r.k for r in runs)), "calls": float(sum(r.calls for r in runs)),
            "repeats": len(runs) / len({(r.mode, r.k) for r in runs})}


def notes(origin: cosigndeb.Origin) -> str:
    return (f"Debian's cosign {origin.version} ({origin.url}, sha256 {origin.sha256[:16]}...), key-based and offline "
            "against a loopback docker-registry 2.8 (referrers tag schema): --key (an encrypted key pair from "
            "generate-key-pair), --signing-config naming no service, an empty --trusted-root, --allow-http-registry. "
            "call_s/digest_s: least squares over the one-call runs (k = 1, 5, 20, 50); call_s_both/digest_s_both: "
            "over every run, seconds = calls x call_s + digests x digest_s. cosign 3 gets its signer per "
            "digest, not per call (v3.0.6 sign.go: signDigestBundle per image): key-based, one scrypt decryption of "
            "the key per digest (key_load_s; digest_less_key_s is digest_s without it); keyless, a new key, an OIDC "
            "token and a Fulcio certificate per digest. Not included: what keyless signing adds on a runner, the OIDC "
            "token exchange, the Fulcio certificate, the Rekor entry and the TUF trusted root (network round trips "
            "to Sigstore that a runner makes and this machine cannot reach), nor round trips to ghcr.io in place of "
            "loopback.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs of each size (default 3)")
    parser.add_argument("--suite", default="sid", help="Debian suite whose cosign to use (default sid: cosign 3)")
    parser.add_argument("--mirror", help="Debian mirror URL (default: the host's apt sources)")
    parser.add_argument("--refresh", action="store_true", help="look the suite up again, not the cached cosign")
    args = parser.parse_args(argv)
    if not 1 <= args.repeats <= 20:
        parser.error("--repeats: 1 to 20")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a kill ends the registry too, as Ctrl-C does
    load_at_start = os.getloadavg()[0]
    try:
        tool = cosigndeb.ensure(args.suite, args.mirror, args.refresh)
    except cosigndeb.CosignError as error:
        print(f"bench_sign: {error}", file=sys.stderr)
        return 1
    print(f"cosign {tool.origin.version} from {tool.origin.url} ({tool.binary}); load {load_at_start:.2f}")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-sign-") as tmp:
        registry = LocalRegistry(Path(tmp) / "registry")
        registry.start()
        try:
            return signed(tool, registry, Path(tmp), args.repeats, load_at_start, started)
        except KeyboardInterrupt:
            print("bench_sign: interrupted; nothing recorded", file=sys.stderr)
            return 130
        except SystemExit:
            print("bench_sign: stopped; nothing recorded", file=sys.stderr)
            raise
        finally:
            registry.stop()


def signed(tool: cosigndeb.Cosign, registry: LocalRegistry, tmp: Path, repeats: int, load_at_start: float,
           started: float) -> int:
    """Push, sign and time, check what was attached, print and record."""
    api = RegistryClient(registry.address)
    refs = signing.push_images(api, 0, images_needed(repeats))
    cosign = signing.Cosign(tool.binary, tmp / "cosign")
    cosign.prepare()
    key = key_load([cosign.key_load() for _ in range(KEY_LOADS)])
    before = signing.stored_manifests(registry.root / "storage")
    runs = measure(cosign, refs[:-1], repeats)
    done = refs[:sum(r.k for r in runs)]
    attached = signing.signature_tags(api, done)
    added = signing.stored_manifests(registry.root / "storage") - before
    start = time.perf_counter()
    verified = cosign.verify(done[0])
    verify_s = time.perf_counter() - start
    refused = not cosign.verify(refs[-1])
    wall = fit([(r.k, r.wall_s) for r in runs if r.mode == ONE])
    cpu = fit([(r.k, r.cpu_s) for r in runs if r.mode == ONE])
    print("\n".join(table(runs, wall)))
    print(f"call_s {wall.call_s:.3f} s, digest_s {wall.digest_s:.3f} s (least squares over {len(wall.residuals)} "
          f"one-call runs; residuals rms {wall.rms_s:.3f} s, max {wall.max_s:.3f} s); CPU: call "
          f"{cpu.call_s:.3f} s, digest {cpu.digest_s:.3f} s")
    both = fit_both(runs)
    print(f"both kinds of run: call_s {both.call_s:.3f} s, digest_s {both.digest_s:.3f} s (least squares over all "
          f"{len(runs)} runs, seconds = calls x call_s + digests x digest_s; residuals rms {both.rms_s:.3f} s, max "
          f"{both.max_s:.3f} s)")
    print(f"cosign start {key[0]:.3f} s, its key's decryption {key[1]:.3f} s (medians of {KEY_LOADS}): a digest less "
          f"the key's decryption {wall.digest_s - key[1]:.3f} s")
    print(f"{len(done)} digests signed, {attached} with their signature's referrers tag, {added} new manifests "
          f"in the registry; cosign verify --key: signed {'accepted' if verified else 'REFUSED'} ({verify_s:.2f} s), "
          f"unsigned {'refused' if refused else 'ACCEPTED'}; {time.perf_counter() - started:.0f} s in all, "
          f"load {load_at_start:.2f} -> {os.getloadavg()[0]:.2f}")
    if attached != len(done) or not (verified and refused):
        print("bench_sign: the signatures are not all attached and verifiable; nothing recorded", file=sys.stderr)
        return 1
    found = figures(runs, wall, cpu, key) | {"signature_tags": float(attached), "new_manifests": float(added),
                                        "verify_s": round(verify_s, 4)}
    results.record("bench_sign", found, load_at_start, notes(tool.origin))
    print(f"recorded in {results.path_of('bench_sign')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
