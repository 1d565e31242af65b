"""The SECRET_KEY of a setup that sets none (kept apart from settings.py so that settings imports
nothing of Django's; ledger.custody imports none either)."""
from __future__ import annotations

import secrets
from pathlib import Path

from ledger.custody import create_private


def embedded_secret_key(var_dir: Path) -> str:
    """Random, made once into var/ (mode 0600): it survives restarts (sessions stay valid) and
    never sits in the repository. Several servers sharing sessions must set SECRET_KEY instead."""
    path = var_dir / "secret-key"
    create_private(path, secrets.token_urlsafe(50))  # a no-op when made before, or by another process just now
    return path.read_text().strip()
