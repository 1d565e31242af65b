"""SECRET_KEY (README, Configuration; config/secret_key.py): with DEBUG off and none set, a random
key is made once into var/secret-key (mode 0600) and every later start uses it; one set in the
environment wins. Each start is a fresh process, since Django reads its settings once."""
from __future__ import annotations

import os
import stat
import subprocess
import sys

from django.conf import settings

PRINT_KEY = ("import django; django.setup(); from django.conf import settings; "
             "print(settings.DEBUG, settings.SECRET_KEY)")


def start(var_dir, **extra: str) -> tuple[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DEBUG")}
    env.update(FORGESTENCIL_VAR_DIR=str(var_dir), DJANGO_SETTINGS_MODULE="config.settings", **extra)
    done = subprocess.run([sys.executable, "-c", PRINT_KEY], cwd=settings.BASE_DIR, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    debug, key = done.stdout.split()
    return debug, key


def test_without_a_secret_key_one_is_made_once_private_and_kept_across_starts(tmp_path):
    debug, key = start(tmp_path)
    path = tmp_path / "secret-key"
    assert debug == "False" and key == path.read_text().strip() and len(key) >= 50
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert start(tmp_path) == ("False", key)
    assert start(tmp_path / "other")[1] != key  # another installation, another key


def test_a_secret_key_in_the_environment_wins_and_nothing_is_made(tmp_path):
    assert start(tmp_path, SECRET_KEY="k" * 60) == ("False", "k" * 60)
    assert not (tmp_path / "secret-key").exists()


def test_a_var_folder_set_but_empty_is_the_default_never_the_working_folder(tmp_path):
    """`FORGESTENCIL_VAR_DIR=$UNSET_NAME` in a shell left the key and the SQLite ledger in the folder
    the command ran from (session 19, at the repository root)."""
    env = {**os.environ, "FORGESTENCIL_VAR_DIR": "", "DJANGO_SETTINGS_MODULE": "config.settings"}
    done = subprocess.run([sys.executable, "-c", "import django; django.setup(); from django.conf import settings; "
                           "print(settings.VAR_DIR)"], cwd=tmp_path, env={**env, "PYTHONPATH": str(settings.BASE_DIR)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(settings.BASE_DIR / "var") and not any(tmp_path.iterdir())
