"""`manage.py appgate register|run|rerun|agent|triage|profile|list|suite import`: the application gate from
the command line."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from appgate.agent import run_agent
from appgate.baseline_profile import profile_baseline
from forge.proposers.base import ProposerUnavailable
from appgate.manifest import ManifestError
from appgate.models import AppRow
from appgate.proposers import PROPOSERS, AnthropicAppProposer, PatchProposer
from appgate.services import (AppGateError, AppProtocol, close_orphaned_runs, machine, register, rerun, run_gate,
                              settle_state, settle_unsettled)
from appgate.suites.importer import ADAPTERS, SuiteImportError, import_suite
from appgate import profiler
from appgate.profiler import TOOLS
from appgate.triage import Limits, manifest_paths, triage_all
from appgate.verdicts import ceiling_problem, parity

PROFILE_S = 120.0 + profiler.OVERHEAD_S  # the profiled run's limit, as the App Agent's M1 profile


class Command(BaseCommand):
    help = "The application gate: register a manifest, run the gate on it, re-run it on a registered app, list apps."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--actor", default="user:cli")
        actions = parser.add_subparsers(dest="action", required=True)
        actions.add_parser("register", help="validate and record a manifest").add_argument("manifest")
        run = actions.add_parser("run", help="build, check and time both variants on every dataset; record the verdict")
        run.add_argument("manifest")
        again = actions.add_parser("rerun", help="re-run the gate on a registered app; retract or downgrade if it conclusively no "
                                                   "longer holds (a noisy re-run is inconclusive and changes nothing)")
        again.add_argument("app")
        for sub in (run, again):
            sub.add_argument("--passes", type=int, default=AppProtocol.passes, help="interleaved timing passes (default 7)")
        agent = actions.add_parser("agent", help="the App Agent: milestones M1..M4 on one application")
        agent.add_argument("manifest")
        agent.add_argument("--proposer", choices=PROPOSERS, default="external",
                           help="external: the variant behind the manifest's switch (default); anthropic: a patch "
                                "proposed by Claude (needs ANTHROPIC_API_KEY); patch: the forged variant in --patch")
        agent.add_argument("--patch", help="with --proposer patch: a folder holding candidate.patch (a unified diff of "
                                           "the baseline files) and candidate.yaml (subject, hypothesis, risk)")
        agent.add_argument("--kernel-rounds", type=int, default=0, help="rounds of the Kernel Agent on the hotspot case (M2b)")
        agent.add_argument("--passes", type=int, default=AppProtocol.passes, help="interleaved timing passes (default 7)")
        agent.add_argument("--gate-budget", type=float, help="seconds from the agent's start (M1 included) by which the "
                           "gate's runs are to end: when M1's wall time per run says they would not, stop after M1 "
                           "(RESEARCH, over_budget) instead of starting the gate; in the gate, a noisy dataset's second "
                           "timing attempt that would not end by then is not started (inconclusive)")
        agent.add_argument("--profiler", choices=("auto", *TOOLS, "none"), default="auto",
                           help="what measures a CUDA program's hotspot share where its manifest declares none and no "
                                "earlier M1 (a triage's) measured it on the same baseline (auto: nsys, else ncu)")
        triage = actions.add_parser("triage", help="the App Agent's M1 alone on each manifest: BLOCKED, OUT_OF_SCOPE "
                                                   "or RESEARCH, with the reason's code")
        triage.add_argument("manifests", nargs="+", help="manifest files, or folders of them (*.yaml)")
        triage.add_argument("--report", help="write the states and counts as JSON here, after every program (default: "
                                             "the --resume file)")
        triage.add_argument("--resume", help="a report of an earlier triage: its programs are kept and not triaged again")
        triage.add_argument("--retry", default="", help="comma-separated reason codes whose resumed programs are triaged "
                                                         "again, e.g. timed_out with a longer --run-timeout")
        triage.add_argument("--jobs", type=int, default=1, help="baselines built in parallel")
        triage.add_argument("--run-jobs", type=int, default=1,
                            help="programs run side by side on the machine (default one at a time; profiles always are)")
        triage.add_argument("--deadline", type=float, help="seconds from now after which no build or run is started "
                                                            "that could end past it; the rest is listed as not triaged")
        triage.add_argument("--build-timeout", type=float, help="cap on each build's time limit, in seconds")
        triage.add_argument("--run-timeout", type=float, help="cap on each run's time limit, in seconds")
        triage.add_argument("--profiler", choices=("auto", *TOOLS, "none"), default="auto",
                            help="what measures a CUDA program's hotspot share where its manifest declares none "
                                 "(auto: nsys, else ncu, else none: the share is unknown)")
        profiled = actions.add_parser("profile", help="the baseline's quality without changing the app's state: its "
                                                      "registered baseline built and run once on the first dataset "
                                                      "under a profiler (AppBaselineProfiled)")
        profiled.add_argument("manifests", nargs="+", help="manifest files of registered apps, or folders of them")
        profiled.add_argument("--profiler", choices=("auto", *TOOLS), default="auto",
                              help="ncu measures the speed of light, nsys only the kernels' times "
                                   "(auto: nsys, else ncu)")
        profiled.add_argument("--timeout", type=float, default=PROFILE_S,
                              help=f"seconds the profiled run may take, the profiler's own included "
                                   f"(default {PROFILE_S:g})")
        actions.add_parser("list", help="registered applications and their standing results")
        actions.add_parser("settle", help="close the gate runs an imported ledger left open (no verdict, no live "
                                          "holder here); record the state each application's last gate verdict "
                                          "leads to, where no state change followed it (runs recorded without one)")
        suite = actions.add_parser("suite", help="suites of outside programs")
        suite = suite.add_subparsers(dest="suite_action", required=True)
        imported = suite.add_parser("import", help="a manifest per program of a suite checkout, each registered; a "
                                                   "report of what could not be inferred")
        imported.add_argument("path", help="the suite's checkout (nothing of it is copied)")
        imported.add_argument("--suite", required=True, choices=sorted(ADAPTERS))
        imported.add_argument("--root-name", help="the FORGESTENCIL_SUITE_ROOTS name the manifests use (default: the "
                                                  "suite)")
        imported.add_argument("--model", default="cuda", help="the programming model's programs to import (default: "
                                                              "cuda)")
        imported.add_argument("--arch", help="the GPU architecture to build for, e.g. sm_90 (default: this machine's "
                                             "GPU)")
        imported.add_argument("--only", default="", help="comma-separated upstream program names (default: all)")
        imported.add_argument("--out", help="where the manifests go (default: var/suites/<root>/<model>/)")
        imported.add_argument("--report", help="write the report as JSON here")

    def handle(self, *args, **options) -> None:
        try:
            getattr(self, f"do_{options['action']}")(options)
        except ManifestError as error:
            raise CommandError(str(error)) from None
        except AppGateError as error:
            raise CommandError(str(error)) from None

    def _progress(self, message: str) -> None:
        print(f"  {message}", file=sys.stderr, flush=True)

    def do_register(self, options) -> None:
        loaded, event = register(options["manifest"], options["actor"])
        self.stdout.write(f"{loaded.name}: " + (f"registered (event #{event.position})" if event else "already registered, unchanged"))

    def do_run(self, options) -> None:
        outcome = run_gate(options["manifest"], options["actor"], self._protocol(options), self._progress)
        self._report(outcome)
        state = settle_state(outcome, options["actor"])  # as the App Agent's M4 would
        self.stdout.write(f"state: {state.data['state']}: {state.data['reason']}")

    def do_rerun(self, options) -> None:
        outcome, revision = rerun(options["app"], options["actor"], self._protocol(options), self._progress)
        self._report(outcome)
        if revision is not None:
            self.stdout.write(f"{revision.type}: {revision.data['reason']} (event #{revision.position})")
            state = settle_state(outcome, options["actor"])
            self.stdout.write(f"state: {state.data['state']}: {state.data['reason']}")
        elif outcome.inconclusive:
            self.stdout.write(f"inconclusive ({outcome.inconclusive}): nothing was revised; re-run it later")
        else:
            self.stdout.write("the standing result holds")

    def do_agent(self, options) -> None:
        if options["kernel_rounds"] < 0:
            raise CommandError("--kernel-rounds must be 0 or more")
        if options["gate_budget"] is not None and not options["gate_budget"] > 0:
            raise CommandError("--gate-budget must be a positive number of seconds")
        if (options["proposer"] == "patch") != bool(options["patch"]):
            raise CommandError("--patch FOLDER goes with --proposer patch, and only with it")
        try:
            proposer = (AnthropicAppProposer() if options["proposer"] == "anthropic"
                        else PatchProposer(options["patch"]) if options["proposer"] == "patch" else None)
        except (ProposerUnavailable, ValueError) as error:
            raise CommandError(str(error)) from None
        row = run_agent(options["manifest"], options["actor"], options["kernel_rounds"], self._protocol(options), self._progress,
                        proposer, self._profile(options), options["gate_budget"])
        for milestone in row.milestones:
            self.stdout.write(f"{milestone['milestone']:4} {milestone['detail']}")
        self.stdout.write(f"state: {row.state}: {row.state_reason}")

    @staticmethod
    def _tool(options) -> str | None:
        return profiler.available() if options["profiler"] == "auto" else None if options["profiler"] == "none" \
            else options["profiler"]

    def _profile(self, options):
        """The agent's profile hook: the tool's run of the first dataset, at most 120 s plus the
        profiler's overhead."""
        tool = self._tool(options)
        return None if tool is None else profiler.profiler(tool, PROFILE_S)

    def do_profile(self, options) -> None:
        if not options["timeout"] > 0:
            raise CommandError("--timeout must be a positive number of seconds")
        tool = self._tool(options)
        if tool is None:
            raise CommandError(f"no profiler ({', '.join(TOOLS)}) on this machine's PATH: profile on the GPU machine")
        refused = []
        for path in manifest_paths(options["manifests"]):
            try:
                event = profile_baseline(path, options["actor"], tool=tool, timeout_s=options["timeout"],
                                         progress=self._progress)
            except (AppGateError, ManifestError) as error:
                refused.append(f"{path}: {error}")  # the path as found: suites name every manifest alike
                self.stdout.write(f"{path}: refused: {error}")
                continue
            light, problem = event.data["profile"].get("speed_of_light"), event.data["profile"]["problem"]
            self.stdout.write(f"{event.data['app']}: " + (
                f"baseline quality {light:.1%} ({tool})" if light is not None else
                f"not measured: {problem or tool + ' measured no speed of light'}") + f" (event #{event.position})")
        if refused:
            raise CommandError(f"{len(refused)} refused, nothing recorded for them: " + "; ".join(refused))

    def do_settle(self, options) -> None:
        orphaned = close_orphaned_runs(options["actor"])
        self.stdout.write(f"gate runs left open by a process that died elsewhere, closed: {len(orphaned)}")
        for subject in orphaned:
            self.stdout.write(f"  {subject}")
        settled = settle_unsettled(options["actor"])
        self.stdout.write(f"application states settled from their last verdicts: {len(settled)}")
        for event in settled:
            self.stdout.write(f"  {event.data['app']}: {event.data['state']} ({event.data['code']})")

    def do_triage(self, options) -> None:
        if options["jobs"] < 1 or options["run_jobs"] < 1:
            raise CommandError("--jobs and --run-jobs must be 1 or more")
        resumed = None
        if options["resume"]:
            try:
                resumed = json.loads(Path(options["resume"]).read_text())
            except (OSError, ValueError) as error:
                raise CommandError(f"--resume {options['resume']}: not a triage report ({error})") from None
        tool = self._tool(options)
        profile_s = (options["run_timeout"] or 120.0) + profiler.OVERHEAD_S
        limits = Limits(jobs=options["jobs"], run_jobs=options["run_jobs"], build_timeout_s=options["build_timeout"],
                        run_timeout_s=options["run_timeout"],
                        profile=profiler.profiler(tool, profile_s), profile_timeout_s=profile_s,
                        deadline=time.monotonic() + options["deadline"] if options["deadline"] else None)
        self._progress(f"hotspot share of CUDA programs: {tool or 'unknown (no nsys or ncu here)'}")
        out = options["report"] or options["resume"]
        report = triage_all(manifest_paths(options["manifests"]), options["actor"], self._progress, limits=limits,
                            resumed=resumed, save=lambda r: _write_json(out, r, "apps"),
                            retry=frozenset(filter(None, options["retry"].split(","))))
        for app in report["apps"]:
            self.stdout.write(f"{app['app'] or app['manifest']}: {app['state'] or '-'} [{app['code']}] "
                              f"{app['reason'][:200]}")
        self.stdout.write(f"{report['triaged']} triaged, {len(report['not_triaged'])} left for another call: "
                          + ", ".join(f"{k} {v}" for k, v in report["by_reason"].items()))

    def do_suite(self, options) -> None:
        arch = options["arch"]
        if arch is None and ADAPTERS[options["suite"]].models.get(options["model"]) == "cuda":
            try:
                arch = machine("cuda").get("arch")
            except AppGateError as error:
                raise CommandError(f"--arch is needed: no GPU here to read it from ({error})") from None
        try:
            report = import_suite(options["path"], options["suite"], root_name=options["root_name"],
                                  model=options["model"], arch=arch, only=tuple(n for n in options["only"].split(",") if n),
                                  out=options["out"], actor=options["actor"], progress=self._progress)
        except SuiteImportError as error:
            raise CommandError(str(error)) from None
        counts = report["counts"]
        self.stdout.write(f"{counts['programs']} programs: {counts['imported']} imported (manifests in "
                          f"{report['manifests']}), {counts['refused']} refused")
        for code, count in counts["refused_by_first_reason"].items():
            self.stdout.write(f"  refused {count:4} {code}")
        for code, count in counts["imported_notes"].items():
            self.stdout.write(f"  noted   {count:4} {code}")
        _write_json(options["report"], report, "programs")

    def do_list(self, options) -> None:
        rows = list(AppRow.objects.order_by("name"))
        width = max([len("app"), *(len(row.name) for row in rows)])  # names run to 64 characters
        self.stdout.write(f"{'app':{width}} {'arch':5} {'state':12} {'status':12} {'headline':>9} {'real':4} flags")
        for row in rows:
            headline = f"{row.headline:.3f}x" if row.headline else "-"
            flags = (["noisy: " + ", ".join(row.noisy)] if row.noisy else []) \
                + (["parity"] if parity(row.status, row.headline_ci) else []) \
                + (["above the Amdahl ceiling"] if ceiling_problem(row.headline, row.amdahl_ceiling) else [])
            self.stdout.write(f"{row.name:{width}} {row.architecture:5} {row.state:12} {row.status or '-':12} {headline:>9} "
                              f"{'yes' if row.real else 'no':4} {'; '.join(flags) or '-'}")

    @staticmethod
    def _protocol(options) -> AppProtocol:
        if options["passes"] < 1:
            raise CommandError("--passes must be at least 1")
        return AppProtocol(passes=options["passes"])

    def _report(self, outcome) -> None:
        data = outcome.verdict_event.data
        checks = " + ".join(data.get("checks") or []) or "-"
        self.stdout.write(f"{data['app']} ({data['architecture']}): {outcome.verdict.upper()}"
                          + (f" [{', '.join(outcome.reasons)}]" if outcome.reasons else "") + f": {outcome.detail}"
                          + f" (checks: {checks}" + (f"; noisy: {', '.join(data['noisy'])}" if data.get("noisy") else "") + ")")
        if outcome.measured:
            self.stdout.write(f"{'dataset':14} {'baseline':>11} {'candidate':>11} {'speedup':>8} {'95% CI':>15} {'hotspot f':>9} noisy")
            for p in outcome.measured:
                base, cand = p["medians"].get("baseline"), p["medians"].get("candidate")
                ci = p.get("speedup_ci")
                self.stdout.write(
                    f"{p['dataset']:14} {_s(base):>11} {_s(cand):>11} "
                    f"{(format(p['speedup'], '.3f') + 'x') if p.get('speedup') else '-':>8} "
                    f"{(f'{ci[0]:.3f}-{ci[1]:.3f}') if ci else '-':>15} "
                    f"{format(p['hotspot_fraction'], '.2f') if p.get('hotspot_fraction') is not None else '-':>9} "
                    f"{'yes' if p['noisy'] else 'no'}")
        if data.get("amdahl_ceiling"):
            self.stdout.write(f"Amdahl: hotspot fraction f={data['hotspot_fraction']:.2f}, hotspot speedup "
                              f"S={data['hotspot_speedup']:.2f}x, ceiling 1/(1-f+f/S)={data['amdahl_ceiling']:.2f}x"
                              + (" (the headline is above it: a measurement problem)"
                                 if ceiling_problem(data["headline"], data["amdahl_ceiling"]) else ""))
        self.stdout.write(f"REAL: {'yes' if data['real'] else 'no'}; verdict event #{outcome.verdict_event.position}")


def _write_json(path: str | None, report: dict, rows: str) -> None:
    """The report as JSON, each of its `rows` (one per program) on a line of its own: hundreds of
    programs stay readable and diff line by line."""
    if path:
        parts = [f" {json.dumps(key)}: " + ("[\n" + ",\n".join(f"  {json.dumps(row)}" for row in value) + "\n ]"
                                           if key == rows else json.dumps(value, indent=1).replace("\n", "\n "))
                 for key, value in report.items()]
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        temporary = Path(f"{path}.tmp")  # replaced at once: a call cut while writing keeps the last report
        temporary.write_text("{\n" + ",\n".join(parts) + "\n}\n")
        os.replace(temporary, path)


def _s(seconds: float | None) -> str:
    """Seconds (every clock is converted from its manifest unit) in the unit that reads best."""
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.2f} {unit}"
    return f"{seconds / 1e-9:.2f} ns"
