"""The python backend's environments and settings: the EXECUTION_ENV_PATH
model parameter (a directory, or an archive unpacked once into a cache
shared by the models that name it, "$$TRITON_MODEL_DIRECTORY" in the
path), its load errors, and --backend-config=python,... (shared memory
sizes and name prefix, stub timeout, unknown keys, bad values), and the
shared memory growing by shm-growth-byte-size steps. Requests go through
tritonclient, over HTTP and gRPC.

Run by ctest with NEREID_BIN and NEREID_BACKEND_DIR set (tests/CMakeLists.txt).
"""
import glob
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

import numpy as np

from test_nereid_cli import BACKENDS, Server, listening_ports
from test_python_backend import ONE_FP32, failure, fp32, infer, model_file, outputs_of, running

PY = f"{sys.version_info.major}.{sys.version_info.minor}"

# Answers where its Python runs (sys.prefix) and the value of a module
# that only the environment holds.
PROBE = '''
import sys
import numpy as np
import triton_python_backend_utils as pb_utils
import nrd_env_probe


class TritonPythonModel:
    def execute(self, requests):
        out = np.array([nrd_env_probe.VALUE], dtype=np.float32)
        pb_utils.Logger.log_info("probe prefix=" + sys.prefix)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", out)]) for _ in requests]
'''


# Its configuration comes from auto_complete_config, which needs the
# environment's module too: the auto-complete stub runs in it.
AUTO_PROBE = PROBE + '''
    @staticmethod
    def auto_complete_config(config):
        dims = [nrd_env_probe.VALUE // 7]
        config.add_input({"name": "INPUT0", "data_type": "TYPE_FP32", "dims": dims})
        config.add_output({"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": dims})
        return config
'''


def env_config(path):
    return ONE_FP32 + f'''
parameters: {{ key: "EXECUTION_ENV_PATH" value: {{ string_value: "{path}" }} }}
'''


