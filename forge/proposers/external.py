"""The `external` proposer: a candidate written by any agent or person, submitted as a file."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .base import Proposal, RoundContext


@dataclass
class ExternalProposer:
    source: str
    hypothesis: str
    launch: dict[str, Any] = field(default_factory=dict)
    lever_tags: tuple[str, ...] = ()
    subject: str = ""
    name: str = "external"

    def propose(self, context: RoundContext) -> Proposal:
        subject = self.subject or self.hypothesis.splitlines()[0][:120]
        return Proposal(source=self.source, launch=self.launch, hypothesis=self.hypothesis,
                        lever_tags=self.lever_tags, subject=subject, usage={"submitted": True})
