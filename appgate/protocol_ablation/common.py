"""What both kinds of protocol ablation share: the arms, their records on the ablation's stream,
and the printed table."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from django.conf import settings

from ledger.records import RecordedEvent
from ledger.services import NewEvent, append
from measurement.harness.plan import ProtocolSettings
from measurement.reports import finite


ROOT = Path(settings.BASE_DIR)
BUNDLED_APPS = ROOT / "fixtures" / "apps"
BACKENDS = ("cpu", "cuda")
TWIN = "half_work_twin"  # the correctness arm's wrong-but-fast kernel, by name in its evidence
PER_LAUNCH = "candidate_per_launch"  # the symmetric-timing arm's subject, timed per launch beside its pipelined self
WRONG = "wrong"  # the app correctness arm's wrong-but-fast variant, by name in its evidence
REQUIREMENTS = ("correctness_gate", "symmetric_timing", "all_dataset_headline", "warmup", "cache_flush", "interleaving")
ARMS = REQUIREMENTS + ("control",)
UNIT = "x"

Progress = Callable[[str], None]


class AblationError(Exception):
    pass


@dataclass
class ArmResult:
    arm: str
    status: str = "measured"  # measured | not_run
    honest: float | None = None
    honest_ci: tuple[float, float] | None = None
    ablated: float | None = None
    ablated_ci: tuple[float, float] | None = None
    note: str = ""  # one line for the table
    reason: str = ""  # why the arm was not run
    events: list[str] = field(default_factory=list)  # events holding the evidence
    event: RecordedEvent | None = None  # the AblationMeasured event

    @property
    def distortion(self) -> float | None:
        if self.honest is None or self.ablated is None or self.honest <= 0:
            return None
        return self.ablated / self.honest - 1.0


@dataclass
class ProtocolAblation:
    ablation: str
    kind: str  # case | app
    name: str  # the case id or the application's name
    backend: str  # the backend, or the application's architecture
    subject: str  # the result key
    what: str  # which kernel / which manifest, and the protocol
    machine: str
    quantity: str
    arms: list[ArmResult] = field(default_factory=list)
    honest_events: list[str] = field(default_factory=list)

    @property
    def stream(self) -> str:
        return ablation_stream(self.ablation)


def ablation_stream(ablation: str) -> str:
    return f"ablation/{ablation}"


def record_arm(result: ProtocolAblation, arm: ArmResult, actor: str) -> RecordedEvent:
    detail = arm.note if not result.what else f"{arm.note} [subject: {result.what}]"
    arm.event = append(NewEvent(stream=result.stream, type="AblationMeasured", actor=actor, payload={
        "ablation": result.ablation, "kind": "protocol", "case": result.name, "backend": result.backend,
        "arm": arm.arm, "budget": 1, "status": arm.status, "reason": arm.reason,
        "measurement_events": list(dict.fromkeys(arm.events)), "detail": detail, "subject": result.subject,
        "honest_value": finite(arm.honest), "honest_ci": _finite_pair(arm.honest_ci),
        "ablated_value": finite(arm.ablated), "ablated_ci": _finite_pair(arm.ablated_ci),
        "distortion": finite(arm.distortion), "unit": UNIT,
    }))
    result.arms.append(arm)
    return arm.event


def _finite_pair(pair) -> list[float] | None:
    if pair is None or not all(v is not None and math.isfinite(v) for v in pair):
        return None
    return [float(pair[0]), float(pair[1])]


# ==== operator cases ======================================================================


def protocol_text(protocol: ProtocolSettings) -> str:
    return (f"{protocol.passes} passes x {protocol.launches} launches, warm-up {protocol.warmup}, "
            f"flush {'on' if protocol.flush else 'off'}, interleave {'on' if protocol.interleave else 'off'}, "
            f"up to {protocol.max_attempts} attempt(s)")


# ==== the table ===========================================================================


def table(result: ProtocolAblation) -> str:
    """The printed table: one row per arm in the order of REQUIREMENTS, control last."""
    order = {name: index for index, name in enumerate(ARMS)}
    rows = [("requirement removed", "status", "honest", "ablated", "distortion", "note")]
    for arm in sorted(result.arms, key=lambda a: order[a.arm]):
        rows.append((
            "(none: control)" if arm.arm == "control" else arm.arm,
            arm.status,
            _x(arm.honest, arm.honest_ci),
            _x(arm.ablated, arm.ablated_ci) if arm.status == "measured" else "-",
            f"{arm.distortion:+.1%}" if arm.distortion is not None else "-",
            arm.note,
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join([*(value.ljust(width) for value, width in zip(row[:-1], widths)), row[-1]]).rstrip() for row in rows]
    head = [f"protocol ablation {result.ablation}: {result.kind} {result.name} on {result.machine}",
            f"subject: {result.what}",
            f"value: {result.quantity} ({UNIT}, 95% CI); distortion = ablated / honest - 1"]
    return "\n".join(head + lines)


def _x(value: float | None, ci) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}x" + (f" [{ci[0]:.2f}-{ci[1]:.2f}]" if ci else "")
