"""How the hand-written plane-queue kernels (forge/handwritten.py) read their rows: the 16- or
8-byte vector helpers (with the optional L2::256B prefetch hint) and one row of a footprint as whole
vectors, its x halo from the neighbouring aligned vectors or, where a whole warp is in range, from the
neighbouring lanes by warp shuffles. Kept apart so the kernel skeleton and its plane sums read on
their own; the emitted text is what forge/handwritten.py emitted before the split, byte for byte."""
from __future__ import annotations

VECTOR_TYPE = {("f32", 16): "float4", ("f64", 16): "double2", ("f16", 16): "uint4", ("f32", 8): "float2", ("f16", 8): "uint2",
               ("f64", 8): "double"}  # one double a lane (session 34: tuned Halide's shape for star2d_1 f64)


# (the PTX vector of a load, its register constraint, the fields) per vector type, for `L2::256B`
PTX_VECTOR = {"float4": ("v4.f32", "f", "xyzw"), "float2": ("v2.f32", "f", "xy"), "double2": ("v2.f64", "d", "xy"),
              "uint4": ("v4.u32", "r", "xyzw"), "uint2": ("v2.u32", "r", "xy")}


def _hinted_load(vtype: str) -> list[str]:
    """`load_hinted`: the read-only vector load with the L2::256B prefetch hint on the device (the
    CPU emulation, which has no __CUDA_ARCH__, reads plainly)."""
    shape, constraint, fields = PTX_VECTOR[vtype]
    operands = ", ".join(f"%{i}" for i in range(len(fields)))
    outputs = ", ".join(f'"={constraint}"(v.{f})' for f in fields)
    return [
        f"__device__ __forceinline__ {vtype} load_hinted(const {vtype}* p)",
        "{",
        "#if defined(__CUDA_ARCH__)",
        f"    {vtype} v;",
        f'    asm volatile("ld.global.nc.L2::256B.{shape} {{{operands}}}, [%{len(fields)}];" : {outputs} : "l"(p));',
        "    return v;",
        "#else",
        "    return *p;",
        "#endif",
        "}",
    ]


def vector_lines(precision: str, vw: int, vtype: str) -> tuple[list[str], list[str], list[str]]:
    """The bodies of `load_vector` (its first line the load into `v`, the rest the conversion to `out`) and
    `store_vector`, and the scalar LOAD / STORE macros."""
    if precision == "f16":
        load = [
            f"    const {vtype} v = *reinterpret_cast<const {vtype}*>(p);",
            "    const __half2* h = reinterpret_cast<const __half2*>(&v);",
            "#pragma unroll",
            f"    for (int i = 0; i < {vw // 2}; ++i) {{ const float2 f = __half22float2(h[i]); out[2 * i] = f.x; out[2 * i + 1] = f.y; }}",
        ]
        store = [
            f"    {vtype} v;",
            "    __half2* h = reinterpret_cast<__half2*>(&v);",
            "#pragma unroll",
            f"    for (int i = 0; i < {vw // 2}; ++i) h[i] = __floats2half2_rn(in[2 * i], in[2 * i + 1]);",
            f"    *reinterpret_cast<{vtype}*>(p) = v;",
        ]
        scalar = ["#define LOAD(p, k) __half2float((p)[k])", "#define STORE(v) __float2half(v)"]
    elif vw == 1:
        load = ["    out[0] = (acc_t)*p;"]
        store = ["    *p = (elem_t)in[0];"]
        scalar = ["#define LOAD(p, k) ((acc_t)(p)[k])", "#define STORE(v) ((elem_t)(v))"]
    else:
        fields = "xyzw"[:vw]
        load = [f"    const {vtype} v = *reinterpret_cast<const {vtype}*>(p);",
                "    " + " ".join(f"out[{i}] = v.{f};" for i, f in enumerate(fields))]
        store = [f"    {vtype} v;", "    " + " ".join(f"v.{f} = in[{i}];" for i, f in enumerate(fields)),
                 f"    *reinterpret_cast<{vtype}*>(p) = v;"]
        scalar = ["#define LOAD(p, k) ((acc_t)(p)[k])", "#define STORE(v) ((elem_t)(v))"]
    return load, store, scalar


def vector_helpers(precision: str, vw: int, vector_bytes: int, l2_prefetch: bool = False,
                   streaming: bool = False, ldg: bool = False) -> list[str]:
    """`streaming`: the vector store as `__stcs` (PTX `st.global.cs`, evict first), so the output
    lines leave the L2 first and the inputs that neighbouring blocks and chunks read again stay (the
    CPU emulation, which has no __CUDA_ARCH__, stores plainly). `ldg`: every load through `__ldg`, which the
    kernels of `render(ahead=)` need: beside the prefetch's inline PTX nvcc no longer proves the inputs read-only and
    emits plain `LDG.E` where the others have `LDG.E.CONSTANT` (benchmarks/sass_count.py, session 46)."""
    vtype = VECTOR_TYPE[precision, vector_bytes]
    load, store, scalar = vector_lines(precision, vw, vtype)
    if vw == 1 and (l2_prefetch or streaming):
        raise ValueError("one element a lane has no vector load or store to hint")
    if l2_prefetch:
        load[0] = f"    const {vtype} v = load_hinted(reinterpret_cast<const {vtype}*>(p));"
    if ldg:
        if l2_prefetch:
            raise ValueError("the L2::256B load is its own inline PTX: not through __ldg")
        load[0] = (load[0].replace(f"*reinterpret_cast<const {vtype}*>(p)", f"__ldg(reinterpret_cast<const {vtype}*>(p))")
                   .replace("(acc_t)*p", "(acc_t)__ldg(p)"))
        scalar[0] = scalar[0].replace("(p)[k]", "__ldg((p) + (k))")
    if streaming:
        store[-1] = f"    STORE_VECTOR(reinterpret_cast<{vtype}*>(p), v);"
    return [
        *scalar,
        *(_hinted_load(vtype) if l2_prefetch else []),
        *(["#if defined(__CUDA_ARCH__)", "#define STORE_VECTOR(p, v) __stcs(p, v)", "#else",
           "#define STORE_VECTOR(p, v) (*(p) = (v))", "#endif"] if streaming else []),
        "/* VW lanes from a 16-byte aligned address, converted to acc_t, and back. */",
        "__device__ __forceinline__ void load_vector(const elem_t* p, acc_t* out)",
        "{", *load, "}",
        "__device__ __forceinline__ void store_vector(elem_t* p, const acc_t* in)",
        "{", *store, "}",
    ]


