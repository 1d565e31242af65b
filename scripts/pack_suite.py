"""Pack what an import of a suite needs into one xz tarball, for a machine the whole checkout
cannot reach (the GPU device: the repository plus carried paths stay under 64 MiB; HeCBench's
CUDA corpus is 76 MiB). Without Django: the suite's adapter (appgate.suites) infers each
program's manifest as `manage.py appgate suite import` would, and the tarball holds, for every
program it would import, its whole folder, every file its manifest names outside it (the build's
include closure, the datasets' inputs), and the suite's own files (benchmarks.yaml, CORPUS.md,
LICENSE), plus PACKED: the programs' upstream names, one a line, for `suite import --only`.

The tarball is checked before it is kept: unpacked into a scratch folder, every packed program
is inferred again from that copy, and its manifest (provenance: upstream commit from CORPUS.md,
sha256 of every baseline file; build, datasets, checks) must equal the one inferred from the
checkout. The tarball is reproducible (sorted names, no times or owners).

    .venv/bin/python scripts/pack_suite.py ../shared/corpora/hecbench --out device_carry/hecbench/hecbench.tar.xz
    (on the device: tar -xJf hecbench.tar.xz -C DIR; FORGESTENCIL_SUITE_ROOTS=hecbench=DIR;
     manage.py appgate suite import DIR --suite hecbench --arch sm_90 --only "$(paste -sd, DIR/PACKED)")
"""
from __future__ import annotations

import argparse
import io
import lzma
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from appgate.suites.base import Options  # noqa: E402  (after the path above)
from appgate.suites.hecbench import HecbenchAdapter  # noqa: E402

ADAPTERS = {"hecbench": HecbenchAdapter}
SUITE_FILES = ("benchmarks.yaml", "CORPUS.md", "LICENSE")


def infer_all(root: Path, suite: str, options: Options) -> dict[str, dict]:
    """Every program the import would take, by upstream name: its manifest (a dict)."""
    adapter = ADAPTERS[suite]()
    upstream = adapter.upstream(root)
    found = {}
    for name in adapter.programs(root, options):
        program = adapter.infer(root, name, options, upstream)
        if program.manifest is not None and not program.refusals:
            found[name] = {"folder": program.folder, "manifest": program.manifest}
    return found


def needed_files(root: Path, programs: dict[str, dict]) -> list[str]:
    """The files to pack, relative to the root: each program's folder, its manifest's files
    outside it, and the suite's own files."""
    files = {name for name in SUITE_FILES if (root / name).is_file()}
    for entry in programs.values():
        files.update(p.relative_to(root).as_posix() for p in (root / entry["folder"]).rglob("*") if p.is_file())
        manifest = entry["manifest"]
        base = root / manifest["source"]["path"]
        named = list(manifest["source"]["baseline_files"]) + [i for d in manifest["datasets"] for i in d.get("inputs", [])]
        files.update((base / name).resolve().relative_to(root.resolve()).as_posix() for name in named)
    return sorted(files)


def pack(root: Path, files: list[str], names: list[str]) -> bytes:
    """The tarball: the files under their relative paths, PACKED, nothing of this machine."""
    buffer = io.BytesIO()
    with lzma.open(buffer, "wb", preset=9 | lzma.PRESET_EXTREME) as xz, tarfile.open(fileobj=xz, mode="w",
                                                                                       format=tarfile.PAX_FORMAT) as tar:
        def add(name: str, data: bytes, mode: int = 0o644) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime, info.uname, info.gname = len(data), mode, 0, "", ""
            tar.addfile(info, io.BytesIO(data))

        for name in files:
            path = root / name
            add(name, path.read_bytes(), 0o755 if path.stat().st_mode & 0o111 else 0o644)
        add("PACKED", "".join(f"{n}\n" for n in names).encode())
    return buffer.getvalue()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", help="the suite's checkout")
    parser.add_argument("--suite", default="hecbench", choices=sorted(ADAPTERS))
    parser.add_argument("--model", default="cuda")
    parser.add_argument("--arch", default="sm_90", help="as the device's import will be given (the build command names it)")
    parser.add_argument("--root-name", help="the FORGESTENCIL_SUITE_ROOTS name (default: the suite)")
    parser.add_argument("--out", required=True, help="the tarball to write (.tar.xz), e.g. in the ignored device_carry/")
    options = parser.parse_args()
    root, started = Path(options.path).resolve(), time.perf_counter()
    adapter = ADAPTERS[options.suite]()
    arch = options.arch if adapter.models.get(options.model) == "cuda" else None
    opts = Options(options.root_name or options.suite, options.model, arch)
    programs = infer_all(root, options.suite, opts)
    files = needed_files(root, programs)
    data = pack(root, files, sorted(programs))
    with tempfile.TemporaryDirectory() as scratch:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:xz") as tar:
            tar.extractall(scratch, filter="data")
        copy = infer_all(Path(scratch), options.suite, Options(opts.root_name, opts.model, arch, frozenset(programs)))
        differ = sorted(n for n in programs if copy.get(n, {}).get("manifest") != programs[n]["manifest"])
    if differ:
        print(f"the unpacked copy gives other manifests for {len(differ)} programs: {', '.join(differ[:10])}",
              file=sys.stderr)
        return 1
    out = Path(options.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    size = sum((root / f).stat().st_size for f in files)
    print(f"{out}: {len(programs)} programs, {len(files)} files ({size / 2**20:.1f} MiB) in {len(data) / 2**20:.2f} MiB; "
          f"every manifest inferred again from the unpacked copy is the same; {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
