"""A throw-away ledger for a benchmark run: a fresh FORGESTENCIL_VAR_DIR (unless one is set),
migrated, with Django set up, so a benchmark records real events without touching any other
ledger (what it keeps, it exports)."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def setup_django(prefix: str) -> None:
    os.environ.setdefault("FORGESTENCIL_VAR_DIR", tempfile.mkdtemp(prefix=f"forgestencil-{prefix}-"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    sys.path.insert(0, str(ROOT))
    subprocess.run([sys.executable, str(ROOT / "manage.py"), "migrate", "--noinput", "-v", "0"], check=True, cwd=ROOT)
    import django

    django.setup()
