"""`manage.py gate operator --case ID`: re-run the operator gate on the admitted kernel."""
from django.core.management.base import BaseCommand, CommandError

from measurement.harness.cases import CaseError
from measurement.services import MeasurementError, rerun_gate

from ._common import add_protocol_arguments, protocol_from, report_table


class Command(BaseCommand):
    help = "Re-run a gate on what it admitted; a result that no longer holds is retracted or downgraded."

    def add_arguments(self, parser) -> None:
        parser.add_argument("gate", choices=["operator"])
        parser.add_argument("--case", required=True)
        add_protocol_arguments(parser)

    def handle(self, *args, **options) -> None:
        progress = lambda message: self.stderr.write(f"  {message}")  # noqa: E731
        try:
            outcome, revision = rerun_gate(options["case"], options["backend"], options["actor"], protocol_from(options), progress)
        except (CaseError, MeasurementError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(report_table(outcome.report))
        self.stdout.write(f"re-run verdict: {outcome.verdict.upper()}: {outcome.detail or ', '.join(outcome.reasons)}")
        if revision is not None:
            self.stdout.write(f"recorded {revision.type} #{revision.position}: {revision.data['reason']}")
