#!/usr/bin/env python
"""The whole-matrix gate re-run with 1, 2, 4 … Celery workers: wall time and scaling efficiency.

Why: a whole-matrix re-run takes minutes per case on one device, and issue 21 fans it out, one
re-run task per case (frontend/batches.py). This measures what that buys. For each worker count
k it makes a fresh PostgreSQL database (`<name>_<k>w` beside --database-url's), migrates it,
purges the queue, starts k workers (`celery -A config worker -Q <queue> --concurrency 1`, the
layout of one worker per device; with --gpus worker i is pinned to GPU i by
FORGESTENCIL_DEVICE_INDEX), waits until they are ready, and runs
`benchmarks/matrix_rerun.py --fan-out` against them: the export is imported, the batch
requested, and the wall time taken from the batch's request to its last re-run's end (the
workers' start-up is not in it). Then the workers stop and the database is dropped.

Writes --out: per k the wall seconds, the speedup over the first (smallest) k, the scaling
efficiency (speedup / (k / k_first)), the outcome counts, each case's seconds, and the 1-minute
load average before and after (other processes share the machine's cores: the numbers mean
little when the load exceeds the cores). --exports keeps each run's ledger export.

Here (CPU, 2 cores, shared):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/worker_scaling CELERY_BROKER_URL=redis://127.0.0.1:6379/7 \\
        .venv/bin/python benchmarks/worker_scaling.py --workers 1,2,4 --passes 2 --launches 2 --attempts 1 \\
        --out docs/benchmarks/worker_scaling_cpu.json

On a host with N GPUs (docs/gpu.md, "Several GPUs"):

    python3 benchmarks/worker_scaling.py --backend cuda --gpus --workers 1,2,4,8 \\
        --ledger fixtures/ledgers/h200_campaign.jsonl --out $OUT/worker_scaling_h200.json --exports $OUT
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
CELERY = str(Path(sys.executable).parent / "celery")
START_S = 300


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def database(url: str, name: str, create: bool) -> str:
    """Drop `name` on the server of `url` and, with `create`, make it anew; its URL."""
    import psycopg

    parts = urlsplit(url)
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if create:
            connection.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(parts._replace(path=f"/{name}"))


def start_workers(count: int, queue: str, env: dict[str, str], gpus: bool, folder: Path) -> list[subprocess.Popen]:
    started = []
    for number in range(count):
        pinned = {"FORGESTENCIL_DEVICE_INDEX": str(number)} if gpus else {}
        handle = (folder / f"w{number}.log").open("w")
        started.append(subprocess.Popen(
            [CELERY, "-A", "config", "worker", "-Q", queue, "--concurrency", "1", "-n", f"w{number}@%h", "-l", "info"],
            cwd=ROOT, env={**env, **pinned}, stdout=handle, stderr=subprocess.STDOUT))
    deadline = time.monotonic() + START_S
    for number, process in enumerate(started):
        path = folder / f"w{number}.log"
        while " ready." not in path.read_text():
            if process.poll() is not None or time.monotonic() > deadline:
                stop(started)
                raise SystemExit(f"worker {number} did not start:\n{path.read_text()[-3000:]}")
            time.sleep(0.2)
    return started


def stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        process.terminate()  # warm shutdown: a running task ends first
    for process in processes:
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def one_run(count: int, options: argparse.Namespace, scratch: Path) -> dict:
    queue = "gpu" if options.backend == "cuda" else "cpu"
    name = f"{urlsplit(options.database_url).path.strip('/')}_{count}w"
    env = {**os.environ, "DATABASE_URL": database(options.database_url, name, create=True),
           "CELERY_BROKER_URL": options.broker, "FORGESTENCIL_VAR_DIR": str(scratch / f"var-{count}w")}
    Path(env["FORGESTENCIL_VAR_DIR"]).mkdir(mode=0o700)
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    subprocess.run([CELERY, "-A", "config", "purge", "-f", "-Q", queue], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL)  # messages left by an earlier run would reach these workers
    folder = scratch / f"{count}w"
    folder.mkdir()
    workers = start_workers(count, queue, env, options.gpus, folder)
    summary = folder / "summary.json"
    exported = Path(options.exports or folder) / f"worker_scaling_{options.backend}_{count}w.jsonl"
    command = [sys.executable, "benchmarks/matrix_rerun.py", "--fan-out", "--backend", options.backend,
               "--ledger", options.ledger, "--out", str(exported), "--summary", str(summary)]
    for flag in ("passes", "launches", "attempts", "only"):
        if getattr(options, flag):
            command += [f"--{flag}", str(getattr(options, flag))]
    load_before = os.getloadavg()[0]
    try:
        finished = subprocess.run(command, cwd=ROOT, env=env)
    finally:
        stop(workers)
        load_after = os.getloadavg()[0]
        database(options.database_url, name, create=False)
    result = json.loads(summary.read_text())
    return {"workers": count, "wall_seconds": result["wall_seconds"], "counts": result["counts"],
            "exit_status": finished.returncode, "load_1min_before": round(load_before, 2),
            "load_1min_after": round(load_after, 2), "export": str(exported),
            "cases": [{"case": c["case"], "seconds": c["seconds"], "verdict": c["verdict"], "error": c["error"]}
                      for c in result["cases"]], "protocol": result["protocol"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", default="1,2,4", help="worker counts, comma-separated, smallest first")
    parser.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--gpus", action="store_true", help="pin worker i to GPU i (FORGESTENCIL_DEVICE_INDEX)")
    parser.add_argument("--ledger", default=str(ROOT / "docs" / "benchmarks" / "forge_cpu_levers.jsonl"),
                        help="the export whose standing results to re-run")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL", ""),
                        help="a PostgreSQL URL; each run uses a fresh database named after it, then drops it")
    parser.add_argument("--broker", default=os.environ.get("CELERY_BROKER_URL", ""), help="the Redis URL")
    parser.add_argument("--passes", type=int)
    parser.add_argument("--launches", type=int)
    parser.add_argument("--attempts", type=int)
    parser.add_argument("--only", help="re-run only these cases (comma-separated)")
    parser.add_argument("--out", required=True, help="the JSON to write")
    parser.add_argument("--exports", help="a folder for each run's ledger export (default: the scratch folder)")
    options = parser.parse_args()
    if not options.database_url.startswith("postgres") or not options.broker:
        parser.error("needs --database-url (PostgreSQL: the workers share it) and --broker (or DATABASE_URL, CELERY_BROKER_URL)")
    options.ledger = str(Path(options.ledger).resolve())  # the runs start in the repository root
    options.exports = options.exports and str(Path(options.exports).resolve())
    counts = sorted(int(k) for k in options.workers.split(","))
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    runs = []
    with tempfile.TemporaryDirectory(prefix="worker-scaling-") as scratch:
        for count in counts:
            log(f"--- {count} worker(s)")
            runs.append(one_run(count, options, Path(scratch)))
            log(f"--- {count} worker(s): {runs[-1]['wall_seconds']:.1f} s, {runs[-1]['counts']}")
    first = runs[0]
    for run in runs:
        run["speedup"] = round(first["wall_seconds"] / run["wall_seconds"], 3)
        run["efficiency"] = round(run["speedup"] / (run["workers"] / first["workers"]), 3)
    result = {"backend": options.backend, "ledger": os.path.relpath(options.ledger, ROOT), "gpus": options.gpus,
              "cores": os.cpu_count(), "started_utc": started,
              "finished_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]), "runs": runs}
    Path(options.out).parent.mkdir(parents=True, exist_ok=True)
    Path(options.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    for run in runs:
        log(f"{run['workers']} worker(s): {run['wall_seconds']:.1f} s, speedup {run['speedup']:.2f}, "
            f"efficiency {run['efficiency']:.2f} (load {run['load_1min_before']}-{run['load_1min_after']})")
    return 1 if any(run["exit_status"] for run in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
