"""The report of one measurement: what `measurement.services.measure` returns (and the protocol
ablation builds from its re-timings), and the evidence recorded from it as the payload of
CandidateMeasured and BaselinesMeasured.

Plain data over the harness's results: nothing here imports Django or the ledger, which stay in
measurement/services.py with the orchestration and the recording.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

from measurement.backends.base import Variant
from measurement.harness.cases import Case
from measurement.harness.judge import Correctness, VariantTiming
from measurement.harness.plan import ProtocolSettings, harness_version


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def finite(value: float | None) -> float | None:
    """JSON (and so the ledger) has no inf/NaN: a non-finite number is recorded as null."""
    return value if value is not None and math.isfinite(value) else None


@dataclass
class VariantReport:
    variant: Variant
    precision: str
    correctness: Correctness
    timing: VariantTiming | None = None
    identity: dict[str, Any] = field(default_factory=dict)  # what exactly ran (Prepared.identity)

    @property
    def usable(self) -> bool:
        return (
            self.correctness.correct
            and self.timing is not None
            and not self.timing.impossible
            and self.timing.timed_output_ok
        )

    def evidence(self) -> dict[str, Any]:
        kernel = self.variant.kernel
        correctness = self.correctness.as_dict()
        for check in correctness["checks"]:
            check["error"] = finite(check["error"])
        timing = None
        if self.timing is not None:
            timing = self.timing.as_dict()
            timing["timed_output_error"] = finite(timing["timed_output_error"])
        return {
            "name": self.variant.name,
            "role": self.variant.role,
            "precision": self.precision,
            "source_hash": source_hash(kernel.source) if kernel else None,
            "source": kernel.source if kernel else None,
            "launch": kernel.launch if kernel else {},
            "identity": self.identity,
            "correctness": correctness,
            "timing": timing,
        }


@dataclass
class MeasurementReport:
    case: Case
    backend: str
    description: dict[str, Any]
    variants: dict[str, VariantReport]
    protocol: ProtocolSettings
    seeds: dict[str, int]
    copy_bandwidth: float | None = None
    launch_overhead: float | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    samples: dict[str, list[list[float]]] = field(default_factory=dict)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    noisy: bool = False

    @property
    def left_out(self) -> list[str]:
        """The baselines a re-run left out of contention, neither checked nor timed (measurement.contenders)."""
        return list(self.description.get("left_out") or [])

    @property
    def bound(self) -> VariantReport | None:
        usable = self.baselines()
        return min(usable, key=lambda r: r.timing.median) if usable else None

    def evidence(self) -> dict[str, Any]:
        bound = self.bound
        variants = []
        for report in self.variants.values():
            item = report.evidence()
            if item["timing"] is not None:
                item["timing"]["samples"] = self.samples.get(report.variant.name, [])
            variants.append(item)
        return {
            "case": self.case.id,
            "backend": self.backend,
            "description": self.description,
            "environment": self.environment,
            "harness_version": harness_version(),
            "protocol": self.protocol.__dict__,
            "seeds": self.seeds,
            "copy_bandwidth": self.copy_bandwidth,
            "launch_overhead": self.launch_overhead,
            "variants": variants,
            "bound": self._summary(bound) if bound else None,
            "attempts": self.attempts,
            "noisy": self.noisy,
        }

    def baselines(self) -> list[VariantReport]:
        """Every public baseline that was correct and timed: the candidates for the bound."""
        return [r for r in self.variants.values() if r.variant.role == "baseline" and r.usable]

    @staticmethod
    def _summary(bound: VariantReport) -> dict[str, Any]:
        """The bound as verdicts, tables and exports name it: the variant, its identity (library
        and version, schedule, a composed bound's parts) and its label, e.g. `pystencils 2.0`."""
        return {"name": bound.variant.name, "label": bound_label(bound.variant.name, bound.identity),
                "precision": bound.precision, "median": bound.timing.median, "identity": bound.identity}


def bound_label(name: str, identity: dict[str, Any]) -> str:
    """A bound's short name for tables: the variant's name, the library version and the tuned
    schedule where there is one (`halide 21.0.0 [gpu_tile_32x8]`); a composed bound's name
    already says what it is made of (`composed(star_1 admitted x8)`)."""
    label = name
    if identity.get("version") and identity.get("library") == name:
        label += f" {identity['version']}"
    if identity.get("schedule"):
        label += f" [{identity['schedule']}]"
    return label