def prefetch_helper() -> list[str]:
    """`prefetch_l2`: a hint with no register to wait on (the CPU emulation of tests/forge, which has no __CUDA_ARCH__,
    defines EMULATED_PREFETCH to check the address; nvcc's host pass sees an empty body)."""
    return [
        "__device__ __forceinline__ void prefetch_l2(const void* p)",
        "{",
        "#if defined(__CUDA_ARCH__)",
        '    asm volatile("prefetch.global.L2 [%0];" :: "l"(p));',
        "#elif defined(EMULATED_PREFETCH)",
        "    EMULATED_PREFETCH(p);",
        "#else",
        "    (void)p;",
        "#endif",
        "}",
    ]


def prefetch_ahead(case, ahead: int, alternate: bool) -> list[str]:
    """The first lines of a march step for `render(ahead=)`: the thread's own row (and its `a` row for varcoef)
    `ahead` planes on, in the direction of the march, where that plane is still the chunk's (`base` is this
    plane's row; the loop counts n when odd chunks march down, k otherwise)."""
    if not ahead:
        return []
    within, step = ("n + D < ke - kb + 2 * R", "(long)dir * D * sk") if alternate else ("k + D < ke + R", "D * sk")
    arrays = ["u", "a"] if case.stencil.variable_coefficient else ["u"]
    return [f"        constexpr int D = {ahead};  /* planes (2D: rows) ahead */",
            f"        if ({within}) {{ " + " ".join(f"prefetch_l2({x} + base + {step});" for x in arrays) + " }"]


def row_load(row: str, offset: str, lo: int, hi: int, pad: int, pad_name: str, v: int, vw: int, indent: str,
              shuffle: bool = False, own_loaded: bool = False) -> list[str]:
    """Lanes lo .. V-1+hi (relative to x0) of one row into `row[pad + lane]` (`pad_name` spells pad
    in index expressions): whole 16-byte vectors on the vector path (the halo from the
    neighbouring aligned vectors), per-lane scalars otherwise. The one-vector halo keeps the
    spelling of the first H200 campaign's sources, so their hashes name the same kernels. With
    `own_loaded` the vector path has the row's own lanes already (forge/handwritten_pipelined.py)
    and takes its halo alone."""
    out = [f"{indent}{{", f"{indent}    const long p = {offset};", f"{indent}    if (vec) {{"]
    starts = list(range(-(-(-lo) // vw) * -vw, v + hi, vw))
    own = [start for start in starts if 0 <= start < v]
    out += [f"{indent}        load_vector(u + p + {start}, &{row}[{pad_name} + {start}]);" for start in own if not own_loaded]
    if shuffle and (lo or hi):
        if -lo > v or hi > v:
            raise ValueError(f"an x halo of {max(-lo, hi)} exceeds the {v} lanes a neighbouring thread holds")
        out += [f"{indent}        if (whole_warp) {{",
                *[f"{indent}            {row}[{pad + x}] = __shfl_up_sync(0xffffffffu, {row}[{pad + v + x}], 1);"
                  for x in range(lo, 0)],
                *[f"{indent}            {row}[{pad + x}] = __shfl_down_sync(0xffffffffu, {row}[{pad + x - v}], 1);"
                  for x in range(v, v + hi)],
                *([f"{indent}            if (lane == 0) {{ " + " ".join(f"{row}[{pad + x}] = LOAD(u, p + ({x}));"
                                                             for x in range(lo, 0)) + " }"] if lo else []),
                *([f"{indent}            if (lane == 31) {{ " + " ".join(f"{row}[{pad + x}] = LOAD(u, p + {x});"
                                                              for x in range(v, v + hi)) + " }"] if hi else []),
                f"{indent}        }} else {{"]
        halo_indent = indent + "    "
    else:
        halo_indent = indent
    for start in sorted(s for s in starts if s not in own):  # left, then right
        address = "u + p - VW" if start == -vw else "u + p + V" if start == v else f"u + p + ({start})"
        element = (lambda x: f"VW + ({x})") if start == -vw else (lambda x: f"{x - start}")
        kept = [x for x in range(start, start + vw) if lo <= x <= v - 1 + hi]
        out += [f"{halo_indent}        {{ acc_t t[VW]; load_vector({address}, t);",
                *[f"{halo_indent}          {row}[{pad + x}] = t[{element(x)}];" for x in kept], f"{halo_indent}        }}"]
    if halo_indent != indent:
        out.append(f"{indent}        }}")
    out += [f"{indent}    }} else {{", "#pragma unroll",
            f"{indent}        for (int i = {lo}; i < V + {hi}; ++i) {row}[{pad_name} + i] = LOAD(u, p + i);",
            f"{indent}    }}", f"{indent}}}"]
    return out
