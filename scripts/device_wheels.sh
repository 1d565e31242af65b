#!/usr/bin/env bash
# Download, here, the wheels that the GPU device machine lacks into device_wheels/ (git-ignored),
# for its Python 3.12 on manylinux x86_64. The device tool carries that folder (`carry`), and
# scripts/device_env.sh installs it there without any index (the device reaches no registry).
#
#   bash scripts/device_wheels.sh            # then: run(command="bash scripts/gpu_tests.sh", carry=["device_wheels", "device_carry/bwrap"])
#   (the Halide baseline also needs device_carry/halide: scripts/halide_aot.py, scripts/halide_device_check.sh)
#
# It also copies this machine's bubblewrap (Debian's, with the three libraries it links) into
# device_carry/bwrap/ (git-ignored): the device image has no bwrap, and without a sandbox the gate
# refuses to run candidate code; scripts/device_env.sh points FORGESTENCIL_BWRAP at it.
#
# What goes in: requirements.txt minus cupy-cuda12x (the device image has cupy-cuda13x, import
# name cupy), playwright (browser tests never run there), halide (69 MB: the device runs the pipelines
# that scripts/halide_aot.py compiles here, carried as device_carry/halide), devito (CPU only), plotly
# (10 MB; only a served page needs it) and psycopg (the device runs SQLite) plus pystencils 2.0's own needs (appdirs, fasteners, ...), with dependencies
# resolved by pip for the device's platform. What is then removed: every distribution that the
# device image already holds (DEVICE_HAS below, from the device docs' package list: numpy,
# scipy, sympy, torch's stack, ...), except those this project pins for its tests (pytest).
# The working tree plus carried paths must stay under 64 MiB: the script prints the total and
# fails above LIMIT_MB.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=device_wheels
LIMIT_MB=${LIMIT_MB:-60}
PY=${PYTHON:-.venv/bin/python}

# Distributions in the device image ('cuda' image, package list of 2026-11-17). Names normalised (PEP 503).
DEVICE_HAS="absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build
certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core
cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock
flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx
huggingface-hub humanize hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin
jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax
llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack
multidict multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro
nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft
nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py
nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript
opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec
patsy peft pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11
py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions pytest-benchmark pytest-cov pytest-mock
pytest-timeout pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu
safetensors scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers
setuptools shellingham simplejson six sortedcontainers statsmodels sympy tabulate tensorboard
tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz torch torchaudio
torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope triton typer
typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp"
# (pytest is in the image too, but this project's pinned pytest 8.4.2 travels so pytest-django 4.11.1 matches.)

requirements=$(mktemp)
trap 'rm -f "$requirements"' EXIT
grep -v -E '^\s*(#|$)' requirements.txt | grep -v -i -E '^(cupy-cuda12x|numpy|scipy|playwright|halide|devito|plotly|psycopg)\b' >"$requirements"
# pystencils' own needs beyond numpy/sympy (the device has those): listed so that a resolver
# failure names them plainly.
printf '%s\n' appdirs fasteners >>"$requirements"

mkdir -p "$OUT"
rm -f "$OUT"/*.whl
"$PY" -m pip download --quiet --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any \
    -r "$requirements" -d "$OUT" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)

# bubblewrap for the device (docs/security.md): the binary, its libraries, a wrapper that finds them.
BWRAP_OUT=device_carry/bwrap
if ! command -v bwrap >/dev/null 2>&1; then
    echo "bwrap not found here: install bubblewrap (apt-get install bubblewrap) so it can be carried" >&2
    exit 1
fi
rm -rf "$BWRAP_OUT" && mkdir -p "$BWRAP_OUT/lib"
cp "$(command -v bwrap)" "$BWRAP_OUT/bwrap"
ldd "$(command -v bwrap)" | awk '/=> \// && $1 !~ /^(libc\.so|ld-linux)/ {print $3}' | xargs -I{} cp -L {} "$BWRAP_OUT/lib/"
cat >"$BWRAP_OUT/bwrap-run" <<'SH'
#!/bin/sh
# Debian's bubblewrap and its libraries, carried to a machine without the package.
here=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/bwrap" "$@"
SH
chmod +x "$BWRAP_OUT/bwrap-run"

normalise() { echo "$1" | tr 'A-Z_.' 'a-z--'; }
removed=()
for wheel in "$OUT"/*.whl; do
    name=$(normalise "$(basename "$wheel" | cut -d- -f1)")
    for have in $DEVICE_HAS; do
        if [ "$name" = "$have" ]; then removed+=("$name"); rm -f "$wheel"; break; fi
    done
done
echo "skipped (already on the device): ${removed[*]:-none}"
# Django's translations (5.5 of its 8.3 MB) serve no purpose on the device, which shows no page:
# the wheel is rewritten without the .mo/.po files of other languages than English, and its RECORD
# without their lines, so the carried tree keeps room for an export and the Halide objects.
"$PY" - "$OUT"/django-*.whl <<'PY'
import sys, zipfile, os
path = sys.argv[1]
def dropped(name):
    return "/locale/" in name and name.endswith((".mo", ".po")) and "/locale/en/" not in name
slim = path + ".slim"
with zipfile.ZipFile(path) as source, zipfile.ZipFile(slim, "w", zipfile.ZIP_DEFLATED) as target:
    for info in source.infolist():
        if dropped(info.filename):
            continue
        data = source.read(info)
        if info.filename.endswith(".dist-info/RECORD"):
            lines = data.decode().splitlines(keepends=True)
            data = "".join(line for line in lines if not dropped(line.split(",")[0])).encode()
        target.writestr(info, data)
os.replace(slim, path)
print(f"django wheel without translations: {os.path.getsize(path) / 2**20:.1f} MiB")
PY
ls -1 "$OUT"
# device_carry/halide (scripts/halide_aot.py) travels in the same call when the Halide baseline is run
wheels_kb=$(du -sk "$OUT" "$BWRAP_OUT" $(ls -d device_carry/halide 2>/dev/null) | awk '{s+=$1} END {print s}')
tree_kb=$(git ls-files -z --cached --others --exclude-standard | xargs -0 du -ck 2>/dev/null | tail -1 | cut -f1)
total_mb=$(( (wheels_kb + tree_kb) / 1024 ))
echo "device_wheels, device_carry: $((wheels_kb / 1024)) MiB; working tree: $((tree_kb / 1024)) MiB; together ${total_mb} MiB (limit 64 MiB, this script's $LIMIT_MB)"
if [ "$total_mb" -gt "$LIMIT_MB" ]; then
    echo "too large to carry: drop wheels the device already has (DEVICE_HAS)" >&2
    exit 1
fi
