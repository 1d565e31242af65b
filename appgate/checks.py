"""Judging one run of an application and comparing the two variants' runs: the gate's eyes,
free of Django (appgate.runner runs the programs; this module only reads what they printed or wrote).

Two independent correctness checks (docs/appgate.md#correctness): the program's own verdict
(`correctness.own_check`: its result pattern must match its output, its failure pattern must
not) and a comparison of the variants' declared outputs (`correctness.compare`: the groups of
every match of a pattern in the output, or the numbers of a file the program writes, under a
norm and a tolerance). The own check alone was fooled: a candidate with another relaxation
weight converged, printed the program's PASS and was admitted at 10.5x (issue 17); the
comparison sees that it computed something else.

Pattern semantics (appgate.patterns): multi-line (`^`/`$` at line ends), `.` never crosses a
line; timing and hotspot patterns read one group of the first or last match (`match`), in the
manifest's `unit`, converted to seconds. A pattern that matches nothing says so with the tail
of the output, so that the manifest's author sees what the program printed.
"""
from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from . import patterns
from .manifest import LoadedManifest
from .manifest_checks import TIME_UNITS

NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)", re.IGNORECASE)
SHOWN_TAIL = 400  # characters of output quoted when a pattern does not match


@dataclass
class RunResult:
    ok: bool  # exited 0 within the limit
    returncode: int | None  # None: killed at the time limit
    wall_seconds: float
    stdout: str
    outputs: dict[str, bytes | None] = field(default_factory=dict)  # compared files: bytes, None when not written
    problem: str = ""
    errors: str = ""  # the tail of what it wrote to stderr (why a failed run failed)


def output_files(loaded: LoadedManifest) -> list[str]:
    """The files the comparisons read, relative to the run's folder (removed before each run:
    a stale output is never judged)."""
    return [c.file for c in loaded.manifest.correctness.compare if c.source == "file"]


def tail(text: str) -> str:
    shown = text.strip()[-SHOWN_TAIL:]
    return f"output tail: {shown!r}" if shown else "the output is empty"


def seconds_of(loaded: LoadedManifest, result: RunResult) -> float | None:
    timing = loaded.manifest.timing
    if timing.source == "wall":
        return result.wall_seconds
    return _matched_seconds(timing.pattern, result.stdout, timing.unit, timing.match)


def hotspot_of(loaded: LoadedManifest, result: RunResult) -> float | None:
    hotspot = loaded.manifest.hotspot
    if hotspot.source != "pattern":
        return None
    return _matched_seconds(hotspot.pattern, result.stdout, hotspot.unit, hotspot.match)


def clock_step(loaded: LoadedManifest, result: RunResult) -> float | None:
    """The step of the program's printed clock in seconds: one unit of the last digit it prints
    (haccmk's "0.000034" s: 1e-6 s; "3.4e-05": 1e-6), added up over the matches a `sum` adds;
    None for wall time, when nothing matched, or for a reading with no finite step."""
    timing = loaded.manifest.timing
    if timing.source == "wall":
        return None
    steps = [_last_digit(x) for x in _chosen(timing.pattern, result.stdout, timing.match)]
    if not steps or None in steps:
        return None
    return sum(steps) * TIME_UNITS[timing.unit]


def _last_digit(text: str) -> float | None:
    try:
        exponent = Decimal(text.strip()).as_tuple().exponent
    except InvalidOperation:
        return None
    if not isinstance(exponent, int):  # nan, inf
        return None
    try:
        step = 10.0 ** exponent
    except OverflowError:  # "0.0e400"
        return None
    return step if step > 0 else None


def _chosen(pattern: str | None, text: str, match: str) -> list[str]:
    """The group of the first or last match, or of every match (`sum`)."""
    found = patterns.findall(pattern, text) if pattern else []
    if not found:
        return []
    return found if match == "sum" else [found[0 if match == "first" else -1]]


def _matched_seconds(pattern: str | None, text: str, unit: str = "s", match: str = "last") -> float | None:
    """The chosen groups (`_chosen`) added up, in `unit`, as seconds (None: no finite number >= 0)."""
    chosen = _chosen(pattern, text, match)
    if not chosen:
        return None
    try:
        value = sum(float(x) for x in chosen) * TIME_UNITS[unit]
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


# What a program prints when a file it reads is not there (stdout or stderr, any case): a run
# that fails so is missing an input (HeCBench keeps files of 1 MB or more out of git).
MISSING_FILE = (r"(?i)no such file|(?:cannot|can't|could not|couldn't|unable to|failed to|fail to) (?:open|read|find)"
                r"|error opening|file not found")


def own_verdict(loaded: LoadedManifest, result: RunResult) -> tuple[bool, str]:
    """One run on its own: it ran, the program's own check (when declared) passed, what the
    comparisons need is there, and the program reported its times."""
    code, why = judge_run(loaded, result)
    return not code, why


