"""A throw-away ledger for a benchmark run: a fresh var folder, migrated, with Django set up, so
a benchmark records real events without touching any other ledger (what it keeps, it exports).

The folder is new for every run, inside FORGESTENCIL_VAR_DIR when that names a folder (the
device machine's scripts/device_env.sh exports one for the whole shell): two benchmarks of one
shell must not share a ledger, or the second would find the first's ledger and refuse to import
its export. A benchmark that means to reuse a ledger passes `var_dir`."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def setup_django(prefix: str, var_dir: str | None = None) -> None:
    parent = os.environ.get("FORGESTENCIL_VAR_DIR")
    os.environ["FORGESTENCIL_VAR_DIR"] = var_dir or tempfile.mkdtemp(
        prefix=f"forgestencil-{prefix}-", dir=parent if parent and os.path.isdir(parent) else None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    sys.path.insert(0, str(ROOT))
    subprocess.run([sys.executable, str(ROOT / "manage.py"), "migrate", "--noinput", "-v", "0"], check=True, cwd=ROOT)
    import django

    django.setup()


def export(out: Path) -> int:
    """Write the whole scratch ledger to `out` (JSON Lines), atomically."""
    from ledger.transfer import export_ledger

    temporary = out.with_suffix(".tmp")
    with temporary.open("w", encoding="utf-8") as handle:
        count = export_ledger(handle)
    os.replace(temporary, out)
    return count


def read_export(path: Path) -> list[dict]:
    import json

    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
