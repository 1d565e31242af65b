#!/usr/bin/env python
"""Re-run the operator gate on every standing result of a ledger export, timed, in one call.

Why: a change of harness, driver or library has to be checked against everything already
claimed, and a whole-matrix re-run must fit in one device call. This imports a ledger export
(e.g. a forge campaign's, carried in an ignored folder such as device_carry/) into a fresh
scratch ledger, runs `measurement.reruns.rerun_all` for --backend (each admitted or
downgraded result re-gated in case order; a failed check appends ResultRetracted, a much
slower speedup ResultDowngraded), prints one line per case to stderr, and writes

- --out: the whole scratch ledger's export: the imported campaign plus the re-run's
  CandidateMeasured / GateVerdict (`revises` = the admitted verdict) and revision events;
- --summary: JSON with started/finished UTC, wall seconds, per case {case, verdict, speedup,
  speedup_ci, admitted_speedup, revision, seconds (tuning included), tuning}, the counts, and
  the cases a --deadline left out.

With --tune LIBRARY (e.g. halide), each case is first tuned on --backend (a tuning run,
measurement.tuning: two children, every schedule of the library's family checked, the correct
ones timed in the same passes; BaselineTuned in the export), so the re-run holds the kernel to
the library's fastest correct schedule on this machine. The case's line and its summary entry
say what was chosen (its median, how many schedules were correct) or why nothing was; a
tuning run that fails is counted (summary "tuning_counts") and the case is re-run with the
schedule it had. The tuning runs count against --deadline.

--fan-out hands the cases to the workers instead (one re-run task per case, frontend/batches.py) and
waits for them, a line "[n of N] …" per case as it ends; the summary is the same, its per-case
seconds from the worker's claim to the end. benchmarks/worker_scaling.py runs it with 1, 2, 4 …
workers (docs/workers.md, "One worker per device").

--only finishes what a deadline left out, in a second call: give it the first call's export as
--ledger (its tuning runs and re-runs come along) and its summary as --only (its `not_run`).

On the device machine (docs/gpu.md):

    source scripts/device_env.sh && python3 scripts/halide_aot.py --unpack && \\
        python3 benchmarks/matrix_rerun.py --backend cuda --tune halide \\
        --ledger fixtures/ledgers/h200_campaign.jsonl --out $OUT/Y.jsonl --summary $OUT/Z.json --deadline 540

Exit status 1 when any case's re-run failed (MeasurementError; a failed tuning run alone does
not count); the files are written anyway.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import scratch_ledger

ACTOR = "user:matrix-rerun"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def cases_to_run(only: str | None) -> set[str] | None:
    """--only: case ids, comma-separated, or a previous call's --summary JSON, whose `not_run`
    (the cases its deadline left out) are the ones to run now."""
    if only is None:
        return None
    path = Path(only)
    if path.suffix == ".json" and path.exists():
        return set(json.loads(path.read_text(encoding="utf-8"))["not_run"])
    return {case.strip() for case in only.split(",") if case.strip()}


def run(options: argparse.Namespace) -> int:
    scratch_ledger.setup_django("matrix-rerun")
    from forge.edges import standing_matrix_cases
    from ledger.services import initialise_ledger
    from ledger.transfer import import_ledger
    from measurement.harness.plan import DEFAULT_PROTOCOL
    from measurement.reruns import record_matrix_rerun, rerun_all, rerun_counts, tuning_counts

    initialise_ledger(f"gate re-run ({options.backend}, scratch)", ACTOR)
    imported, _ = import_ledger(Path(options.ledger), ACTOR)
    standing = standing_matrix_cases(options.backend)  # not the edge shapes' verdicts (forge/edges.py)
    only = cases_to_run(options.only)
    if only is not None:
        unknown = sorted(only - set(standing))
        if unknown:
            raise SystemExit(f"--only names cases without a standing {options.backend} result: {', '.join(unknown)}")
        standing = [case for case in standing if case in only]
    only = set(standing)
    log(f"imported {imported} events from {options.ledger}; {len(standing)} standing {options.backend} results to re-run")
    changes = {k: getattr(options, k) for k in ("passes", "launches", "max_attempts") if getattr(options, k)}
    protocol = dataclasses.replace(DEFAULT_PROTOCOL[options.backend], **changes)
    started_utc, started = utc_now(), time.perf_counter()
    batch = None
    if options.fan_out:  # one re-run task per case, run by the workers on the backend's queue
        from frontend.batches import follow, request_batch

        batch = request_batch(options.backend, ACTOR, protocol=changes or None, only=only)
        log(f"batch {batch}: {len(standing)} re-run tasks queued")
        outcomes = follow(batch, lambda done, total, item: log(f"[{done} of {total}] {item.line()}"))
    else:
        outcomes = rerun_all(options.backend, ACTOR, protocol, lambda item: log(item.line()), options.deadline,
                             tune=options.tune, only=only)
    wall = time.perf_counter() - started
    record_matrix_rerun(options.backend, ACTOR, standing, outcomes, wall, whole=options.only is None, deadline=options.deadline)
    counts = rerun_counts(outcomes)
    out = Path(options.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    exported = scratch_ledger.export(out)
    summary = {
        "backend": options.backend,
        "ledger": str(options.ledger),
        "protocol": protocol.__dict__,
        "started_utc": started_utc,
        "finished_utc": utc_now(),
        "wall_seconds": round(wall, 3),
        "cases": [{
            "case": o.case,
            "verdict": o.verdict,
            "speedup": o.speedup,
            "speedup_ci": list(o.speedup_ci) if o.speedup_ci else None,
            "admitted_speedup": o.admitted_speedup,
            "revision": o.revision,
            "reasons": o.reasons,
            "inconclusive": o.inconclusive,
            "error": o.error,
            "seconds": round(o.seconds, 3),
            "tuning": _tuning(o.tuning),
            "left_out": o.left_out,
        } for o in outcomes],
        "counts": counts,
        "tune": options.tune,
        "tuning_counts": tuning_counts(outcomes) if options.tune else None,
        "not_run": [case for case in standing if case not in {o.case for o in outcomes}],
        "exported_events": exported,
        "fan_out_batch": batch,
    }
    Path(options.summary).parent.mkdir(parents=True, exist_ok=True)
    Path(options.summary).write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    tuned = "".join(f"; {options.tune} {k}: {n}" for k, n in (summary["tuning_counts"] or {}).items())
    log(f"re-ran {len(outcomes)} of {len(standing)} in {wall:.1f} s: " + ", ".join(f"{n} {k}" for k, n in counts.items())
        + f"{tuned}; {exported} events in {out}")
    return 1 if counts["failed"] else 0


def _tuning(tuning) -> dict | None:
    """A case's tuning run in the summary (measurement.reruns.TuningOutcome), None without --tune."""
    if tuning is None:
        return None
    return {"library": tuning.library, "outcome": tuning.outcome, "chosen": tuning.chosen, "median": tuning.median,
            "correct": tuning.correct, "candidates": tuning.candidates, "seconds": round(tuning.seconds, 3),
            "error": tuning.error, "measured_schedule": tuning.measured}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--ledger", required=True, help="the JSON Lines export whose results to re-run")
    parser.add_argument("--out", required=True, help="the scratch ledger's export to write (JSON Lines)")
    parser.add_argument("--summary", required=True, help="the timing summary to write (JSON)")
    parser.add_argument("--passes", type=int, help="timing passes (default: the canonical protocol's)")
    parser.add_argument("--launches", type=int, help="launches per measurement (default: the canonical protocol's)")
    parser.add_argument("--attempts", dest="max_attempts", type=int, help="timing attempts while noisy (default 3)")
    parser.add_argument("--deadline", type=float, help="seconds: start no case expected to end later")
    parser.add_argument("--tune", metavar="LIBRARY", help="tune this library baseline on each case before its re-run")
    parser.add_argument("--only", metavar="CASES|SUMMARY.json",
                        help="re-run only these cases (comma-separated), or the not_run cases of a previous --summary")
    parser.add_argument("--fan-out", action="store_true",
                        help="one re-run task per case on the backend's queue, run by the workers (frontend/batches.py); "
                             "needs DATABASE_URL on a database the workers share (PostgreSQL) and CELERY_BROKER_URL")
    options = parser.parse_args()
    if options.fan_out and (options.tune or options.deadline):
        parser.error("--fan-out re-runs only: --tune and --deadline run in this process")
    if any(v is not None and v < 1 for v in (options.passes, options.launches, options.max_attempts)):
        parser.error("--passes, --launches and --attempts must be at least 1")
    return run(options)


if __name__ == "__main__":  # the harness children are spawned: this module must not run on import
    sys.exit(main())