def make_env(where, value):
    """A venv of this Python (with the system's numpy) holding the module
    nrd_env_probe (VALUE = value)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", where], check=True)
    site = os.path.join(where, "lib", f"python{PY}", "site-packages")
    with open(os.path.join(site, "nrd_env_probe.py"), "w") as f:
        f.write(f"VALUE = {value}\n")
    return where


def make_archive(env, path):
    with tarfile.open(path, "w:gz") as tar:
        tar.add(env, arcname=".")
    return path


def start(root, *flags, env=None):
    return Server([f"--model-repository={root}", f"--backend-directory={BACKENDS}", "--http-port=0",
                   "--http-address=127.0.0.1", "--grpc-port=0", "--grpc-address=127.0.0.1",
                   "--allow-metrics=false", *flags], env=env)


def take_ports(s, lines):
    s.ports = listening_ports(lines)
    s.port = s.ports["http"]


def prefixes(log):
    return [line.split("probe prefix=")[1].strip() for line in log.splitlines() if "probe prefix=" in line]


def test_execution_env_directory_and_shared_archive():
    with tempfile.TemporaryDirectory() as root, tempfile.TemporaryDirectory() as work:
        envdir = make_env(os.path.join(work, "env dir"), 42)  # a space, quoted through bash
        archive = make_archive(make_env(os.path.join(work, "packed"), 7), os.path.join(work, "packed.tar.gz"))
        shutil.rmtree(os.path.join(work, "packed"))  # only the archive remains
        cache_parent = os.path.join(work, "tmp")
        os.mkdir(cache_parent)
        model_file(root, "from_dir", PROBE, env_config(envdir))
        # The same archive twice: once beside the model through
        # $$TRITON_MODEL_DIRECTORY, once by the same path spelt otherwise.
        model_file(root, "from_archive", PROBE, env_config("$$TRITON_MODEL_DIRECTORY/env.tar.gz"))
        shutil.copy(archive, os.path.join(root, "from_archive", "env.tar.gz"))
        model_file(root, "same_archive", PROBE,
                   env_config(os.path.join(root, "from_archive", ".", "env.tar.gz")))
        model_file(root, "plain", PROBE.replace("import nrd_env_probe\n", ""), ONE_FP32)
        model_file(root, "auto", AUTO_PROBE, f'''
backend: "python"
parameters: {{ key: "EXECUTION_ENV_PATH" value: {{ string_value: "{archive}" }} }}
''')
        # The environments lie outside the models' folders: allowed only
        # when the operator says so (issue 53; see docs/python.md).
        s = start(root, "--backend-config=python,execution-env-outside-model=true",
                  env={**os.environ, "TMPDIR": cache_parent})
        with running(s) as lines:
            take_ports(s, lines)
            assert outputs_of(infer(s, "from_dir", [fp32("INPUT0", [0])])) == {"OUTPUT0": [42]}
            for name, protocol in (("from_archive", "http"), ("same_archive", "grpc")):
                result = infer(s, name, [fp32("INPUT0", [0])], protocol=protocol)
                assert outputs_of(result) == {"OUTPUT0": [7]}, name
            # A model without the parameter has no such module.
            for protocol in ("http", "grpc"):
                e = failure(s, "plain", [fp32("INPUT0", [0])], protocol)
                assert "nrd_env_probe" in e.message(), (protocol, e)
            assert outputs_of(infer(s, "auto", [fp32("INPUT0", [0])], protocol="grpc")) == {"OUTPUT0": [7]}
            seen = prefixes(s.text())
            caches = glob.glob(os.path.join(cache_parent, "nereid_python_env_*"))
            assert len(caches) == 1, caches
            unpacked = [d for d in os.listdir(caches[0])]
            assert len(unpacked) == 2, unpacked  # two archives, each unpacked once
            assert seen[0] == os.path.realpath(envdir), seen
            assert seen[1] == seen[2] and os.path.dirname(seen[1]) == caches[0], seen
            assert seen[3] != seen[1] and os.path.dirname(seen[3]) == caches[0], seen
        assert s.log.count("unpacked the Python execution environment") == 2, s.log
        # The cache goes with the server.
        assert os.listdir(cache_parent) == [], os.listdir(cache_parent)


def test_execution_env_errors_name_the_parameter_and_path():
    with tempfile.TemporaryDirectory() as root, tempfile.TemporaryDirectory() as work:
        not_archive = os.path.join(work, "broken.tar.gz")
        with open(not_archive, "wb") as f:
            f.write(b"this is not a tar archive\n" * 10)
        no_activate = os.path.join(work, "no_activate")
        os.makedirs(os.path.join(no_activate, "lib", f"python{PY}"))
        other_python = make_env(os.path.join(work, "other"), 1)
        os.rename(os.path.join(other_python, "lib", f"python{PY}"), os.path.join(other_python, "lib", "python2.7"))
        model_file(root, "missing", PROBE, env_config(os.path.join(work, "nowhere.tar.gz")))
        model_file(root, "not_archive", PROBE, env_config(not_archive))
        model_file(root, "no_activate", PROBE, env_config(no_activate))
        model_file(root, "other_python", PROBE, env_config(other_python))
        s = start(root, "--exit-on-error=false", "--backend-config=python,execution-env-outside-model=true",
                  env={**os.environ, "TMPDIR": work})
        with running(s):
            pass
        log = s.log
        assert (f"Failed to get the canonical path for {work}/nowhere.tar.gz. (python: model 'missing' "
                f"parameter EXECUTION_ENV_PATH") in log, log
        assert f"model 'not_archive' parameter EXECUTION_ENV_PATH '{not_archive}': cannot unpack" in log, log
        assert (f"Path {no_activate}/bin/activate does not exist. The Python environment should contain an "
                "'activate' script.") in log, log
        assert f"model 'other_python' parameter EXECUTION_ENV_PATH '{other_python}': the environment has no " \
               f"lib/python{PY}" in log, log
        # A failed unpacking leaves nothing behind.
        assert glob.glob(os.path.join(work, "nereid_python_env_*", "*")) == []


def stub_pids(server_pid):
    """(index, pid) of the server's child processes (its stubs)."""
    pids = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[1]) == server_pid:
                pids.append(int(os.path.basename(os.path.dirname(stat))))
        except (OSError, ValueError, IndexError):
            continue
    return list(enumerate(sorted(pids)))


def stub_memfds(server_pid):
    """The memfd names the server's stub processes hold as descriptor 3."""
    names = []
    for _, pid in stub_pids(server_pid):
        try:
            names.append(os.readlink(f"/proc/{pid}/fd/3"))
        except OSError:
            continue
    return names


