"""Application manifests: what the application gate may run, parsed and checked, never trusted.

A manifest is YAML validated by pydantic models with unknown keys forbidden, then by the checks
a schema cannot express (safe paths, a licence we recognise, placeholders the switch needs, the
baseline's bytes). Every problem is reported at once, each as "field.path: what is wrong"; an
invalid manifest records nothing.

Before any of that the file's size is bounded (read at most MAX_MANIFEST_BYTES + 1 bytes) and
its structure is walked as a stream of parser events, which needs no recursion: nesting deeper
than MAX_DEPTH or a YAML alias is refused before PyYAML builds objects (its composer recurses
once per level: a deeply nested file raised RecursionError, and aliases let a small file stand
for an exponentially large structure). Patterns run with RE2 (appgate.patterns).

Commands are argument lists after placeholder substitution, run without a shell:
`{out}` the variant's binary in the gate's scratch folder, `{switch}` the switch value of the
variant (build_flag / cli_flag), `{src}` the application's source folder, `{args}` the
dataset's arguments (split like a shell would), `{workdir}` the run's scratch folder.
"""
from __future__ import annotations

import hashlib
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator

from . import diffs, patterns
from .manifest_checks import Correctness, Hotspot, Strict, Timing, clock_problems, correctness_problems

# SPDX identifiers accepted for a bundled or outside program's licence.
LICENCES = frozenset({
    "MIT", "BSD-2-Clause", "BSD-3-Clause", "Apache-2.0", "GPL-2.0-only", "GPL-2.0-or-later", "GPL-3.0-only",
    "GPL-3.0-or-later", "LGPL-2.1-only", "LGPL-2.1-or-later", "LGPL-3.0-only", "LGPL-3.0-or-later", "MPL-2.0", "ISC",
    "Unlicense", "CC0-1.0", "Zlib",
})
NAME = r"^[a-z][a-z0-9_-]{1,63}$"
PLACEHOLDER = re.compile(r"\{(\w+)\}")
BUILD_PLACEHOLDERS = {"out", "switch", "src", "workdir", "build_args"}
ARGS_PLACEHOLDERS = {"src", "workdir"}  # in a dataset's args
# Set by the gate for every build and run; a manifest cannot declare them.
GATE_VARIABLES = {"HOME", "TMPDIR"}
RUN_PLACEHOLDERS = {"out", "switch", "src", "args", "workdir"}
# The bundled manifests are under 2 KB and 4 levels deep.
MAX_MANIFEST_BYTES = 64 * 1024
MAX_DEPTH = 10
# Named checkouts that manifests refer to (`source.root`), `name=/path` entries separated by the
# path separator: a generated manifest names its suite's root, never this machine's path to it.
SUITE_ROOTS_ENV = "FORGESTENCIL_SUITE_ROOTS"


