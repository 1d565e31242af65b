"""benchmarks/ledger_bench.py --append-writers on PostgreSQL, with tiny numbers: the run it records
and the tables it prints (docs/ledger_benchmarks.md, "More writers"), for the plain append and the
group commit prototype (benchmarks/ledger_group_commit.py), whose appends must leave a ledger that
verifies like the plain path's. The benchmark creates and
drops a database of its own, so the test needs a PostgreSQL server and skips without one."""
import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from ledger_bench_writers import markdown_tables  # noqa: E402


def _server() -> str:
    """The PostgreSQL server of DATABASE_URL when it names one, else the local default (user postgres)."""
    url = os.environ.get("DATABASE_URL", "")
    return urlsplit(url).netloc if url.startswith(("postgres://", "postgresql://")) else "postgres@127.0.0.1:5432"


def _unreachable(server: str) -> str | None:
    try:
        psycopg.connect(f"postgresql://{server}/postgres", connect_timeout=3).close()
    except psycopg.OperationalError as error:
        return f"no PostgreSQL server at {server}: {error}"
    return None


def test_writers_mode_counts_every_writers_appends_on_both_paths_and_leaves_a_verified_ledger(tmp_path):
    server = _server()
    if reason := _unreachable(server):
        pytest.skip(reason)
    out = tmp_path / "writers.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/ledger_bench.py", "--db", "postgres", "--append-writers", "1,2",
         "--writers-paths", "plain,group",
         "--writers-rounds", "1", "--writers-seconds", "1", "--writers-raw-seconds", "0.5", "--ratio-at", "300",
         "--warmup", "20", "--pg-url", f"postgres://{server}/test_writers_bench_{os.getpid()}",
         "--writers-out", str(out), "--tmp-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    (run_id, run), = json.loads(out.read_text())["runs"].items()
    assert run["writers"] == [1, 2] and run["machine"]["ledger_source_sha256"] and run["command"]
    assert [(r["round"], r["writers"], r["path"]) for r in run["rounds"]] == [
        (0, 1, "plain"), (0, 1, "group"), (0, 2, "plain"), (0, 2, "group")]
    for entry in run["rounds"]:
        assert len(entry["appends_by_writer"]) == entry["writers"] and min(entry["appends_by_writer"]) > 0
        assert entry["raw_per_s"] > 0 and entry["append_server_cpu_ms"] > 0
        if entry["path"] == "plain":
            assert entry["begin_to_commit_ms"] > 0 and "events_per_commit" not in entry
        else:
            assert entry["events_per_commit"] >= 1 and "begin_to_commit_ms" not in entry
    assert {path: set(by_n) for path, by_n in run["by_path"].items()} == {"plain": {"1", "2"}, "group": {"1", "2"}}
    assert all(set(spread) == {"median", "min", "max"} for by_n in run["by_path"].values() for spread in by_n.values())
    assert run["verify"]["ok"] and run["verify"]["events"] == run["ledger_events_after"] > run["ledger_events_before"]
    rates, locks = markdown_tables({"runs": {run_id: run}}).split("\n\n")
    assert len(rates.splitlines()) == 6 and len(locks.splitlines()) == 4  # header, rule, a row per path and N
    assert f"| `{run_id}` | 2 |" in locks and "| group | 2 |" in rates
