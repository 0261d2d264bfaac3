"""The install tree (cmake/install.cmake): `cmake --install` of this build
into a temporary prefix, then the installed nereid run with no path of the
build tree anywhere (no --backend-directory, no loader path, nothing in a
RUNPATH), and a backend built outside the tree against that prefix, once
with find_package(Nereid) and once with pkg-config, served by it.

The install component onnxruntime_gpu (ONNX Runtime's GPU build, left out of
a plain install) is installed over a tree of its own and serves an ONNX model.

Environment: NRD_BUILD_DIR (the build tree to install), CMAKE_COMMAND,
NEREID_EXAMPLES, NRD_ORT_GPU_DIR (ONNX Runtime's GPU build, when fetched)."""
import os
import shutil

import numpy as np
import pytest
import tritonclient.http as httpclient

from deploy_helpers import (BUILD_DIR, EXAMPLES, SOURCE, Server, clean_env, elf_files, infer, infer_simple,
                            local_ports, run)

CMAKE = os.environ.get("CMAKE_COMMAND", "cmake")
NEGATE_SRC = os.path.join(SOURCE, "tests", "integration", "deploy", "negate_backend")


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    assert BUILD_DIR, "NRD_BUILD_DIR is not set"
    p = tmp_path_factory.mktemp("install") / "nereid"
    run([CMAKE, "--install", BUILD_DIR, "--prefix", str(p)])
    return p


def test_layout(prefix):
    for rel in ["bin/nereid", "bin/nrd_perf", "lib/libtritonserver.so", "lib/libnrd_backend_utils.a",
                "include/triton/core/tritonserver.h", "include/triton/core/tritonbackend.h",
                "include/nereid/backend_utils.h", "lib/cmake/Nereid/NereidConfig.cmake",
                "lib/cmake/Nereid/NereidConfigVersion.cmake", "lib/pkgconfig/nereid.pc",
                "lib/pkgconfig/nereid-backend-utils.pc"]:
        assert (prefix / rel).exists(), rel
    for name in ["identity", "add_sub", "square", "repeat"]:
        assert (prefix / "backends" / name / f"libtriton_{name}.so").exists(), name
    # Test-only backends never ship.
    assert not (prefix / "backends" / "recorder").exists()
    assert not (prefix / "test_backends").exists()
    # ONNX Runtime's GPU build (299 MiB) only on request.
    for name in ["onnxruntime", "stateful"]:
        assert not (prefix / "backends" / name / "libonnxruntime_providers_cuda.so").exists(), name


def test_nothing_points_into_the_build_tree(prefix):
    # Debug information names the build tree (DW_AT_comp_dir); what the
    # loader reads may not.
    for path in elf_files(prefix):
        dyn = run(["readelf", "-d", path]).stdout
        for line in dyn.splitlines():
            if "RPATH" in line or "RUNPATH" in line:
                assert "$ORIGIN" in line and os.path.realpath(BUILD_DIR) not in line, (path, line)
    for pc in (prefix / "lib" / "pkgconfig").iterdir():
        assert os.path.realpath(BUILD_DIR) not in pc.read_text()
    assert os.path.realpath(BUILD_DIR) not in (prefix / "lib/cmake/Nereid/NereidConfig.cmake").read_text()


def test_version(prefix):
    out = run([str(prefix / "bin" / "nereid"), "--version"], env=clean_env()).stdout
    version = open(os.path.join(SOURCE, "CMakeLists.txt")).read().split("project(nereid VERSION ", 1)[1].split()[0]
    assert out == f"nereid {version}\n"


def test_installed_server_finds_its_backends_and_infers(prefix, tmp_path):
    # A copy of the examples away from the source tree, started from an
    # unrelated directory: only the prefix is left to find things in.
    models = tmp_path / "models"
    shutil.copytree(EXAMPLES, models)
    s = Server([str(prefix / "bin" / "nereid"), f"--model-repository={models}", *local_ports()],
               cwd=str(tmp_path))
    try:
        lines = s.wait_ready()
        assert any("models READY" in line for line in lines), s.text()
        infer_simple(s.ports()["http"])
        s.stop_clean()
    finally:
        s.close()


def negate_served(prefix, backend_lib, tmp_path):
    """Serves the negate model with backend_lib placed in a backends folder
    of its own (--backend-directory), next to the installed ones."""
    backends = tmp_path / "backends"
    (backends / "negate").mkdir(parents=True)
    shutil.copy(backend_lib, backends / "negate" / "libtriton_negate.so")
    models = tmp_path / "models"
    shutil.copytree(os.path.join(NEGATE_SRC, "models"), models)
    s = Server([str(prefix / "bin" / "nereid"), f"--model-repository={models}",
                f"--backend-directory={backends}", *local_ports()], cwd=str(tmp_path))
    try:
        s.wait_ready()
        out = infer(s.ports()["http"], "negate_int32",
                    [{"name": "INPUT0", "datatype": "INT32", "shape": [4], "data": [1, -2, 3, 0]}])
        assert out["OUTPUT0"] == [-1, 2, -3, 0]
        s.stop_clean()
    finally:
        s.close()


