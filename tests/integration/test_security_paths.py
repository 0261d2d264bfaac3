"""Security issue 53, "paths": a path that comes from a client or from a
configuration stays inside the folder it belongs to.

- Model names given to a repository load (HTTP, gRPC, the C API under
  both) are one folder of a repository: "..", "/" refused with Triton's
  sentence (core 66f09f8, 50830ba), nothing loaded, the index not fooled.
- File overrides are written in a fresh mkdtemp folder under one private
  (0700) root of the server, never outside it; override names with ".."
  or absolute are refused with Triton's sentence; the folders go with
  the unload and the root with the server.
- label_filename (Triton core f2226c0), default_model_filename and
  cc_model_filenames resolve inside the model folder, symbolic links
  followed.
- The python backend's EXECUTION_ENV_PATH resolves inside the model
  folder, and an archive with an absolute member, a ".." member or a
  member under a symbolic link is refused before anything is unpacked
  (Triton server e520f8c70).
- SageMaker's "url" may not lead into /dev, /proc or /sys, through a
  symbolic link either (Triton server a202ae54f).

tritonclient sends every request here, except the HTTP loads of names
with a '/': tritonclient's HTTP client puts the name into the URL path
unescaped, so the request must be built by hand with the '/' as %2F to
reach the load route at all; and the SageMaker /models route, which is
not a KServe route (see test_sagemaker).
"""
import glob
import http.client
import io
import json
import os
import stat
import tarfile
import time
import uuid

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from security_helpers import WatchedServer
from test_sagemaker import call, mme

IDENTITY_CFG = '''backend: "identity"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] %s } ]
'''


