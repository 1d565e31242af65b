"""`manage.py ablation protocol --case ID [--backend cpu|cuda] [--source FILE --launch JSON] | --app MANIFEST_OR_NAME`:
re-run a real measurement with one protocol requirement removed at a time (docs/protocol_ablation.md)."""
from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError

from appgate.manifest import ManifestError
from appgate.protocol_ablation import AblationError, ablate_app, ablate_case, table
from appgate.services import AppGateError, AppProtocol
from measurement.harness.cases import CaseError
from measurement.management.commands._common import kernel_from, protocol_from
from measurement.services import MeasurementError


class Command(BaseCommand):
    help = ("Protocol ablation: measure a case's kernel or an application honestly, then once per requirement "
            "removed (correctness gate, symmetric timing, all-dataset headline, warm-up, cache flush, interleaving) "
            "plus a control re-run; prints honest vs ablated value and the distortion, records AblationMeasured events.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--actor", default="user:cli")
        actions = parser.add_subparsers(dest="action", required=True)
        protocol = actions.add_parser("protocol", help="one requirement of the measurement protocol removed at a time")
        subject = protocol.add_mutually_exclusive_group(required=True)
        subject.add_argument("--case", help="an operator case, e.g. star_1/64x64x64/f32")
        subject.add_argument("--app", help="an application: a manifest file, a registered app or a bundled app (its manifest name, e.g. heat3d-cpu)")
        protocol.add_argument("--backend", choices=["cpu", "cuda"], default="cpu", help="case only (an app runs on its architecture)")
        protocol.add_argument("--source", help="case only: the kernel to ablate (default: the admitted kernel, else the straightforward one)")
        protocol.add_argument("--launch", help='case only: its launch configuration JSON, e.g. {"threads": 2}')
        protocol.add_argument("--passes", type=int, help="timing passes (default 7)")
        protocol.add_argument("--launches", type=int, help="case only: launches per measurement (default: 5 cpu, 10 cuda)")
        protocol.add_argument("--wrong-switch", help="app only: the switch value of a wrong-but-fast variant, for the correctness_gate arm")

    def handle(self, *args, **options) -> None:
        progress = lambda message: print(f"  {message}", file=sys.stderr, flush=True)  # noqa: E731
        for flag in ("passes", "launches"):
            if options[flag] is not None and options[flag] < 1:
                raise CommandError(f"--{flag} must be at least 1")
        try:
            if options["case"]:
                for flag in ("wrong_switch",):
                    if options[flag] is not None:
                        raise CommandError(f"--{flag.replace('_', '-')} applies to --app only")
                if options["launch"] and not options["source"]:
                    raise CommandError("--launch needs --source")
                kernel = kernel_from(options["source"], options["launch"]) if options["source"] else None
                result = ablate_case(options["case"], options["backend"], options["actor"], kernel,
                                     protocol_from(options), progress)
            else:
                for flag in ("source", "launch", "launches"):
                    if options[flag] is not None:
                        raise CommandError(f"--{flag} applies to --case only")
                if options["backend"] != "cpu":
                    raise CommandError("--backend applies to --case only: an application runs on its manifest's architecture")
                app_protocol = AppProtocol(passes=options["passes"]) if options["passes"] else AppProtocol()
                result = ablate_app(options["app"], options["actor"], app_protocol, options["wrong_switch"], progress)
        except (AblationError, CaseError, MeasurementError, ManifestError, AppGateError) as error:
            raise CommandError(str(error)) from None
        self.stdout.write(table(result))
        first, last = result.arms[0].event, result.arms[-1].event
        self.stdout.write(f"recorded {len(result.arms)} AblationMeasured events (#{first.position}..#{last.position}) "
                          f"on {result.stream}")
