"""Root test configuration: each test session gets its own scratch var/ directory (signing key,
SQLite test database), so tests never touch the developer's ledger."""
import os
import tempfile

os.environ.setdefault("FORGESTENCIL_VAR_DIR", tempfile.mkdtemp(prefix="forgestencil-test-"))
