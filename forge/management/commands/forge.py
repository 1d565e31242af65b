"""`manage.py forge submit|run`: the Kernel Agent from the command line."""
from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from measurement.harness.cases import CaseError
from measurement.services import MeasurementError, matrix_cases

from forge import selectors
from forge.proposers.base import ProposerUnavailable
from forge.proposers.external import ExternalProposer
from forge.services import ForgeError, execute_round, run_campaign, start_campaign, start_round


class Command(BaseCommand):
    help = "Run the Kernel Agent: `submit` one external candidate as a round, or `run` a campaign."

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

    def handle(self, *args, **options) -> None:
        try:
            getattr(self, f"do_{options['action']}")(options)
        except (CaseError, MeasurementError, ForgeError, ProposerUnavailable) as exc:
            raise CommandError(str(exc)) from None

    def do_submit(self, options) -> None:
        path = Path(options["source"])
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        try:
            launch = json.loads(options["launch"])
        except json.JSONDecodeError as exc:
            raise CommandError(f"--launch is not valid JSON: {exc}") from None
        proposer = ExternalProposer(source=path.read_text(), hypothesis=options["hypothesis"], launch=launch)
        campaign = start_campaign([options["case"]], options["backend"], "external", 1, options["actor"])
        case = selectors.campaign_table(campaign)[0].case
        round_id = start_round(campaign, case, "external", options["actor"])
        outcome = execute_round(round_id, proposer, options["actor"])
        self.stdout.write(f"round {round_id}: {outcome.status.upper()} ({outcome.state}) {outcome.detail}")

    def do_run(self, options) -> None:
        cases = [options["case"]] if options["case"] else matrix_cases(options["matrix"])
        campaign = start_campaign(cases, options["backend"], options["proposer"], options["rounds"], options["actor"])
        self.stderr.write(f"campaign {campaign}: {len(cases)} cases x up to {options['rounds']} rounds, proposer {options['proposer']}")
        counts: dict[str, int] = {}

        def progress(case: str, outcome: dict) -> None:
            counts[case] = counts.get(case, 0) + 1
            bar = "#" * counts[case] + "." * (options["rounds"] - counts[case])
            speed = f"{outcome['speedup']:.2f}x" if outcome.get("speedup") else "-"
            self.stderr.write(f"  {case:<34} [{bar}] round {counts[case]}: {outcome['status']} {outcome['state']} {speed}")

        states = run_campaign(campaign, options["proposer"], options["actor"], progress)
        self.stdout.write(f"{'case':<34} {'rounds':>6} {'best speedup':>13} {'% copy BW':>10}  converged")
        for state in states:
            best = state.best or {}
            fraction = selectors.verdict_fraction(best.get("verdict"))
            speedup = f"{best['speedup']:.2f}x" if best.get("speedup") else "-"
            share = f"{fraction:.1%}" if fraction else "-"
            self.stdout.write(f"{state.case:<34} {state.rounds:>6} {speedup:>13} {share:>10}  {state.converged or 'no'}")
