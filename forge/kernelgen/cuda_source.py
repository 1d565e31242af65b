"""The CUDA writer of forge.kernelgen: codegen's composed-weights loops for temporal cases, or the
general kernel (x lanes, z-march, vector or shared-memory reads; the CUDA parameters of
forge/kernelgen/plan.py)."""
from __future__ import annotations

from typing import Any, Callable

from measurement.harness import codegen
from measurement.harness.cases import Case
from measurement.harness.codegen import acc_type, cuda_type, octahedron

from .plan import plan_comment
from .cuda_vectors import row_windows, vector_rows
from .terms import grouped, offset_text, offsets3


_ZERO = {"f16": "__float2half(0.0f)", "f32": "0.0f", "f64": "0.0"}


def _cuda_prelude(case: Case, p: dict[str, Any]) -> list[str]:
    f16 = case.precision == "f16"
    raw = "__ldg(&(p)[k])" if p["ldg"] else "(p)[k]"
    return [
        plan_comment(case, "cuda", p),
        "#include <cuda_fp16.h>" if f16 else None,
        "",
        f"typedef {cuda_type(case.precision)} elem_t;",
        f"typedef {acc_type(case.precision)} acc_t;",
        f"#define LDE(p, k) ({raw})",
        "#define TOACC(v) __half2float(v)" if f16 else "#define TOACC(v) ((acc_t)(v))",
        "#define LOAD(p, k) TOACC(LDE(p, k))",
        "#define STORE(v) __float2half(v)" if f16 else "#define STORE(v) ((elem_t)(v))",
        "",
    ]


_SIGNATURE = [
    'extern "C" __global__ void stencil(const elem_t* __restrict__ u, const elem_t* __restrict__ a,',
    "                                   elem_t* __restrict__ y, const double* __restrict__ coef,",
    "                                   int nz, int ny, int nx)",
]


