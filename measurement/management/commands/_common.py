"""Shared argument handling and table printing of the measurement commands."""
from __future__ import annotations

import json
import os
from pathlib import Path

from django.core.management.base import CommandError

from measurement.backends.base import Kernel, SourceTooLarge, check_source
from measurement.harness import sandbox
from measurement.harness.plan import DEFAULT_PROTOCOL, ProtocolSettings
from measurement.services import MeasurementReport


def add_protocol_arguments(parser) -> None:
    parser.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--passes", type=int, help="timing passes (default 7)")
    parser.add_argument("--launches", type=int, help="launches per measurement (default: 5 cpu, 10 cuda)")
    parser.add_argument("--actor", default="user:cli")
    parser.add_argument("--unsafe-no-sandbox", action="store_true",
                        help="development only: run candidate code without the sandbox (recorded on every measurement)")


def protocol_from(options) -> ProtocolSettings:
    if options.get("unsafe_no_sandbox"):  # read by measurement.harness.sandbox at every child
        os.environ[sandbox.UNSAFE_ENV] = "1"
    base = DEFAULT_PROTOCOL[options["backend"]]
    changes = {k: options[k] for k in ("passes", "launches") if options.get(k)}
    if any(v < 1 for v in changes.values()):
        raise CommandError("--passes and --launches must be at least 1")
    return ProtocolSettings(**{**base.__dict__, **changes})


def kernel_from(source: str, launch: str | None) -> Kernel:
    path = Path(source)
    if not path.is_file():
        raise CommandError(f"{source}: no such file")
    try:
        config = json.loads(launch) if launch else {}
    except json.JSONDecodeError as exc:
        raise CommandError(f"--launch is not valid JSON: {exc}") from None
    if not isinstance(config, dict):
        raise CommandError('--launch must be a JSON object, e.g. {"threads": 2}')
    source = path.read_text()
    try:
        check_source(source)
    except SourceTooLarge as error:
        raise CommandError(f"{path}: {error}") from None
    return Kernel(source, config)


def report_table(report: MeasurementReport) -> str:
    rows = [("variant", "role", "prec", "median", "spread", "% copy BW", "GFLOP/s", "max error", "verdict")]
    for item in report.variants.values():
        timing = item.timing
        errors = [c.error for c in item.correctness.checks if c.error is not None]
        rows.append((
            item.variant.name,
            item.variant.role,
            item.precision,
            f"{timing.median * 1e3:.3f} ms" if timing else "-",
            f"{timing.spread:.1%}" if timing else "-",
            f"{timing.fraction_of_copy:.1%}" if timing else "-",
            f"{timing.gflops:.1f}" if timing else "-",
            f"{max(errors):.2e}" if errors else "-",
            "ok" if item.usable else (item.correctness.reason or ("impossible_speed" if timing and timing.impossible else "timed_output_mismatch")),
        ))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(str(v).ljust(w) for v, w in zip(row, widths)) for row in rows]
    bound = report.bound
    copy = f"{report.copy_bandwidth / 1e9:.1f} GB/s" if report.copy_bandwidth else "-"
    lines.insert(0, f"{report.case.id} on {report.backend} ({report.description.get('device', '?')}); copy bandwidth {copy}"
                    f"{'; NOISY' if report.noisy else ''}")
    lines.append(f"public bound: {bound.variant.name} ({bound.precision}) {bound.timing.median * 1e3:.3f} ms" if bound else "public bound: none")
    return "\n".join(lines)
