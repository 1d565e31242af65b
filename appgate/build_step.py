"""The gate's build step: both variants of an application, once per distinct compile-time
arguments of its datasets, each from a fresh copy of the source (appgate.builds), every build
recorded as AppVariantBuilt; a failed build or a candidate identical to its baseline ends the
gate run with its reason.

A baseline already built by the caller in the same scratch (the App Agent's M1) is recorded
again under this gate run and not rebuilt: its binary is the one M1 ran.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ledger.services import NewEvent, append

from . import builds
from .builds import BuildResult
from .manifest import LoadedManifest, file_hash

VARIANTS = ("baseline", "candidate")


@dataclass
class BuiltVariants:
    binaries: dict[tuple[str, str], Path] = field(default_factory=dict)  # (variant, build_args) -> binary
    evidence: list[str] = field(default_factory=list)  # AppVariantBuilt ids
    reasons: list[str] = field(default_factory=list)  # non-empty: the gate run ends here
    detail: str = ""

    def for_dataset(self, dataset) -> dict[str, Path]:
        return {v: self.binaries[(v, dataset.build_args)] for v in VARIANTS}


def build_variants(loaded: LoadedManifest, gate_run: str, scratch: Path, actor: str, *, patch: dict[str, str],
                   upstream: dict | None, say: Callable[[str], None],
                   prebuilt: dict[str, BuildResult] | None = None) -> BuiltVariants:
    """Build (or take `prebuilt`, keyed by build_args, for the baseline) every variant for every
    distinct build_args; record each build; stop at the first failure or identical pair."""
    m = loaded.manifest
    done = BuiltVariants()
    for build_args in builds.build_arguments(loaded):
        pair = {}
        for variant in VARIANTS:
            label = f" ({build_args})" if build_args else ""
            reused = (prebuilt or {}).get(build_args) if variant == "baseline" else None
            say(f"building the {variant}{label}" if reused is None else f"the {variant}{label}: built in M1")
            built = reused or builds.build(loaded, variant, scratch, patch=patch if variant == "candidate" else None,
                                           build_args=build_args)
            sources = {**{n: file_hash(loaded.source_dir / n) for n in m.source.baseline_files},
                       **({n: hashlib.sha256(t.encode()).hexdigest() for n, t in patch.items()} if variant == "candidate" else {})}
            event = append(NewEvent(stream=f"app/{m.name}", type="AppVariantBuilt", actor=actor, payload={
                "app": m.name, "run": gate_run, "variant": variant, "ok": built.ok, "command": built.command,
                "seconds": built.seconds, "output_tail": built.output_tail, "binary_hash": built.binary_hash,
                "source_hashes": sources, "build_args": build_args,
                "upstream": upstream if variant == "baseline" else None,
                "probe": builds.probe_hash(loaded)}))
            done.evidence.append(str(event.event_id))
            if not built.ok:
                done.reasons, done.detail = [f"{variant}_build_failed"], built.output_tail[-500:]
                return done
            pair[variant] = built
            done.binaries[(variant, build_args)] = built.binary
        same = builds.identical(loaded, pair["baseline"], pair["candidate"], patched=bool(patch))
        if same:
            done.reasons, done.detail = ["identical_binaries"], same
            return done
    return done
