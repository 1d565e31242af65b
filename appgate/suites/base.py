"""The suite-independent half of importing a suite of outside programs (docs/appgate.md#import-a-suite):
what an adapter returns for one program (a manifest, or refusals, with notes on what it could not
infer, each a machine-readable code and a detail), and the pieces of a manifest every suite builds
the same way: provenance, the source block under a named root (the common folder of everything the
build reads and the datasets need), datasets whose file arguments become input files, the two
correctness checks as far as the source shows them, and the manifest's text. Free of Django.
"""
from __future__ import annotations

import hashlib
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import yaml

from ..manifest import NAME
from . import sources

OUTPUT_NAME = re.compile(r"(?i)(?:^|[/._-])(?:out|output|outputs|result|results)(?:[._-]|$)")
MAX_INPUT_FILES = 200  # files of one argument's folder taken as inputs; more is not a test input


@dataclass(frozen=True)
class Finding:
    code: str  # machine-readable: no_test_metadata, missing_input, timing_unit_unknown, ...
    detail: str


@dataclass
class Program:
    """One program of a suite: its manifest (a dict, None when refused), why it was refused,
    and what the manifest says less than it could (notes)."""

    name: str  # upstream's name
    folder: str  # relative to the suite root; "" when the program has no folder
    manifest: dict | None = None
    refusals: list[Finding] = field(default_factory=list)
    notes: list[Finding] = field(default_factory=list)

    def refuse(self, code: str, detail: str) -> "Program":
        self.refusals.append(Finding(code, detail))
        return self

    def note(self, code: str, detail: str) -> None:
        self.notes.append(Finding(code, detail))


@dataclass(frozen=True)
class Upstream:
    repository: str  # https URL of the upstream repository
    commit: str


@dataclass(frozen=True)
class Options:
    root_name: str  # the FORGESTENCIL_SUITE_ROOTS name the manifests refer to
    model: str  # the suite's programming model to import (HeCBench: cuda, omp)
    arch: str | None  # the GPU architecture to build for (sm_90); None for a CPU model
    only: frozenset[str] = frozenset()  # upstream names; empty: every program


class Adapter(Protocol):
    """What a suite tells the importer: its upstream, its programs, and one program's manifest."""

    name: str
    models: dict[str, str]  # model -> manifest architecture (cpu / cuda)

    def upstream(self, root: Path) -> Upstream: ...

    def programs(self, root: Path, options: Options) -> list[str]: ...

    def infer(self, root: Path, name: str, options: Options, upstream: Upstream) -> Program: ...


def app_name(root_name: str, folder: str) -> str | None:
    """The application's name: the root's name and the program's folder, lower case, other
    characters as '-' (None when that is no name: too long)."""
    name = re.sub(r"[^a-z0-9_-]+", "-", f"{root_name}-{folder}".lower()).strip("-")
    return name if re.fullmatch(NAME, name) else None


LICENCE_HEADS = [  # (a phrase of the licence's own text, its SPDX id), the first match wins
    ("Apache License", "Apache-2.0"), ("Mozilla Public License Version 2.0", "MPL-2.0"),
    ("MIT License", "MIT"), ("Permission is hereby granted, free of charge", "MIT"),
    ("BSD 3-Clause", "BSD-3-Clause"), ("BSD 2-Clause", "BSD-2-Clause"),
    ("unencumbered software released into the public domain", "Unlicense"),
]


def licence_of(text: str, program_texts: list[str]) -> tuple[str | None, str]:
    """The SPDX id of a LICENSE file's text (a GNU licence's "or later" read from the program's
    own file headers), or None and why."""
    flat = " ".join(text.split())
    gnu = re.search(r"GNU (LESSER )?GENERAL PUBLIC LICENSE\s+Version (\d(?:\.\d)?)", flat, re.I)
    if gnu:
        kind, version = ("LGPL" if gnu.group(1) else "GPL"), gnu.group(2)
        version = {"2": "2.0", "3": "3.0"}.get(version, version)
        later = any("any later version" in " ".join(t.split()) for t in program_texts)
        return f"{kind}-{version}-{'or-later' if later else 'only'}", ""
    heads = [spdx for phrase, spdx in LICENCE_HEADS if phrase.lower() in flat.lower()]
    if heads:
        return heads[0], ""
    if "Redistribution and use in source and binary forms" in flat:
        three = "Neither the name" in flat or "names of its contributors" in flat
        return ("BSD-3-Clause" if three else "BSD-2-Clause"), ""
    return None, f"a licence not recognised: {flat[:120]!r}"


