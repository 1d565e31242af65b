"""The straightforward C kernel of any case (measurement.harness.codegen says what straightforward
means): OpenMP over z,y in 3D and over y in 2D, one output point per iteration of the x loop,
compiled with the CPU backend's flags (measurement.backends.cpu_compile: -O3 -march=native
-std=c11, so GCC vectorises the f32 and f64 x loops itself and contracts nothing into FMAs).

Temporal types (diamond_tsT, T > 1 applications of star_1): two scratch grids of the accumulation
type are malloc'd inside the call; step 1 reads u, steps 2..T-1 ping-pong between the scratch
grids, each over its shrinking region (halo = the step number), and step T writes y over the
case's region. Scratch in the accumulation type (not the storage type) means the only rounding to
f16 is the final store, the same numerical floor as the CUDA kernel. If malloc fails the kernel
returns without writing y (the poisoned output then fails the check rather than the process).

Single-step f16 cases (issue 15, point 4): GCC 12 does not vectorise conversions between
`_Float16` and float (its vectoriser reports "unsupported data-type float", with -march=native
as with -march=sapphirerapids), so the scalar kernel converts point by point; where the CPU has
AVX512-FP16 it does so with vcvtsh2ss, which merges into its destination register and so chains
each conversion to the one before, and the kernel ran 15-30x the f32 kernel's time
(docs/benchmarks/f16_naive_rate_cpu.json has the measured times). A bound that slow measured
GCC, not f16 stencils. The f16 kernel here is the loop GCC makes of the f32 one, written out:

* where the compiler targets F16C, LANES = 8 x points at a time: each neighbour's eight halves
  converted with one vcvtph2ps, then per point the scalar kernel's arithmetic in the same order
  (acc = 0, acc += c[class] * u[p + o] over the stencil's offsets, times a[p] for varcoef, one
  rounding to f16 at the store, nearest even like the cast), so the output is the scalar
  kernel's bit for bit; the row's last points one at a time with scalar F16C conversions
  (vcvtph2ps of one half: no merge, no chain);
* without F16C it is the scalar kernel again (LANES 0, the casts).

The scalar kernel stays the historical baseline `straightforward_f16_scalar` of f16 CPU cases.

Nothing here imports Django.
"""
from __future__ import annotations

from .cases import Case
from .codegen_base import acc_type, c_type, coefficient_locals, header, index_expr, sum_lines

# Halves <-> floats with F16C: exact on load, round to nearest even on store (as the casts). One
# half at a time through a vector register (the row's tail), so no conversion merges into the last.
F16C_PRELUDE = (
    "#ifdef __F16C__",
    "#include <immintrin.h>",
    "#define LANES 8",
    "#define VLOAD(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(p)))",
    "#define VSTORE(p, v) _mm_storeu_si128((__m128i*)(p), _mm256_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT))",
    "#define LOAD(p) _mm_cvtss_f32(_mm_cvtph_ps(_mm_loadu_si16(p)))",
    "#define STORE(p, v) _mm_storeu_si16((p), _mm_cvtps_ph(_mm_set_ss(v), _MM_FROUND_TO_NEAREST_INT))",
    "#else  /* no F16C: the scalar kernel's casts */",
    "#define LANES 0",
    "#define LOAD(p) ((acc_t)*(p))",
    "#define STORE(p, v) (*(p) = (elem_t)(v))",
    "#endif",
)


def vectorised_c(case: Case) -> bool:
    """Whether the straightforward C kernel of `case` is the F16C one (f16, one time step)."""
    return case.precision == "f16" and case.stencil.time_steps == 1


def straightforward_c(case: Case) -> str:
    """C source of the straightforward OpenMP kernel `stencil` for `case` (ABI: base.py): the F16C
    kernel for single-step f16 cases, the scalar one for every other case."""
    return straightforward_c_f16(case) if vectorised_c(case) else straightforward_c_scalar(case)


