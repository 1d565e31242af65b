"""Stencil cases: what a kernel must compute, on which grid, in which precision.

A case id reads `TYPE/SHAPE/PRECISION`, e.g. `star_1/512x512x512/f32`,
`diamond_ts4/256x256x256/f32`, `star2d_1/8192x8192/f64`. Shapes are nz×ny×nx (2D: ny×nx),
x contiguous. Any well-formed id is a case; matrices are just named lists of ids.

One spelling per case: `parse_case` refuses any other spelling of a case's id (leading zeros,
signs, spaces, digits other than ASCII, `diamond_ts04`) and names the canonical one, because
the id is the key of the case's streams (`operator/<backend>/<case>`): an alias would be a
second case with its own results. Ids of more than 2^31 - 1 points are refused (kernels index
with 32-bit integers), and so is an id longer than MAX_CASE_ID_CHARS.

The computation, for every type:  y[p] = a[p]? · Σ_o c[class(o)] · u[p + o]
over the stencil's offsets o, where c holds one coefficient per symmetry class of offsets
(star: per distance; box: per sorted |offset| tuple), a is the variable coefficient field
(varcoef types only). diamond_tsT applies star_1 T times; its output is defined where all T
steps are (halo = radius · T). The written region is the grid minus the halo on every axis.
"""
from __future__ import annotations

import hashlib
import itertools
import math
import re
from dataclasses import dataclass
from functools import cached_property

import numpy as np

PRECISIONS = {"f16": np.float16, "f32": np.float32, "f64": np.float64}
TYPE_PATTERN = re.compile(r"^(star|box|star2d|box2d|varcoef_star)_(\d)$|^diamond_ts(\d{1,2})$", re.ASCII)
SHAPE_PATTERN = re.compile(r"[0-9]+(?:x[0-9]+)*", re.ASCII)  # fullmatch: no sign, space or other digit
MAX_POINTS = 2**31 - 1  # kernels index with 32-bit integers
# The longest real id is 33 characters (varcoef_star_1/512x512x512/f64); the cap keeps a
# hostile id from reaching int() with thousands of digits.
MAX_CASE_ID_CHARS = 64
VALID_FORMS = (
    "TYPE/SHAPE/PRECISION with TYPE one of star_R, box_R, star2d_R, box2d_R, varcoef_star_R (R = 1..4), "
    "diamond_tsT (T = 1..16); SHAPE nz x ny x nx for 3D (e.g. 512x512x512) or ny x nx for 2D types; "
    "PRECISION f16, f32 or f64"
)


class CaseError(ValueError):
    pass


class CaseTooLarge(CaseError):
    """The case needs more memory than the backend has (measurement.backends.base.ensure_fits)."""


@dataclass(frozen=True)
class Stencil:
    family: str  # star | box
    dims: int
    radius: int
    variable_coefficient: bool
    time_steps: int

    @cached_property
    def offsets(self) -> tuple[tuple[int, ...], ...]:
        r = self.radius
        if self.family == "box":
            return tuple(itertools.product(range(-r, r + 1), repeat=self.dims))
        points = [(0,) * self.dims]
        for axis in range(self.dims):
            for distance in range(1, r + 1):
                for sign in (-1, 1):
                    offset = [0] * self.dims
                    offset[axis] = sign * distance
                    points.append(tuple(offset))
        return tuple(points)

    @cached_property
    def classes(self) -> tuple[tuple[int, ...], ...]:
        """Symmetry classes, in a fixed order; coefficient k belongs to classes[k]."""
        return tuple(sorted({self.class_of(o) for o in self.offsets}))

    def class_of(self, offset: tuple[int, ...]) -> tuple[int, ...]:
        if self.family == "star":
            return (max(abs(v) for v in offset),)
        return tuple(sorted(abs(v) for v in offset))

    @cached_property
    def class_index(self) -> tuple[int, ...]:
        """For each offset, the index of its coefficient."""
        lookup = {c: k for k, c in enumerate(self.classes)}
        return tuple(lookup[self.class_of(o)] for o in self.offsets)

    @property
    def halo(self) -> int:
        return self.radius * self.time_steps


