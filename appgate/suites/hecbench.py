"""The HeCBench adapter (github.com/zjin-lcf/HeCBench): a program is `src/<name>-<model>/` with its
own Makefile, and upstream's `benchmarks.yaml` holds its test arguments and the regex of the time
it prints (docs/appgate.md#import-a-suite). Free of Django.

The build is the program's own Makefile, run in the gate's fresh copy with the machine's
architecture (`ARCH=sm_90`), the binary written to the gate's `{out}` through the Makefile's
`program` variable, and the candidate's switch through `EXTRA_CFLAGS`, which upstream's Makefiles
put first on every compile line. The timing regex's matches are added up (`match: sum`), as
upstream's own runner (src/scripts/autohecbench.py) does.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

import yaml

from . import sources
from .base import (Options, Program, Upstream, app_name, authors_of, baseline_files, correctness, dataset, licence_of,
                   resolve_arguments, source_base)
from ..builds import git_read
from ..patterns import PatternError, groups

VARIABLE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*[:?]?=\s*(.*?)\s*$", re.M)
REFERENCE = re.compile(r"\$[({]([A-Za-z_][A-Za-z0-9_]*)[)}]")
RUN_RECIPE = re.compile(r"^run\s*:[^\n]*\n\t[^\n]*?\./\$\(program\)[ \t]*([^\n]*)$", re.M)
BUILD_TIMEOUT_S = 900  # one program's nvcc build; the largest take minutes
CORPUS_UPSTREAM = re.compile(r"github\.com/([\w.-]+/[\w.-]+)\s+at\s+commit\s+([0-9a-f]{40})")


class HecbenchAdapter:
    name = "hecbench"
    models = {"cuda": "cuda", "omp": "cpu"}

    def upstream(self, root: Path) -> Upstream:
        """The checkout's own commit and origin where it is a git checkout; else what its
        CORPUS.md says (a copy such as ../shared/corpora/hecbench records its commit there)."""
        top = git_read(root, "rev-parse", "--show-toplevel")
        commit = git_read(root, "rev-parse", "HEAD") if top and Path(top).resolve() == root.resolve() else None
        origin = git_read(root, "remote", "get-url", "origin") or ""
        found = re.search(r"github\.com[:/]([\w.-]+/[\w.-]+?)(?:\.git)?$", origin)
        if commit and found:
            return Upstream(f"https://github.com/{found.group(1)}", commit)
        corpus = root / "CORPUS.md"
        stated = CORPUS_UPSTREAM.search(" ".join(corpus.read_text().split())) if corpus.is_file() else None
        if stated is None:
            raise ValueError(f"{root}: neither a git checkout with a GitHub origin nor a CORPUS.md naming "
                             "'github.com/OWNER/REPO at commit SHA': the upstream commit of its programs is unknown")
        return Upstream(f"https://github.com/{stated.group(1)}", stated.group(2))

    def programs(self, root: Path, options: Options) -> list[str]:
        """Every program of the model: each with test metadata in benchmarks.yaml for the model,
        and each with a folder src/<name>-<model>/ (with or without metadata)."""
        listed = [name for name, entry in _metadata(root).items()
                  if options.model in ((entry or {}).get("models") or []) and (entry or {}).get("test")]
        folders = [p.name[: -len(options.model) - 1] for p in (root / "src").glob(f"*-{options.model}") if p.is_dir()]
        names = sorted(set(listed) | set(folders))
        return [n for n in names if n in options.only] if options.only else names

    def infer(self, root: Path, name: str, options: Options, upstream: Upstream) -> Program:
        top = root.resolve()
        folder = top / "src" / f"{name}-{options.model}"
        program = Program(name, folder.relative_to(top).as_posix() if folder.is_dir() else "")
        entry = _metadata(root).get(name) or {}
        test, make = entry.get("test"), folder / "Makefile"
        unlisted = (f"benchmarks.yaml has no test block for {name}" if name in _metadata(root)
                    else f"{name} is not in benchmarks.yaml")
        if not folder.is_dir():
            return program.refuse("missing_source", f"benchmarks.yaml has test metadata for {name}, but the checkout "
                                  f"has no folder src/{name}-{options.model}/")
        if not make.is_file() and not test:
            return program.refuse("no_test_metadata", f"{unlisted}, and src/{folder.name}/ has no Makefile")
        if not make.is_file():
            return program.refuse("no_makefile", f"src/{folder.name}/ has no Makefile (upstream builds it with CMake)")
        facts = _makefile(make.read_text(errors="replace"))
        build_command = _build_command(program, facts, options)
        closure, main, texts = _read_sources(program, folder, make, facts, top)
        if test:
            timing = _timing(program, test["regex"], texts)
            datasets = _arguments(program, [str(a) for a in test.get("args") or []], facts["run_args"], folder, top)
        else:
            timing = _timing_from_source(program, unlisted, facts, texts)
            datasets = _arguments(program, None, facts["run_args"], folder, top) if timing else {}
        checks = correctness(program, texts)
        licence, authors = _licence(program, folder, top, texts)
        name_of_app = app_name(options.root_name, folder.name)
        if name_of_app is None:
            program.refuse("name_unusable", f"{options.root_name}-{folder.name} is no application name (64 characters "
                           "at most)")
        if program.refusals or build_command is None or main is None or checks is None or timing is None:
            return program
        needed = closure.files | {path for arguments in datasets.values() for path in arguments.paths()}
        base = source_base(folder.resolve(), [p for p in needed if not p.is_relative_to(folder.resolve())])
        blocks = []
        for dataset_name, arguments in datasets.items():
            block, problem = dataset(dataset_name, arguments, base)
            if problem:
                return program.refuse("dataset_unusable", f"{dataset_name}: {problem}")
            blocks.append(block)
        if base != folder.resolve():
            program.note("source_root_widened", f"the build or a dataset reaches outside src/{folder.name}/: the "
                         f"source folder is {base.relative_to(top).as_posix() or '.'} (every build copies all of it)")
        relative = folder.resolve().relative_to(base).as_posix()
        architecture = self.models[options.model]
        categories = ", ".join(entry.get("categories") or []) or "uncategorised"
        program.note("larger_dataset_not_inferred", "the meaning of the arguments is not in the metadata: no dataset "
                     "larger than upstream's was inferred; size them on the GPU")
        program.note("hotspot_unmeasured", "hotspot: none: the share of the top kernels is measured on the GPU (a "
                     "profile)")
        program.manifest = {
            "name": name_of_app,
            "domain": f"HeCBench: {categories}",
            "real_program": {
                "description": f"HeCBench's {name} ({categories}): upstream's {options.model} program, built with its "
                               "own Makefile and run with upstream's "
                               + ("test arguments" if test else "arguments of its Makefile's run target")
                               + ("; it checks its own result" if checks.get("own_check") else "") + ".",
                "language": "cuda" if architecture == "cuda" else "c",
                "entry": main.relative_to(base).as_posix()},
            "provenance": {"upstream": f"{upstream.repository}/tree/{upstream.commit}/{program.folder}",
                           "version": upstream.commit, "licence": licence, "authors": authors},
            "source": {"root": options.root_name, "path": base.relative_to(top).as_posix() or ".",
                       "baseline_files": baseline_files(closure.files, base)},
            "build": {"command": build_command.replace("{dir}", "{src}" + (f"/{relative}" if relative != "." else "")),
                      "timeout_s": BUILD_TIMEOUT_S},
            "switch": {"kind": "build_flag", "baseline": "", "candidate": "-DFORGED"},
            "run": {"command": "{out} {args}", "timeout_s": min(float((test or {}).get("timeout") or 300), 3600)},
            "datasets": blocks,
            "correctness": checks,
            "timing": timing,
            "hotspot": {"source": "none"},
            "architecture": architecture,
        }
        return program


@functools.lru_cache(maxsize=4)
def _metadata(root: Path) -> dict:
    """benchmarks.yaml, read once per import (3,000 lines: a second per parse)."""
    path = root / "benchmarks.yaml"
    return (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}


def _makefile(text: str) -> dict:
    """What the importer needs of a Makefile: its first definition of each variable, the -I
    folders its flags name, the makefiles it includes and the run target's arguments."""
    variables: dict[str, str] = {}
    for name, value in VARIABLE.findall(text):
        variables.setdefault(name, value.split("#")[0].strip())

    def expand(value: str, depth: int = 0) -> str:
        return value if depth > 8 else REFERENCE.sub(lambda m: expand(variables.get(m.group(1), ""), depth + 1), value)

    flags = expand(" ".join(line for line in text.splitlines() if "-I" in line or "FLAGS" in line))
    run = RUN_RECIPE.search(text)
    return {"variables": variables, "extra_cflags": bool(re.search(r"\$[({]EXTRA_CFLAGS[)}]", text)),
            "include_dirs": list(dict.fromkeys(d for d in re.findall(r"-I\s*([^\s$]+)", flags)
                                               if not d.startswith("/"))),
            "makefiles": [expand(m) for m in re.findall(r"^-?include\s+(\S+)", text, re.M)],
            "run_args": expand(run.group(1)).split() if run else None}


