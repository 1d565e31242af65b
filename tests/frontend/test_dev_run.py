"""Issue 19, point 9: `./dev run` with its port taken stops before any work (no virtual
environment, migration, seed or rebuild of a ledger another server is serving), saying why."""
from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_dev_run_checks_its_port_before_doing_anything(tmp_path):
    """The port is PORT's (default 8000); the test holds a free one of its own and names it."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    var = tmp_path / "var"
    env = {**os.environ, "FORGESTENCIL_VAR_DIR": str(var), "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
           "PORT": str(port)}
    try:
        done = subprocess.run(["sh", str(ROOT / "dev"), "run"], env=env, capture_output=True, text=True, timeout=600)
    finally:
        holder.close()
    assert done.returncode == 1, done.stderr
    assert (f"port {port} on 127.0.0.1 is in use (another ./dev run?): stop that server first, or choose another port "
            "(PORT=8001 ./dev run); nothing was done") in done.stderr
    assert not var.exists() and not (tmp_path / "db.sqlite3").exists()  # no migration, no seed
    assert "installing" not in done.stderr and done.stdout == ""
