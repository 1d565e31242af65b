"""A proposer backed by Claude through the official `anthropic` SDK.

One `messages.create` call per round. The prompt carries the rulebook, the perf and idea logs,
the current kernel and launch, the profile, a borrowed diagnosis, the case and the kernel ABI,
and asks for exactly ONE change in a strict reply format:

    ```c / ```cuda   the full kernel source
    ```json          {"launch": {...}, "hypothesis": "...", "lever_tags": [...], "subject": "..."}

Retries on 429/5xx/connection errors are the SDK's own (`max_retries`, honouring retry-after);
an API error after those retries, a timeout, or a reply that does not parse raises
GenerationFailure with the usage recorded. The proposer never judges what it proposes.
"""
from __future__ import annotations

import json
import os
import re
from typing import Any

import anthropic
import httpx

from .base import GenerationFailure, Proposal, ProposerUnavailable, RoundContext

MODEL_ENV = "FORGESTENCIL_ANTHROPIC_MODEL"
API_KEY_ENV = "ANTHROPIC_API_KEY"
DEFAULT_MODEL = "claude-sonnet-4-5"
DEFAULT_MAX_TOKENS = 16_000  # a full kernel plus the JSON; non-streaming stays under the SDK's 10-minute bound
DEFAULT_TIMEOUT_S = 300.0
DEFAULT_MAX_RETRIES = 3

# The ABI restated, for when the backend module's docstring is unavailable (python -OO).
_ABI_FALLBACK = """\
Kernel ABI (both languages), T = the case's element type (`_Float16`/`__half`, `float`, `double`):

    C:     void stencil(const T* u, const T* a, T* y, const double* coef, int nz, int ny, int nx)
    CUDA:  extern "C" __global__ void stencil(const T* __restrict__ u, const T* __restrict__ a,
                                              T* __restrict__ y, const double* __restrict__ coef,
                                              int nz, int ny, int nx)

`a` is the variable coefficient field (NULL unless the type is varcoef_*); 2D cases pass nz = 1;
`coef` holds one coefficient per symmetry class. Arrays are C-contiguous nz×ny×nx, x fastest.
The kernel writes y over the written region (the grid minus the halo on every axis) and must
not write anything else or touch u, a, coef.

Launch configuration (JSON): CPU `{"threads": N}` (OpenMP threads; omitted = all cores);
CUDA `{"block": [bx, by, bz], "tile": [tx, ty, tz], "shared_bytes": S}` where the grid is
ceil(nx/tx) × ceil(ny/ty) × ceil(nz/tz) (tile defaults to block).
"""

_REPLY_FORMAT = """\
Reply format (strict; anything else is discarded as a generation failure):
1. Exactly one fenced code block tagged ```{lang} holding the COMPLETE kernel source after your
   change (not a diff, not an excerpt): it is compiled as it stands.
2. Exactly one fenced ```json block holding one object:
   {{"launch": {{...}}, "hypothesis": "...", "lever_tags": ["..."], "subject": "..."}}
   - launch: the launch configuration JSON for the {backend} backend ({launch_hint}).
   - hypothesis: why this one change should help, stated so a measurement can refute it.
   - lever_tags: short lowercase tags naming the lever(s) pulled (e.g. "tiling", "vectorization",
     "register_blocking", "temporal_blocking", "launch_config", "unrolling", "prefetch").
   - subject: one line (under 80 characters) naming the change.
Put nothing else in fenced blocks."""

_LAUNCH_HINTS = {
    "cpu": '{"threads": N} or {} for all cores',
    "cuda": '{"block": [bx, by, bz], "tile": [tx, ty, tz], "shared_bytes": S}',
}
_CODE_LANGS = {"cpu": "c", "cuda": "cuda"}

# A fenced block: ```lang\n ... \n``` (the closing fence on a line of its own).
_FENCE = re.compile(r"^[ \t]*```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)^[ \t]*```[ \t]*$", re.MULTILINE | re.DOTALL)
_JSON_LANGS = {"json", "jsonc", "json5"}


