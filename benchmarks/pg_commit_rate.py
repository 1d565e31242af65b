"""The ceiling under the ledger's single-append rate on PostgreSQL: how many durable one-row
INSERT transactions per second this server commits for one sequential client.

`benchmarks/ledger_bench.py` measures it interleaved with its appends (`raw_commit`, `locked_commit`), so
both numbers share the machine's load; run alone it writes its own JSON:

    .venv/bin/python benchmarks/pg_commit_rate.py [--url postgres://postgres@127.0.0.1:5432/test] \
        --out docs/benchmarks/pg_commit_rate.json
"""
import argparse
import json
import statistics
import sys
import time
from datetime import datetime, timezone

import psycopg

PROBE_TABLE = "commit_rate_probe"


def open_probe(url: str) -> psycopg.Connection:
    """An autocommit connection with the probe table in place (every INSERT is one commit)."""
    conn = psycopg.connect(url, autocommit=True)
    conn.execute(f"CREATE TABLE IF NOT EXISTS {PROBE_TABLE} (i int)")
    return conn


def raw_commit(conn: psycopg.Connection, value: int) -> None:
    """One durable one-row INSERT transaction (autocommit)."""
    conn.execute(f"INSERT INTO {PROBE_TABLE} VALUES (%s)", (value,))


def locked_commit(conn: psycopg.Connection, value: int, lock_key: int) -> None:
    """The same INSERT inside an explicit transaction that first takes a transaction-scoped
    advisory lock, as every ledger append does, pipelined (BEGIN, lock, INSERT, COMMIT in one
    round trip): the least a serialised append can cost from Python, before it does any work."""
    with conn.pipeline():
        conn.execute("BEGIN")
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key,))
        conn.execute(f"INSERT INTO {PROBE_TABLE} VALUES (%s)", (value,))
        conn.execute("COMMIT")


def commit_rate(conn: psycopg.Connection, inserts: int) -> float:
    """Durable one-row INSERT transactions per second, one after the other."""
    started = time.perf_counter()
    for i in range(inserts):
        raw_commit(conn, i)
    return inserts / (time.perf_counter() - started)


def server_facts(conn: psycopg.Connection) -> dict:
    settings = {name: conn.execute(f"SHOW {name}").fetchone()[0] for name in ("synchronous_commit", "fsync", "wal_sync_method")}
    return {"server": conn.execute("SELECT version()").fetchone()[0], "settings": settings}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default="postgres://postgres@127.0.0.1:5432/test")
    parser.add_argument("--inserts", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with open_probe(args.url) as conn:
        rates = [commit_rate(conn, args.inserts) for _ in range(args.repeat)]
        conn.execute(f"DROP TABLE {PROBE_TABLE}")
        facts = server_facts(conn)
    result = {
        "what": "durable single-row INSERT transactions per second, one sequential client (autocommit)",
        "command": " ".join([".venv/bin/python", *sys.argv]),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **facts,
        "commits_per_s": [round(r, 1) for r in rates],
        "median_commits_per_s": round(statistics.median(rates), 1),
    }
    with open(args.out, "w") as handle:
        json.dump(result, handle, indent=2)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
