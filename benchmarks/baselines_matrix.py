#!/usr/bin/env python
"""The public baselines of the GPU matrix (fixtures/matrices/gpu.json) on the CUDA backend.

For every case, `measurement.services.measure_baselines(case, "cuda", actor, protocol)` with
the canonical CUDA protocol (7 passes x 10 launches after 3 warm-ups, L2 flushed before each
launch, variants interleaved; up to 3 timing attempts while the spread exceeds 2%); per case it
keeps each baseline's median, spread, % of the copy bandwidth, effective bandwidth, precision
and largest check error, the bound (the fastest usable baseline) and the copy bandwidth that
the same timing child measured. Then the repeatability probe: one `measure` of a case with the
straightforward kernel also entered as the candidate (identical source, two variants timed in
the same interleaved passes), reporting the difference of the two medians (target <= 1%).

It needs Django and an initialised ledger: it sets FORGESTENCIL_VAR_DIR to a fresh
folder (benchmarks/scratch_ledger.py), runs `manage.py migrate` and `ledger.services.initialise_ledger`,
and records every BaselinesMeasured event there (the ledger itself is thrown away).

On the device machine (docs/gpu.md), in one call of at most 10 minutes; with --deadline the
script starts no case it expects to overrun, writes the JSON after every case, and a second
call with --resume finishes the rest:

    bash scripts/device_wheels.sh        # here, once
    run(carry=["device_wheels"], command=
      "source scripts/device_env.sh && python3 benchmarks/baselines_matrix.py --deadline 540 \\
         --out $OUT/baselines_h200.json")
    run(carry=["device_wheels"], command=
      "source scripts/device_env.sh && python3 benchmarks/baselines_matrix.py --deadline 540 \\
         --resume docs/benchmarks/baselines_h200.json --out $OUT/baselines_h200.json")
    cp <files_at>/baselines_h200.json docs/benchmarks/baselines_h200.json
    .venv/bin/python benchmarks/baselines_matrix.py --table > docs/benchmarks/baselines_h200.md

--cases takes a range of matrix positions (`0-17`, `18-36`) or case ids separated by commas.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

import scratch_ledger

ROOT = Path(__file__).resolve().parent.parent
MATRIX = ROOT / "fixtures" / "matrices" / "gpu.json"
DEFAULT_JSON = ROOT / "docs" / "benchmarks" / "baselines_h200.json"
REPEAT_CASE = "star_1/512x512x512/f32"
ACTOR = "user:baselines-benchmark"
BASELINE_ORDER = ["straightforward", "cupyx.ndimage", "pystencils", "torch.conv"]
# Timeouts shorter than the service defaults (300 s / 900 s) so that one stuck baseline cannot
# eat a whole 10-minute device call; the measurement settings are the canonical ones.
CHECK_TIMEOUT_S = 150.0
TIMING_TIMEOUT_S = 240.0


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def matrix_cases() -> list[str]:
    return json.loads(MATRIX.read_text())["cases"]


def select_cases(spec: str | None) -> list[str]:
    cases = matrix_cases()
    if not spec or spec == "all":
        return cases
    if all(part.strip().replace("-", "").isdigit() for part in spec.split(",")):
        chosen = []
        for part in spec.split(","):
            low, _, high = part.partition("-")
            chosen += cases[int(low) : int(high or low) + 1]
        return chosen
    names = [name.strip() for name in spec.split(",") if name.strip()]
    unknown = [name for name in names if name not in cases]
    if unknown:
        raise SystemExit(f"not in the gpu matrix: {unknown}")
    return names


def setup_django() -> None:
    scratch_ledger.setup_django("baselines")
    from ledger.services import initialise_ledger

    initialise_ledger("baselines benchmark (scratch)", ACTOR)


def protocol():
    from measurement.harness.plan import DEFAULT_PROTOCOL, ProtocolSettings

    base = DEFAULT_PROTOCOL["cuda"]
    return ProtocolSettings(**{**base.__dict__, "check_timeout": CHECK_TIMEOUT_S, "timing_timeout": TIMING_TIMEOUT_S})


def _finite(value):
    return value if isinstance(value, (int, float)) and value == value and abs(value) != float("inf") else None


def _env_summary(state: dict | None) -> dict | None:
    if not state:
        return None
    gpu = state.get("gpu") or {}
    return {
        "idle": state.get("idle"),
        "other_compute_processes": state.get("other_compute_processes"),
        "sm_mhz": gpu.get("clocks.sm"),
        "mem_mhz": gpu.get("clocks.mem"),
        "temperature_c": gpu.get("temperature.gpu"),
        "power_w": gpu.get("power.draw"),
        "throttle": gpu.get("clocks_event_reasons.active") or gpu.get("clocks_throttle_reasons.active"),
        "utilization": gpu.get("utilization.gpu"),
    }


def summarise(report, wall: float) -> dict:
    case = report.case
    variants = []
    for item in report.variants.values():
        timing = item.timing
        errors = [c.error for c in item.correctness.checks if c.error is not None]
        variants.append({
            "name": item.variant.name,
            "role": item.variant.role,
            "precision": item.precision,
            "correct": item.correctness.correct,
            "reason": item.correctness.reason,
            "detail": item.correctness.detail[:500],
            "usable": item.usable,
            "max_check_error": _finite(max(errors)) if errors else None,
            "median_s": timing.median if timing else None,
            "pass_medians_s": timing.pass_medians if timing else None,
            "spread": timing.spread if timing else None,
            "fraction_of_copy": timing.fraction_of_copy if timing else None,
            "effective_bandwidth": timing.achieved_bandwidth if timing else None,
            "gflops": timing.gflops if timing else None,
            "impossible": timing.impossible if timing else None,
            "timed_output_error": _finite(timing.timed_output_error) if timing else None,
        })
    bound = report.bound
    return {
        "case": case.id,
        "compulsory_bytes": case.compulsory_bytes,
        "flops": case.flops,
        "copy_bandwidth": report.copy_bandwidth,
        "bound": None if bound is None else {
            "name": bound.variant.name,
            "precision": bound.precision,
            "median_s": bound.timing.median,
            "fraction_of_copy": bound.timing.fraction_of_copy,
            "effective_bandwidth": bound.timing.achieved_bandwidth,
        },
        "noisy": report.noisy,
        "attempts": report.attempts,
        "variants": variants,
        "environment": {
            "before": _env_summary(report.environment.get("before")),
            "after": _env_summary(report.environment.get("after")),
        },
        "wall_seconds": round(wall, 1),
    }


def measure_case(case_id: str, settings) -> dict:
    from measurement.services import measure_baselines

    started = time.perf_counter()
    try:
        report, _ = measure_baselines(case_id, "cuda", ACTOR, settings, progress=lambda m: log(f"  {case_id}: {m}"))
        return summarise(report, time.perf_counter() - started) | {"_description": report.description}
    except Exception as error:  # one failed case must not lose the others
        if "torch.conv" in os.environ.get("FORGESTENCIL_CUDA_BASELINES", "torch.conv") and "timing the baselines failed" in str(error):
            log(f"  {case_id}: {error}; retrying without torch.conv")
            os.environ["FORGESTENCIL_CUDA_BASELINES"] = "cupyx.ndimage,pystencils"
            try:
                result = measure_case(case_id, settings)
                result["note"] = f"first attempt failed ({error}); measured without torch.conv"
                return result
            finally:
                os.environ.pop("FORGESTENCIL_CUDA_BASELINES", None)
        return {"case": case_id, "error": f"{type(error).__name__}: {error}", "trace": traceback.format_exc(limit=4),
                "wall_seconds": round(time.perf_counter() - started, 1)}


def repeatability(case_id: str, settings) -> dict:
    """The straightforward kernel timed twice in one session: as the baseline and as the candidate."""
    from measurement.services import measure
    from measurement.backends.base import Kernel
    from measurement.harness.cases import parse_case
    from measurement.harness import codegen

    case = parse_case(case_id)
    kernel = Kernel(codegen.straightforward_cuda(case), codegen.straightforward_cuda_launch(case))
    before = os.environ.get("FORGESTENCIL_CUDA_BASELINES")
    os.environ["FORGESTENCIL_CUDA_BASELINES"] = ""  # only the two identical variants
    started = time.perf_counter()
    try:
        report = measure(case_id, "cuda", candidate=kernel, protocol=settings)
    finally:
        if before is None:
            os.environ.pop("FORGESTENCIL_CUDA_BASELINES", None)
        else:
            os.environ["FORGESTENCIL_CUDA_BASELINES"] = before
    a, b = report.variants["straightforward"].timing, report.variants["candidate"].timing
    return {
        "case": case_id,
        "variants": ["straightforward", "candidate (identical source)"],
        "medians_s": [a.median, b.median],
        "pass_medians_s": [a.pass_medians, b.pass_medians],
        "spreads": [a.spread, b.spread],
        "difference": abs(a.median - b.median) / min(a.median, b.median),
        "target": 0.01,
        "copy_bandwidth": report.copy_bandwidth,
        "fractions_of_copy": [a.fraction_of_copy, b.fraction_of_copy],
        "wall_seconds": round(time.perf_counter() - started, 1),
    }


def write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    os.replace(temporary, path)


def run(options) -> int:
    started = time.perf_counter()
    out = Path(options.out)
    data: dict = {}
    if options.resume and Path(options.resume).is_file():
        data = json.loads(Path(options.resume).read_text())
        log(f"resuming from {options.resume}: {len(data.get('cases', {}))} cases done")
    setup_django()
    from measurement.harness.plan import harness_version

    settings = protocol()
    data.setdefault("matrix", "gpu")
    data.setdefault("cases", {})
    data.setdefault("parts", [])
    data["protocol"] = {k: v for k, v in settings.__dict__.items()}
    data["matrix_order"] = matrix_cases()
    part = {
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(shlex.quote(a) for a in sys.argv),
        "harness_version": harness_version(),
        "cases": [],
    }
    data["parts"].append(part)
    todo = [c for c in select_cases(options.cases) if c not in data["cases"] or "error" in data["cases"][c]]
    durations: list[float] = []
    for index, case_id in enumerate(todo):
        elapsed = time.perf_counter() - started
        estimate = max(durations) * 1.15 if durations else 30.0
        if options.deadline and elapsed + estimate > options.deadline:
            log(f"deadline: {len(todo) - index} cases left for a later --resume run")
            break
        log(f"[{index + 1}/{len(todo)}] {case_id} (elapsed {elapsed:.0f} s)")
        result = measure_case(case_id, settings)
        description = result.pop("_description", None)
        if description:
            data["device"] = description
        data["cases"][case_id] = result
        part["cases"].append(case_id)
        durations.append(result.get("wall_seconds", 0.0))
        log("  " + one_line(result))
        write(out, data)
    want_repeat = options.repeat_case and "repeatability" not in data
    if want_repeat:
        elapsed = time.perf_counter() - started
        if not options.deadline or elapsed + 60 <= options.deadline:
            log(f"repeatability: {options.repeat_case}")
            try:
                data["repeatability"] = repeatability(options.repeat_case, settings)
                log(f"  difference of medians {data['repeatability']['difference']:.2%}")
            except Exception as error:
                data["repeatability_error"] = f"{type(error).__name__}: {error}"
                log(f"  failed: {error}")
        else:
            log("deadline: repeatability left for a later --resume run")
    part["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    part["wall_seconds"] = round(time.perf_counter() - started, 1)
    write(out, data)
    missing = [c for c in matrix_cases() if c not in data["cases"] or "error" in data["cases"][c]]
    log(f"wrote {out}: {len(data['cases'])} cases, {len(missing)} missing or failed")
    print(table(data))
    return 0


def one_line(result: dict) -> str:
    if "error" in result:
        return f"ERROR {result['error'][:200]}"
    parts = []
    for v in result["variants"]:
        if v["median_s"] is not None:
            parts.append(f"{v['name']} {v['median_s'] * 1e3:.3f} ms ({v['fraction_of_copy']:.0%})")
        else:
            parts.append(f"{v['name']} {v['reason']}")
    copy = result.get("copy_bandwidth")
    return "; ".join(parts) + (f"; copy {copy / 1e12:.2f} TB/s" if copy else "") + f"; {result['wall_seconds']} s"


# ---------------------------------------------------------------- the markdown table


def _cell(v: dict | None) -> str:
    if v is None:
        return "–"
    if v.get("median_s") is None:
        return f"✗ {v.get('reason') or 'not timed'}"
    text = f"{v['median_s'] * 1e3:.3f} ms · {v['fraction_of_copy']:.0%}"
    if v["precision"] and v.get("_case_precision") and v["precision"] != v["_case_precision"]:
        text += f" ({v['precision']})"
    if not v["usable"]:
        text += " ✗"
    return text


def _runs(data: dict) -> list[str]:
    """Where the numbers came from: each device call (part) and the GPU state around each case."""
    measured = [r for r in data.get("cases", {}).values() if "error" not in r]
    lines = [
        "# CUDA baselines of the GPU matrix on an NVIDIA H200",
        "",
        "Generated by `.venv/bin/python benchmarks/baselines_matrix.py --table > docs/benchmarks/baselines_h200.md` "
        "from [baselines_h200.json](baselines_h200.json), which came back from the device machine "
        "(`source scripts/device_env.sh && python3 benchmarks/baselines_matrix.py ...`, docs/gpu.md). "
        f"**Coverage: {len(measured)} of the {len(data.get('matrix_order') or [])} cases**, measured in these calls:",
        "",
        "| started (UTC) | finished | harness version | cases | wall | command |",
        "|---|---|---|---|---|---|",
    ]
    for part in data.get("parts", []):
        if not part.get("cases"):
            continue
        lines.append(
            f"| {part['started'][:16].replace('T', ' ')} | {(part.get('finished') or '?')[11:16]} | `{part['harness_version'][:12]}` "
            f"| {len(part['cases'])} | {part.get('wall_seconds', 0):.0f} s | `{part['command']}` |"
        )
    after = [r["environment"]["after"] for r in measured if r.get("environment")]
    before = [r["environment"]["before"] for r in measured if r.get("environment")]
    if after:
        clocks = [e["sm_mhz"] for e in after if e.get("sm_mhz")]
        throttles = sorted({e.get("throttle") for e in after if e.get("throttle")})
        lines += [
            "",
            f"GPU state ({len(after)} cases with a record): idle with no other compute process before "
            f"{sum(1 for e in before if e.get('idle'))} of {len(before)} cases; SM clock right after timing "
            f"{min(clocks):.0f}–{max(clocks):.0f} MHz; throttle reasons after timing: {', '.join(throttles)}.",
        ]
    return lines + [""]


def table(data: dict) -> str:
    device = data.get("device", {})
    lines = _runs(data) + [
        f"Device: {device.get('device', '?')} (CC {device.get('compute_capability', '?')}, {device.get('sm_count', '?')} SMs, "
        f"L2 {int(device.get('l2_bytes') or 0) // 2**20} MiB), driver {device.get('nvidia_driver') or device.get('driver_version', '?')}, "
        f"CUDA runtime {device.get('runtime_version', '?')}, NVRTC {device.get('nvrtc_version', '?')}, CuPy {device.get('cupy', '?')}, "
        f"torch {device.get('torch', '?')}, pystencils {device.get('pystencils', '?')}.",
        "",
        "Each cell: median of the 7 pass medians (10 L2-flushed launches each) · effective bandwidth (compulsory bytes / median) "
        "as a fraction of the copy bandwidth measured in the same timing child; a precision in brackets where the baseline "
        "computes in another precision than the case's; ✗ = not usable (with the reason where it failed a check). "
        "Bound = fastest usable baseline.",
        "",
        "| case | copy BW | straightforward | cupyx.ndimage | pystencils | torch.conv | bound | bound % copy | max spread |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    order = data.get("matrix_order") or list(data.get("cases", {}))
    for case_id in order:
        result = data.get("cases", {}).get(case_id)
        if result is None:
            lines.append(f"| {case_id} | not measured | | | | | | | |")
            continue
        if "error" in result:
            lines.append(f"| {case_id} | error: {result['error'][:80]} | | | | | | | |")
            continue
        precision = case_id.rsplit("/", 1)[-1]
        by_name = {v["name"]: {**v, "_case_precision": precision} for v in result["variants"]}
        spreads = [v["spread"] for v in result["variants"] if v.get("spread") is not None]
        bound = result.get("bound")
        lines.append(
            f"| {case_id} | {result['copy_bandwidth'] / 1e12:.2f} TB/s | "
            + " | ".join(_cell(by_name.get(name)) for name in BASELINE_ORDER)
            + (f" | {bound['name']} ({bound['precision']}) | {bound['fraction_of_copy']:.0%}" if bound else " | none | –")
            + f" | {max(spreads):.1%}{' (noisy)' if result.get('noisy') else ''} |"
        )
    repeat = data.get("repeatability")
    if repeat:
        lines += [
            "",
            f"Repeatability ({repeat['case']}, the straightforward kernel timed twice in one session as two variants with "
            f"identical source): medians {repeat['medians_s'][0] * 1e3:.4f} ms and {repeat['medians_s'][1] * 1e3:.4f} ms, "
            f"difference {repeat['difference']:.2%} (target ≤ {repeat['target']:.0%}).",
        ]
    copies = [r["copy_bandwidth"] for r in data.get("cases", {}).values() if r.get("copy_bandwidth")]
    if copies:
        lines += ["", f"Copy bandwidth over the cases: median {statistics.median(copies) / 1e12:.2f} TB/s, "
                      f"range {min(copies) / 1e12:.2f}–{max(copies) / 1e12:.2f} TB/s (read + write bytes, fastest of 20 flushed copies)."]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", help="matrix positions (0-17,18-36) or case ids, comma-separated; default all")
    parser.add_argument("--out", default=str(DEFAULT_JSON), help="the JSON to write (and, with --table, to read)")
    parser.add_argument("--resume", help="a JSON of an earlier run: its cases are kept and skipped")
    parser.add_argument("--deadline", type=float, help="seconds: start no case expected to end later")
    parser.add_argument("--repeat-case", default=REPEAT_CASE, help="case of the repeatability probe ('' to skip)")
    parser.add_argument("--table", action="store_true", help="print the markdown table of --out and exit")
    options = parser.parse_args()
    if options.table:
        print(table(json.loads(Path(options.out).read_text())))
        return 0
    return run(options)


if __name__ == "__main__":
    sys.exit(main())