def test_out_of_tree_backend_with_find_package(prefix, tmp_path):
    build = tmp_path / "build"
    env = clean_env()
    env["CMAKE_PREFIX_PATH"] = str(prefix)
    run([CMAKE, "-S", NEGATE_SRC, "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
         "-DCMAKE_C_FLAGS=-Wall -Wextra -Werror"], env=env)
    run([CMAKE, "--build", str(build)], env=env)
    lib = build / "libtriton_negate.so"
    needed = run(["readelf", "-d", str(lib)]).stdout
    assert "[libtritonserver.so]" in needed
    exported = run(["nm", "-D", "--defined-only", str(lib)]).stdout
    assert "TRITONBACKEND_ModelInstanceExecute" in exported
    assert "negate_one" not in exported  # -fvisibility=hidden from nereid_add_backend
    negate_served(prefix, lib, tmp_path)


def test_out_of_tree_backend_with_pkg_config(prefix, tmp_path):
    env = clean_env()
    env["PKG_CONFIG_PATH"] = str(prefix / "lib" / "pkgconfig")
    flags = run(["pkg-config", "--cflags", "--libs", "nereid-backend-utils"], env=env).stdout.split()
    includes = [os.path.realpath(f[2:]) for f in flags if f.startswith("-I")]
    assert os.path.realpath(prefix / "include") in includes, flags
    lib = tmp_path / "libtriton_negate.so"
    run(["cc", "-std=c17", "-Wall", "-Wextra", "-Werror", "-O2", "-fPIC", "-shared", "-fvisibility=hidden",
         os.path.join(NEGATE_SRC, "negate.c"), "-o", str(lib), *flags], env=env)
    negate_served(prefix, lib, tmp_path)


ORT_GPU = os.environ.get("NRD_ORT_GPU_DIR", "")
ORT_GPU_LIBS = ["libonnxruntime.so.1", "libonnxruntime_providers_shared.so", "libonnxruntime_providers_cuda.so"]


@pytest.mark.skipif(not os.path.isfile(os.path.join(ORT_GPU, "libonnxruntime_providers_cuda.so")),
                    reason="ONNX Runtime's GPU build was not fetched (scripts/fetch_pypi.sh: .deps/onnxruntime-gpu)")
def test_onnxruntime_gpu_component_replaces_the_cpu_library(tmp_path):
    # A plain install, then the component over it (docs/gpu.md): the three
    # libraries beside the onnxruntime backend, relative links to them
    # beside the stateful backend, and the installed server runs the
    # example's ONNX model on the GPU build.
    p = tmp_path / "nereid"
    run([CMAKE, "--install", BUILD_DIR, "--prefix", str(p)])
    run([CMAKE, "--install", BUILD_DIR, "--prefix", str(p), "--component", "onnxruntime_gpu"])
    for name in ORT_GPU_LIBS:
        got = p / "backends" / "onnxruntime" / name
        assert got.is_file() and not got.is_symlink(), name
        assert got.stat().st_size == os.stat(os.path.join(ORT_GPU, name)).st_size, name
        link = p / "backends" / "stateful" / name
        assert os.readlink(link) == f"../onnxruntime/{name}", name
        assert os.path.samefile(link, got), name
    models = tmp_path / "models"
    shutil.copytree(os.path.join(EXAMPLES, "accumulate_onnx"), models / "accumulate_onnx")
    s = Server([str(p / "bin" / "nereid"), f"--model-repository={models}", *local_ports()], cwd=str(tmp_path))
    try:
        s.wait_ready()
        port = s.ports()["http"]
        with httpclient.InferenceServerClient(f"127.0.0.1:{port}") as c:
            total = 0
            for k, value in enumerate([5, 7, -2]):
                i = httpclient.InferInput("INPUT", [1, 1], "INT32")
                i.set_data_from_numpy(np.array([[value]], np.int32))
                r = c.infer("accumulate_onnx", [i], sequence_id=7, sequence_start=k == 0, sequence_end=k == 2)
                total += value
                assert r.as_numpy("OUTPUT").reshape(-1).tolist() == [total]
        s.stop_clean()
        assert f"from {p}/backends/onnxruntime/libonnxruntime.so.1" in s.text(), s.text()
        pin = open(os.path.join(SOURCE, "scripts", "pypi", "onnxruntime-gpu.txt")).read()
        assert f"ONNX Runtime {pin.split('onnxruntime-gpu==')[1].split()[0]} from" in s.text(), s.text()
    finally:
        s.close()