def straightforward_c_f16(case: Case) -> str:
    """C source of the straightforward kernel of a single-step f16 case, LANES points at a time."""
    s = case.stencil
    if not vectorised_c(case):
        raise ValueError(f"the F16C kernel is for single-step f16 cases, not {case.id}")
    h = s.halo
    if s.dims == 3:
        loops = [
            "    #pragma omp parallel for collapse(2) schedule(static)",
            f"    for (int z = {h}; z < nz - {h}; ++z) {{",
            f"        for (int j = {h}; j < ny - {h}; ++j) {{",
        ]
        point, indent, close = "z * sz + j * sy + x", " " * 12, ["        }", "    }"]
    else:
        loops = ["    #pragma omp parallel for schedule(static)", f"    for (int j = {h}; j < ny - {h}; ++j) {{"]
        point, indent, close = "j * sy + x", " " * 8, ["    }"]
    inner = indent + "    "
    vector_sum = [f"{inner}acc = _mm256_add_ps(acc, _mm256_mul_ps(v{k}, VLOAD(u + {index_expr(o)})));"
                  for o, k in zip(s.offsets, s.class_index)]
    varcoef = s.variable_coefficient
    out = [
        header(case, "C"),
        "/* f16: F16C conversions, LANES x points at a time (measurement.harness.codegen_c). */",
        "#include <stddef.h>",
        *F16C_PRELUDE,
        "",
        "typedef _Float16 elem_t;",
        "typedef float acc_t;",
        "",
        "void stencil(const elem_t* u, const elem_t* a, elem_t* y, const double* coef, int nz, int ny, int nx)",
        "{",
        "    const ptrdiff_t sy = nx;",
        "    const ptrdiff_t sz = (ptrdiff_t)nx * ny;",
        "    (void)sz; (void)a;",
        *coefficient_locals(case, "    "),
        "#if LANES",
        *[f"    const __m256 v{k} = _mm256_set1_ps(c{k});" for k in range(len(s.classes))],
        "#endif",
        *loops,
        f"{indent}int x = {h};",
        "#if LANES",
        f"{indent}for (; x + LANES <= nx - {h}; x += LANES) {{  /* LANES points, each as in the loop below */",
        f"{inner}const ptrdiff_t i = {point};",
        f"{inner}__m256 acc = _mm256_setzero_ps();",
        *vector_sum,
        f"{inner}VSTORE(y + i, {'_mm256_mul_ps(acc, VLOAD(a + i))' if varcoef else 'acc'});",
        f"{indent}}}",
        "#endif",
        f"{indent}for (; x < nx - {h}; ++x) {{",
        f"{inner}const ptrdiff_t i = {point};",
        f"{inner}acc_t acc = 0;",
        *sum_lines(case, lambda index: f"LOAD(u + {index})", inner),
        f"{inner}STORE(y + i, {'acc * LOAD(a + i)' if varcoef else 'acc'});",
        f"{indent}}}",
        *close,
        "}",
    ]
    return "\n".join(out) + "\n"


def straightforward_c_scalar(case: Case) -> str:
    """C source of the scalar straightforward OpenMP kernel `stencil` for `case` (ABI: base.py): one
    point per loop iteration, left to GCC's vectoriser. For single-step f16 cases it is the historical
    baseline `straightforward_f16_scalar` (the module docstring says why it was replaced)."""
    s = case.stencil
    elem, acc = c_type(case.precision), acc_type(case.precision)
    out = [
        header(case, "C"),
        "#include <stddef.h>",
        "#include <stdlib.h>" if s.time_steps > 1 else None,
        "",
        f"typedef {elem} elem_t;",
        f"typedef {acc} acc_t;",
        "",
        "void stencil(const elem_t* u, const elem_t* a, elem_t* y, const double* coef, int nz, int ny, int nx)",
        "{",
        "    const ptrdiff_t sy = nx;",
        "    const ptrdiff_t sz = (ptrdiff_t)nx * ny;",
        "    (void)sz; (void)a;",
        *coefficient_locals(case, "    "),
    ]
    if s.time_steps == 1:
        out += _c_sweep(case, str(s.halo), src="u", dst="y", src_is_elem=True, dst_is_elem=True)
    else:
        out += _c_time_steps(case)
    out.append("}")
    return "\n".join(line for line in out if line is not None) + "\n"


