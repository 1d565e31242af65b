"""The `levers` proposer: offline and deterministic, the embedded default.

Each round it applies ONE structural lever (forge.levers) to the current kernel's plan,
choosing by the diagnosis (the measured fraction of copy bandwidth) and skipping what the
history already tried from the same plan; when the outside-history rule fired it takes a
lever whose name appears nowhere in the history.
"""
from __future__ import annotations

from forge import kernelgen, levers
from measurement.harness.cases import parse_case

from .base import GenerationFailure, Proposal, RoundContext


class LeversProposer:
    name = "levers"

    def propose(self, context: RoundContext) -> Proposal:
        case = parse_case(context.case_id)
        if context.current_plan:
            plan = kernelgen.Plan.from_dict(context.current_plan)
        else:
            plan = levers.initial_plan(case, context.backend)
        fraction = context.profile.get("fraction_of_copy_bandwidth")
        diagnosis = levers.diagnose(case, fraction, None)
        history = " ".join(context.recent_subjects + context.perf_log)
        for lever in levers.rank(levers.applicable(case, plan), diagnosis):
            candidate = levers.apply(lever, case, plan)
            subject = f"{lever.name}: {'; '.join(candidate.differences(plan))}"
            if subject in history or (context.must_leave_history and lever.name in history):
                continue
            kernel = kernelgen.render(case, context.backend, candidate)
            return Proposal(
                source=kernel.source,
                launch=kernel.launch,
                hypothesis=f"{lever.description} Diagnosis: {diagnosis}"
                + (f" Borrowed diagnosis: {context.borrowed_diagnosis}" if context.borrowed_diagnosis else ""),
                lever_tags=lever.tags,
                subject=subject,
                usage={"lever": lever.name},
                plan=candidate.as_dict(),
                disruptive=lever.disruptive(plan) and not context.on_branch,
            )
        raise GenerationFailure("every applicable lever was already tried from this kernel", kind="exhausted")
