"""Files only the service user may read or write: the signing key and the tail witness.

Anyone who reads the signing key can sign a rewritten history; anyone who rewrites the witness
can hide a cut tail. So the folders holding them are 0700, the files are created 0600 from the
start (never loosened and then tightened), and a key file found readable by others or owned by
another user is refused rather than used: it may already have been copied.
"""
from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from .errors import LedgerError


def private_dir(path: Path) -> Path:
    """`path` as a folder of the service user's, mode 0700 (tightened when found looser)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.stat()
    if info.st_uid != os.geteuid():
        raise LedgerError(f"{path} belongs to uid {info.st_uid}, not to the service user (uid {os.geteuid()})")
    if stat.S_IMODE(info.st_mode) & 0o077:
        path.chmod(0o700)
    return path


def create_private(path: Path, text: str) -> bool:
    """Write `text` to `path`, mode 0600, only when no such file exists yet; True when written."""
    private_dir(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    return True


def replace_private(path: Path, text: str) -> None:
    """Replace `path` with `text` atomically (a reader sees the old file or the new, whole), mode 0600."""
    folder = private_dir(path.parent)
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.")  # created 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    directory = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def read_private(path: Path) -> str:
    """The text of a file that must be the service user's alone; LedgerError when it is not."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, encoding="utf-8") as handle:
        info = os.fstat(handle.fileno())
        if info.st_uid != os.geteuid():
            raise LedgerError(f"{path} belongs to uid {info.st_uid}, not to the service user (uid {os.geteuid()}): refused")
        if stat.S_IMODE(info.st_mode) & 0o077:
            raise LedgerError(
                f"{path} is readable or writable by other users (mode {stat.S_IMODE(info.st_mode):o}): refused. "
                "Anyone who read it can sign; make a new key (and trust the old public key for the past checkpoints)"
            )
        return handle.read()