@dataclass(frozen=True)
class Case:
    type: str
    shape: tuple[int, ...]
    precision: str

    @property
    def id(self) -> str:
        return f"{self.type}/{'x'.join(map(str, self.shape))}/{self.precision}"

    def __str__(self) -> str:
        return self.id

    @cached_property
    def stencil(self) -> Stencil:
        return stencil_of(self.type)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(PRECISIONS[self.precision])

    @property
    def points(self) -> int:
        return math.prod(self.shape)

    @property
    def region(self) -> tuple[slice, ...]:
        h = self.stencil.halo
        return tuple(slice(h, n - h) for n in self.shape)

    @property
    def region_points(self) -> int:
        h = self.stencil.halo
        return int(np.prod([n - 2 * h for n in self.shape]))

    @property
    def input_names(self) -> tuple[str, ...]:
        return ("u", "a") if self.stencil.variable_coefficient else ("u",)

    @property
    def compulsory_bytes(self) -> int:
        """Bytes one application must move at least: read every input once, write the output once."""
        return (len(self.input_names) + 1) * self.points * self.dtype.itemsize

    @property
    def flops(self) -> int:
        """Floating-point operations of one application, counting a multiply-add as two."""
        per_point = 2 * len(self.stencil.offsets) + (1 if self.stencil.variable_coefficient else 0)
        return per_point * self.region_points * self.stencil.time_steps

    def with_shape(self, shape: tuple[int, ...]) -> "Case":
        return Case(self.type, tuple(shape), self.precision)

    def coefficients(self) -> np.ndarray:
        """The case's constant coefficients: drawn once, deterministically from the case type."""
        return draw_coefficients(self.stencil, seed_from(f"coefficients/{self.type}"))


def seed_from(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def draw_coefficients(stencil: Stencil, seed: int) -> np.ndarray:
    """Positive class coefficients normalised so the weights over all offsets sum to 1.

    The sum of 1 keeps values bounded over many time steps (diamond) and the outputs of the
    same magnitude as the inputs, so relative errors mean the same thing for every type.
    """
    rng = np.random.default_rng(seed)
    raw = rng.uniform(0.2, 1.0, size=len(stencil.classes))
    counts = np.bincount(stencil.class_index, minlength=len(stencil.classes))
    return raw / float(np.dot(raw, counts))


def stencil_of(type_name: str) -> Stencil:
    match = TYPE_PATTERN.match(type_name)
    if not match:
        raise CaseError(f"unknown stencil type {type_name!r}; valid: {VALID_FORMS}")
    family, radius, steps = match.groups()
    if steps is not None:
        t = int(steps)
        if not 1 <= t <= 16:
            raise CaseError(f"diamond time steps must be 1..16, got {t}")
        return Stencil("star", 3, 1, False, t)
    r = int(radius)
    if not 1 <= r <= 4:
        raise CaseError(f"radius must be 1..4, got {r} in {type_name!r}")
    dims = 2 if family.endswith("2d") else 3
    return Stencil(family.replace("2d", "").replace("varcoef_", ""), dims, r, family.startswith("varcoef"), 1)


def canonical_type(type_name: str) -> str:
    """The one spelling of a stencil type: only diamond_tsT can be spelt two ways (`diamond_ts04`);
    the other types match exactly one ASCII digit. CaseError if the type is unknown."""
    stencil = stencil_of(type_name)
    return f"diamond_ts{stencil.time_steps}" if type_name.startswith("diamond_ts") else type_name


def parse_case(text: str) -> Case:
    """The case of a canonical id; CaseError naming the canonical spelling for any alias.

    Every entry point that takes a case id (commands, services, forge, the API) goes through
    here, so no alias can open a second stream for one case. Replay never parses ids (the
    projections copy them), so a ledger that recorded an alias before this check still imports
    and replays; the shipped ledgers hold canonical ids only (tests/measurement/test_cases.py)."""
    if not isinstance(text, str) or len(text) > MAX_CASE_ID_CHARS:
        shown = text[:MAX_CASE_ID_CHARS] + "..." if isinstance(text, str) else repr(text)
        raise CaseError(f"bad case id {shown!r}: at most {MAX_CASE_ID_CHARS} characters, {VALID_FORMS}")
    parts = text.split("/")
    if len(parts) != 3:
        raise CaseError(f"bad case id {text!r}: expected {VALID_FORMS}")
    type_name, shape_text, precision = (part.strip() for part in parts)
    stencil = stencil_of(type_name)
    if precision not in PRECISIONS:
        raise CaseError(f"bad precision {precision!r} in {text!r}: use f16, f32 or f64")
    if not SHAPE_PATTERN.fullmatch(shape_text):
        raise CaseError(f"bad shape {shape_text!r} in {text!r}: use e.g. 512x512x512")
    shape = tuple(int(v) for v in shape_text.split("x"))
    if len(shape) != stencil.dims:
        raise CaseError(f"{type_name} is {stencil.dims}D but shape {shape_text!r} has {len(shape)} dimensions")
    smallest = 2 * stencil.halo + 1
    if any(n < smallest for n in shape):
        raise CaseError(f"every extent of {text!r} must be at least {smallest} (2 × halo + 1)")
    if math.prod(shape) > MAX_POINTS:
        raise CaseError(f"{text!r} has more than 2^31 - 1 points; kernels index with 32-bit integers")
    case = Case(canonical_type(type_name), shape, precision)
    if case.id != text:
        raise CaseError(f"{text!r} is not the canonical spelling of its case: use {case.id!r} "
                        "(one spelling per case: no leading zeros, signs or spaces)")
    return case
