"""Length-prefixed frames on pipes and sockets, and the unpickler that reads a child's answer.

Between the parent, the sandbox's server and the harness children every message is one frame:
an 8-byte big-endian length, then that many bytes. A reader states the largest frame it
accepts, so a child cannot make its parent allocate without bound.

What a harness child sends back is read by `load_result`, which only rebuilds containers,
numbers, strings, NumPy arrays and dtypes and the harness's own dataclasses: a child that ran
candidate code may send anything, and a plain `pickle.loads` in the parent would run any
callable the bytes name, outside the sandbox, with the service's secrets.
"""
from __future__ import annotations

import dataclasses
import io
import os
import pickle
import struct

HEADER = struct.Struct(">Q")
RESULT_LIMIT = 1 << 31  # bytes a harness child may send back (server and parent both enforce it)


def write_frame(fd: int, data: bytes) -> None:
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def read_exactly(fd: int, count: int) -> bytes | None:
    """`count` bytes, or None at end of file before them."""
    chunks, left = [], count
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, limit: int) -> bytes | None:
    """One frame, or None at end of file; ValueError for a frame over `limit` bytes."""
    header = read_exactly(fd, HEADER.size)
    if header is None:
        return None
    (size,) = HEADER.unpack(header)
    if size > limit:
        raise ValueError(f"a frame of {size} bytes exceeds the limit of {limit}")
    return read_exactly(fd, size)


def split_frame(data: bytes) -> bytes | None:
    """The payload of the single frame that `data` must be, or None if it is not exactly one."""
    if len(data) < HEADER.size:
        return None
    (size,) = HEADER.unpack(data[: HEADER.size])
    return data[HEADER.size :] if len(data) == HEADER.size + size else None


# What a harness child may send back: NumPy's array and scalar reconstruction, and the
# harness's dataclasses (rebuilt as plain data: pickle sets their fields, runs none of their code).
_NUMPY = {
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("numpy._core.numeric", "_frombuffer"), ("numpy.core.numeric", "_frombuffer"),
}
_BUILTINS = {("builtins", "complex"), ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "slice")}
_DATACLASS_MODULES = ("measurement.harness.", "measurement.backends.base")


class _ResultUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) in _NUMPY or (module, name) in _BUILTINS:
            return super().find_class(module, name)
        if module.startswith(_DATACLASS_MODULES) and "." not in name:
            found = super().find_class(module, name)
            if isinstance(found, type) and dataclasses.is_dataclass(found) and "__setstate__" not in vars(found):
                return found
        raise pickle.UnpicklingError(f"a harness child may not send {module}.{name}")


def load_result(data: bytes):
    return _ResultUnpickler(io.BytesIO(data)).load()