class ManifestError(Exception):
    """The manifest is invalid; `problems` lists every "path: message"."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: {len(problems)} problem(s)\n" + "\n".join(f"  - {p}" for p in problems))


class RealProgram(Strict):
    """The program itself (not an operator proxy): what it computes and where its main file is."""

    description: str = Field(min_length=10)
    language: Literal["c", "cuda"]
    entry: str  # the main source file, relative to source.path


class Provenance(Strict):
    upstream: str  # "bundled" or an https URL of the original
    version: str = Field(min_length=1)  # commit hash or release
    licence: str
    authors: str = Field(min_length=1)


class Source(Strict):
    # A named root of FORGESTENCIL_SUITE_ROOTS (an imported suite's checkout): `path` is then
    # relative to that root, so the manifest holds no machine's path (appgate/suites).
    root: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_-]{0,63}$")
    path: str = "."  # relative to the manifest for bundled apps (to `root` if set); absolute for outside programs
    # Files of the baseline with their sha256: the baseline must be byte-identical to the original.
    baseline_files: dict[str, str] = Field(min_length=1)

    @field_validator("baseline_files")
    @classmethod
    def _hashes(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [name for name, digest in value.items() if not re.fullmatch(r"[0-9a-f]{64}", digest)]
        if bad:
            raise ValueError(f"not a sha256 hex digest for {', '.join(bad)}")
        return value


class Build(Strict):
    command: str = Field(min_length=1)
    timeout_s: float = Field(default=300, gt=0, le=3600)


class Run(Strict):
    command: str = Field(min_length=1)
    timeout_s: float = Field(default=120, gt=0, le=3600)


class Switch(Strict):
    """The single switch that selects the candidate variant; the baseline gets `baseline`."""

    kind: Literal["build_flag", "env", "cli_flag"]
    name: str | None = None  # the environment variable (kind env)
    baseline: str = ""
    candidate: str = Field(min_length=1)


class Dataset(Strict):
    name: str = Field(pattern=NAME)
    args: str = ""  # may use {src} (a read-only copy of the source folder) and {workdir} (the run's folder)
    # Files the run reads, relative to source.path: copied into the run's folder (same relative
    # path) before every run, and their sha256 recorded with the dataset's measurement.
    inputs: list[str] = Field(default_factory=list)
    # Compile-time arguments of this dataset (a problem size fixed by -D...): each variant is
    # built once per distinct value, through the {build_args} placeholder of build.command.
    build_args: str = ""


class Manifest(Strict):
    name: str = Field(pattern=NAME)
    domain: str = Field(min_length=3)
    real_program: RealProgram
    provenance: Provenance
    source: Source
    build: Build
    switch: Switch
    run: Run
    datasets: list[Dataset] = Field(min_length=1)
    correctness: Correctness
    timing: Timing
    hotspot: Hotspot
    architecture: Literal["cpu", "cuda"]
    # The run's environment (docs/appgate.md#environment): every build and run gets exactly these
    # variables (threads: OMP_NUM_THREADS; affinity: OMP_PROC_BIND, OMP_PLACES, ...) on top of the
    # sandbox's minimal one; nothing of the service's own OMP_* or KMP_* settings leaks in.
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("env", mode="before")
    @classmethod
    def _env_values(cls, value: Any) -> Any:
        """`OMP_NUM_THREADS: 4` is written as a YAML number; the variable's value is its text."""
        if isinstance(value, dict):
            return {k: str(v).lower() if isinstance(v, bool) else str(v) if isinstance(v, (int, float)) else v
                    for k, v in value.items()}
        return value


@dataclass(frozen=True)
class LoadedManifest:
    manifest: Manifest
    path: Path  # the manifest file
    source_dir: Path  # resolved source.path
    text: str  # the manifest as written (recorded with AppRegistered)

    @property
    def name(self) -> str:
        return self.manifest.name


def load_manifest(path: str | Path) -> LoadedManifest:
    path = Path(path)
    if not path.is_file():
        raise ManifestError(str(path), [f"no manifest file at {path}"])
    with path.open("rb") as handle:
        raw = handle.read(MAX_MANIFEST_BYTES + 1)
    if len(raw) > MAX_MANIFEST_BYTES:
        raise ManifestError(str(path), [f"(file): larger than {MAX_MANIFEST_BYTES} bytes"])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ManifestError(str(path), [f"(file): not UTF-8: {error}"]) from None
    return parse_manifest(text, path)


def parse_manifest(text: str, path: Path) -> LoadedManifest:
    try:
        structure = _structure_problems(text)
        if structure:
            raise ManifestError(str(path), structure)
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ManifestError(str(path), [f"(file): not valid YAML: {error}"]) from None
    if not isinstance(data, dict):
        raise ManifestError(str(path), ["(file): the manifest must be a mapping of fields"])
    problems: list[str] = []
    if "real_program" not in data:
        problems.append("real_program: missing: a manifest must name the real program (an operator proxy is not an application)")
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as error:
        problems += [_describe(e) for e in error.errors() if not (e["loc"] == ("real_program",) and e["type"] == "missing")]
        raise ManifestError(str(path), problems) from None
    source_dir = _source_dir(manifest, path, problems)
    problems += semantic_problems(manifest, source_dir)
    if problems:
        raise ManifestError(str(path), problems)
    return LoadedManifest(manifest, path.resolve(), source_dir, text)