def kernel_abi_text() -> str:
    """The kernel ABI and launch-configuration text, taken from measurement.backends.base."""
    try:
        from measurement.backends import base as backend_base

        doc = backend_base.__doc__ or ""
    except Exception:  # pragma: no cover - the backend module always imports here
        doc = ""
    start = doc.find("Kernel ABI")
    return doc[start:].strip() if start >= 0 else _ABI_FALLBACK.strip()


def case_summary(case_id: str, backend: str) -> str:
    """What the case asks for, derived from its id (just the id if it does not parse)."""
    try:
        from measurement.harness import codegen
        from measurement.harness.cases import parse_case

        case = parse_case(case_id)
    except Exception:
        return f"Case: {case_id}"
    s = case.stencil
    element = (codegen.CUDA_TYPES if backend == "cuda" else codegen.C_TYPES).get(case.precision, "?")
    accumulate = codegen.ACC_TYPES.get(case.precision, "?")
    written = "x".join(str(n - 2 * s.halo) for n in case.shape)
    lines = [
        f"Case: {case.id}",
        f"- {s.dims}D {s.family} stencil, radius {s.radius}, {len(s.offsets)} points"
        + (f", applied {s.time_steps} times (diamond/temporal)" if s.time_steps > 1 else "")
        + (", variable coefficient field a" if s.variable_coefficient else ""),
        f"- y[p] = {'a[p] · ' if s.variable_coefficient else ''}Σ_o coef[class(o)] · u[p + o]; "
        f"{len(s.classes)} coefficient classes {list(s.classes)} (coef[k] belongs to class k)",
        f"- shape (nz×ny×nx or ny×nx) {'x'.join(map(str, case.shape))}, halo {s.halo}, written region {written}",
        f"- element type T = {element}; the straightforward kernel accumulates in {accumulate}",
        f"- compulsory traffic {case.compulsory_bytes} bytes, {case.flops} flops per application",
    ]
    return "\n".join(lines)


def _block(title: str, body: str) -> str:
    return f"## {title}\n{body.strip() if body and body.strip() else '(none)'}\n"


def _entries(items: list[str]) -> str:
    return "\n".join(f"- {item}" for item in items) if items else "(none)"


def _profile_text(profile: dict[str, Any]) -> str:
    if not profile:
        return "(nothing measured yet)"
    lines = []
    for key, value in profile.items():
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
        lines.append(f"- {key}: {text}")
    return "\n".join(lines)


def build_system_prompt(context: RoundContext) -> str:
    backend = context.backend
    lang = _CODE_LANGS.get(backend, "c")
    return "\n".join(
        [
            "You are the proposer in ForgeStencil, which forges a specialised stencil kernel for one case "
            "through rounds. Each round you propose exactly ONE change to the current kernel (one lever, "
            "one hypothesis). You do not judge it: a gate compiles it, checks it for correctness against "
            "the reference and measures it. Never game the checks; follow the rulebook.",
            "",
            _block("Rulebook", context.rulebook),
            _block("Kernel ABI", kernel_abi_text()),
            _REPLY_FORMAT.format(lang=lang, backend=backend, launch_hint=_LAUNCH_HINTS.get(backend, "{}")),
        ]
    )


def build_user_prompt(context: RoundContext) -> str:
    lang = _CODE_LANGS.get(context.backend, "c")
    parts = [
        _block("Case", case_summary(context.case_id, context.backend)),
        _block("Backend", context.backend),
        _block("Perf log (recent, factual)", _entries(context.perf_log)),
        _block("Idea log", _entries(context.idea_log)),
        _block("Profile of the current kernel", _profile_text(context.profile)),
        _block("Borrowed diagnosis", context.borrowed_diagnosis or "(none)"),
        _block("Recent subjects (do not repeat these)", _entries(context.recent_subjects)),
        "## Current kernel\n" f"```{lang}\n{context.current_source.rstrip()}\n```\n",
        "## Current launch\n" f"```json\n{json.dumps(context.current_launch or {}, sort_keys=True)}\n```\n",
    ]
    if context.must_leave_history:
        parts.append(
            "## Leave the history\nThe last three rounds did not improve. Your proposal MUST come from "
            "outside the history: a lever not in the perf log, idea log or recent subjects, not a "
            "variation of one already tried.\n"
        )
    parts.append(
        "Make exactly ONE change to the current kernel and reply in the strict format: the complete "
        f"kernel source in one ```{lang} block, then one ```json block with launch, hypothesis, "
        "lever_tags and subject."
    )
    return "\n".join(parts)