def test_backend_config_settings():
    with tempfile.TemporaryDirectory() as root:
        model_file(root, "plain", PROBE.replace("import nrd_env_probe\n", "").replace("nrd_env_probe.VALUE", "5"),
                   ONE_FP32)
        s = start(root, "--backend-config=python,shm-region-prefix-name=nrdtest_region_",
                  "--backend-config=python,shm-default-byte-size=8388608",
                  "--backend-config=python,shm-growth-byte-size=1048576",
                  "--backend-config=python,stub-timeout-seconds=60",
                  "--backend-config=python,no-such-setting=1")
        with running(s) as lines:
            take_ports(s, lines)
            assert outputs_of(infer(s, "plain", [fp32("INPUT0", [0])])) == {"OUTPUT0": [5]}
            names = stub_memfds(s.proc.pid)
            assert any("memfd:nrdtest_region_" in n for n in names), names
        assert "python: --backend-config=python,no-such-setting has no meaning here; ignored" in s.log, s.log


def test_bad_backend_config_values_fail_the_load():
    cases = [("shm-default-byte-size=abc", "python: --backend-config=python,shm-default-byte-size='abc': not a whole"),
             ("shm-default-byte-size=1000", "shm-default-byte-size can't be smaller than 4 MiBs"),
             ("stub-timeout-seconds=0", "stub-timeout-seconds can't be smaller than or equal to zero."),
             ("shm-growth-byte-size=-5", "shm-growth-byte-size can't be smaller than or equal to zero.")]
    # (An empty shm-region-prefix-name is refused by the command line
    # already.)
    with tempfile.TemporaryDirectory() as root:
        model_file(root, "plain", PROBE.replace("import nrd_env_probe\n", ""), ONE_FP32)
        for flag, said in cases:
            s = start(root, "--exit-on-error=false", f"--backend-config=python,{flag}")
            with running(s):
                pass
            assert said in s.log, (flag, s.log)


# Outputs its input (in place), the input doubled (a new array) and the
# input through BLS to "ident"; all of them larger than the region.
GROW = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            t = pb_utils.get_input_tensor_by_name(r, "INPUT0")
            x = t.as_numpy()
            reply = pb_utils.InferenceRequest(model_name="ident", inputs=[t],
                                              requested_output_names=["SAME"]).exec()
            if reply.has_error():
                raise pb_utils.TritonModelException(reply.error().message())
            via = pb_utils.get_output_tensor_by_name(reply, "SAME").as_numpy()
            out.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("SAME", x), pb_utils.Tensor("DOUBLED", x * 2),
                pb_utils.Tensor("VIA_BLS", via)]))
        return out
'''
IDENT = '''
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "SAME", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())]) for r in requests]
'''


def grow_config(outputs):
    outs = ", ".join(f'{{ name: "{o}" data_type: TYPE_INT32 dims: [ -1 ] }}' for o in outputs)
    return f'''
backend: "python"
input [ {{ name: "INPUT0" data_type: TYPE_INT32 dims: [ -1 ] }} ]
output [ {{ outs }} ]
'''.replace("{ outs }", outs)


def test_shared_memory_grows_by_the_growth_size():
    """A 1 MiB region (shm-default-byte-size) grows by 1 MiB steps
    (shm-growth-byte-size) for inputs (the server), outputs (the stub)
    and BLS outputs (the server, while the stub waits)."""
    with tempfile.TemporaryDirectory() as root:
        model_file(root, "grow", GROW, grow_config(["SAME", "DOUBLED", "VIA_BLS"]))
        model_file(root, "ident", IDENT, grow_config(["SAME"]))
        s = start(root, "--backend-config=python,shm-default-byte-size=1048576",
                  "--backend-config=python,shm-growth-byte-size=1048576")
        with running(s) as lines:
            take_ports(s, lines)
            before = {p: os.stat(f"/proc/{p}/fd/3").st_size for _, p in stub_pids(s.proc.pid)}
            assert len(before) == 2 and max(before.values()) < 3 << 20, before
            for n, protocol in ((300000, "http"), (100, "grpc"), (700000, "grpc")):
                x = [i % 1000 for i in range(n)]
                out = outputs_of(infer(s, "grow", [("INPUT0", np.array(x, np.int32))], protocol=protocol))
                assert out["SAME"] == x and out["VIA_BLS"] == x and out["DOUBLED"] == [2 * v for v in x], n
            after = {p: os.stat(f"/proc/{p}/fd/3").st_size for p in before}
            # 700000 INT32 in and three outputs out: more than 10 MiB, in
            # whole 1 MiB steps.
            assert max(after.values()) > 10 << 20, after
            assert all((after[p] - before[p]) % (1 << 20) == 0 for p in before), (before, after)