def _c_sweep(case: Case, halo: str, src: str, dst: str, src_is_elem: bool, dst_is_elem: bool) -> list[str]:
    """One application of the stencil over the region `halo` cells inside the grid's edges."""
    s = case.stencil

    def load(index: str) -> str:
        return f"(acc_t){src}[{index}]" if src_is_elem else f"{src}[{index}]"

    result = "acc * (acc_t)a[i]" if (s.variable_coefficient and dst == "y") else "acc"
    store = f"{dst}[i] = (elem_t)({result});" if dst_is_elem else f"{dst}[i] = {result};"
    if s.dims == 3:
        head = [
            "    #pragma omp parallel for collapse(2) schedule(static)",
            f"    for (int z = {halo}; z < nz - {halo}; ++z) {{",
            f"        for (int j = {halo}; j < ny - {halo}; ++j) {{",
            f"            for (int x = {halo}; x < nx - {halo}; ++x) {{",
            "                const ptrdiff_t i = z * sz + j * sy + x;",
        ]
        indent, tail = "                ", ["            }", "        }", "    }"]
    else:
        head = [
            "    #pragma omp parallel for schedule(static)",
            f"    for (int j = {halo}; j < ny - {halo}; ++j) {{",
            f"        for (int x = {halo}; x < nx - {halo}; ++x) {{",
            "            const ptrdiff_t i = j * sy + x;",
        ]
        indent, tail = "            ", ["        }", "    }"]
    body = [f"{indent}acc_t acc = 0;", *sum_lines(case, load, indent), f"{indent}{store}"]
    return head + body + tail


def _indented(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


def _c_time_steps(case: Case) -> list[str]:
    """T applications: u -> s0, then ping-pong s0 <-> s1 over shrinking regions, last -> y."""
    t = case.stencil.time_steps
    out = [
        "    /* T = %d steps: scratch grids in the accumulation type, step k over halo k. */" % t,
        "    const size_t n = (size_t)nz * (size_t)ny * (size_t)nx;",
        "    acc_t* s0 = (acc_t*)malloc(n * sizeof(acc_t));",
        "    acc_t* s1 = (acc_t*)malloc(n * sizeof(acc_t));" if t > 2 else "    acc_t* s1 = NULL;",
        "    if (s0 == NULL || (%s)) { free(s0); free(s1); return; }" % ("s1 == NULL" if t > 2 else "0"),
        "    /* step 1: u -> s0 */",
        "    {",
        "        acc_t* dst = s0;",
        *_indented(_c_sweep(case, "1", src="u", dst="dst", src_is_elem=True, dst_is_elem=False)),
        "    }",
    ]
    if t > 2:
        out += [
            f"    /* steps 2 .. {t - 1}: ping-pong between s0 and s1 */",
            f"    for (int step = 2; step < {t}; ++step) {{",
            "        const acc_t* src = (step % 2 == 0) ? s0 : s1;",
            "        acc_t* dst = (step % 2 == 0) ? s1 : s0;",
            "        const int h = step;",
            *_indented(_c_sweep(case, "h", src="src", dst="dst", src_is_elem=False, dst_is_elem=False)),
            "    }",
        ]
    last_src = "s0" if t % 2 == 0 else "s1"  # step T-1 wrote s0 when T-1 is odd
    out += [
        f"    /* step {t}: {last_src} -> y over the case's region */",
        "    {",
        f"        const acc_t* src = {last_src};",
        *_indented(_c_sweep(case, str(t), src="src", dst="y", src_is_elem=False, dst_is_elem=True)),
        "    }",
        "    free(s0);",
        "    free(s1);",
    ]
    return out



def empty_c(case: Case) -> str:
    """A kernel with the ABI and no body: timing it gives the harness's own cost of a launch."""
    t = c_type(case.precision)
    return (f"void stencil(const {t} *u, const {t} *a, {t} *y, const double *coef, int nz, int ny, int nx)"
            " { (void)u; (void)a; (void)y; (void)coef; (void)nz; (void)ny; (void)nx; }\n")

