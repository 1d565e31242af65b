#!/usr/bin/env python
"""Compile the Halide baseline of every case of a matrix ahead of time for the H200, here
(measurement.backends.halide_aot says why and what), into device_carry/halide/ (git-ignored).

    .venv/bin/python scripts/halide_aot.py                      # gpu.json and gpu_edges.json
    .venv/bin/python scripts/halide_aot.py --matrix fixtures/matrices/gpu.json --jobs 2
    # then on the device: run(carry=["device_wheels", "device_carry/bwrap", "device_carry/halide"], ...)
    python3 scripts/halide_aot.py --unpack                      # there, before anything loads them

By default the cases of the GPU matrix and of its edge shapes (fixtures/matrices/gpu_edges.json):
forge_edges.py tunes each edge's Halide bound, and an edge whose objects were not built fails
(session 31 lost two edges of a call that way). `--matrix` may be given more than once.
Every build replaces the folder's contents; the objects are stored xz-packed (halide_aot says why). The last lines print the folder's size and what the
device tool would carry with it (device_wheels, device_carry/bwrap, the working tree) against
its 64 MiB limit; the exit status is 1 above LIMIT_MB.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from measurement.backends import halide_aot  # noqa: E402
from measurement.harness.cases import parse_case  # noqa: E402

LIMIT_MB = 64
CARRIED_BESIDE = ("device_wheels", "device_carry/bwrap")


def _build(case_id: str, out_dir: str) -> tuple[str, list[dict], float]:
    started = time.perf_counter()
    entries = halide_aot.build_case(parse_case(case_id), Path(out_dir))
    return case_id, entries, time.perf_counter() - started


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _tree_bytes() -> int:
    """The tracked and untracked-not-ignored files: what the device tool sends besides `carry`."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.split(b"\0")
    return sum(_size(ROOT / name.decode()) for name in listed if name and (ROOT / name.decode()).exists())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--matrix", action="append", help="a matrix or edge file (its `cases`); again for more "
                                                          "(default: fixtures/matrices/gpu.json and gpu_edges.json)")
    parser.add_argument("--out", default=str(halide_aot.DEFAULT_AOT_DIR))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--unpack", action="store_true", help="only unpack the folder's objects (on the GPU machine)")
    args = parser.parse_args()
    if args.unpack:
        made = halide_aot.unpack(Path(args.out))
        print(f"unpacked {len(made)} Halide objects in {args.out}")
        return 0
    files = args.matrix or [str(ROOT / "fixtures" / "matrices" / name) for name in ("gpu.json", "gpu_edges.json")]
    matrices = [json.loads(Path(path).read_text()) for path in files]
    cases = list(dict.fromkeys(case for matrix in matrices for case in matrix["cases"]))
    out_dir = Path(args.out)
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    entries: list[dict] = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        results = pool.map(_build, cases, [str(out_dir)] * len(cases))
        for case_id, case_entries, seconds in results:
            failed = [e["schedule"] for e in case_entries if "error" in e]
            print(f"{case_id}: {len(case_entries) - len(failed)} of {len(case_entries)} schedules in {seconds:.1f} s"
                  + (f"; failed: {', '.join(failed)}" if failed else ""), flush=True)
            entries += case_entries
    index = halide_aot.write_index(out_dir, entries, matrix="+".join(matrix["name"] for matrix in matrices))
    aot = _size(out_dir)
    beside = {name: _size(ROOT / name) for name in CARRIED_BESIDE if (ROOT / name).exists()}
    tree = _tree_bytes()
    total = aot + sum(beside.values()) + tree
    mib = 2**20
    print(f"index: {index}; {sum('error' not in e for e in entries)} of {len(entries)} pipelines compiled")
    print(f"device_carry/halide: {aot / mib:.1f} MiB; "
          + "; ".join(f"{name}: {size / mib:.1f} MiB" for name, size in beside.items())
          + f"; working tree: {tree / mib:.1f} MiB; together {total / mib:.1f} MiB (limit {LIMIT_MB} MiB)")
    missing = [name for name in CARRIED_BESIDE if name not in beside]
    if missing:
        print(f"not built yet (bash scripts/device_wheels.sh): {', '.join(missing)}")
    return 1 if total > LIMIT_MB * mib else 0


if __name__ == "__main__":
    sys.exit(main())