def judge_run(loaded: LoadedManifest, result: RunResult) -> tuple[str, str]:
    """As own_verdict, with a machine-readable code: ("", what the program said) for a correct
    run; otherwise timed_out, missing_input, run_failed, own_check_failed, no_compared_output or
    no_time, and why (the App Agent's M1 blocks an application with it)."""
    if not result.ok:
        if result.returncode is None:
            return "timed_out", result.problem or "the run timed out"
        said = f"{result.stdout}\n{result.errors}"
        if patterns.search(MISSING_FILE, said):
            return "missing_input", f"{result.problem or 'the run failed'}: {_line(MISSING_FILE, said)}"
        errors = f"; {tail(result.errors)}" if result.errors.strip() else ""
        return "run_failed", (result.problem or "the run failed") + errors
    m = loaded.manifest
    own = m.correctness.own_check
    said = "ran"
    if own is not None:
        if patterns.search(own.failure_pattern, result.stdout):
            return "own_check_failed", f"the program reported failure ({_line(own.failure_pattern, result.stdout)})"
        if not patterns.search(own.result_pattern, result.stdout):
            return "own_check_failed", ("the program did not report its verification result "
                                        f"(own_check.result_pattern); {tail(result.stdout)}")
        said = _line(own.result_pattern, result.stdout)
    for index, c in enumerate(m.correctness.compare):
        if c.source == "file" and result.outputs.get(c.file) is None:
            return "no_compared_output", f"no output file {c.file} (correctness.compare.{index})"
        if c.source == "stdout" and not patterns.search(c.pattern, result.stdout):
            return "no_compared_output", (f"nothing in the output matches correctness.compare.{index}.pattern; "
                                          f"{tail(result.stdout)}")
    if m.timing.source == "pattern" and seconds_of(loaded, result) is None:
        return "no_time", f"the program did not report its time (timing.pattern); {tail(result.stdout)}"
    return "", said


def agreement(loaded: LoadedManifest, baseline: RunResult, candidate: RunResult) -> tuple[bool, str]:
    """The independent check: every declared output of the candidate against the baseline's.
    Without a comparison (correctness.no_comparison) the verdict is self-checked."""
    compare = loaded.manifest.correctness.compare
    if not compare:
        return True, "no output compared (self-checked: correctness.no_comparison)"
    said = []
    for index, c in enumerate(compare):
        where = f"compare.{index} ({c.file if c.source == 'file' else 'output values'}, {c.norm})"
        if c.source == "file":
            a, b = baseline.outputs.get(c.file) or b"", candidate.outputs.get(c.file) or b""
        else:
            a, b = _matched_text(c.pattern, baseline.stdout), _matched_text(c.pattern, candidate.stdout)
        ok, why = _compare(a, b, c.norm, c.tolerance)
        if not ok:
            return False, f"{where}: {why}"
        said.append(f"{where}: {why}")
    return True, "; ".join(said)


def _matched_text(pattern: str, text: str) -> bytes:
    """Every group of every match (the whole match without a group), one per line; the empty
    groups of an alternation's other branches are left out."""
    found = [x for m in patterns.findall(pattern, text) for x in ((m,) if isinstance(m, str) else m) if x]
    return "\n".join(found).encode()


def _compare(a: bytes, b: bytes, norm: str, tolerance: float) -> tuple[bool, str]:
    if norm == "exact":
        ours, theirs = hashlib.sha256(a).hexdigest(), hashlib.sha256(b).hexdigest()
        same = ours == theirs
        return same, "identical (sha256)" if same else f"differ (sha256 {ours[:12]} vs {theirs[:12]})"
    x, y = _numbers(a), _numbers(b)
    if len(x) != len(y) or not x:
        return False, f"the outputs differ in length ({len(x)} vs {len(y)} numbers)"
    distance = _distance(x, y, norm)
    if not math.isfinite(distance) or distance > tolerance:
        nans = [sum(map(math.isnan, side)) for side in (x, y)]
        said = f" (NaN at {nans[0]} of the baseline's {len(x)} values, {nans[1]} of the candidate's)" if any(nans) else ""
        return False, f"{norm} difference {distance:.3g} > tolerance {tolerance:g}{said}"
    return True, f"{norm} difference {distance:.3g} <= {tolerance:g}"


def _distance(x: list[float], y: list[float], norm: str) -> float:
    """max_abs, l2_rel (relative to the norm of the baseline's finite values) or max_rel; equal
    values (infinities included) differ by 0, and a NaN anywhere or an infinity anywhere else
    never passes: a NaN the baseline prints says nothing of the work behind it, and a candidate
    that matches it may have done none (so cbsfil's make-run, if upstream's overflows, cannot be
    compared at all)."""
    differences = [0.0 if p == q else abs(p - q) for p, q in zip(x, y)]
    if any(math.isnan(d) for d in differences):
        return math.nan
    if any(math.isinf(d) for d in differences):
        return math.inf
    if norm == "max_abs":
        return max(differences)
    if norm == "l2_rel":
        scale = math.sqrt(sum(p * p for p in x if math.isfinite(p)))  # an equal infinity would make any difference pass
        return math.sqrt(sum(d * d for d in differences)) / (scale if scale > 0 else 1.0)
    return max(d / max(abs(p), abs(q), 1e-300) if d else 0.0 for d, p, q in zip(differences, x, y))


def _numbers(data: bytes) -> list[float]:
    return [float(x) for x in NUMBER.findall(data.decode(errors="replace"))]


def _line(pattern: str, text: str) -> str:
    for line in text.splitlines():
        if patterns.search(pattern, line):
            return line.strip()[:200]
    return ""
