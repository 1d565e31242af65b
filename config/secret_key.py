"""The SECRET_KEY of a setup that sets none (kept apart from settings.py so that settings imports
nothing of Django's)."""
from __future__ import annotations

import os
import secrets
from pathlib import Path


def embedded_secret_key(var_dir: Path) -> str:
    """Random, made once into var/ (mode 0600): it survives restarts (sessions stay valid) and
    never sits in the repository. Several servers sharing sessions must set SECRET_KEY instead."""
    path = var_dir / "secret-key"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # made before, or by another process just now
        pass
    else:
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(50))
    return path.read_text().strip()