def _build_command(program: Program, facts: dict, options: Options) -> str | None:
    """make in the program's folder of the gate's copy ({dir}), for this machine, writing {out}."""
    variables = facts["variables"]
    problem = ("the Makefile has no `program` variable to name the binary {out}" if "program" not in variables
               else "the Makefile's flags do not take EXTRA_CFLAGS, so no switch reaches the compiler"
               if not facts["extra_cflags"] else "")
    arch = ""
    if options.arch is not None and not problem:
        written = variables.get("ARCH", "")
        if written.startswith("sm_"):
            arch = f" ARCH={options.arch}"
        elif written.isdigit():
            arch = f" ARCH={options.arch.removeprefix('sm_')}"
        else:
            problem = (f"the Makefile's ARCH ({written or 'none'}) is not sm_NN or NN: the build cannot be told this "
                       "machine's architecture")
    if problem:
        program.refuse("makefile_unsupported", problem)
        return None
    return f"make -C {{dir}}{arch} program={{out}} EXTRA_CFLAGS={{switch}}"


def _read_sources(program: Program, folder: Path, make: Path, facts: dict, top: Path):
    """Every file the build reads (the compiled files of the folder, what they include, the
    Makefiles), the file defining main, and the texts of the C-family ones."""
    include_dirs = [(folder / d).resolve() for d in facts["include_dirs"]]
    units = sorted(p for p in sources.program_files(folder) if p.suffix in sources.COMPILED)
    closure = sources.include_closure(units, include_dirs, top)
    absent = [f"-I{w}" for w, d in zip(facts["include_dirs"], include_dirs) if not d.is_dir() and d.is_relative_to(top)]
    if absent and closure.unresolved:  # the headers the build cannot find were to come from there
        program.refuse("missing_build_file", f"the Makefile's {', '.join(absent)} names no folder in the checkout, "
                       f"and {', '.join(closure.unresolved[:5])} is found nowhere")
    elif absent:
        program.note("missing_include_dir", f"the Makefile's {', '.join(absent)} names no folder in the checkout "
                     "(no header of the program is looked up there)")
    makefiles = [(folder / m).resolve() for m in facts["makefiles"] if (folder / m).is_file()]
    closure.files.update([make.resolve(), *makefiles])
    if closure.unresolved:
        program.note("unresolved_include", "taken as system headers: " + ", ".join(closure.unresolved[:10]))
    main = sources.entry_file(sorted(closure.files), folder.resolve())
    if main is None:
        program.refuse("no_main", f"no compiled file of src/{folder.name}/ defines main")
    texts = [sources.read(p) for p in sorted(closure.files) if p.suffix in sources.COMPILED | sources.HEADERS]
    return closure, main, texts


