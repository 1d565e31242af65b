"""The ceiling under the ledger's single-append rate on PostgreSQL: how many durable one-row
INSERT transactions per second this server commits for one sequential client.

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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default="postgres://postgres@127.0.0.1:5432/test")
    parser.add_argument("--inserts", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with psycopg.connect(args.url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS commit_rate_probe (i int)")
        rates = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            for i in range(args.inserts):
                conn.execute("INSERT INTO commit_rate_probe VALUES (%s)", (i,))  # one durable commit each
            rates.append(args.inserts / (time.perf_counter() - started))
        conn.execute("DROP TABLE commit_rate_probe")
        settings = {name: conn.execute(f"SHOW {name}").fetchone()[0] for name in ("synchronous_commit", "fsync", "wal_sync_method")}
        server = conn.execute("SELECT version()").fetchone()[0]
    result = {
        "what": "durable single-row INSERT transactions per second, one sequential client (autocommit)",
        "command": " ".join([".venv/bin/python", *sys.argv]),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "server": server,
        "settings": settings,
        "commits_per_s": [round(r, 1) for r in rates],
        "median_commits_per_s": round(statistics.median(rates), 1),
    }
    with open(args.out, "w") as handle:
        json.dump(result, handle, indent=2)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
