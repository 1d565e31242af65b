"""The Halide AOT index (measurement.backends.halide_aot): which compiled pipeline a case and
schedule get, and the reason recorded on the case where there is none. No GPU: the index is the
JSON that scripts/halide_aot.py writes, here with two cases, or a real build of one small case."""
from __future__ import annotations

import hashlib
import json
import lzma

import pytest

# The device machine carries no Halide wheel, only the AOT-compiled pipelines (docs/gpu.md).
pytest.importorskip("halide")

from measurement.backends import get_backend, halide_algorithm  # noqa: E402
from measurement.backends.base import BaselineUnavailable, scheduled  # noqa: E402
from measurement.backends.halide_aot import AOT_ENV, INDEX_NAME, build_case, entry_for, read_index, unpack, write_index  # noqa: E402
from measurement.backends.halide_cuda import HalideCudaBaseline, compiled_cases, unavailable  # noqa: E402
from measurement.harness.cases import parse_case  # noqa: E402
from measurement.harness.session_info import baseline_session, schedule_session  # noqa: E402

STAR = "star_1/512x512x512/f32"
F16 = "star_1/512x512x512/f16"


@pytest.fixture
def folder(tmp_path):
    entries = [
        {"case": STAR, "schedule": "gpu_32x8x1", "default": True, "schedule_text": "out.gpu_tile(...)",
         "function": "fs_gpu_32x8x1", "arguments": ["u", "coef"], "file": "ab.so", "aot_sha256": "ab"},
        {"case": STAR, "schedule": "gpu_64x4x1", "default": False, "schedule_text": "out.gpu_tile(...)",
         "function": "fs_gpu_64x4x1", "arguments": ["u", "coef"], "file": "ab.so", "aot_sha256": "ab"},
        {"case": F16, "schedule": "gpu_32x8x1", "default": True, "schedule_text": "out.gpu_tile(...)",
         "error": "CompileError: Float(16) is not supported"},
    ]
    index = {"halide_version": "21.0.0", "target": "x86-64-linux-cuda-cuda_capability_86", "matrix": "gpu", "entries": entries}
    (tmp_path / INDEX_NAME).write_text(json.dumps(index))
    return tmp_path


def test_no_schedule_means_the_family_default_and_a_named_one_is_found(folder):
    index = read_index(folder)
    assert entry_for(index, STAR, None)["schedule"] == "gpu_32x8x1"
    assert entry_for(index, STAR, "gpu_64x4x1")["function"] == "fs_gpu_64x4x1"
    assert compiled_cases(folder) == {STAR, F16}


def test_a_schedule_that_did_not_compile_gives_its_recorded_reason(folder):
    with pytest.raises(ValueError, match=r"Halide 21.0.0 could not compile star_1/512x512x512/f16 with schedule "
                                         r"'gpu_32x8x1' for x86-64-linux-cuda-cuda_capability_86: CompileError: Float\(16\)"):
        HalideCudaBaseline(parse_case(F16), None, folder)


def test_an_unknown_schedule_or_case_names_what_was_compiled(folder):
    index = read_index(folder)
    with pytest.raises(ValueError, match=r"no Halide schedule 'gpu_1x1x1' for star_1/512x512x512/f32; compiled: "
                                         r"\['gpu_32x8x1', 'gpu_64x4x1'\]"):
        entry_for(index, STAR, "gpu_1x1x1")
    with pytest.raises(ValueError, match="no Halide AOT pipeline for box_1/512x512x512/f32: run scripts/halide_aot.py"):
        entry_for(index, "box_1/512x512x512/f32", None)


def test_without_an_aot_folder_no_case_offers_halide(tmp_path):
    assert read_index(tmp_path) is None and compiled_cases(tmp_path) == set()
    with pytest.raises(ValueError, match="no Halide AOT folder at"):
        HalideCudaBaseline(parse_case(STAR), None, tmp_path)


def test_packed_objects_unpack_once_and_only_to_the_object_they_name(tmp_path):
    data = b"\x7fELF a shared object"
    name = hashlib.sha256(data).hexdigest()
    (tmp_path / f"{name}.so.xz").write_bytes(lzma.compress(data))
    assert unpack(tmp_path) == [tmp_path / f"{name}.so"] and (tmp_path / f"{name}.so").read_bytes() == data
    assert unpack(tmp_path) == []
    (tmp_path / f"{'0' * 64}.so.xz").write_bytes(lzma.compress(data))
    with pytest.raises(ValueError, match=f"{'0' * 64}.so.xz does not unpack to the object it names"):
        unpack(tmp_path)
    assert not (tmp_path / f"{'0' * 64}.so").exists()


