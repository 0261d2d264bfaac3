"""The onnxruntime backend on ONNX Runtime's GPU build (PyPI's
onnxruntime-gpu, which scripts/fetch_pypi.sh puts in .deps/onnxruntime-gpu):
its libonnxruntime.so.1 with the CUDA provider's two libraries beside the
backend, as a user installs them (docs/gpu.md). No GPU here: the CUDA
provider itself cannot compute, so what is checked is that the one library
serves KIND_CPU models, that a KIND_GPU instance now gets as far as the
CUDA runtime and fails its load with the runtime's own reason (in Triton's
wording, with our context), and that the server goes on serving.

Skipped, saying why, where the GPU build was not fetched. Run by ctest
with NRD_ORT_GPU_DIR (the folder of the GPU build) and NRD_FAKE_CUDA (the
stand-in driver, tests/gpu_stub) set (tests/CMakeLists.txt)."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from test_nereid_cli import BACKENDS, running
from test_onnxruntime import ALL, CONFIGS, THREADS, config_of, gpu_config, make_repo, start, take_ports
from test_python_backend import PROTOCOLS, client, infer, outputs_of

HERE = os.path.dirname(os.path.abspath(__file__))
ORT_GPU = os.environ.get("NRD_ORT_GPU_DIR", "")
ORT_GPU_LIBS = ("libonnxruntime.so.1", "libonnxruntime_providers_shared.so", "libonnxruntime_providers_cuda.so")
ORT_GPU_PIN = re.search(r"^onnxruntime-gpu==(\S+)",
                        open(os.path.join(HERE, "..", "..", "scripts", "pypi", "onnxruntime-gpu.txt")).read(),
                        re.M).group(1)

pytestmark = pytest.mark.skipif(
    not all(os.path.isfile(os.path.join(ORT_GPU, n)) for n in ORT_GPU_LIBS),
    reason=f"ONNX Runtime's GPU build is not in '{ORT_GPU}' (scripts/fetch_pypi.sh puts onnxruntime-gpu's "
           "libraries in .deps/onnxruntime-gpu)")


def gpu_library_backends(backends):
    """Lays out in 'backends' the onnxruntime backend with ONNX Runtime's
    GPU build beside it: a copy of the backend (the core takes a backend's
    folder from its real path) and links to the three libraries (299 MiB:
    ONNX Runtime finds its providers beside the path it was opened by)."""
    d = os.path.join(backends, "onnxruntime")
    os.makedirs(d)
    shutil.copy(os.path.join(BACKENDS, "onnxruntime", "libtriton_onnxruntime.so"), d)
    for name in ORT_GPU_LIBS:
        os.symlink(os.path.join(ORT_GPU, name), os.path.join(d, name))
    return d


def assert_on_the_gpu_build(s, folder):
    text = s.text()
    assert f"ONNX Runtime {ORT_GPU_PIN} from {folder}/libonnxruntime.so.1" in text, text


def load_fails(s, name, protocol="http"):
    with client(s, protocol) as c, pytest.raises(InferenceServerException) as e:
        c.load_model(name)
    return e.value.message()


def add_sub_answers(s, model):
    for protocol in PROTOCOLS:
        r = infer(s, model, [("INPUT0", np.array([1, 2, 3, 4], np.int32)),
                             ("INPUT1", np.array([10, 20, 30, 40], np.int32))], protocol=protocol)
        assert outputs_of(r) == {"OUTPUT0": [11, 22, 33, 44], "OUTPUT1": [-9, -18, -27, -36]}, protocol


def test_one_library_serves_kind_cpu_models():
    # KIND_CPU models on the GPU build answer as on the CPU library (so one
    # library serves both kinds): batched through the dynamic batcher,
    # unbatched, strings, implicit state. Where the core finds no driver
    # (NEREID_CUDA_LIBRARY names none), a KIND_GPU model is the core's
    # refusal and a model without instance groups runs on the CPU. Under
    # ASan the server must stop without a leak report (running() checks).
    models = {name: ALL[name] for name in ("add_sub", "fixed_add_sub", "strings", "accumulate")}
    models.update(gpu=("fixed_add_sub", gpu_config()), auto=("fixed_add_sub", CONFIGS["fixed_add_sub"] + THREADS))
    with tempfile.TemporaryDirectory() as backends, tempfile.TemporaryDirectory() as root:
        env = dict(os.environ, NEREID_CUDA_LIBRARY=os.path.join(root, "no-driver", "libcuda.so.1"))
        folder = gpu_library_backends(backends)
        make_repo(root, models)
        s = start(root, "--model-control-mode=explicit", backends=backends, env=env)
        with running(s) as lines:
            take_ports(s, lines)
            with client(s) as c:
                for name in ("add_sub", "fixed_add_sub", "strings", "accumulate", "auto"):
                    c.load_model(name)
            assert_on_the_gpu_build(s, folder)
            add_sub_answers(s, "fixed_add_sub")
            add_sub_answers(s, "auto")
            group = config_of(s, "auto")["instance_group"][0]
            assert group["kind"] == "KIND_CPU", group
            a = np.array([[1.5, 2, 3, 4], [5, 6, 7, 8]], np.float32)
            r = infer(s, "add_sub", [("INPUT0", a), ("INPUT1", a)], protocol="grpc")
            assert outputs_of(r)["OUTPUT0"] == list((a + a).flat)
            words = ["", "héllo", "x" * 100]
            r = infer(s, "strings", [("INPUT", np.array([words], np.object_))])
            assert [w.decode() for w in outputs_of(r)["OUTPUT"]] == words
            for k, total in ((5, 5), (7, 12), (-2, 10)):
                r = infer(s, "accumulate", [("INPUT", np.array([[k]], np.int32))], sequence_id=42,
                          sequence_start=(k == 5), sequence_end=(k == -2))
                assert outputs_of(r)["OUTPUT"] == [total], (k, outputs_of(r))
            message = load_fails(s, "gpu")
            assert "has kind KIND_GPU but server does not support GPUs" in message, message


# The CUDA provider library links the driver (NEEDED libcuda.so.1) and
# calls one driver function directly; the CUDA runtime under it opens
# libcuda.so.1 itself. The stand-in is loaded by its own name, so neither
# finds it unless it is reachable as libcuda.so.1.
REASONS = {
    # The stand-in as libcuda.so.1 (a link on LD_LIBRARY_PATH): the provider
    # loads, and the CUDA runtime refuses the stand-in's driver version
    # (12.4, below what CUDA 13's runtime needs).
    "stand_in_as_libcuda": ["CUDA failure 35: CUDA driver version is insufficient for CUDA runtime version",
                            "cudaGetDeviceCount"],
    # No libcuda.so.1 at all: the provider library does not load.
    "no_libcuda": ["Failed to load library", "libonnxruntime_providers_cuda.so",
                   "libcuda.so.1: cannot open shared object file"],
}


def driver_on_the_loaders_path():
    """Whether dlopen("libcuda.so.1") succeeds here (in a child process,
    with this environment)."""
    return subprocess.run([sys.executable, "-c", "import ctypes; ctypes.CDLL('libcuda.so.1')"],
                          capture_output=True).returncode == 0


@pytest.mark.parametrize("driver", sorted(REASONS))
def test_kind_gpu_fails_with_the_cuda_runtimes_reason_and_the_server_survives(driver):
    # The stand-in gives the core one GPU. A KIND_GPU model on the GPU
    # build: the library has the CUDA provider now, so the instance gets
    # past CreateCUDAProviderOptions and fails where CUDA does, in Triton's
    # wording with our context; a model without instance groups is KIND_GPU
    # there (the backend prefers no group on a library with the provider)
    # and fails the same way; a second try fails again; a KIND_CPU model on
    # the same server loads and answers.
    if driver == "no_libcuda" and driver_on_the_loaders_path():
        pytest.skip("the loader finds a libcuda.so.1 here (an NVIDIA driver): the provider would load it")
    fake = os.environ["NRD_FAKE_CUDA"]
    env = dict(os.environ, NEREID_CUDA_LIBRARY=fake, NEREID_NVML_LIBRARY=fake, NRD_FAKE_CUDA_DEVICES="1")
    models = {"gpu": ("fixed_add_sub", gpu_config()),
              "cpu": ("fixed_add_sub", CONFIGS["fixed_add_sub"] + "instance_group [ { kind: KIND_CPU } ]\n" + THREADS),
              "auto": ("fixed_add_sub", CONFIGS["fixed_add_sub"] + THREADS)}
    with tempfile.TemporaryDirectory() as backends, tempfile.TemporaryDirectory() as root, \
            tempfile.TemporaryDirectory() as drivers:
        folder = gpu_library_backends(backends)
        if driver == "stand_in_as_libcuda":
            os.symlink(fake, os.path.join(drivers, "libcuda.so.1"))
            env["LD_LIBRARY_PATH"] = drivers + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        make_repo(root, models)
        s = start(root, "--model-control-mode=explicit", backends=backends, env=env)
        with running(s) as lines:
            take_ports(s, lines)
            context = (f"(onnxruntime: instance 'gpu_0_0' on GPU 0: UpdateCUDAProviderOptions failed in "
                       f"{folder}/libonnxruntime.so.1, ONNX Runtime {ORT_GPU_PIN}; KIND_GPU instances run on "
                       "ONNX Runtime's CUDA execution provider: see docs/gpu.md)")
            for protocol in (*PROTOCOLS, "http"):
                message = load_fails(s, "gpu", protocol)
                assert message.count("onnx runtime error 1: ") == 1 and context in message, (protocol, message)
                for words in REASONS[driver]:
                    assert words in message, (protocol, words, message)
            message = load_fails(s, "auto")
            assert all(w in message for w in REASONS[driver]) and "on GPU 0" in message, message
            with client(s) as c:
                c.load_model("cpu")
            add_sub_answers(s, "cpu")
            assert_on_the_gpu_build(s, folder)
