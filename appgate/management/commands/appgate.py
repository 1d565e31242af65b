"""`manage.py appgate register|run|rerun|list`: the application gate from the command line."""
from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError

from appgate.agent import run_agent
from forge.proposers.base import ProposerUnavailable
from appgate.manifest import ManifestError
from appgate.models import AppRow
from appgate.proposers import PROPOSERS, AnthropicAppProposer
from appgate.services import AppGateError, AppProtocol, register, rerun, run_gate, settle_state
from appgate.verdicts import ceiling_problem, parity


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
                                "proposed by Claude (needs ANTHROPIC_API_KEY)")
        agent.add_argument("--kernel-rounds", type=int, default=0, help="rounds of the Kernel Agent on the hotspot case (M2b)")
        agent.add_argument("--passes", type=int, default=AppProtocol.passes, help="interleaved timing passes (default 7)")
        actions.add_parser("list", help="registered applications and their standing results")

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
        try:
            proposer = AnthropicAppProposer() if options["proposer"] == "anthropic" else None
        except ProposerUnavailable as error:
            raise CommandError(str(error)) from None
        row = run_agent(options["manifest"], options["actor"], options["kernel_rounds"], self._protocol(options), self._progress,
                        proposer)
        for milestone in row.milestones:
            self.stdout.write(f"{milestone['milestone']:4} {milestone['detail']}")
        self.stdout.write(f"state: {row.state}: {row.state_reason}")

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


def _s(seconds: float | None) -> str:
    """Seconds (every clock is converted from its manifest unit) in the unit that reads best."""
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.2f} {unit}"
    return f"{seconds / 1e-9:.2f} ns"