def test_the_cuda_backend_offers_the_folders_schedules_of_a_case_to_tune_with_failed_ones_failing_loudly(tmp_path,
                                                                                                         monkeypatch):
    """A real build for one small case (halide compiles for the CUDA target here, no GPU needed),
    plus one schedule recorded as not compiled: the tuning run's candidates on the GPU."""
    case = parse_case("star_1/16x16x16/f32")
    entries = build_case(case, tmp_path)
    entries.append({"case": case.id, "schedule": "gpu_broken", "default": False, "schedule_text": "out.gpu_tile(...)",
                    "error": "CompileError: too many threads"})
    write_index(tmp_path, entries, matrix="test")
    monkeypatch.setenv(AOT_ENV, str(tmp_path))
    backend = get_backend("cuda")
    version, family = backend.baseline_schedules(case, "halide")
    built = halide_algorithm.schedules(case, "cuda")
    assert version == halide_algorithm.VERSION and list(family) == [*built, "gpu_broken"]
    assert next(iter(family)) == halide_algorithm.default_schedule(case, "cuda")
    assert {name: family[name] for name in built} == {e["schedule"]: e["schedule_text"] for e in entries[:-1]}
    # what the tuning run's check child records for it, without touching a GPU (unpacked, as there)
    unpack(tmp_path)
    with pytest.raises(ValueError, match="could not compile star_1/16x16x16/f32 with schedule 'gpu_broken'.*too many"):
        backend.prepare(case, scheduled("halide", "gpu_broken"))
    with pytest.raises(ValueError, match="no Halide AOT pipeline for star_1/32x32x32/f32: run scripts/halide_aot.py"):
        backend.baseline_schedules(parse_case("star_1/32x32x32/f32"), "halide")
    with pytest.raises(ValueError, match="the CUDA backend has no schedule family for 'cupyx.ndimage'"):
        backend.baseline_schedules(case, "cupyx.ndimage")


def test_what_keeps_a_cases_halide_from_running_here_is_named(folder, tmp_path, monkeypatch):
    """Halide cannot run for a case without a folder, without the case's pipelines, or with an
    object not unpacked (session 28's call 6); a schedule that did not compile is the library
    failing, which preparing it reports, not Halide missing."""
    assert unavailable(STAR, tmp_path / "none").startswith(f"no Halide AOT folder at {tmp_path / 'none'}")
    assert unavailable("box_1/512x512x512/f32", folder).startswith("no Halide AOT pipeline for box_1/512x512x512/f32")
    assert unavailable(STAR, folder) == f"{folder / 'ab.so'} is not unpacked: run python3 scripts/halide_aot.py --unpack"
    assert unavailable(F16, folder) is None
    with pytest.raises(ValueError, match="ab.so is not unpacked"):
        HalideCudaBaseline(parse_case(STAR), "gpu_64x4x1", folder)
    (folder / "ab.so").write_bytes(b"")
    assert unavailable(STAR, folder) is None
    monkeypatch.setenv(AOT_ENV, str(folder))
    assert get_backend("cuda").library_unavailable(parse_case("box_1/512x512x512/f32"), "halide").startswith("no Halide")


def test_the_gates_children_refuse_to_measure_or_tune_without_a_library_the_bound_needs(folder, monkeypatch):
    """No GPU: the refusal comes before anything touches one. Offered (the case is in the index)
    but not unpacked; tuned before (the ledger expects it) but not built for the case; and the
    tuning child, which would otherwise record every schedule as failed."""
    monkeypatch.setenv(AOT_ENV, str(folder))
    monkeypatch.setenv("FORGESTENCIL_CUDA_BASELINES", "halide")
    with pytest.raises(BaselineUnavailable, match=r"no verdict on star_1/512x512x512/f32 \(cuda\) without its library "
                                                  r"baselines \(halide: .*ab.so is not unpacked"):
        baseline_session("cuda", STAR, [])
    box = "box_1/512x512x512/f32"
    assert "halide" not in get_backend("cuda").baseline_names(parse_case(box))
    with pytest.raises(BaselineUnavailable, match=r"\(halide: no Halide AOT pipeline for box_1/512x512x512/f32"):
        baseline_session("cuda", box, [], expected=["halide"])
    with pytest.raises(BaselineUnavailable, match="halide cannot be tuned on star_1/512x512x512/f32 here: .*not unpacked"):
        schedule_session("cuda", STAR, "halide", [])