def identity_json(name):
    return json.dumps({"name": name, "backend": "identity", "max_batch_size": 8,
                       "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
                       "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}]})


def make_model(repo, name, extra_output="", extra="", files=()):
    d = os.path.join(repo, name)
    os.makedirs(os.path.join(d, "1"), exist_ok=True)
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(IDENTITY_CFG % extra_output + extra)
    return d


def refused(fn, *args, **kwargs):
    with pytest.raises(InferenceServerException) as e:
        fn(*args, **kwargs)
    return e.value


def index_names(client):
    return [m["name"] for m in client.get_model_repository_index()]


@pytest.fixture
def layout(tmp_path):
    """tmp/repo (the repository) beside tmp/outside/evil (a model the
    names with ".." would reach) and tmp/secret.txt."""
    repo = tmp_path / "repo"
    repo.mkdir()
    make_model(str(tmp_path / "outside"), "evil")
    (tmp_path / "secret.txt").write_text("root:x:0:0\nsecret line\n")
    return tmp_path


BAD_NAMES = ["../outside/evil", "..", " .. ", "a/b", "/abs", ".", "", "  "]


def test_load_by_traversing_name_is_refused_over_http_and_grpc(layout):
    with WatchedServer(["--model-control-mode=explicit"], repo=str(layout / "repo")) as s:
        with httpclient.InferenceServerClient(s.url("http")) as h, \
                grpcclient.InferenceServerClient(s.url("grpc")) as g:
            for name in BAD_NAMES:
                e = refused(g.load_model, name)
                assert e.status() == "StatusCode.INVALID_ARGUMENT", (name, e)
                if name.strip():
                    assert e.message() == (f"invalid model name '{name}', model name must not contain path "
                                           "traversal characters"), e
                else:
                    assert e.message() == "Model name cannot be empty. Please enter a valid name to deploy.", e
            # Over HTTP the name is one path segment, never percent-decoded
            # (as Triton's route): ".." is the one that can arrive.
            e = refused(h.load_model, "..")
            assert e.message() == ("invalid model name '..', model name must not contain path traversal "
                                   "characters"), e
            # Hand-built, to be sure the request reached the load route
            # as written (see the module doc).
            conn = http.client.HTTPConnection(*s.url("http").split(":"))
            conn.request("POST", "/v2/repository/models/../load", body=b"{}",
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            body = r.read().decode()
            conn.close()
            assert r.status == 400 and "path traversal characters" in body, (r.status, body)
            # A '/' never reaches the route: another path, not found.
            refused(h.load_model, "../outside/evil")
            # With a config override as well: still the name is refused first.
            e = refused(g.load_model, "../outside/evil", config=identity_json("x"))
            assert "path traversal characters" in e.message(), e
            # Nothing loaded, nothing listed, unload of such a name finds nothing.
            names = index_names(h)
            assert not any("evil" in n or "/" in n or n.strip() in ("", ".", "..") for n in names), names
            assert not g.is_model_ready("evil")
            refused(g.get_model_metadata, "../outside/evil")
            g.unload_model("../outside/evil")  # Triton: unloading an unknown name succeeds
            assert h.is_server_ready()
            # A plain name beside them still loads.
            make_model(str(layout / "repo"), "fine")
            h.load_model("fine")
            assert h.is_model_ready("fine")


def test_overrides_live_in_a_private_mkdtemp_root_gone_after_unload_and_exit(layout):
    tmp = layout / "tmp"
    tmp.mkdir()
    marker = f"nrd-escape-{uuid.uuid4().hex}"
    env = dict(os.environ, TMPDIR=str(tmp))
    blob = b"\x00weights" * 10
    with WatchedServer(["--model-control-mode=explicit"], repo=str(layout / "repo"), env=env) as s:
        with grpcclient.InferenceServerClient(s.url("grpc")) as g, \
                httpclient.InferenceServerClient(s.url("http")) as h:
            # A name that climbs out: refused, no folder made anywhere.
            for client, name in ((g, f"../{marker}"), (g, ".."), (h, "..")):
                e = refused(client.load_model, name, config=identity_json("x"), files={f"file:{marker}": blob})
                assert "path traversal characters" in e.message(), e
            # Override file names that climb out or are absolute.
            for bad in (f"file:../../{marker}", f"file:1/../../../{marker}", f"file:/tmp/{marker}",
                        f"file:{tmp}/{marker}", "file:", "file:1/./w.bin/.."):
                for client in (g, h):
                    e = refused(client.load_model, "made", config=identity_json("made"), files={bad: blob})
                    assert e.message().startswith(f"Invalid file parameter '{bad}' with normalized path '"), e
                    assert e.message().endswith("' must stay within model directory."), e
                    if bad.startswith("file:/"):
                        assert f"normalized path '{os.path.normpath(bad[5:])}'" in e.message(), e
            for where in ("/tmp", str(tmp), str(layout), str(layout / "repo")):
                assert not glob.glob(os.path.join(where, f"*{marker}*")), where
            # A failed load leaves no folder behind.
            roots = glob.glob(str(tmp / "nereid-overrides-*"))
            assert len(roots) == 1, os.listdir(tmp)
            root = roots[0]
            assert stat.S_IMODE(os.stat(root).st_mode) == 0o700
            assert os.listdir(root) == []
            # Files written, then the load fails (bad JSON; a config the
            # core refuses): their folder goes with the failure.
            for bad_cfg in ("{not json", json.dumps({"name": "made", "backend": "identity", "max_batch_size": -3})):
                refused(g.load_model, "made", config=bad_cfg, files={"file:1/w.bin": blob})
                assert os.listdir(root) == [], os.listdir(root)
            # A good override: in one mkdtemp folder under the root.
            g.load_model("made", config=identity_json("made"), files={"file:1/sub/w.bin": blob})
            assert g.is_model_ready("made")
            loads = os.listdir(root)
            assert len(loads) == 1 and loads[0].startswith("load-"), loads
            assert stat.S_IMODE(os.stat(os.path.join(root, loads[0])).st_mode) == 0o700
            with open(os.path.join(root, loads[0], "made", "1", "sub", "w.bin"), "rb") as f:
                assert f.read() == blob
            # Reloading replaces the folder; unloading removes it.
            h.load_model("made", config=identity_json("made"), files={"file:1/w.bin": blob})
            assert len(os.listdir(root)) == 1 and os.listdir(root) != loads
            h.unload_model("made")
            deadline = time.monotonic() + 10
            while os.listdir(root) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert os.listdir(root) == []
            g.load_model("made", config=identity_json("made"), files={"file:1/w.bin": blob})
            assert len(os.listdir(root)) == 1
    # At exit, the root and what it held are gone.
    assert os.listdir(tmp) == [], os.listdir(tmp)


LABEL_CASES = [
    ("label_dotdot", 'label_filename: "../../secret.txt"', "../../secret.txt"),
    ("label_abs", None, None),  # filled in with the absolute path of secret.txt
    ("label_link", 'label_filename: "link.txt"', "link.txt"),
    ("label_dir_link", 'label_filename: "up/secret.txt"', "up/secret.txt"),
]


def test_label_filename_outside_the_model_folder_is_refused(layout):
    repo = str(layout / "repo")
    secret = str(layout / "secret.txt")
    for name, field, file in LABEL_CASES:
        if field is None:
            field, file = f'label_filename: "{secret}"', secret
        d = make_model(repo, name, extra_output=field)
        if name == "label_link":
            os.symlink(secret, os.path.join(d, "link.txt"))
        if name == "label_dir_link":
            os.symlink(str(layout), os.path.join(d, "up"))
    ok = make_model(repo, "label_ok", extra_output='label_filename: "labels.txt"')
    with open(os.path.join(ok, "labels.txt"), "w") as f:
        f.write("cat\ndog\n")
    with WatchedServer(["--model-control-mode=explicit"], repo=repo) as s:
        with grpcclient.InferenceServerClient(s.url("grpc")) as g, \
                httpclient.InferenceServerClient(s.url("http")) as h:
            for name, _, file in LABEL_CASES:
                e = refused(g.load_model, name)
                msg = e.message()
                assert "label file path '" in msg and "' for output 'OUTPUT0' in model '" + name + \
                    "' is outside model directory" in msg, msg
                assert "label_filename" in msg, msg
                assert not h.is_model_ready(name)
                e = refused(h.load_model, name)
                assert "is outside model directory" in e.message(), e
            # The secret never reaches a client: no model serves it.
            h.load_model("label_ok")
            import numpy as np
            x = httpclient.InferInput("INPUT0", [1, 2], "FP32")
            x.set_data_from_numpy(np.array([[1.0, 5.0]], dtype=np.float32))
            out = h.infer("label_ok", [x], outputs=[httpclient.InferRequestedOutput("OUTPUT0", class_count=1)])
            assert out.as_numpy("OUTPUT0")[0][0].decode().endswith(":dog"), out.as_numpy("OUTPUT0")
            log = s.log()
            assert "secret line" not in log


def test_model_file_names_outside_the_model_folder_are_refused(layout):
    repo = str(layout / "repo")
    secret = str(layout / "secret.txt")
    cases = {
        "dmf_dotdot": ('default_model_filename: "../../secret.txt"\n', "default_model_filename"),
        "dmf_abs": (f'default_model_filename: "{secret}"\n', "default_model_filename"),
        "dmf_link": ('default_model_filename: "model.bin"\n', "default_model_filename"),
        "cc_dotdot": ('cc_model_filenames { key: "7.0" value: "../../../secret.txt" }\n', "cc_model_filenames"),
    }
    for name, (extra, _) in cases.items():
        d = make_model(repo, name, extra=extra)
        if name == "dmf_link":
            os.symlink(secret, os.path.join(d, "1", "model.bin"))
    # Inside, through a link that stays inside: fine.
    d = make_model(repo, "dmf_ok", extra='default_model_filename: "model.bin"\n')
    with open(os.path.join(d, "weights.bin"), "w") as f:
        f.write("w")
    os.symlink("../weights.bin", os.path.join(d, "1", "model.bin"))
    with WatchedServer(["--model-control-mode=explicit"], repo=repo) as s:
        with grpcclient.InferenceServerClient(s.url("grpc")) as g:
            for name, (_, field) in cases.items():
                e = refused(g.load_model, name)
                assert e.status() == "StatusCode.INVALID_ARGUMENT", e
                assert f"model '{name}': {field} '" in e.message(), e
                assert "outside the model directory" in e.message(), e
                assert not g.is_model_ready(name)
            g.load_model("dmf_ok")
            assert g.is_model_ready("dmf_ok")


def test_backend_name_from_a_config_override_is_a_plain_name(layout):
    """A backend name is a folder of --backend-directory and part of the
    library's file name: a client's config override may not climb out."""
    make_model(str(layout / "repo"), "made")
    with WatchedServer(["--model-control-mode=explicit"], repo=str(layout / "repo")) as s:
        with grpcclient.InferenceServerClient(s.url("grpc")) as g:
            for backend in ("../identity", "..", "x/../../identity"):
                cfg = json.loads(identity_json("made"))
                cfg["backend"] = backend
                e = refused(g.load_model, "made", config=json.dumps(cfg))
                assert f"backend '{backend}' is not a backend name" in e.message(), e
                assert not g.is_model_ready("made")


MODEL_PY = b'''import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse(output_tensors=[
            pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())])
            for r in requests]
'''


def python_model(repo, name, env_path):
    d = os.path.join(repo, name)
    os.makedirs(os.path.join(d, "1"))
    with open(os.path.join(d, "1", "model.py"), "wb") as f:
        f.write(MODEL_PY)
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(f'''backend: "python"
max_batch_size: 8
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
parameters: {{ key: "EXECUTION_ENV_PATH" value: {{ string_value: "{env_path}" }} }}
''')
    return d


def bad_archive(path, members):
    """A .tar.gz of (name, kind, payload) members: kind 'file', 'link'
    (payload is the target) or 'hard' (payload is the target)."""
    with tarfile.open(path, "w:gz") as tar:
        for name, kind, payload in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
            else:
                info.type = tarfile.SYMTYPE if kind == "link" else tarfile.LNKTYPE
                info.linkname = payload
                tar.addfile(info)


def test_python_execution_env_stays_inside_the_model_folder(layout):
    repo = str(layout / "repo")
    tmp = layout / "tmp"
    tmp.mkdir()
    marker = f"nrd-zipslip-{uuid.uuid4().hex}"
    activate = ("bin/activate", "file", b"# activate\n")
    shared = layout / "shared_env"
    (shared / "bin").mkdir(parents=True)
    (shared / "bin" / "activate").write_text("# activate\n")
    python_model(repo, "env_up", "$$TRITON_MODEL_DIRECTORY/../../shared_env")
    python_model(repo, "env_abs", str(shared))
    d = python_model(repo, "env_link", "$$TRITON_MODEL_DIRECTORY/env")
    os.symlink(str(shared), os.path.join(d, "env"))
    cases = {
        "zip_dotdot": ([(f"../../{marker}", "file", b"x\n"), activate], f"member '../../{marker}': Path contains '..'"),
        "zip_inner_dotdot": ([activate, (f"bin/../../{marker}", "file", b"x\n")], "Path contains '..'"),
        "zip_abs": ([(f"/tmp/{marker}", "file", b"x\n"), activate], f"member '/tmp/{marker}': Path is absolute"),
        "zip_link": ([("escape", "link", "/tmp"), (f"escape/{marker}", "file", b"x\n"), activate],
                     f"member 'escape/{marker}': Cannot extract through symlink escape"),
        "zip_dot_link": ([("./d", "link", "/tmp"), (f"d/{marker}", "file", b"x\n"), activate],
                         "Cannot extract through symlink d"),
        "zip_hard": ([(marker, "hard", "../../../etc/passwd"), activate], "Path contains '..'"),
        # A name that reads like a listing's "name -> target".
        "zip_arrow": ([("x -> y", "link", "/tmp"), (f"x -> y/{marker}", "file", b"x\n"), activate],
                      "Cannot extract through symlink x -> y"),
    }
    for name, (members, _) in cases.items():
        d = python_model(repo, name, "$$TRITON_MODEL_DIRECTORY/env.tar.gz")
        bad_archive(os.path.join(d, "env.tar.gz"), members)
    env = dict(os.environ, TMPDIR=str(tmp))
    with WatchedServer(["--model-control-mode=explicit"], repo=repo, env=env) as s:
        with grpcclient.InferenceServerClient(s.url("grpc")) as g:
            for name in ("env_up", "env_abs", "env_link"):
                e = refused(g.load_model, name)
                assert f"python: model '{name}' parameter EXECUTION_ENV_PATH '" in e.message(), e
                assert f"{os.path.realpath(shared)} is outside the model directory" in e.message(), e
            for name, (_, why) in cases.items():
                e = refused(g.load_model, name)
                assert f"python: model '{name}' parameter EXECUTION_ENV_PATH" in e.message(), e
                assert why in e.message(), e
                assert not g.is_model_ready(name)
    for where in ("/tmp", str(tmp), str(layout), repo, "/etc"):
        assert not glob.glob(os.path.join(where, f"*{marker}*")), where
        for cache in glob.glob(os.path.join(where, "nereid_python_env_*")):
            assert not glob.glob(os.path.join(cache, "*", f"*{marker}*")), cache


def test_python_execution_env_outside_needs_a_true_or_false_key(layout):
    """The operator's key that restores Triton's any-path behaviour takes
    true or false only; with true the outside environment is used."""
    repo = str(layout / "repo")
    shared = layout / "shared_env"
    (shared / "bin").mkdir(parents=True)
    (shared / "bin" / "activate").write_text("# activate\n")
    python_model(repo, "env_abs", str(shared))
    with WatchedServer(["--model-control-mode=explicit", "--backend-config=python,execution-env-outside-model=yes"],
                       repo=repo) as s:
        with grpcclient.InferenceServerClient(s.url("grpc")) as g:
            e = refused(g.load_model, "env_abs")
            assert "execution-env-outside-model='yes': expected true or false" in e.message(), e
    with WatchedServer(["--model-control-mode=explicit", "--backend-config=python,execution-env-outside-model=true"],
                       repo=repo) as s:
        with grpcclient.InferenceServerClient(s.url("grpc")) as g:
            e = refused(g.load_model, "env_abs")  # past the folder check: this stand-in has no lib/python3.x
            assert "is outside the model directory" not in e.message(), e
            assert "the environment has no lib/python" in e.message(), e


def test_sagemaker_url_and_target_may_not_leave(tmp_path):
    link = tmp_path / "to_proc"
    os.symlink("/proc/self", str(link))
    dev = tmp_path / "to_dev"
    os.symlink("/dev", str(dev))
    with mme(tmp_path) as s:
        for url, where in ((str(link), "/proc/"), (str(dev), "/dev"), (str(tmp_path) + "/.." * 12 + "/proc/self", "/proc/")):
            code, _, reply = call(s, "/models", {"model_name": "m", "url": url})
            assert code == 400, (url, reply)
            msg = json.loads(reply)["error"]
            assert msg.startswith('"url" cannot start with /dev/, /proc/ or /sys/'), msg
            assert where in msg, msg
        # The target model name becomes a model name: no '/' or "..".
        root = tmp_path / "m1"
        (root / "identity_fp32" / "1").mkdir(parents=True)
        (root / "identity_fp32" / "config.pbtxt").write_text(IDENTITY_CFG % "")
        code, _, reply = call(s, "/models", {"model_name": "m1", "url": str(root)},
                              {"X-Amzn-SageMaker-Target-Model": "../escape"})
        assert code == 400, reply
        assert "path traversal characters" in json.loads(reply)["error"], reply
        assert json.loads(call(s, "/models")[2]) == {"models": []}
