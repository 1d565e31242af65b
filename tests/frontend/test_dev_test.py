"""`./dev test` with PostgreSQL and a Redis broker runs its two passes side by side (session 34, docs/testing.md):
the SQLite pass's workers and tasks on the broker's next Redis database, so that neither pass's workers take the
other's tasks; with another broker, or a result backend of its own, the passes go one after the other. The function
of ./dev that decides it, run from the script's own text."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def other_redis_database(url: str, **env: str) -> str:
    function = re.search(r"^other_redis_database\(\) \{.*?^\}", (ROOT / "dev").read_text(), re.S | re.M).group(0)
    script = f'VENV="{Path(sys.executable).parent.parent}"\n{function}\nother_redis_database "$1"'
    environment = {key: value for key, value in os.environ.items() if key != "CELERY_RESULT_BACKEND"}
    done = subprocess.run(["sh", "-c", script, "sh", url], env={**environment, **env}, capture_output=True, text=True,
                          timeout=60, check=True)
    return done.stdout.strip()


def test_the_sqlite_pass_gets_the_next_redis_database_or_the_passes_go_in_turn():
    assert other_redis_database("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/1"
    assert other_redis_database("redis://:secret@broker:6379/15?ssl_cert_reqs=none") == "redis://:secret@broker:6379/0?ssl_cert_reqs=none"
    assert other_redis_database("redis://127.0.0.1:6379") == "redis://127.0.0.1:6379/1"
    assert other_redis_database("") == ""  # no broker: in turn
    assert other_redis_database("amqp://guest@127.0.0.1//") == ""  # not Redis
    assert other_redis_database("redis://127.0.0.1:6379/zero") == ""  # not a database number
    assert other_redis_database("redis://127.0.0.1:6379/0", CELERY_RESULT_BACKEND="redis://127.0.0.1:6379/0") == ""