def parse_reply(text: str) -> tuple[str, dict[str, Any], str, tuple[str, ...], str]:
    """(source, launch, hypothesis, lever_tags, subject) from a reply, or ValueError saying what is wrong."""
    blocks = [(lang.strip().lower(), body) for lang, body in _FENCE.findall(text or "")]
    if not any(lang in _JSON_LANGS for lang, _ in blocks):
        # No ```json tag: a single untagged block holding a JSON object counts as the JSON block.
        untagged = [i for i, (lang, body) in enumerate(blocks) if not lang and body.lstrip().startswith("{")]
        if len(untagged) == 1:
            blocks[untagged[0]] = ("json", blocks[untagged[0]][1])
    json_blocks = [body for lang, body in blocks if lang in _JSON_LANGS]
    code_blocks = [body for lang, body in blocks if lang not in _JSON_LANGS]
    if len(code_blocks) > 1:
        kernels = [body for body in code_blocks if re.search(r"\bstencil\s*\(", body)]
        code_blocks = kernels if len(kernels) == 1 else code_blocks
    if not code_blocks:
        raise ValueError("the reply has no fenced code block with the kernel source")
    if len(code_blocks) > 1:
        raise ValueError(f"the reply has {len(code_blocks)} code blocks; expected exactly one kernel source")
    source = code_blocks[0].strip("\n")
    if not source.strip():
        raise ValueError("the kernel code block is empty")
    if not json_blocks:
        raise ValueError("the reply has no fenced ```json block")
    if len(json_blocks) > 1:
        raise ValueError(f"the reply has {len(json_blocks)} json blocks; expected exactly one")
    try:
        meta = json.loads(json_blocks[0])
    except json.JSONDecodeError as error:
        raise ValueError(f"the json block is not valid JSON: {error}") from None
    if not isinstance(meta, dict):
        raise ValueError(f"the json block must hold an object, got {type(meta).__name__}")
    missing = [key for key in ("launch", "hypothesis", "lever_tags", "subject") if key not in meta]
    if missing:
        raise ValueError(f"the json block lacks {', '.join(missing)}")
    launch = meta["launch"]
    if not isinstance(launch, dict):
        raise ValueError(f"'launch' must be an object, got {launch!r}")
    hypothesis = meta["hypothesis"]
    if not isinstance(hypothesis, str) or not hypothesis.strip():
        raise ValueError("'hypothesis' must be a non-empty string")
    tags = meta["lever_tags"]
    if isinstance(tags, str):
        tags = [tags]
    if not isinstance(tags, list) or not tags or not all(isinstance(t, str) and t.strip() for t in tags):
        raise ValueError(f"'lever_tags' must be a non-empty list of strings, got {meta['lever_tags']!r}")
    subject = meta["subject"]
    if not isinstance(subject, str) or not subject.strip():
        raise ValueError("'subject' must be a non-empty string")
    subject = " ".join(subject.split())  # one line
    lever_tags = tuple(dict.fromkeys(t.strip() for t in tags))
    return source + "\n", launch, hypothesis.strip(), lever_tags, subject


