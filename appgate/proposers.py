"""Where the App Agent's candidate comes from (design.md §7): `external`, the variant already in
the source behind the manifest's switch; `anthropic`, a patch to the application proposed by
Claude; or `patch`, a forged variant written outside the agent and kept as a unified diff
against the baseline (fixtures/forged/<suite>/<program>/: candidate.patch and candidate.yaml).
A patch is kept as the full new text of each changed file (what the gate builds) and as a unified diff (what a reviewer reads); only files the manifest hashes as the baseline may change,
and the baseline itself is always built from the untouched original.
"""
from __future__ import annotations

import difflib
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from forge.proposers.anthropic_proposer import ClaudeMessages
from forge.proposers.base import GenerationFailure

from . import diffs
from .manifest import LoadedManifest

PROPOSERS = ("external", "anthropic", "patch")
MAX_FILE_CHARS = 60_000  # a larger file is shown to the model cut, and cannot be proposed whole

# ```lang file=PATH ... ``` (the closing fence on a line of its own)
_FENCE = re.compile(r"^[ \t]*```[ \t]*([A-Za-z0-9_+.-]*)([^\n]*)\n(.*?)^[ \t]*```[ \t]*$", re.MULTILINE | re.DOTALL)
_FILE = re.compile(r"\bfile=(\S+)")


@dataclass(frozen=True)
class AppCandidate:
    proposer: str
    subject: str
    hypothesis: str
    files: dict[str, str] = field(default_factory=dict)  # path in the source folder -> full new text; {} = the switch's variant
    patch: str = ""  # unified diff of `files` against the baseline
    usage: dict[str, Any] = field(default_factory=dict)


def external_candidate(loaded: LoadedManifest) -> AppCandidate:
    switch = loaded.manifest.switch
    name = f"{switch.name}=" if switch.name else ""
    return AppCandidate("external", f"the variant behind the {switch.kind} switch {name}{switch.candidate!r}",
                        "the candidate variant already in the source is faster on every dataset and still verifies")


def unified_patch(loaded: LoadedManifest, files: dict[str, str]) -> str:
    return "".join(
        "".join(difflib.unified_diff(diffs.read_source(loaded.source_dir / path).splitlines(keepends=True),
                                     text.splitlines(keepends=True), f"a/{path}", f"b/{path}"))
        for path, text in sorted(files.items()))


def parse_patch_reply(loaded: LoadedManifest, text: str) -> tuple[dict[str, str], str, str]:
    """(changed files, subject, hypothesis) from a reply, or ValueError saying what is wrong."""
    allowed = set(loaded.manifest.source.baseline_files)
    files: dict[str, str] = {}
    meta = None
    for lang, info, body in _FENCE.findall(text or ""):
        named = _FILE.search(info)
        if lang.lower() == "json" and not named:
            if meta is not None:
                raise ValueError("the reply has more than one ```json block")
            meta = body
        elif named:
            path = named.group(1)
            if path not in allowed:
                raise ValueError(f"file={path} is not one of the application's source files ({', '.join(sorted(allowed))})")
            if path in files:
                raise ValueError(f"file={path} appears twice")
            files[path] = body
        else:
            raise ValueError("a code block without file=PATH: name the file each block replaces")
    if meta is None:
        raise ValueError("the reply has no ```json block with subject and hypothesis")
    try:
        data = json.loads(meta)
    except json.JSONDecodeError as error:
        raise ValueError(f"the json block is not valid JSON: {error}") from None
    if not isinstance(data, dict) or not all(isinstance(data.get(k), str) and data[k].strip() for k in ("subject", "hypothesis")):
        raise ValueError("the json block must be an object with non-empty strings 'subject' and 'hypothesis'")
    changed = {path: body for path, body in files.items() if body != diffs.read_source(loaded.source_dir / path)}
    if not changed:
        raise ValueError("the reply changes no file")
    return changed, " ".join(data["subject"].split()), data["hypothesis"].strip()


def _system_prompt(loaded: LoadedManifest) -> str:
    switch = loaded.manifest.switch
    return "\n".join([
        "You are the App Agent's proposer in ForgeStencil: you propose ONE optimisation of a real application, "
        "as a patch to its source. You do not judge it: the application gate builds the original (the baseline) "
        "and your patched source (the candidate), runs both on every dataset, requires the program's own "
        "verification to pass for both, and times them in interleaved passes. Never weaken, skip or fake the "
        "program's verification or its timing output; a candidate that does is rejected and recorded as such.",
        f"The candidate is your patched source built and run with the {switch.kind} switch set to "
        f"{switch.candidate!r}{f' ({switch.name})' if switch.name else ''}; the baseline is the original with "
        f"{switch.baseline!r}. Change the code that this switch selects, or code both variants share.",
        "",
        "Reply format (strict; anything else is discarded as a generation failure):",
        "1. For each file you change, one fenced block whose opening line is ```<lang> file=<path> "
        "(the path exactly as given) holding the COMPLETE new text of that file, not a diff or an excerpt.",
        '2. One fenced ```json block: {"subject": "<one line under 80 characters>", '
        '"hypothesis": "<why this change should make the application faster, stated so a measurement can refute it>"}.',
        "Put nothing else in fenced blocks.",
    ])


