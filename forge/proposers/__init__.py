"""Proposers by name: `levers` (offline, the default), `anthropic` (Claude), `external` (a file)."""
from __future__ import annotations

from .base import Proposer


def make_proposer(name: str) -> Proposer:
    if name == "levers":
        from .levers import LeversProposer

        return LeversProposer()
    if name == "anthropic":
        from .anthropic_proposer import AnthropicProposer

        return AnthropicProposer()
    raise ValueError(f"unknown proposer {name!r}: use levers or anthropic (external candidates go through `forge submit`)")
