"""Bring the embedded default to a browsable state in one command: an initialised ledger with the
case matrices defined, the committed ledgers of real runs imported (a CPU forge campaign, the
protocol ablations on the H200, the bundled apps' gate on the CPU and the H200, the H200 triage of HeCBench's
programs, the H200 campaign and any
export shipped in fixtures/ledgers/), checkpointed
and verified. Demo accounts exist only when FORGESTENCIL_DEMO_PASSWORD asks for them."""
from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from ledger.errors import LedgerError
from ledger.transfer import import_ledger

ACTOR = "system:seed_demo"
ROOT = Path(settings.BASE_DIR)
# Issue 18: HeCBench's CUDA programs imported (AppRegistered each), triaged on the H200 (their
# states with reason codes), then the forged ones gated against their upstream code; each device
# call's export continues the previous one's ledger, so the last holds them all. The tests import
# the same file (tests/appgate/fixtures.py): a new call's export is named here only.
HECBENCH_FORGED_EXPORT = "docs/benchmarks/hecbench_forged_h200_23.jsonl"
# Real runs whose exports are committed: what a new user browses before running anything.
# The protocol ablations come before the gates' runs: they register the same apps (heat3d-cuda
# with an older manifest), and an app's row shows its last registration. Not the CPU ablation
# (docs/benchmarks/protocol_ablation_cpu.jsonl): its application is the tests' `smoothing`
# program (domain "testing"), which would stand in the application table beside the real apps
# (issue 17); an export is imported whole or not at all, and the H200 ablations show the page.
COMMITTED_EXPORTS = (
    "docs/benchmarks/forge_cpu_levers.jsonl",
    "docs/benchmarks/protocol_ablation_h200.jsonl",
    "docs/benchmarks/protocol_ablation_h200_l2.jsonl",
    "docs/benchmarks/appgate_cpu.jsonl",
    "docs/benchmarks/appgate_h200_hardened.jsonl",
    HECBENCH_FORGED_EXPORT,
    "docs/benchmarks/forge_h200_levers.jsonl",
)
SHIPPED_EXPORTS = "fixtures/ledgers"
PASSWORD_VARIABLE = "FORGESTENCIL_DEMO_PASSWORD"
# username -> groups (the groups and their permissions come from the frontend's migrations)
DEMO_USERS = {"reviewer1": ("Reviewer",), "reviewer2": ("Reviewer",), "maintainer": ("Maintainer",)}


def demo_exports() -> list[Path]:
    """The committed exports, then the shipped ones in name order (a later import of the same
    result stands as its headline, so the shipped campaign overrides the committed sample)."""
    return [ROOT / name for name in COMMITTED_EXPORTS] + sorted((ROOT / SHIPPED_EXPORTS).glob("*.jsonl"))


def ensure_demo_users(password: str) -> list[str]:
    """Create or reset the demo accounts with this password; returns their usernames."""
    if not settings.DEBUG:
        raise CommandError(f"{PASSWORD_VARIABLE} is set but DEBUG is off: demo accounts are refused outside development")
    if len(password) < 8:
        raise CommandError(f"{PASSWORD_VARIABLE} must have at least 8 characters")
    groups = {group.name: group for group in Group.objects.filter(name__in={g for gs in DEMO_USERS.values() for g in gs})}
    missing = sorted({g for gs in DEMO_USERS.values() for g in gs} - set(groups))
    if missing:
        raise CommandError(f"groups {', '.join(missing)} do not exist: run `manage.py migrate` first")
    users = get_user_model()
    with transaction.atomic():
        for username, names in DEMO_USERS.items():
            user, _ = users.objects.get_or_create(username=username)
            user.set_password(password)
            user.save()
            user.groups.set([groups[name] for name in names])
    return list(DEMO_USERS)


class Command(BaseCommand):
    help = (
        "Initialise the ledger if needed, define the case matrices, import the committed ledger exports "
        f"(and any in {SHIPPED_EXPORTS}/), rebuild the projections, sign a checkpoint of the head and verify it. Idempotent. "
        f"With {PASSWORD_VARIABLE} set (development only), also create the demo accounts "
        f"{', '.join(DEMO_USERS)} with that password."
    )

    def handle(self, *args, **options) -> None:
        call_command("ledger", "--actor", ACTOR, "init")
        for matrix in ("cpu", "gpu"):
            call_command("matrix", "load", matrix, "--actor", ACTOR)
        for path in demo_exports():
            try:
                fresh, present = import_ledger(path, ACTOR)
            except LedgerError as exc:
                raise CommandError(str(exc)) from None
            self.stdout.write(f"{os.path.relpath(path, ROOT)}: {fresh} events imported, {present} already present")
        # A var/ ledger made by an older version of the code may lack projections this version
        # adds: replaying every event (well under a second here) makes the pages match the events.
        call_command("appgate", "--actor", ACTOR, "settle", stdout=self.stdout)  # exports with verdicts, no states
        call_command("ledger", "--actor", ACTOR, "rebuild")
        call_command("ledger", "--actor", ACTOR, "checkpoint")
        call_command("ledger", "--actor", ACTOR, "verify")
        password = os.environ.get(PASSWORD_VARIABLE, "")
        if password:
            names = ensure_demo_users(password)
            self.stdout.write(f"demo accounts {', '.join(names)} have the password in {PASSWORD_VARIABLE}: {password}")
        else:
            self.stdout.write(f"no demo accounts (set {PASSWORD_VARIABLE} to create {', '.join(DEMO_USERS)})")