def _timing_from_source(program: Program, unlisted: str, facts: dict, texts: list[str]) -> dict | None:
    """Without upstream's metadata: the one time the source prints with a unit (of several, the
    one that names a kernel, as upstream's regexes mostly do), read by a pattern made from its
    printf format, and the Makefile's run target for the arguments; a program that prints no
    such time, or several of which not exactly one names a kernel, or has no run target, is refused."""
    times = sources.printed_times(texts)
    kernel = {literal: unit for literal, unit in times.items() if re.search(r"(?i)\bkernels?\b", literal)}
    chosen = kernel if len(times) > 1 and len(kernel) == 1 else times
    if chosen is not times:
        program.note("timing_of_the_kernel", f"of the {len(times)} times the source prints, the one of the kernel")
    times = chosen
    pattern = sources.time_pattern(next(iter(times))) if len(times) == 1 else None
    shown = "; ".join(map(repr, list(times)[:3]))
    problem = ("the Makefile has no run target to take its arguments from" if facts["run_args"] is None
               else "the source prints no time with a unit" if not times
               else f"the source prints {len(times)} times ({shown}): which one is the program's is unclear"
               if len(times) > 1 else f"the format that prints its time ({shown}) makes no pattern" if pattern is None
               else "")
    if problem:
        program.refuse("no_test_metadata", f"{unlisted}, and {problem}")
        return None
    literal, unit = next(iter(times.items()))
    program.note("timing_from_source", f"{unlisted}: the time is the one the source prints ({literal!r}, in {unit}) "
                 "and the arguments are the Makefile's run target's")
    return {"source": "pattern", "pattern": pattern, "unit": unit, "match": "sum"}


