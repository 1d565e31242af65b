"""Setup for benchmarks/ledger_bench.py: the workload, the scratch database and the facts
recorded about the machine and the code of a run."""
from __future__ import annotations

import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---- workload ------------------------------------------------------------------------------

STENCILS = ["star_1", "star_2", "box_1", "box_2", "heat3d", "wave3d", "jacobi", "laplace", "advect", "diffuse"]
SIZES = ["64x64x64", "128x128x128", "256x256x256", "512x512x64", "96x96x96",
         "192x192x192", "320x320x32", "1024x1024x1", "48x48x48", "384x384x16",
         "160x160x160", "224x224x224", "288x288x72", "448x448x8", "80x80x80",
         "112x112x112", "240x240x60", "352x352x44", "416x416x26", "480x480x30",
         "544x544x17", "608x608x13", "672x672x11", "736x736x9", "800x800x7"]
DTYPES = ["f32", "f64", "bf16", "f16"]
REASONS = ["re-run slower on quiet node", "thermal throttling in original run", "wrong clock domain",
           "baseline was not warmed up", "reviewer reproduction 4% slower", "driver update changed timings"]
REVIEWERS = [f"user:reviewer{i}" for i in range(8)]
ACTORS = ["user:alice", "user:bob", "agent:forge-bot", "worker:measure-01", "worker:measure-02"]


class Workload:
    """Deterministic stream of realistic NewEvents over `streams` result streams."""

    def __init__(self, streams: int = 1000, seed: int = 20240611, signoff_share: float = 0.4) -> None:
        from ledger.services import NewEvent

        self.NewEvent = NewEvent
        self.rng = random.Random(seed)
        keys = [f"case/{s}/{z}/{d}" for s in STENCILS for z in SIZES for d in DTYPES]
        self.rng.shuffle(keys)
        self.streams = keys[:streams]
        self.signoff_share = signoff_share
        self.value = {key: 2.0 + self.rng.random() * 2 for key in self.streams}

    def event(self):
        rng = self.rng
        stream = self.streams[int(len(self.streams) * rng.random() ** 1.3)]  # mild skew: some results are busier
        if rng.random() < self.signoff_share:
            payload = {"result": stream, "result_version": rng.randint(1, 12), "reviewer": rng.choice(REVIEWERS)}
            if rng.random() < 0.3:
                payload["comment"] = "numbers reproduced on the reference node"
            return self.NewEvent(stream=stream, type="AuditSignedOff", payload=payload, actor=rng.choice(REVIEWERS))
        before = self.value[stream]
        after = round(before * (0.9 + rng.random() * 0.09), 4)
        self.value[stream] = after if after > 0.5 else 3.0
        payload = {"result": stream, "from_value": before, "to_value": after, "reason": rng.choice(REASONS)}
        if rng.random() < 0.1:
            payload["rerun"] = f"run/{uuid.UUID(int=rng.getrandbits(128))}"
        return self.NewEvent(stream=stream, type="ResultDowngraded", payload=payload, actor=rng.choice(ACTORS))

    def batch(self, size: int) -> list:
        return [self.event() for _ in range(size)]


# ---- database setup (before Django is imported) --------------------------------------------


