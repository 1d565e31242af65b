"""`manage.py forge submit|run|resume|ablation`: the Kernel Agent from the command line."""
from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from measurement.backends.base import SourceTooLarge, check_source
from measurement.harness.cases import CaseError, parse_case
from measurement.management.commands._common import protocol_from
from measurement.matrices import matrix_cases
from measurement.services import MeasurementError

from forge import selectors
from forge.ablation import ARMS, run_ablation
from forge.ablation_results import CandidateResult
from forge.proposers.base import ProposerUnavailable
from forge.proposers.external import ExternalProposer
from forge.runner import resume_campaign, run_campaign
from forge.services import ForgeError, execute_round, start_campaign, start_round


class Command(BaseCommand):
    help = ("Run the Kernel Agent: `submit` one external candidate as a round, `run` a campaign, `resume` one whose "
            "worker died, or `ablation` (synthesis vs search at equal budget).")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--actor", default="user:cli")
        actions = parser.add_subparsers(dest="action", required=True)
        submit = actions.add_parser("submit", help="run one round on a candidate written by any agent or person")
        submit.add_argument("--case", required=True)
        submit.add_argument("--source", required=True)
        submit.add_argument("--launch", default="{}")
        submit.add_argument("--hypothesis", required=True)
        submit.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")
        run = actions.add_parser("run", help="forge one case or a matrix for N rounds per case")
        target = run.add_mutually_exclusive_group(required=True)
        target.add_argument("--case")
        target.add_argument("--matrix")
        run.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")
        run.add_argument("--proposer", choices=["levers", "anthropic"], default="levers")
        run.add_argument("--rounds", type=int, default=6)
        resume = actions.add_parser("resume", help="continue a campaign whose worker died: its open rounds are abandoned, "
                                                   "then every case goes on until it converges")
        resume.add_argument("campaign", help="the campaign id (`forge run` prints it)")
        ablation = actions.add_parser(
            "ablation", help="synthesis vs search at equal budget on one case: autotune, oneshot, loop (docs/forge_ablation.md)")
        ablation.add_argument("--case", required=True)
        ablation.add_argument("--budget", type=int, required=True, help="measured candidates per arm (at least 1)")
        ablation.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")
        ablation.add_argument("--proposer", choices=["levers", "anthropic"], default="levers", help="the loop arm's proposer")
        ablation.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated subset of {','.join(ARMS)} (default: all)")
        ablation.add_argument("--passes", type=int, help="timing passes (default 7)")
        ablation.add_argument("--launches", type=int, help="launches per measurement (default: 5 cpu, 10 cuda)")

    def handle(self, *args, **options) -> None:
        try:
            getattr(self, f"do_{options['action']}")(options)
        except (CaseError, MeasurementError, ForgeError, ProposerUnavailable, SourceTooLarge) as exc:
            raise CommandError(str(exc)) from None

    def do_submit(self, options) -> None:
        path = Path(options["source"])
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        try:
            launch = json.loads(options["launch"])
        except json.JSONDecodeError as exc:
            raise CommandError(f"--launch is not valid JSON: {exc}") from None
        source = path.read_text()
        check_source(source)  # before the campaign and the round are recorded
        proposer = ExternalProposer(source=source, hypothesis=options["hypothesis"], launch=launch)
        campaign = start_campaign([options["case"]], options["backend"], "external", 1, options["actor"])
        case = selectors.campaign_table(campaign)[0].case
        round_id = start_round(campaign, case, "external", options["actor"])
        outcome = execute_round(round_id, proposer, options["actor"])
        self.stdout.write(f"round {round_id}: {outcome.status.upper()} ({outcome.state}) {outcome.detail}")

    def do_run(self, options) -> None:
        cases = [options["case"]] if options["case"] else matrix_cases(options["matrix"])
        campaign = start_campaign(cases, options["backend"], options["proposer"], options["rounds"], options["actor"])
        self.stderr.write(f"campaign {campaign}: {len(cases)} cases x up to {options['rounds']} rounds, proposer {options['proposer']}")
        self.drive(campaign, options["proposer"], options["actor"], options["rounds"])

    def do_resume(self, options) -> None:
        campaign = options["campaign"]
        proposer, abandoned = resume_campaign(campaign, options["actor"])
        states = list(selectors.campaign_table(campaign))
        budget = max((state.budget for state in states), default=0)
        self.stderr.write(f"campaign {campaign}: {abandoned} round(s) left open by a dead worker abandoned; "
                          f"{sum(1 for s in states if not s.converged)} of {len(states)} cases go on, proposer {proposer}")
        self.drive(campaign, proposer, options["actor"], budget)

    def drive(self, campaign: str, proposer: str, actor: str, budget: int) -> None:
        """Run the campaign to convergence with a progress bar per case, then print its table."""
        counts = {state.case: state.rounds for state in selectors.campaign_table(campaign)}

        def progress(case: str, outcome: dict) -> None:
            counts[case] += 1
            bar = "#" * counts[case] + "." * max(0, budget - counts[case])
            speed = f"{outcome['speedup']:.2f}x" if outcome.get("speedup") else "-"
            self.stderr.write(f"  {case:<34} [{bar}] round {counts[case]}: {outcome['status']} {outcome['state']} {speed}")

        states = run_campaign(campaign, proposer, actor, progress)
        self.stdout.write(f"{'case':<34} {'rounds':>6} {'best speedup':>13} {'% copy BW':>10}  converged")
        for state in states:
            best = state.best or {}
            fraction = selectors.verdict_fraction(best.get("verdict"))
            speedup = f"{best['speedup']:.2f}x" if best.get("speedup") else "-"
            share = f"{fraction:.1%}" if fraction else "-"
            self.stdout.write(f"{state.case:<34} {state.rounds:>6} {speedup:>13} {share:>10}  {state.converged or 'no'}")

    def do_ablation(self, options) -> None:
        budget = options["budget"]
        if budget < 1:
            raise CommandError(f"--budget must be at least 1 measured candidate per arm, got {budget}")
        arms = [arm.strip() for arm in options["arms"].split(",") if arm.strip()]
        unknown = [arm for arm in arms if arm not in ARMS]
        if unknown or not arms:
            raise CommandError(f"--arms takes a comma-separated subset of {','.join(ARMS)}; got {options['arms']!r}")
        protocol = protocol_from(options)
        case = parse_case(options["case"]).id
        self.stderr.write(f"ablation on {case} ({options['backend']}): {', '.join(a for a in ARMS if a in arms)}, "
                          f"{budget} candidate(s) per arm, loop proposer {options['proposer']}")

        def progress(c: CandidateResult) -> None:
            speed = f"{c.speedup:.2f}x over straightforward" if c.speedup is not None else "-"
            what = c.state if c.measured else f"{c.state} (not measured)"
            self.stderr.write(f"  {c.arm:<8} {c.number:>3}/{budget:<3} {c.label[:48]:<48} {what:<34} {speed}")

        results = run_ablation(case, options["backend"], budget, options["actor"], options["proposer"],
                               protocol, progress, arms)
        first = results[0]
        self.stdout.write(f"ablation {first.ablation}: {first.case} on {first.backend}, budget {budget} measured candidates per arm")
        self.stdout.write(f"{'arm':<9} {'status':<9} {'measured':>9} {'correct':>8} {'best speedup':>13}  reason")
        for r in results:
            best = r.best
            speedup = f"{best.speedup:.2f}x" if best else "-"
            measured = f"{r.candidates_measured}/{r.budget}"
            reason = r.reason or ("" if r.candidates_measured == r.budget else "used less than its budget: see detail")
            self.stdout.write(f"{r.arm:<9} {r.status:<9} {measured:>9} {r.correct_candidates:>8} {speedup:>13}  {reason}")
        self.stdout.write("best speedup: median of the straightforward kernel / median of the best correct candidate, same measurement")
        for r in results:
            self.stdout.write(f"  {r.arm}: event #{r.event.position} (AblationMeasured) {r.event.data['detail'] or r.reason}")
