"""Loaded first (`-p tests.scratch_var` in pytest.ini): each test session gets its own scratch
var/ directory (signing key, secret key, witness, SQLite test database), so tests never touch
the developer's ledger. It has to run before pytest-django imports the settings, which happens
before the root conftest.py is read: set there, the test process itself kept the repository's
var/ while only the processes it started got the scratch one."""
import os
import tempfile

os.environ.setdefault("FORGESTENCIL_VAR_DIR", tempfile.mkdtemp(prefix="forgestencil-test-"))