def _structure_problems(text: str) -> list[str]:
    """Nesting beyond MAX_DEPTH, or an alias, seen in the parser's events (stops at the first)."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            return ["(file): YAML aliases (*name) are not allowed in a manifest"]
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                return [f"(file): nested deeper than {MAX_DEPTH} levels"]
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1
    return []


def _describe(error: dict) -> str:
    where = ".".join(str(part) for part in error["loc"]) or "(file)"
    message = error["msg"]
    if error["type"] == "extra_forbidden":
        message = "unknown field"
    elif error["type"] == "string_pattern_mismatch" and error["loc"][-1] == "name":  # the app's or a dataset's
        given = error.get("input")
        message = (f"{given!r} is not a name here: lower-case letters, digits, '-' and '_', 2-64 characters, starting "
                   "with a letter (names key ledger streams and URLs, where 'Foo' and 'foo' must not be two things)"
                   + (f"; use {given.lower()!r}" if isinstance(given, str) and re.fullmatch(NAME, given.lower()) else ""))
    if where == "correctness.mode" and error["type"] == "extra_forbidden":
        message = ("the single-mode correctness block was replaced by two checks: write correctness.own_check "
                   "(result_pattern, failure_pattern) and correctness.compare (or correctness.no_comparison: why no "
                   "output can be compared); see docs/appgate.md#correctness")
    return f"{where}: {message}"


def suite_roots() -> dict[str, Path]:
    """The named roots of FORGESTENCIL_SUITE_ROOTS (`hecbench=/data/HeCBench:other=/x`)."""
    roots = {}
    for entry in os.environ.get(SUITE_ROOTS_ENV, "").split(os.pathsep):
        name, _, folder = entry.partition("=")
        if name.strip() and folder.strip():
            roots[name.strip()] = Path(folder.strip()).expanduser().resolve()
    return roots


def _source_dir(manifest: Manifest, path: Path, problems: list[str]) -> Path:
    declared = Path(manifest.source.path)
    base = path.resolve().parent
    if manifest.source.root is not None:
        roots = suite_roots()
        if manifest.source.root not in roots:
            problems.append(f"source.root: {manifest.source.root!r} is not a configured suite root: set "
                            f"{SUITE_ROOTS_ENV}={manifest.source.root}=/path/to/its/checkout (configured: "
                            f"{', '.join(sorted(roots)) or 'none'})")
            return base
        base = roots[manifest.source.root]
        if declared.is_absolute():
            problems.append(f"source.path: {manifest.source.path!r} must be relative to source.root")
            return base
    resolved = declared if declared.is_absolute() else (base / declared).resolve()
    if manifest.source.root is not None and not resolved.is_relative_to(base):
        problems.append(f"source.path: {manifest.source.path!r} leaves the root {manifest.source.root!r}")
    elif not declared.is_absolute() and not resolved.is_relative_to(base):
        problems.append(f"source.path: {manifest.source.path!r} leaves the manifest's folder; use an absolute path for outside programs")
    elif not resolved.is_dir():
        problems.append(f"source.path: no folder at {resolved}")
    return resolved


def _inside(source_dir: Path, relative: str) -> bool:
    candidate = Path(relative)
    return not candidate.is_absolute() and (source_dir / candidate).resolve().is_relative_to(source_dir.resolve())


def semantic_problems(manifest: Manifest, source_dir: Path) -> list[str]:
    """What a schema cannot say: safe paths, known licence, placeholders, patterns, files present."""
    problems: list[str] = []
    m = manifest
    if m.provenance.licence not in LICENCES:
        problems.append(f"provenance.licence: {m.provenance.licence!r} is not a recognised SPDX identifier ({', '.join(sorted(LICENCES))})")
    if m.provenance.upstream != "bundled" and not re.match(r"^https://[\w.-]+/\S+$", m.provenance.upstream):
        problems.append("provenance.upstream: must be 'bundled' or an https URL of the original")
    files = {"real_program.entry": m.real_program.entry}
    files.update({f"source.baseline_files.{name}": name for name in m.source.baseline_files})
    files.update({f"datasets.{i}.inputs.{j}": f for i, d in enumerate(m.datasets) for j, f in enumerate(d.inputs)})
    if m.hotspot.kernel_file is not None:
        files["hotspot.kernel_file"] = m.hotspot.kernel_file
        if m.hotspot.kernel_file not in m.source.baseline_files:
            problems.append(f"hotspot.kernel_file: {m.hotspot.kernel_file!r} must be one of source.baseline_files "
                            "(the kernel the App Agent replaces must be a declared original)")
    for where, relative in files.items():
        if not _inside(source_dir, relative):
            problems.append(f"{where}: {relative!r} is not a path inside the source folder")
        elif source_dir.is_dir() and not (source_dir / relative).is_file():
            problems.append(f"{where}: no file {relative!r} in {source_dir}")
    if m.real_program.entry not in m.source.baseline_files:
        problems.append(f"source.baseline_files: must include the entry file {m.real_program.entry!r}")
    problems += _probe_problems(m, source_dir)
    problems += _placeholder_problems("build.command", m.build.command, BUILD_PLACEHOLDERS)
    problems += _placeholder_problems("run.command", m.run.command, RUN_PLACEHOLDERS)
    for i, d in enumerate(m.datasets):
        problems += _placeholder_problems(f"datasets.{i}.args", d.args, ARGS_PLACEHOLDERS)
        problems += _placeholder_problems(f"datasets.{i}.build_args", d.build_args, set())
    if any(d.build_args for d in m.datasets) and "{build_args}" not in m.build.command:
        problems.append("build.command: datasets declare build_args: the command needs the {build_args} placeholder")
    for name in m.env:
        if not re.fullmatch(r"[A-Z_][A-Z0-9_]*", name):
            problems.append(f"env.{name}: not an environment variable name (upper case, digits, '_')")
        elif name in GATE_VARIABLES or (m.switch.kind == "env" and name == m.switch.name):
            problems.append(f"env.{name}: set by the gate (HOME and TMPDIR: the command's folder; the switch: its variable)")
    if "{out}" not in m.build.command:
        problems.append("build.command: must write the variant's binary to {out}")
    where_switch = {"build_flag": ("build.command", m.build.command), "cli_flag": ("run.command", m.run.command)}.get(m.switch.kind)
    if where_switch and "{switch}" not in where_switch[1]:
        problems.append(f"{where_switch[0]}: a {m.switch.kind} switch needs the {{switch}} placeholder here")
    if m.switch.kind == "env" and not (m.switch.name and re.fullmatch(r"[A-Z_][A-Z0-9_]*", m.switch.name)):
        problems.append("switch.name: an env switch needs the variable's name (upper case)")
    if m.switch.kind != "env" and m.switch.name:
        problems.append(f"switch.name: only an env switch has a name (this one is {m.switch.kind})")
    if m.switch.baseline == m.switch.candidate:
        problems.append("switch.candidate: must differ from switch.baseline")
    names = [d.name for d in m.datasets]
    if len(set(names)) != len(names):
        problems.append("datasets: dataset names must be unique")
    patterns = {"timing.pattern": m.timing.pattern, "hotspot.pattern": m.hotspot.pattern}
    problems += correctness_problems(m.correctness, patterns)
    for where, pattern in patterns.items():
        if pattern is not None:
            problems += _pattern_problems(where, pattern)
    if m.timing.source == "pattern" and not m.timing.pattern:
        problems.append("timing.pattern: required when timing.source is 'pattern'")
    if m.hotspot.source == "pattern" and not m.hotspot.pattern:
        problems.append("hotspot.pattern: required when hotspot.source is 'pattern'")
    problems += clock_problems(m.timing, m.hotspot)
    return problems


def _probe_problems(m: Manifest, source_dir: Path) -> list[str]:
    """A probe may change only baseline files, and must apply to them as they are: a probe that
    fits neither variant would fail every build of the application."""
    if m.correctness.probe is None:
        return []
    try:
        paths = diffs.parse(m.correctness.probe)
    except ValueError:
        return []  # said by correctness_problems
    outside = sorted(set(paths) - set(m.source.baseline_files))
    if outside:
        return [f"correctness.probe: changes {', '.join(outside)}, not among source.baseline_files"]
    if not source_dir.is_dir():
        return []
    try:
        diffs.apply({p: diffs.read_source(source_dir / p) for p in paths}, m.correctness.probe, unique=True)
    except (OSError, ValueError) as error:
        return [f"correctness.probe: does not apply to the baseline: {error}"]
    return []


def _placeholder_problems(where: str, command: str, allowed: set[str]) -> list[str]:
    problems = [f"{where}: unknown placeholder {{{name}}} (allowed: {', '.join(sorted(allowed))})"
                for name in PLACEHOLDER.findall(command) if name not in allowed]
    try:
        shlex.split(command)
    except ValueError as error:
        problems.append(f"{where}: cannot be split into arguments: {error}")
    return problems


def _pattern_problems(where: str, pattern: str) -> list[str]:
    try:
        groups = patterns.groups(pattern)
    except patterns.PatternError as error:
        return [f"{where}: not a regular expression RE2 can run (no backreferences or lookaround): {error}"]
    needs_group = where in ("timing.pattern", "hotspot.pattern")
    if needs_group and groups != 1:
        return [f"{where}: needs exactly one group (the number of seconds)"]
    return []


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def baseline_mismatches(loaded: LoadedManifest) -> list[str]:
    """Baseline files whose bytes differ from the declared original (empty: byte-identical)."""
    return [name for name, digest in loaded.manifest.source.baseline_files.items()
            if file_hash(loaded.source_dir / name) != digest]
