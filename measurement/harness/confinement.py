"""The confinement of one harness child: the raw syscalls (unshare, mount, prctl, capset) and
the sequence that turns a freshly forked process into a harness child.

Kept apart from measurement.harness.sandbox_server, which forks and relays, so that the part
which decides what a candidate can see and do reads on its own. Runs only inside the sandbox's
server process and its children (Linux, ctypes on the C library).
"""
from __future__ import annotations

import ctypes
import os
import resource
import signal

CLONE_NEWNS, CLONE_NEWPID = 0x00020000, 0x20000000
CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS = 0x40000000, 0x08000000, 0x04000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_RDONLY = 2, 4, 8, 1
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 24, 38

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def checked(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source: str | None, target: str, kind: str | None, flags: int, data: str | None = None) -> None:
    encode = lambda text: text.encode() if text is not None else None  # noqa: E731
    checked(libc.mount(encode(source), encode(target), encode(kind), flags, encode(data)), f"mount {target}")


def prctl(option: int, value: int) -> None:
    checked(libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0), f"prctl({option})")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _drop_privileges(options: dict) -> None:
    """Bounding set emptied, then (as root) uid/gid 65534 without groups, else every capability
    cleared (the non-root fallback: one uid in a user namespace); no_new_privs either way."""
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    for capability in range(last + 1):
        libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0)  # EINVAL for caps this kernel lacks
    if options["separate_uid"]:
        uid = options["uid"]
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    else:
        data = (_CapData * 2)()
        checked(libc.capset(ctypes.byref(_CapHeader(0x20080522, 0)), data), "capset")
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # cleared by the uid change above, so set after it


def _set_limits(limits: dict, cpu_seconds: float, gpu: bool) -> None:
    memory = resource.RLIMIT_DATA if gpu else resource.RLIMIT_AS  # the CUDA driver reserves address space
    settings = [(memory, limits["memory"]), (resource.RLIMIT_CPU, int(cpu_seconds) + 1),
                (resource.RLIMIT_NPROC, limits["processes"]), (resource.RLIMIT_FSIZE, limits["file_size"]),
                (resource.RLIMIT_CORE, 0)]
    for which, value in settings:
        resource.setrlimit(which, (value, value))


def confine(options: dict, environment: dict, cpu_seconds: float, keep: tuple[int, ...], gpu: bool) -> None:
    """Turn this freshly forked process into a harness child (see the docstring of
    measurement.harness.sandbox_server). Only a CUDA child (`gpu`) keeps the NVIDIA devices and
    CuPy's kernel cache: a CPU child, which runs candidate host code, gets /dev/null in their
    place and an empty folder."""
    if options["sandboxed"]:
        # own network, IPC and host-name namespaces too: two children of one server (a GPU gate
        # checks the candidate and the prior best at once) share no loopback, socket or SysV IPC
        checked(libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        owner = options["uid"] if options["separate_uid"] else os.getuid()
        # The interpreter, venv or repository may lie under /tmp (a checkout in a temporary
        # folder): held open across the private /tmp and bound back read-only, or lazy imports
        # (scipy.ndimage's filters, sympy's submodules) would find nothing in the child.
        held = [(os.open(path, os.O_PATH | os.O_DIRECTORY), path) for path in options["exposed_in_tmp"]]
        _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
               f"size={options['limits']['scratch']},mode=0700,uid={owner},gid={owner}")
        for fd, path in held:
            os.makedirs(path, exist_ok=True)
            _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
            _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
            os.close(fd)
        cache = options["cache"]
        _mount(cache, cache, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
        if not gpu:
            for device in options["devices"]:
                if os.path.isdir(device):
                    _mount("tmpfs", device, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0755")
                else:
                    _mount("/dev/null", device, None, MS_BIND)
            if options["cupy_cache"]:
                _mount("tmpfs", options["cupy_cache"], "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0755")
    else:
        os.setsid()
    _set_limits(options["limits"], cpu_seconds, gpu)
    if options["sandboxed"]:
        _drop_privileges(options)
        for folder in skeleton:
            os.makedirs(os.path.join("/tmp", folder), exist_ok=True)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    low = 3  # every other descriptor inherited from the server and the intermediate goes
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 20)
    os.environ.clear()
    os.environ.update(environment)
    os.chdir(os.environ.get("TMPDIR", "/tmp"))


# Folders the preloaded modules made in the server's /tmp, its HOME (CuPy 14 makes its kernel
# cache folder at import and never again): made again, empty, in every child's own /tmp.
skeleton: list[str] = []
