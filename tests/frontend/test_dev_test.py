"""`./dev test` with PostgreSQL and a Redis broker runs its two passes side by side (docs/testing.md): the SQLite
pass's workers and tasks on the broker's next Redis database, so that neither pass's workers take the other's tasks,
and with a share of the `one_database` tests (conftest.py, SQLITE_SHARE) so that both end together; with another
broker, or a result backend of its own, the passes go one after the other. What must hold: every test still runs,
every `one_database` test exactly once, the tests that use a database on both databases."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# one module of each kind: one_database tests without workers in the SQLite share's folder (test_verdicts) and outside
# it (test_edges), one_database tests that start real workers (test_round_tasks), database tests (test_tasks), and
# neither (test_rules)
MODULES = ["tests/forge/test_edges.py", "tests/appgate/test_verdicts.py", "tests/forge/test_round_tasks.py",
           "tests/ledger/test_tasks.py", "tests/forge/test_rules.py"]


def collected(*arguments: str, **env: str) -> set[str]:
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("DATABASE_URL", "FORGESTENCIL_DATABASE_TESTS_ONLY", "FORGESTENCIL_ONE_DATABASE_SPLIT")}
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *arguments, *MODULES],
                          cwd=ROOT, env={**environment, **env}, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return {line for line in done.stdout.splitlines() if "::" in line}


def test_side_by_side_every_test_runs_and_each_one_database_test_once():
    everything = collected()
    one_database = collected("-m", "one_database")
    sqlite = collected("-m", "not browser", FORGESTENCIL_ONE_DATABASE_SPLIT="1")
    other = collected(FORGESTENCIL_DATABASE_TESTS_ONLY="1", FORGESTENCIL_ONE_DATABASE_SPLIT="1")
    assert sqlite | other == everything
    assert not sqlite & other & one_database  # once
    shared = sqlite & one_database
    assert shared and all(test.startswith("tests/appgate/test_verdicts.py") for test in shared)
    assert other & one_database and all(test.startswith(("tests/forge/test_round_tasks.py", "tests/forge/test_edges.py"))
                                        for test in other & one_database)
    assert any(test.startswith("tests/forge/test_edges.py") for test in other & one_database)
    assert any(test.startswith("tests/ledger/test_tasks.py") for test in sqlite & other)  # database tests: on both
    assert not any(test.startswith("tests/forge/test_rules.py") for test in other)  # no database: SQLite only
    # one after the other (no Redis to share), the second pass keeps every one_database test, as before
    assert collected(FORGESTENCIL_DATABASE_TESTS_ONLY="1") >= one_database


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