def cuda_source(case: Case, p: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    s = case.stencil
    if s.time_steps > 1 and p["temporal"] == "composed":
        return _cuda_composed_loops(case, p)
    return _CudaGeneral(case, p).source()


def _cuda_composed_loops(case: Case, p: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """codegen's composed-weights kernel (run-time loops over the octahedron), with the plan's
    block and loads."""
    s = case.stencil
    bx, by, bz = p["block"]
    out = [
        *_cuda_prelude(case, p),
        *codegen.cuda_composed_tables(case),
        *_SIGNATURE,
        "{",
        *codegen.cuda_composed_weights(),
        "    const int x = blockIdx.x * blockDim.x + threadIdx.x;",
        "    const int j = blockIdx.y * blockDim.y + threadIdx.y;",
        "    const int z = blockIdx.z * blockDim.z + threadIdx.z;",
        f"    const int h = {s.halo};",
        "    if (x < h || x >= nx - h || j < h || j >= ny - h || z < h || z >= nz - h) return;",
        "    const int sy = nx;",
        "    const int sz = nx * ny;",
        "    const int i = (z * ny + j) * nx + x;",
        *codegen.cuda_composed_sum(),
        "    y[i] = STORE(acc);",
        "}",
    ]
    source = "\n".join(line for line in out if line is not None) + "\n"
    return source, {"block": [bx, by, bz], "tile": [bx, by, bz], "shared_bytes": 0}


class _CudaGeneral:
    """The general CUDA kernel: V x-lanes per thread, one plane or an L-plane z-march per thread,
    neighbours from global memory (scalar or vector loads) or a shared-memory tile."""

    def __init__(self, case: Case, p: dict[str, Any]):
        self.case, self.p = case, p
        s = case.stencil
        self.prec = case.precision
        self.dims = s.dims
        self.V = int(p["vector_x"])
        self.L = int(p["z_march"]) if s.dims == 3 else 0
        self.smem = bool(p["smem_tile"])
        self.bx, self.by, self.bz = (int(v) for v in p["block"])
        self.composed = s.time_steps > 1
        if self.composed:
            t = s.time_steps
            self.R = t
            side = t + 1
            self.terms = []
            for o in octahedron(t):
                a = tuple(abs(v) for v in o)
                key = tuple(sorted(a))
                index = (a[0] * side + a[1]) * side + a[2]
                self.terms.append((o, key, f"w[{index}]"))
            rep: dict[Any, str] = {}
            for _, key, expr in self.terms:
                rep.setdefault(key, expr)
            self.coef_of_class = rep
        else:
            self.R = s.radius
            self.terms = [(o, k, f"c{k}") for o, k in zip(offsets3(case), s.class_index)]
            self.coef_of_class = {k: f"c{k}" for k in range(len(s.classes))}
        self.H = s.halo
        self.SX = self.bx * self.V + 2 * self.R
        self.SY = self.by + 2 * self.R
        if self.L:
            self.SZ = self.bz  # one plane per z-layer of the block at a time
        else:
            self.SZ = self.bz + 2 * self.R if self.dims == 3 else 1
        self.itemsize = case.dtype.itemsize

    # -- helpers

    def lanes(self) -> range:
        return range(self.V)

    def shared_bytes(self) -> int:
        return self.SX * self.SY * self.SZ * self.itemsize if self.smem else 0

    def launch(self) -> dict[str, Any]:
        tile_z = self.bz * self.L if self.L else self.bz
        return {"block": [self.bx, self.by, self.bz], "tile": [self.bx * self.V, self.by, tile_z], "shared_bytes": self.shared_bytes()}

    def sum_lines(self, terms, val, target: str, indent: str, declare: bool) -> list[str]:
        """target_l (+)= sum of coef * val(offset, l) over `terms` [(offset, class_key, coef)] for every lane."""
        out = []
        for l in self.lanes():
            name = f"{target}{l}"
            if not terms:
                if declare:
                    out.append(f"{indent}acc_t {name} = 0;")
                continue
            if self.p["unroll_classes"]:
                groups = grouped([((o, c), key) for o, key, c in terms])
                parts = []
                for key, items in groups:
                    loads = " + ".join(val(o, l) for o, _ in items)
                    coef = self.coef_of_class[key]
                    parts.append(f"{coef} * ({loads})")
                first, rest = parts[0], parts[1:]
                out.append(f"{indent}{'acc_t ' + name + ' = ' if declare else name + ' += '}{first};")
                out += [f"{indent}{name} += {part};" for part in rest]
            else:
                if declare:
                    out.append(f"{indent}acc_t {name} = 0;")
                out += [f"{indent}{name} += {c} * {val(o, l)};" for o, _, c in terms]
        return out

    # -- value sources

    def scalar_val(self, base: str, sz: str = "sz"):
        """Global scalar loads around lane index `{base}{l}`."""
        return lambda o, l: f"LOAD(u, {base}{l}{offset_text(o, sz, 'sy')})"

    def smem_val(self, layer: str):
        """Shared tile read; `layer` = the tile plane of offset dz = 0 for this thread."""
        sx, sy = self.SX, self.SY
        R = self.R

        def val(o, l):
            dz, dy, dx = o
            plane = f"({layer}{' + ' + str(dz) if dz > 0 else (' - ' + str(-dz) if dz < 0 else '')})"
            return f"TOACC(tile[({plane} * {sy} + (ty + {R + dy})) * {sx} + (tx * {self.V} + {l + R + dx})])"

        return val

    # -- the kernel

    def header_lines(self) -> list[str]:
        out = [*_cuda_prelude(self.case, self.p)]
        if self.composed:
            out += codegen.cuda_composed_tables(self.case)
        out += [
            f"#define BX {self.bx}",
            f"#define BY {self.by}",
            f"#define BZ {self.bz}",
            f"#define V {self.V}",
            f"#define R {self.R}",
            f"#define H {self.H}",
            "",
        ]
        return out

    def prologue(self) -> list[str]:
        out = []
        if self.composed:
            out += codegen.cuda_composed_weights()
        else:
            out += [f"    const acc_t c{k} = (acc_t)coef[{k}];" for k in range(len(self.case.stencil.classes))]
        if self.smem:
            out += [
                "    extern __shared__ __align__(16) unsigned char smem_raw[];",
                "    elem_t* tile = reinterpret_cast<elem_t*>(smem_raw);",
            ]
        out += [
            "    const int tx = threadIdx.x, ty = threadIdx.y, tz = threadIdx.z;",
            "    (void)tx; (void)ty; (void)tz; (void)a;",
            "    const int x0 = (blockIdx.x * BX + tx) * V;  /* first x of this thread's lanes */",
            "    const int yy = blockIdx.y * BY + ty;",
            "    const int sy = nx;",
            "    const int sz = nx * ny;",
            "    (void)sz; (void)sy;",
        ]
        # lane x positions: real (for the store test) and clamped into the region (for loads)
        for l in self.lanes():
            out.append(f"    const int xr{l} = x0 + {l};")
            out.append(f"    const int xc{l} = min(max(xr{l}, H), nx - H - 1);")
            out.append(f"    const bool in{l} = xr{l} >= H && xr{l} < nx - H;")
            out.append(f"    (void)xc{l}; (void)in{l};")
        return out

    def store_lines(self, zexpr: str, accs: str, indent: str) -> list[str]:
        out = []
        for l in self.lanes():
            index = f"({zexpr} * ny + yy) * nx + xr{l}"
            value = f"{accs}{l} * LOAD(a, {index})" if self.case.stencil.variable_coefficient else f"{accs}{l}"
            out.append(f"{indent}if (in{l}) y[{index}] = STORE({value});")
        return out

    def fill_lines(self, plane_of_layer: Callable[[str], str], indent: str) -> list[str]:
        """Cooperative fill of the shared tile: SZ layers of SY x SX, zero outside the grid."""
        sx, sy, sz = self.SX, self.SY, self.SZ
        return [
            f"{indent}for (int e = (tz * BY + ty) * BX + tx; e < {sx * sy * sz}; e += BX * BY * BZ) {{",
            f"{indent}    const int lx = e % {sx}, ly = (e / {sx}) % {sy}, lz = e / {sx * sy};",
            f"{indent}    const int gx = blockIdx.x * (BX * V) - R + lx, gy = blockIdx.y * BY - R + ly, gz = {plane_of_layer('lz')};",
            f"{indent}    elem_t v = {_ZERO[self.prec]};",
            f"{indent}    if (gx >= 0 && gx < nx && gy >= 0 && gy < ny && gz >= 0 && gz < nz) v = LDE(u, (gz * ny + gy) * nx + gx);",
            f"{indent}    tile[e] = v;",
            f"{indent}}}",
        ]

    def source(self) -> tuple[str, dict[str, Any]]:
        body = self.body_march() if self.L else self.body_single()
        out = [*self.header_lines(), *_SIGNATURE, "{", *self.prologue(), *body, "}"]
        return "\n".join(line for line in out if line is not None) + "\n", self.launch()

    def any_lane_line(self) -> str:
        return "(x0 + V - 1 >= H && x0 < nx - H)"

    def body_single(self) -> list[str]:
        """One output plane per thread (2D: z = 0)."""
        z = "0" if self.dims == 2 else "blockIdx.z * BZ + tz"
        zok = "(blockIdx.z == 0 && tz == 0)" if self.dims == 2 else "(zz >= H && zz < nz - H)"
        out = [
            f"    const int zz = {z};",
            f"    const bool active = yy >= H && yy < ny - H && {zok} && {self.any_lane_line()};",
        ]
        terms = self.terms
        if self.smem:
            gz0 = "0" if self.dims == 2 else "blockIdx.z * BZ - R"
            out += self.fill_lines(lambda lz: f"{gz0} + {lz}" if self.dims == 3 else "0", "    ")
            out += ["    __syncthreads();", "    if (!active) return;"]
            layer = "(tz + R)" if self.dims == 3 else "0"
            out += self.sum_lines(terms, self.smem_val(layer), "acc", "    ", declare=True)
            out += self.store_lines("zz", "acc", "    ")
            return out
        out.append("    if (!active) return;")
        out += [f"    const int b{l} = (zz * ny + yy) * nx + xc{l};" for l in self.lanes()]
        if self.V == 1:
            out += self.sum_lines(terms, self.scalar_val("b"), "acc", "    ", declare=True)
            out += self.store_lines("zz", "acc", "    ")
            return out
        out += [f"    acc_t {', '.join(f'acc{l} = 0' for l in self.lanes())};", *self.vector_guard()]
        rows = row_windows([o for o, _, _ in terms])
        load_lines, vval = vector_rows(self.prec, self.V, self.p["ldg"], rows,
                                       lambda dz, dy: f"((zz + {dz}) * ny + (yy + {dy})) * nx", "        ")
        out += load_lines
        out += self.sum_lines(terms, vval, "acc", "        ", declare=False)
        out += ["    } else {"]
        out += self.sum_lines(terms, self.scalar_val("b"), "acc", "        ", declare=False)
        out += ["    }"]
        out += self.store_lines("zz", "acc", "    ")
        return out

    def vector_guard(self) -> list[str]:
        align = self.V * self.itemsize
        return [f"    if (nx % V == 0 && ((unsigned long long)u & {align - 1}ull) == 0) {{  /* aligned rows: vector loads */"]

    def body_march(self) -> list[str]:
        """Each thread walks L output planes zf..zf+L-1: input plane p = zf - R + s (s = 0..L+2R-1)
        adds its contribution for |dz| = d (partial p_d) to the queue entry q_m of output
        p - R + m, d = |R - m|; q_0 is then complete (output p - R) and the queue shifts."""
        R, L = self.R, self.L
        # The partial of distance d sums the offsets with dz = +d; those with dz = -d have the same
        # (dy, dx) set and coefficients (classes depend on |dz|), so one partial serves both.
        by_d: dict[int, list] = {d: [] for d in range(R + 1)}
        for o, key, c in self.terms:
            if o[0] >= 0:
                by_d[o[0]].append(((0, o[1], o[2]), key, c))  # plane-relative offsets
        out = [
            f"    const int zf = blockIdx.z * (BZ * {L}) + tz * {L};  /* first output plane of this thread */",
            f"    const bool active = yy >= H && yy < ny - H && {self.any_lane_line()};",
        ]
        if not self.smem:
            out.append("    if (!active) return;")
        out += [f"    acc_t {', '.join(f'q{m}_{l} = 0' for l in self.lanes())};" for m in range(2 * R + 1)]
        out += [
            f"    for (int s = 0; s < {L + 2 * R}; ++s) {{",
            "        const int p = zf - R + s;",
        ]
        I = "        "  # noqa: E741
        if self.smem:
            out += [f"{I}__syncthreads();"]
            out += self.fill_lines(lambda lz: f"blockIdx.z * (BZ * {L}) + {lz} * {L} - R + s", I)
            out += [f"{I}__syncthreads();"]
            val = self.smem_val("tz")
            for d in range(R + 1):
                out += self.sum_lines(by_d[d], val, f"p{d}_", I, declare=True)
        else:
            out += [f"{I}acc_t {', '.join(f'p{d}_{l} = 0' for d in range(R + 1) for l in self.lanes())};"]
            out += [f"{I}if (p >= 0 && p < nz) {{"]
            J = I + "    "
            out += [f"{J}const int b{l} = (p * ny + yy) * nx + xc{l};" for l in self.lanes()]
            if self.V == 1:
                for d in range(R + 1):
                    out += self.sum_lines(by_d[d], self.scalar_val("b"), f"p{d}_", J, declare=False)
            else:
                out += ["    " + line for line in self.vector_guard()]
                K = J + "    "
                rows = row_windows([(0, o[1], o[2]) for o, _, _ in self.terms])
                load_lines, vval = vector_rows(self.prec, self.V, self.p["ldg"], rows,
                                               lambda dz, dy: f"(p * ny + (yy + {dy})) * nx", K)
                out += load_lines
                for d in range(R + 1):
                    out += self.sum_lines(by_d[d], vval, f"p{d}_", K, declare=False)
                out += [f"{J}}} else {{"]
                for d in range(R + 1):
                    out += self.sum_lines(by_d[d], self.scalar_val("b"), f"p{d}_", K, declare=False)
                out += [f"{J}}}"]
            out += [f"{I}}}"]
        for m in range(2 * R + 1):
            d = abs(R - m)
            out += [f"{I}q{m}_{l} += p{d}_{l};" for l in self.lanes()]
        out += [
            f"{I}const int zo = p - R;  /* output completed by this plane */",
            f"{I}if (active && s >= 2 * R && zo >= H && zo < nz - H) {{",
            *self.store_lines("zo", "q0_", I + "    "),
            f"{I}}}",
        ]
        for m in range(2 * R):
            out += [f"{I}q{m}_{l} = q{m + 1}_{l};" for l in self.lanes()]
        out += [f"{I}q{2 * R}_{l} = 0;" for l in self.lanes()]
        out.append("    }")
        return out