def authors_of(text: str) -> str | None:
    """The holder named by a licence's first copyright line, without its years."""
    for line in text.splitlines():
        found = re.search(r"Copyright\s*(?:\(c\)|©)?\s*([^\n]+)", line, re.I)
        if found:
            holder = re.sub(r"^[\s\d,\-–]+|\s*All rights reserved\.?|\(c\)|©", "", found.group(1), flags=re.I)
            holder = holder.strip(" .,")
            if len(holder) >= 3:
                return holder[:200]
    return None


@dataclass
class Arguments:
    """A dataset's arguments as upstream wrote them (relative to the program's folder), with
    the files and folders they name resolved."""

    words: list[str | Path]  # a plain argument, or the resolved path of a file or folder it names
    missing: list[str] = field(default_factory=list)  # paths that name nothing in the checkout
    outputs: list[str] = field(default_factory=list)  # not there, but named as outputs: the program writes them

    def paths(self) -> list[Path]:
        return [w for w in self.words if isinstance(w, Path)]


def resolve_arguments(args: list[str], folder: Path, top: Path) -> Arguments:
    """Which arguments name a file or folder (relative to the program's folder, as upstream
    runs it there): those become the dataset's input files. A path with a '/', or a file name,
    that names nothing is a missing input, unless the name says it is an output (`out.txt`,
    `result.dat`, `hiv1-nl43.out`: the program writes it)."""
    resolved = Arguments([])
    for arg in args:
        if _number(arg) or arg.startswith("-") or not arg:
            resolved.words.append(arg)
            continue
        target = (folder / arg).resolve()
        if target.is_relative_to(top) and target.exists() and target != folder.resolve():
            resolved.words.append(target)
        elif "/" in arg or re.search(r"\.\w{1,5}$", arg):
            (resolved.outputs if OUTPUT_NAME.search(arg) else resolved.missing).append(arg)
            resolved.words.append(arg)
        else:
            resolved.words.append(arg)
    return resolved


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def dataset(name: str, arguments: Arguments, base: Path) -> tuple[dict, str]:
    """A manifest dataset: the arguments with each path made relative to `base` (the source
    folder: inputs are placed at that path in the run's folder), and its input files; or a
    problem ("" when none)."""
    words, inputs = [], []
    for word in arguments.words:
        if isinstance(word, Path):
            files = sorted(p for p in word.rglob("*") if p.is_file()) if word.is_dir() else [word]
            if len(files) > MAX_INPUT_FILES:
                return {}, f"{word.relative_to(base)} holds {len(files)} files (more than {MAX_INPUT_FILES} inputs)"
            inputs += [p.relative_to(base).as_posix() for p in files]
            word = word.relative_to(base).as_posix()
        if "{" in word or "}" in word:
            return {}, f"the argument {word!r} holds a brace, which a manifest reads as a placeholder"
        words.append(word)
    block = {"name": name, "args": shlex.join(words)}
    if inputs:
        block["inputs"] = list(dict.fromkeys(inputs))
    return block, ""


def source_base(folder: Path, needed: list[Path]) -> Path:
    """The source folder of the manifest: the program's own folder, or the common folder of it
    and every file its build or datasets need outside it (HeCBench's ../include, ../data)."""
    return Path(os.path.commonpath([folder, *needed])) if needed else folder


def baseline_files(files: set[Path], base: Path) -> dict[str, str]:
    return {p.relative_to(base).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(files)}


def correctness(program: Program, texts: list[str]) -> dict | None:
    """The two checks as far as the program's source shows them: its own PASS / FAIL verdict,
    and its integer checksums compared exactly; without a comparison, `no_comparison` says why
    (the verdict will be self-checked). None, with a refusal, when there is no check at all."""
    own, why_not_own = sources.own_check(texts)
    compare, why_not_compared = sources.checksum_compare(texts)
    if own is None:
        program.note("own_check_not_inferred", why_not_own)
    if not compare:
        program.note("compare_not_inferred", why_not_compared)
    if own is None and not compare:
        program.refuse("no_check", f"neither an own check ({why_not_own}) nor an output to compare "
                       f"({why_not_compared})")
        return None
    block: dict = {"own_check": own} if own else {}
    if compare:
        block["compare"] = compare
    else:
        block["no_comparison"] = f"not inferred from the source on import: {why_not_compared}"
    return block


def render(manifest: dict, header: list[str]) -> str:
    """The manifest's text: a comment header (what generated it, what it could not infer), then
    the blocks in the order people read them."""
    return "".join(f"# {line}\n" for line in header) + yaml.safe_dump(manifest, sort_keys=False, width=120,
                                                                     allow_unicode=True)