def prepare_database(args) -> dict:
    """Create the fresh database, set DATABASE_URL & co; return facts about where it lives."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    var_dir = Path(tempfile.mkdtemp(prefix="ledger_bench_var_", dir=args.tmp_dir))
    os.environ["FORGESTENCIL_VAR_DIR"] = str(var_dir)  # keep the signing key etc. out of var/
    if not args.debug:
        os.environ["DEBUG"] = "0"  # production-like: no query log
        os.environ.setdefault("SECRET_KEY", "ledger-bench-only-not-a-secret")
    else:
        os.environ["DEBUG"] = "1"
    if args.db == "sqlite":
        path = Path(args.sqlite_path) if args.sqlite_path else var_dir / "ledger_bench.sqlite3"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        os.environ["DATABASE_URL"] = f"sqlite:///{path}"
        return {"var_dir": str(var_dir), "sqlite_path": str(path)}
    import psycopg
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(args.pg_url)
    name = parts.path.lstrip("/")
    if "bench" not in name and not args.force_drop:
        raise SystemExit(f"refusing to drop database {name!r}: its name lacks 'bench' (use --force-drop)")
    admin_url = urlunsplit(("postgresql", parts.netloc, "/postgres", "", ""))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    os.environ["DATABASE_URL"] = args.pg_url
    return {"var_dir": str(var_dir), "pg_database": name}


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


# ---- facts ---------------------------------------------------------------------------------


BENCH_FILES = ("ledger_bench.py", "ledger_bench_costs.py", "ledger_bench_measure.py", "ledger_bench_modes.py",
               "ledger_bench_profile.py", "ledger_bench_ratio.py", "ledger_bench_results.py", "ledger_bench_setup.py",
               "ledger_bench_versus.py", "ledger_bench_writers.py", "ledger_group_commit.py", "pg_commit_rate.py")


def snapshot(ref: str, tmp_dir: str | None) -> tuple[str, Path]:
    """A clean `git archive` of `ref` in a new temp dir, with this version of the bench itself:
    (the commit, the dir). The caller removes the dir."""
    commit = git("rev-parse", ref)
    if not commit:
        raise SystemExit(f"cannot resolve git ref {ref!r}")
    snap = Path(tempfile.mkdtemp(prefix=f"ledger_bench_src_{commit[:8]}_", dir=tmp_dir))
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(snap)], input=archive, check=True)
    (snap / "benchmarks").mkdir(exist_ok=True)
    for name in BENCH_FILES:
        shutil.copy2(Path(__file__).with_name(name), snap / "benchmarks" / name)
    return commit, snap


def add_run(path: Path, run_id: str, run: dict, about: str) -> None:
    """Add a run to a results file (runs keyed by id, earlier ones kept for the spread)."""
    import json

    data = json.loads(path.read_text()) if path.exists() else {}
    data.setdefault("about", about)
    data.setdefault("runs", {})[run_id] = run
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")


def git(*cmd: str) -> str | None:
    try:
        return subprocess.run(["git", *cmd], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:
        return None


def source_fingerprint() -> str:
    import hashlib

    digest = hashlib.sha256()
    for path in sorted((ROOT / "ledger").glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def machine_facts(args) -> dict:
    import django
    from django.db import connection

    cpu_model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    facts = {
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": cpu_model,
        "memory_gib": mem_gib,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "django": django.get_version(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "django_debug": bool(args.debug),
        "git_commit": os.environ.get("LEDGER_BENCH_SNAPSHOT") or git("rev-parse", "HEAD"),
        "code": ("clean snapshot of git_commit (--snapshot)" if os.environ.get("LEDGER_BENCH_SNAPSHOT")
                 else "working tree" + (" (ledger/ has uncommitted changes)"
                                        if git("status", "--porcelain", "--", "ledger") else "")),
        # the tree is edited while benchmarks run: fingerprint the ledger code this run imported
        "ledger_source_sha256": source_fingerprint(),
    }
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SHOW server_version")
            facts["database_server"] = f"PostgreSQL {cursor.fetchone()[0]}"
            settings = {}
            for name in ("synchronous_commit", "fsync", "shared_buffers", "work_mem", "max_wal_size"):
                cursor.execute(f"SHOW {name}")
                settings[name] = cursor.fetchone()[0]
            facts["database_settings"] = settings
            import psycopg

            facts["driver"] = f"psycopg {psycopg.__version__}"
        else:
            cursor.execute("select sqlite_version()")
            facts["database_server"] = f"SQLite {cursor.fetchone()[0]}"
            settings = {}
            for name in ("journal_mode", "synchronous", "cache_size", "page_size"):
                cursor.execute(f"PRAGMA {name}")
                settings[name] = cursor.fetchone()[0]
            settings["transaction_mode"] = connection.settings_dict["OPTIONS"].get("transaction_mode")
            facts["database_settings"] = settings
    return facts


def database_bytes(db_info: dict) -> int | None:
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_database_size(current_database())")
            return int(cursor.fetchone()[0])
    path = db_info.get("sqlite_path")
    return sum(Path(f"{path}{s}").stat().st_size for s in ("", "-wal") if Path(f"{path}{s}").exists())


def event_count() -> int:
    from ledger.services import head

    return head()[0]


def drop_database(args, db_info: dict) -> None:
    if args.db == "postgres":
        import psycopg
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(args.pg_url)
        with psycopg.connect(urlunsplit(("postgresql", parts.netloc, "/postgres", "", "")), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{parts.path.lstrip("/")}"')
    shutil.rmtree(db_info["var_dir"], ignore_errors=True)
    if args.sqlite_path:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{args.sqlite_path}{suffix}").unlink(missing_ok=True)