class ClaudeMessages:
    """One `client.messages.create` call with the SDK's own retries, its failures mapped to
    GenerationFailure with the usage recorded: shared by the Kernel Agent's proposer and the App
    Agent's (appgate.proposers), which differ only in their prompts and reply formats."""

    def __init__(
        self,
        model: str | None = None,
        api_key: str | None = None,
        client: anthropic.Anthropic | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        timeout: float | None = None,
        max_retries: int | None = None,
    ):
        self.model = model or os.environ.get(MODEL_ENV) or DEFAULT_MODEL
        self.max_tokens = max_tokens
        if client is None:
            key = api_key or os.environ.get(API_KEY_ENV)
            if not key:
                raise ProposerUnavailable(
                    f"the Anthropic proposer needs an API key: set the {API_KEY_ENV} environment variable "
                    "(or pass api_key=...)"
                )
            client = anthropic.Anthropic(
                api_key=key,
                timeout=httpx.Timeout(timeout or DEFAULT_TIMEOUT_S, connect=10.0),
                max_retries=DEFAULT_MAX_RETRIES if max_retries is None else max_retries,
            )
        else:
            options: dict[str, Any] = {}
            if timeout is not None:
                options["timeout"] = httpx.Timeout(timeout, connect=min(10.0, timeout))
            if max_retries is not None:
                options["max_retries"] = max_retries
            if options:
                client = client.with_options(**options)
        self.client = client

    def _usage(self, message: Any = None, **extra: Any) -> dict[str, Any]:
        usage: dict[str, Any] = {"model": self.model, "input_tokens": 0, "output_tokens": 0}
        if message is not None:
            usage["model"] = getattr(message, "model", None) or self.model
            usage["requested_model"] = self.model
            counts = getattr(message, "usage", None)
            for key in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
                value = getattr(counts, key, None)
                if value is not None:
                    usage[key] = value
            usage["stop_reason"] = getattr(message, "stop_reason", None)
            request_id = getattr(message, "_request_id", None)
            if request_id:
                usage["request_id"] = request_id
        usage.update(extra)
        return usage

    def complete(self, system: str, user: str) -> tuple[str, dict[str, Any], str | None]:
        """(reply text, usage, stop reason) of one call; the system prompt is marked cacheable."""
        try:
            message = self.client.messages.create(
                model=self.model,
                max_tokens=self.max_tokens,
                system=[{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
                messages=[{"role": "user", "content": user}],
            )
        except anthropic.APITimeoutError as error:
            raise GenerationFailure(
                f"Anthropic API timeout after retries: {error}", usage=self._usage(error="timeout"), kind="timeout"
            ) from error
        except anthropic.APIConnectionError as error:
            raise GenerationFailure(
                f"Anthropic API connection error after retries: {error}",
                usage=self._usage(error="connection"),
                kind="connection",
            ) from error
        except anthropic.APIStatusError as error:
            raise GenerationFailure(
                f"Anthropic API error {error.status_code} after retries: {error.message}",
                usage=self._usage(error=f"status {error.status_code}", request_id=error.request_id),
                kind="api_error",
            ) from error
        except (anthropic.AnthropicError, ValueError) as error:
            raise GenerationFailure(
                f"Anthropic API call failed: {error}", usage=self._usage(error=type(error).__name__), kind="api_error"
            ) from error
        raw = "".join(block.text for block in message.content if getattr(block, "type", None) == "text")
        return raw, self._usage(message), message.stop_reason

    def unparsed(self, error: ValueError, raw: str, usage: dict[str, Any], stop_reason: str | None) -> GenerationFailure:
        """The failure for a reply that does not parse, named by why the model stopped."""
        if stop_reason == "refusal":
            return GenerationFailure("the model refused to answer", usage=usage, raw=raw, kind="refusal")
        if stop_reason == "max_tokens":
            return GenerationFailure(
                f"the reply was cut off at max_tokens={self.max_tokens}: {error}", usage=usage, raw=raw, kind="truncated"
            )
        return GenerationFailure(f"malformed reply: {error}", usage=usage, raw=raw, kind="malformed")


class AnthropicProposer(ClaudeMessages):
    """Proposes one change per round with Claude (`client.messages.create`)."""

    name = "anthropic"

    def propose(self, context: RoundContext) -> Proposal:
        raw, usage, stop_reason = self.complete(build_system_prompt(context), build_user_prompt(context))
        try:
            source, launch, hypothesis, lever_tags, subject = parse_reply(raw)
        except ValueError as error:
            raise self.unparsed(error, raw, usage, stop_reason) from None
        return Proposal(
            source=source,
            launch=launch,
            hypothesis=hypothesis,
            lever_tags=lever_tags,
            subject=subject,
            usage=usage,
            raw=raw,
        )
