"""Mutation score of the decision modules (issue 20): do the decision tests fail when a rule breaks?

    .venv/bin/python benchmarks/mutation_score.py [--budget 2400] [--jobs 2]

1. cosmic-ray (pinned below) mutates each decision module, one small change at a time (an operator,
   a comparison, a number, a boolean, a loop or a break), and runs that module's decision tests
   against every mutant (`-x`: the first failure kills it). Bitwise and shift operators are left
   out: the modules hold no integer bit arithmetic, so those mutants only raise TypeError.
2. The named mutations of issue 20's table, applied by hand (`NAMED`), each run against the tests
   that should kill it (the decision tests, or the ledger's and the oracle's own where the rule
   lives there).

Writes docs/benchmarks/mutation_score.json: per module and in all the mutants killed, survived
and not run (the budget), the score (killed / run), every surviving mutant with its diff and the
reason it is equivalent (`EQUIVALENT`; a survivor without one is listed as unexplained), and the
named mutations with their outcome.

Cosmic-ray edits the files it mutates in place, so each module's session runs in a copy of the
tracked tree in a temporary folder, never in this checkout (other processes run from it). The
tool lives in a venv of its own (var/mutation-tool, made with pip on first use): it is not a
dependency of the project or of CI. The tests run with this checkout's .venv python. Each test
run is a fresh pytest process (about 3 s on the 2-core machine), so the whole run takes
minutes; CI runs the decision tests themselves, not this.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOL = "cosmic-ray==8.7.0"
TOOL_VENV = ROOT / "var" / "mutation-tool"
PYTHON = ROOT / ".venv" / "bin" / "python"
PYTEST = [str(PYTHON), "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "--no-header"]
# The decision tests import no Django and no fixture of the conftests: without both a test run
# takes 0.6 s instead of 1.7 s, which is most of the time a mutant costs.
LIGHT = ["-p", "no:django", "--noconftest"]

# Each decision module and the tests that pin its rules.
MODULES = {
    "measurement/decisions.py": ["tests/measurement/test_decisions.py"],
    "measurement/harness/rules.py": ["tests/measurement/test_decisions.py", "tests/appgate/test_decisions.py"],
    "appgate/verdicts.py": ["tests/appgate/test_decisions.py"],
    "forge/rulebook.py": ["tests/forge/test_rules.py"],
}
EXCLUDED_OPERATORS = [r"core/ReplaceBinaryOperator_.*_(BitOr|BitAnd|BitXor|LShift|RShift)$",
                      r"core/ReplaceBinaryOperator_(BitOr|BitAnd|BitXor|LShift|RShift)_.*"]

# Issue 20's table: (name, file, text, replacement, tests). Those the first measurement left alive
# come first; the last six were killed then too.
DECISION_TESTS = ["tests/measurement/test_decisions.py"]
APP_TESTS = ["tests/appgate/test_decisions.py"]
NAMED = [
    ("operator prior-best 2% comparison flipped", "measurement/decisions.py",
     "timing.median > prior.median * (1 + REGRESSION_BAND)", "timing.median < prior.median * (1 + REGRESSION_BAND)",
     DECISION_TESTS),
    ("operator prior-best rule removed", "measurement/decisions.py",
     "if prior is not None and (timing.median > prior.median * (1 + REGRESSION_BAND)", "if False and (timing.median",
     DECISION_TESTS),
    ("operator prior-best noise rule removed (session 47)", "measurement/decisions.py",
     "or bootstrap_ratio_ci(timing.pass_medians, prior.pass_medians)[0] > 1.0)", "or False)", DECISION_TESTS),
    ("operator re-run downgrade band 2% -> 50%", "measurement/decisions.py",
     'ci[1] < standing * (1 - REGRESSION_BAND):\n        return "ResultDowngraded"',
     'ci[1] < standing * (1 - 0.5):\n        return "ResultDowngraded"', DECISION_TESTS),
    ("timing retry keeps the last attempt instead of the least spread", "measurement/decisions.py",
     "if self.kept is None or spread < self.spread:", "if True:", DECISION_TESTS),
    ("timed_output_mismatch rejection removed", "measurement/decisions.py",
     "if not timing.timed_output_ok:", "if False:", DECISION_TESTS),
    ("app floor 0.98 -> 0.5", "appgate/verdicts.py", "FLOOR = 0.98", "FLOOR = 0.5", APP_TESTS),
    ("app floor 0.98 -> 5.0", "appgate/verdicts.py", "FLOOR = 0.98", "FLOOR = 5.0", APP_TESTS),
    ("app re-run never downgrades", "appgate/verdicts.py", 'return "ResultDowngraded"', "return None",
     ["tests/appgate/test_decisions.py"]),
    ("a branch head never advances", "forge/rulebook.py",
     'if head_speedup is None or speedup > head_speedup * (1 + rule("branch")["min_gain"]):',
     "if head_speedup is None:", ["tests/forge/test_rules.py"]),
    ("no convergence by improvement", "forge/rulebook.py",
     "if has_best and len(improvements) >= window and sum(improvements[-window:]) < minimum:", "if False:",
     ["tests/forge/test_rules.py"]),
    ("untrusted imported checkpoints failing instead of counted", "ledger/trust.py",
     "if c.public_key not in trusted and c.local > own_cover and c.at > cover.get(c.ledger_id, 0):",
     "if c.public_key not in trusted and (not c.own or c.local > own_cover and c.at > cover.get(c.ledger_id, 0)):",
     ["tests/ledger/test_export_trust.py"]),
    ("NaN-poison check off", "measurement/harness/judge.py", "if nan.any():", "if False:",
     ["tests/measurement/test_oracle.py"]),
    ("verify skips the last event", "ledger/verification.py", "for row in _rows():", "for row in list(_rows())[:-1]:",
     ["tests/ledger/test_verify.py"]),
    ("oracle drops a coefficient", "measurement/harness/oracle.py",  # the whole-grid reference (_apply_once)
     "for offset, k in zip(stencil.offsets, stencil.class_index):\n        window",
     "for offset, k in zip(stencil.offsets[1:], stencil.class_index[1:]):\n        window",
     ["tests/measurement/test_oracle.py", "tests/measurement/test_cpu_backend.py"]),
    ("one reviewer enough", "ledger/review.py", "REVIEWERS_NEEDED = 2", "REVIEWERS_NEEDED = 1",
     ["tests/ledger/test_review.py"]),
    ("impossible-speed off", "measurement/harness/rules.py",
     "return median - overhead < IMPOSSIBLE_MARGIN * (floor_seconds - overhead)", "return False", DECISION_TESTS),
    ("operator re-run downgrade comparison flipped", "measurement/decisions.py",
     'ci[1] < standing * (1 - REGRESSION_BAND):\n        return "ResultDowngraded"',
     'ci[1] > standing * (1 - REGRESSION_BAND):\n        return "ResultDowngraded"', DECISION_TESTS),
]

# Surviving mutants that cannot change any decision, keyed by (module, operator, the mutated line
# as written): why each is equivalent.
ROLES = ("measurement.backends.base.Variant's roles are 'baseline', 'candidate' and 'prior_best'; ")
RERUN = "a re-run's verdicts are 'reconfirmed', 'revised' and 'inconclusive' (rerun_verdict); "
APP = "the app gate's verdicts are 'admitted', 'self-checked', 'rejected' and 'inconclusive' (verdict_name); "
CLOCKS = ("times and hotspot clocks are read by unsigned patterns or measured: never negative, so `!= 0` "
          "keeps the same values as `> 0`")
EQUIVALENT: dict[tuple[str, str, str], str] = {
    ("measurement/decisions.py", "core/ReplaceBinaryOperator_Mul_Div",
     "def judge_candidate(correctness: Correctness, timing: VariantTiming | None, *, bound: VariantTiming | None,"):
        "`*` to `/` only makes the two parameters before it positional-only; every caller names the others, "
        "so no call changes",
    ("measurement/decisions.py", "core/ReplaceComparisonOperator_NotEq_Gt",
     'compared = [name for name in summary if roles.get(name) != "baseline"]'):
        ROLES + "both others sort after 'baseline', so `> 'baseline'` keeps the same names as `!=`",
    ("measurement/decisions.py", "core/ReplaceComparisonOperator_Eq_LtE",
     'possible = [name for name in summary if roles.get(name) == "baseline" and not summary[name].impossible]'):
        ROLES + "'baseline' sorts first, so `<= 'baseline'` keeps the same names as `==`",
    ("measurement/decisions.py", "core/ReplaceComparisonOperator_Eq_GtE", 'if verdict == "revised":'):
        RERUN + "'revised' sorts last, so `>= 'revised'` holds for it alone",
    ("measurement/decisions.py", "core/ReplaceComparisonOperator_Eq_GtE",
     'if verdict == "reconfirmed" and ci and standing and ci[1] < standing * (1 - REGRESSION_BAND):'):
        RERUN + "of the three only 'revised' also sorts at or after 'reconfirmed', and it returned on the line before",
    ("measurement/decisions.py", "core/ReplaceComparisonOperator_Lt_NotEq",
     "while number < self.allowed and not self.quiet:"):
        "attempt numbers count up by one from 0 and the allowed attempts are never negative: `!=` stops at the "
        "same number as `<`",
    ("measurement/decisions.py", "core/ReplaceComparisonOperator_Lt_IsNot",
     "while number < self.allowed and not self.quiet:"):
        "attempt numbers count up by one from 0 and the allowed attempts are a small non-negative int, which "
        "CPython caches: `is not` is `!=` there, and `!=` stops at the same number as `<`",
    ("appgate/verdicts.py", "core/ReplaceComparisonOperator_Eq_LtE", 'if verdict == "admitted":'):
        APP + "'admitted' sorts first, so `<= 'admitted'` holds for it alone",
    ("appgate/verdicts.py", "core/ReplaceComparisonOperator_Eq_GtE", 'if verdict == "self-checked":'):
        APP + "'admitted' returned above, and of the others 'self-checked' sorts last",
    ("appgate/verdicts.py", "core/ReplaceComparisonOperator_Eq_LtE", 'if verdict == "inconclusive":'):
        APP + "'admitted' and 'self-checked' returned above, and 'inconclusive' sorts before 'rejected'",
    ("appgate/verdicts.py", "core/ReplaceComparisonOperator_Eq_LtE", 'if verdict == "rejected" and headline is None:'):
        APP + "only 'rejected' comes without a headline (conclude gives every other verdict one), so widening "
        "the verdict test changes nothing while `headline is None` holds",
    ("appgate/verdicts.py", "core/ReplaceComparisonOperator_Eq_GtE", 'if verdict == "rejected" and headline is None:'):
        APP + "only 'rejected' comes without a headline (conclude gives every other verdict one), so widening "
        "the verdict test changes nothing while `headline is None` holds",
    ("appgate/verdicts.py", "core/ReplaceComparisonOperator_Gt_NotEq",
     "return (max(samples) - min(samples)) / median if median > 0 else None"): CLOCKS,
    ("appgate/verdicts.py", "core/ReplaceComparisonOperator_Gt_NotEq",
     'and statistics.median(p["hotspot_samples"]["candidate"]) > 0]'): CLOCKS,
    ("appgate/verdicts.py", "core/ReplaceComparisonOperator_Lt_NotEq",
     '"amdahl_limit": 1.0 / (1.0 - f) if f < 1.0 else None,'):
        "the hotspot fraction is capped at 1 where it is measured (appgate.services.time_dataset: "
        "min(1.0, hotspot / time)), so `f != 1.0` holds exactly where `f < 1.0` does",
    ("forge/rulebook.py", "core/ReplaceComparisonOperator_Eq_LtE", 'if verdict == "admitted":'):
        "a gate run's verdicts are 'admitted' and 'rejected' (record_verdict without a re-run's decide): "
        "'admitted' sorts first, so `<=` holds for it alone",
}


def tool() -> Path:
    """The cosmic-ray executable of the tool's own venv, made on first use."""
    executable = TOOL_VENV / "bin" / "cosmic-ray"
    if not executable.exists():
        subprocess.run([sys.executable, "-m", "venv", str(TOOL_VENV)], check=True)
        subprocess.run([str(TOOL_VENV / "bin" / "pip"), "install", "-q", TOOL], check=True)
    return executable


