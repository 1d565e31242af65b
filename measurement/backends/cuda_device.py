"""Facts about the CUDA device and its driver, for the CUDA backend (measurement.backends.cuda).

Two sources: CuPy's runtime (device properties, read in the harness child that owns the CUDA
context) and nvidia-smi (clocks, throttle reasons, other processes: what can spoil a
measurement). Also the lazy CuPy handle every CUDA module uses, so that importing them (to
read a docstring or a constant) works on a machine without a GPU.

Nothing here imports Django.
"""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

DEFAULT_SHARED_LIMIT = 48 * 1024
SMI_TIMEOUT_S = 10


class _LazyCupy:
    """CuPy, imported on first use: no module imports cupy at its top level, so importing this
    one (e.g. to read its docstring or constants) works on a machine without a GPU."""

    def __getattr__(self, name: str) -> Any:
        import cupy as module

        return getattr(module, name)


cupy = _LazyCupy()


def _nvidia_smi(args: list[str]) -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        done = subprocess.run([exe, *args], capture_output=True, text=True, timeout=SMI_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _value(text: str):
    text = text.strip()
    if not text or text.startswith("[") or text in ("N/A", "Not Supported"):
        return None
    try:
        return float(text) if "." in text or text.isdigit() else text
    except ValueError:
        return text


def _bus_suffix(bus_id: str | None) -> str:
    """'00000000:17:00.0' and '0000:17:00.0' name the same GPU: compare bus:device.function."""
    return (bus_id or "").strip().lower().split(":", 1)[-1]


def _query_once(fields: list[str], bus_id: str | None) -> dict[str, Any] | None:
    wanted = ["pci.bus_id", *fields]
    text = _nvidia_smi([f"--query-gpu={','.join(wanted)}", "--format=csv,noheader,nounits"])
    if text is None:
        return None
    rows = [[cell.strip() for cell in line.split(",")] for line in text.strip().splitlines() if line.strip()]
    row = next((r for r in rows if _bus_suffix(r[0]) == _bus_suffix(bus_id)), rows[0] if len(rows) == 1 else None)
    if row is None or len(row) != len(wanted):
        return {}
    return {name: _value(value) for name, value in zip(wanted[1:], row[1:])}


def query_gpu(fields: list[str], bus_id: str | None) -> dict[str, Any]:
    """nvidia-smi --query-gpu for our GPU (matched by PCI bus id); {} without nvidia-smi. When
    the driver refuses the query (a field name it does not know), each field is asked alone and
    the unknown ones are left out."""
    if shutil.which("nvidia-smi") is None:
        return {}
    result = _query_once(fields, bus_id)
    if result is not None:
        return result
    if len(fields) == 1 or _query_once([], bus_id) is None:
        return {}
    merged: dict[str, Any] = {}
    for name in fields:
        merged.update(_query_once([name], bus_id) or {})
    return merged


def compute_processes(bus_id: str | None) -> list[dict[str, Any]] | None:
    text = _nvidia_smi(["--query-compute-apps=pid,process_name,used_memory,gpu_bus_id", "--format=csv,noheader,nounits"])
    if text is None:
        return None
    processes = []
    for line in text.strip().splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) < 4 or (bus_id and _bus_suffix(cells[3]) != _bus_suffix(bus_id)):
            continue
        pid = int(cells[0]) if cells[0].isdigit() else None
        processes.append({"pid": pid, "name": cells[1], "used_memory_mib": _value(cells[2])})
    return processes


@dataclass(frozen=True)
class DeviceFacts:
    index: int
    name: str
    compute_capability: str
    sm_count: int
    l2_bytes: int
    memory_bytes: int
    shared_optin: int
    bus_id: str | None
    properties: dict[str, Any]


def _text(value) -> str:
    return value.decode(errors="replace").rstrip("\x00") if isinstance(value, bytes) else str(value)


def cuda_version(number: int) -> str:
    return f"{number // 1000}.{(number % 1000) // 10}"


def version_of(package: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(package)
    except Exception:
        return None


def device_facts() -> DeviceFacts:
    """The current device's properties, read once per backend (CudaBackend.device)."""
    index = cupy.cuda.runtime.getDevice()
    props = cupy.cuda.runtime.getDeviceProperties(index)
    try:
        bus_id = cupy.cuda.Device(index).pci_bus_id
    except Exception:
        bus_id = None
    keep = {
        key: (_text(value) if isinstance(value, bytes) else value)
        for key, value in props.items()
        if isinstance(value, (int, float, bytes, str, tuple)) and key not in ("uuid", "luid")
    }
    return DeviceFacts(
        index=index,
        name=_text(props.get("name", "?")),
        compute_capability=f"{props.get('major')}.{props.get('minor')}",
        sm_count=int(props.get("multiProcessorCount", 0)),
        l2_bytes=int(props.get("l2CacheSize", 0)) or 64 * 1024 * 1024,
        memory_bytes=int(props.get("totalGlobalMem", 0)),
        shared_optin=int(props.get("sharedMemPerBlockOptin", 0)) or DEFAULT_SHARED_LIMIT,
        bus_id=bus_id,
        properties=keep,
    )