def _timing(program: Program, regex: str, texts: list[str]) -> dict | None:
    """The timing block from upstream's regex: its unit from the regex, else from the printf
    that prints what it reads."""
    try:
        count, compiled = groups(regex), re.compile(regex)
    except (PatternError, re.error) as error:
        program.refuse("timing_regex_unusable", f"{regex!r}: {error}")
        return None
    unit, why = sources.regex_unit(regex)
    if count != 1:
        program.refuse("timing_regex_unusable", f"{regex!r} has {count} groups, not the one the time is in")
    elif unit is None:
        program.refuse("timing_not_a_time", f"the timing regex {why}")
    elif not unit:
        unit, from_source = sources.printed_unit(texts, compiled)
        if unit is None:
            program.refuse("timing_unit_unknown", f"{why}, and {from_source}")
        else:
            program.note("timing_unit_from_source", f"{why}; the source prints the time in {unit}")
    return {"source": "pattern", "pattern": regex, "unit": unit, "match": "sum"} if unit and count == 1 else None


def _arguments(program: Program, test_args: list[str] | None, run_args: list[str] | None, folder: Path,
               top: Path) -> dict:
    """Upstream's test arguments as the dataset `test`, and the Makefile's run target's, where
    they differ, as `make-run` (dropped with a note when an input it names is missing; the only
    dataset, and then required, without test arguments)."""
    found = {}
    if test_args is not None:
        found["test"] = resolve_arguments(test_args, folder, top)
    if run_args is not None and run_args != test_args:
        other = resolve_arguments(run_args, folder, top)
        if other.missing and test_args is not None:
            program.note("dataset_dropped", f"make-run: {', '.join(other.missing)} not in the checkout")
        elif test_args is None or [str(w) for w in other.words] != [str(w) for w in found["test"].words]:
            found["make-run"] = other
    for name, arguments in found.items():
        if arguments.missing:
            program.refuse("missing_input", f"the {name} arguments name {', '.join(arguments.missing)}, not in the "
                           "checkout (upstream keeps files of 1 MB or more out of git)")
        if arguments.outputs:
            program.note("output_argument", f"{name}: {', '.join(arguments.outputs)} not in the checkout: named "
                         "as an output, taken as a file the program writes")
    return found


def _licence(program: Program, folder: Path, top: Path, texts: list[str]) -> tuple[str, str]:
    """The program's own LICENSE, else the suite's; its holder, else HeCBench's."""
    own, suite = folder / "LICENSE", top / "LICENSE"
    chosen = own if own.is_file() else suite
    text = chosen.read_text(errors="replace") if chosen.is_file() else ""
    licence, why = licence_of(text, texts)
    if licence is None:
        program.refuse("licence_unknown", f"{'src/' + folder.name + '/LICENSE' if own.is_file() else 'LICENSE'}: {why}")
    holder = authors_of(text) or (authors_of(suite.read_text(errors="replace")) if suite.is_file() else None)
    return licence or "", f"{holder or 'unknown'} (packaged by HeCBench)"