def _user_prompt(loaded: LoadedManifest, baseline: dict[str, Any]) -> str:
    m = loaded.manifest
    times = "\n".join(f"- {name}: {values.get('seconds')} s, hotspot {values.get('hotspot_seconds')} s"
                      for name, values in baseline.get("datasets", {}).items()) or "(not measured)"
    fraction = baseline.get("hotspot_fraction")
    parts = [
        f"## Application\n{m.name} ({m.domain}), {m.real_program.language}, architecture {m.architecture}\n"
        f"{m.real_program.description}\n",
        f"## Build\n`{m.build.command}`\n## Run\n`{m.run.command}`; datasets: "
        + ", ".join(f"{d.name} (`{d.args}`)" for d in m.datasets) + "\n",
        f"## Hotspot\nstencil case {m.hotspot.case or '(none declared)'}; measured share of the time: "
        f"{'unknown' if fraction is None else f'{fraction:.0%}'}\n## Baseline times\n{times}\n",
    ]
    for path in sorted(m.source.baseline_files):
        text = (loaded.source_dir / path).read_text(errors="replace")
        shown = text if len(text) <= MAX_FILE_CHARS else text[:MAX_FILE_CHARS] + "\n... (cut)\n"
        parts.append(f"## file={path}\n```{m.real_program.language}\n{shown.rstrip()}\n```\n")
    parts.append("Propose exactly ONE optimisation as complete replacement files, then the json block.")
    return "\n".join(parts)


class AnthropicAppProposer(ClaudeMessages):
    """A patch to the application from Claude, through the same client and failure handling as
    the Kernel Agent's proposer."""

    name = "anthropic"

    def propose(self, loaded: LoadedManifest, baseline: dict[str, Any]) -> AppCandidate:
        raw, usage, stop_reason = self.complete(_system_prompt(loaded), _user_prompt(loaded, baseline))
        try:
            files, subject, hypothesis = parse_patch_reply(loaded, raw)
        except ValueError as error:
            raise self.unparsed(error, raw, usage, stop_reason) from None
        return AppCandidate("anthropic", subject, hypothesis, files, unified_patch(loaded, files), usage)


class PatchProposer:
    """A forged variant written outside the agent: `folder` holds candidate.patch (a unified diff
    of the baseline files, paths relative to the manifest's source folder, `a/` and `b/`) and
    candidate.yaml (subject, hypothesis, risk). Both are read when the proposer is made (a
    missing or malformed file is refused before any gate run); the patch is applied to the
    manifest's baseline files when the agent asks, strictly (appgate.diffs), and the candidate
    names the patch file and its sha256."""

    name = "patch"

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        try:
            self.text = (self.folder / "candidate.patch").read_text()
            claims = yaml.safe_load((self.folder / "candidate.yaml").read_text())
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
            raise ValueError(f"{self.folder}: needs candidate.patch and candidate.yaml ({error})") from None
        if not isinstance(claims, dict) or not all(isinstance(claims.get(k), str) and claims[k].strip()
                                                   for k in ("subject", "hypothesis")):
            raise ValueError(f"{self.folder / 'candidate.yaml'}: needs non-empty strings 'subject' and 'hypothesis'")
        self.paths = list(diffs.parse(self.text))  # a malformed patch is refused now, not after M1
        self.subject = " ".join(claims["subject"].split())
        risk = f" Risk: {' '.join(claims['risk'].split())}" if isinstance(claims.get("risk"), str) else ""
        self.hypothesis = (f"{' '.join(claims['hypothesis'].split())}{risk} (patch {self.folder / 'candidate.patch'}, "
                           f"sha256 {hashlib.sha256(self.text.encode()).hexdigest()[:16]})")

    def propose(self, loaded: LoadedManifest, baseline: dict[str, Any]) -> AppCandidate:
        allowed = loaded.manifest.source.baseline_files
        try:
            outside = sorted(set(self.paths) - set(allowed))
            if outside:
                raise ValueError(f"{', '.join(outside)}: not among the baseline files ({', '.join(sorted(allowed))})")
            files = diffs.apply({path: diffs.read_source(loaded.source_dir / path) for path in self.paths}, self.text)
        except (ValueError, OSError) as error:
            raise GenerationFailure(f"the patch does not apply to {loaded.name}'s baseline: {error}", kind="malformed",
                                    raw=self.text) from None
        return AppCandidate("patch", self.subject, self.hypothesis, files, unified_patch(loaded, files))