def tree_copy(into: Path) -> Path:
    """The tracked files (and untracked, unignored ones) of this checkout, as they are now."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            target = into / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return into


def run_session(module: str, tests: list[str], scratch: Path, deadline: float, timeout: float) -> dict:
    """One cosmic-ray session over `module` in a copy of the tree; its results as dump lines."""
    cosmic = tool()
    copy = tree_copy(scratch / module.replace("/", "_"))
    config = copy / "mutation.toml"
    command = " ".join([*PYTEST, *LIGHT, *tests])
    config.write_text(
        "[cosmic-ray]\n"
        f"module-path = {json.dumps(module)}\n"
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(command)}\n"
        "[cosmic-ray.distributor]\nname = \"local\"\n"
        "[cosmic-ray.filters.operators-filter]\n"
        f"exclude-operators = {json.dumps(EXCLUDED_OPERATORS)}\n")
    session = copy / "session.sqlite"
    subprocess.run([str(cosmic), "init", str(config), str(session)], cwd=copy, check=True, capture_output=True)
    subprocess.run([str(TOOL_VENV / "bin" / "cr-filter-operators"), str(session), str(config)], cwd=copy, check=True,
                   capture_output=True)
    baseline = subprocess.run(PYTEST + LIGHT + tests, cwd=copy, capture_output=True, text=True)
    if baseline.returncode != 0:
        raise SystemExit(f"{module}: the decision tests fail without any mutation:\n{baseline.stdout[-3000:]}")
    remaining = deadline - time.monotonic()
    complete = True
    if remaining > 0:
        worker = subprocess.Popen([str(cosmic), "exec", str(config), str(session)], cwd=copy, start_new_session=True,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            worker.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
            complete = False
    else:
        complete = False
    dumped = subprocess.run([str(cosmic), "dump", str(session)], cwd=copy, check=True, capture_output=True, text=True)
    lines = [json.loads(line) for line in dumped.stdout.splitlines() if line.strip()]
    source = (copy / module).read_text().splitlines()
    return summarise(module, lines, source, complete, tests)


def summarise(module: str, lines: list, source: list[str], complete: bool, tests: list[str]) -> dict:
    counts = {"killed": 0, "survived": 0, "incompetent": 0, "not_run": 0, "skipped": 0}
    survivors = []
    for item, result in lines:
        mutation = item["mutations"][0]
        if result is None:
            counts["not_run"] += 1
            continue
        if result["worker_outcome"] == "skipped":
            counts["skipped"] += 1
            continue
        outcome = result["test_outcome"]
        counts[outcome] += 1
        if outcome == "survived":
            line = source[mutation["start_pos"][0] - 1].strip()
            reason = EQUIVALENT.get((module, mutation["operator_name"], line))
            survivors.append({"operator": mutation["operator_name"], "occurrence": mutation["occurrence"],
                              "line": mutation["start_pos"][0], "source": line, "diff": result["diff"],
                              "equivalent_because": reason})
    run = counts["killed"] + counts["survived"]
    return {"module": module, "tests": tests, "complete": complete, **counts,
            "score": round(counts["killed"] / run, 4) if run else None, "survivors": survivors}


def run_named(scratch: Path, timeout: float) -> list[dict]:
    """Each named mutation in a fresh copy of its file, against the tests that should kill it."""
    copy = tree_copy(scratch / "named")
    outcomes = []
    for name, path, text, replacement, tests in NAMED:
        target = copy / path
        original = target.read_text()
        if original.count(text) != 1:
            outcomes.append({"mutation": name, "file": path, "tests": tests, "killed": None,
                             "problem": f"the text to mutate is found {original.count(text)} times, not once"})
            continue
        target.write_text(original.replace(text, replacement))
        try:
            done = subprocess.run(PYTEST + tests, cwd=copy, capture_output=True, text=True, timeout=timeout,
                                  env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
            killed, failed = done.returncode != 0, _first_failure(done.stdout)
        except subprocess.TimeoutExpired:
            killed, failed = True, f"timed out after {timeout:g} s"
        finally:
            target.write_text(original)
        outcomes.append({"mutation": name, "file": path, "from": text, "to": replacement, "tests": tests,
                         "killed": killed, "failed": failed})
    return outcomes


def _first_failure(output: str) -> str | None:
    return next((line for line in output.splitlines() if line.startswith("FAILED ")), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=2400, help="seconds for all sessions (the rest is not run)")
    parser.add_argument("--jobs", type=int, default=2, help="module sessions at a time, each in its own copy")
    parser.add_argument("--timeout", type=float, default=120, help="seconds for one test run (a hang is a kill)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks" / "mutation_score.json"))
    args = parser.parse_args()
    started, began = datetime.now(timezone.utc), time.monotonic()
    deadline = began + args.budget
    tool()
    with tempfile.TemporaryDirectory(prefix="mutation-") as scratch:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            sessions = [pool.submit(run_session, module, tests, Path(scratch), deadline, args.timeout)
                        for module, tests in MODULES.items()]
            named = run_named(Path(scratch), args.timeout)
            modules = [s.result() for s in sessions]
    totals = {k: sum(m[k] for m in modules) for k in ("killed", "survived", "incompetent", "not_run", "skipped")}
    run = totals["killed"] + totals["survived"]
    summary = {
        "command": "benchmarks/mutation_score.py " + " ".join(sys.argv[1:]),
        "tool": TOOL, "started_utc": started.isoformat(timespec="seconds"),
        "wall_seconds": round(time.monotonic() - began, 1), "budget_seconds": args.budget,
        "excluded_operators": EXCLUDED_OPERATORS, **totals,
        "score": round(totals["killed"] / run, 4) if run else None,
        "unexplained_survivors": sum(1 for m in modules for s in m["survivors"] if s["equivalent_because"] is None),
        "named": named, "named_killed": sum(1 for n in named if n["killed"]), "named_total": len(named),
        "modules": modules,
    }
    Path(args.out).write_text(json.dumps(summary, indent=1) + "\n")
    print(f"score {summary['score']}: {totals['killed']} killed, {totals['survived']} survived, "
          f"{totals['not_run']} not run; named mutations killed {summary['named_killed']} of {len(named)}; "
          f"{summary['wall_seconds']} s -> {args.out}")


if __name__ == "__main__":
    main()
