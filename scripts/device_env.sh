# Source this ON the GPU device machine, from the repository root (scripts/gpu_tests.sh and the
# baselines benchmark do): it puts this project's Python packages beside the image's own.
#
# The image's python3 is itself a virtual environment (/opt/torch/.venv) holding torch,
# cupy-cuda13x, numpy and scipy; a new venv made from it with --system-site-packages would see
# the base interpreter's packages, not those. So the wheels of device_wheels/ (made here by
# scripts/device_wheels.sh, carried by the device tool) are installed with
# `pip install --no-index --target` into a folder that goes first on PYTHONPATH: the image's
# cupy and torch stay in use, the project's pins (Django, pytest 8.4.2, pystencils 2.0, ...)
# win where both exist. Installing twice on a warm machine is skipped.
FORGESTENCIL_SITE=${FORGESTENCIL_SITE:-/tmp/forgestencil-site}
if [ ! -f "$FORGESTENCIL_SITE/.installed" ]; then
    if ! ls device_wheels/*.whl >/dev/null 2>&1; then
        echo "device_wheels/ is missing: run scripts/device_wheels.sh here and name device_wheels in carry" >&2
        return 1
    fi
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$FORGESTENCIL_SITE" device_wheels/*.whl || return 1
    touch "$FORGESTENCIL_SITE/.installed"
fi
export PYTHONPATH="$FORGESTENCIL_SITE${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
# The image has no bubblewrap: the copy scripts/device_wheels.sh made here (carried as
# device_carry/bwrap) confines candidate code there as it does here (docs/security.md).
if [ -z "${FORGESTENCIL_BWRAP:-}" ] && [ -x device_carry/bwrap/bwrap-run ] && ! command -v bwrap >/dev/null 2>&1; then
    export FORGESTENCIL_BWRAP="$PWD/device_carry/bwrap/bwrap-run"
fi
# Django's embedded SQLite ledger and signing key go to a scratch folder, never the checkout.
export FORGESTENCIL_VAR_DIR=${FORGESTENCIL_VAR_DIR:-$(mktemp -d /tmp/forgestencil-var-XXXXXX)}
# The image's pytest plugins stay out (pytest-django is loaded by name where pytest runs).
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
python3 - <<'PY' || true
import importlib
for name in ("django", "pytest", "numpy", "scipy", "sympy", "cupy", "torch", "pystencils"):
    try:
        module = importlib.import_module(name)
        print(f"{name} {getattr(module, '__version__', '?')}", end="; ")
    except Exception as error:
        print(f"{name} MISSING ({error})", end="; ")
print()
try:
    import cupy
    print("GPU:", cupy.cuda.runtime.getDeviceProperties(0)["name"], "| CUDA devices:", cupy.cuda.runtime.getDeviceCount())
except Exception as error:
    print("no usable GPU:", error)
PY
