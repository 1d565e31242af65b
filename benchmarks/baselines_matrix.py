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

The committed docs/benchmarks/baselines_h200.{json,md} are no longer this script's: they are read
from the H200 re-gate's events (benchmarks/baselines_from_export.py), where every baseline was
timed in the same measurement as the standing kernel. This script writes the same schema
(baselines_entry.py) and table (baselines_table.py) for a fresh run of the baselines alone; a
device run would replace those files only on purpose. --resume refuses a JSON read from an
export (it holds every case, so nothing would be measured).

On the device machine (docs/gpu.md), in one call of at most 10 minutes; with --deadline the
script starts no case it expects to overrun, writes the JSON after every case, and a second
call with --resume finishes the rest:

    bash scripts/device_wheels.sh        # here, once
    run(carry=["device_wheels"], command=
      "source scripts/device_env.sh && python3 benchmarks/baselines_matrix.py --deadline 540 \\
         --out $OUT/baselines_h200.json")
    cp <files_at>/baselines_h200.json docs/benchmarks/baselines_h200.json
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
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(1, str(ROOT))  # the ledger and measurement packages; this folder is sys.path[0] when run as a script

import scratch_ledger  # noqa: E402
from baselines_entry import case_entry  # noqa: E402
from baselines_table import table  # noqa: E402

MATRIX = ROOT / "fixtures" / "matrices" / "gpu.json"
DEFAULT_JSON = ROOT / "docs" / "benchmarks" / "baselines_h200.json"
REPEAT_CASE = "star_1/512x512x512/f32"
ACTOR = "user:baselines-benchmark"
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


def summarise(report, wall: float) -> dict:
    case = report.case
    entry = case_entry(report.evidence(), compulsory_bytes=case.compulsory_bytes, flops=case.flops)
    return entry | {"wall_seconds": round(wall, 1)}


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
        if "source" in data:
            raise SystemExit(f"{options.resume} was read from a ledger export ({data['source']['export']}), not measured "
                             "by this script: resume from the JSON of this script's previous call")
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
