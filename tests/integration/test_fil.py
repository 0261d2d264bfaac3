"""The fil backend (Triton's FIL backend on Treelite's GTIL) through
tritonclient over HTTP and gRPC. Every model is trained for the run by the
xgboost and lightgbm wheels scripts/fetch_pypi.sh puts in .deps/fil/py
(and written as a Treelite checkpoint by the treelite wheel); the served
outputs are compared with the training library's own predictions.

Covers every model_type with its default file name, a custom file name,
output_class / threshold / predict_proba (binary and multi-class),
regression, the GPU-only parameters accepted on the CPU, many-row
requests, ragged dynamic batches, a model without batching, bad requests
and model files that fail their load while the server keeps serving.

One server (explicit model control) serves every model: the suite stays
within a few seconds of server time under the sanitizers.
"""
import concurrent.futures
import json
import os
import tempfile
import warnings

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from test_nereid_cli import BACKENDS, Server, listening_ports, running

import lightgbm as lgb  # noqa: E402  (from .deps/fil/py, PYTHONPATH set by ctest)
import treelite  # noqa: E402
import xgboost as xgb  # noqa: E402

FEATURES = 6
RNG = np.random.default_rng(47)
TRAIN_X = RNG.standard_normal((300, FEATURES)).astype(np.float32)
TEST_X = RNG.standard_normal((64, FEATURES)).astype(np.float32)
TEST_X[3, 2] = np.nan  # a missing value: every library takes NaN as missing
BINARY_Y = (TRAIN_X[:, 0] + 0.5 * TRAIN_X[:, 1] > 0).astype(np.int32)
MULTI_Y = (TRAIN_X[:, 0] > 0).astype(np.int32) + (TRAIN_X[:, 2] > 0.3).astype(np.int32)
REG_Y = (TRAIN_X[:, 0] * 2 + TRAIN_X[:, 3]).astype(np.float32)

# The instance thread predicts alone below 256 rows; cpu_nthread 2 gives the
# larger batches a second OpenMP thread (ASan sees both paths). The TSan run
# sets 1: libgomp's joins are invisible to it (tests/CMakeLists.txt).
THREADS = ('parameters { key: "cpu_nthread" value { string_value: "%s" } }\n'
           % os.environ.get("NRD_FIL_TEST_THREADS", "2"))


def config(model_type, out_dims, params=None, max_batch_size=8192, extra=""):
    params = dict(params or {})
    params["model_type"] = model_type
    text = f"""backend: "fil"
max_batch_size: {max_batch_size}
input [ {{ name: "input__0" data_type: TYPE_FP32 dims: [ {FEATURES} ] }} ]
output [ {{ name: "output__0" data_type: TYPE_FP32 dims: [ {out_dims} ] }} ]
instance_group [ {{ kind: KIND_CPU }} ]
"""
    for k, v in params.items():
        text += f'parameters {{ key: "{k}" value {{ string_value: "{v}" }} }}\n'
    return text + THREADS + extra


def xgb_train(objective, y, rounds=20, **more):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return xgb.train({"objective": objective, "max_depth": 4, "eta": 0.3, "nthread": 1, **more},
                         xgb.DMatrix(TRAIN_X, label=y), rounds)


def lgb_train(objective, y, **more):
    params = {"objective": objective, "verbose": -1, "num_leaves": 8, "num_threads": 1, **more}
    return lgb.train(params, lgb.Dataset(TRAIN_X, label=y), 15)


def xgb_predict(booster, x):
    return booster.predict(xgb.DMatrix(x))


class Repo:
    """A model repository: models written with their configurations and
    the predictions to expect (a function of the input rows)."""

    def __init__(self, root):
        self.root = root
        self.expect = {}

    def add(self, name, files, config_text, expect=None):
        os.makedirs(os.path.join(self.root, name, "1"), exist_ok=True)
        for fname, write in files.items():
            write(os.path.join(self.root, name, "1", fname))
        with open(os.path.join(self.root, name, "config.pbtxt"), "w") as f:
            f.write(config_text)
        if expect is not None:
            self.expect[name] = expect


def xgb_saver(booster, suffix):
    """Writes booster in the format a file suffix selects (XGBoost picks by
    extension; 'deprecated' is its legacy binary)."""
    def write(path):
        tmp = path + "." + suffix
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            booster.save_model(tmp)
        os.rename(tmp, path)
    return write


def raw_bytes(data):
    def write(path):
        with open(path, "wb") as f:
            f.write(data)
    return write


def build(root):
    r = Repo(root)
    reg = xgb_train("reg:squarederror", REG_Y)
    binary = xgb_train("binary:logistic", BINARY_Y)
    multi = xgb_train("multi:softprob", MULTI_Y, num_class=3)
    poisson = xgb_train("count:poisson", np.abs(REG_Y * 2).astype(np.int32))
    softmax = xgb_train("multi:softmax", MULTI_Y, num_class=3)
    l_multi = lgb_train("multiclass", MULTI_Y, num_class=3)
    l_reg = lgb_train("regression", REG_Y)
    l_bin = lgb_train("binary", BINARY_Y)

    # Every model_type with its default file name.
    r.add("xgb_reg_json", {"xgboost.json": xgb_saver(reg, "json")}, config("xgboost_json", 1),
          lambda x: xgb_predict(reg, x).reshape(-1, 1))
    r.add("xgb_bin_ubj_class", {"xgboost.ubj": xgb_saver(binary, "ubj")},
          config("xgboost_ubj", 1, {"output_class": "true", "threshold": "0.3"}),
          lambda x: (xgb_predict(binary, x) > 0.3).astype(np.float32).reshape(-1, 1))
    p = lambda x: xgb_predict(binary, x)  # noqa: E731
    r.add("xgb_bin_legacy_proba", {"xgboost.model": xgb_saver(binary, "deprecated")},
          config("xgboost", 2, {"output_class": "true", "predict_proba": "true"}),
          lambda x: np.stack([1 - p(x), p(x)], axis=1))
    r.add("xgb_bin_score", {"xgboost.json": xgb_saver(binary, "json")}, config("xgboost_json", 1),
          lambda x: p(x).reshape(-1, 1))
    r.add("xgb_multi_class", {"xgboost.json": xgb_saver(multi, "json")},
          config("xgboost_json", 1, {"output_class": "true"}),
          lambda x: np.argmax(xgb_predict(multi, x), axis=1).astype(np.float32).reshape(-1, 1))
    r.add("xgb_multi_proba", {"xgboost.ubj": xgb_saver(multi, "ubj")},
          config("xgboost_ubj", 3, {"is_classifier": "true", "predict_proba": "true"}),
          lambda x: xgb_predict(multi, x))
    # Objectives whose transform is not a sigmoid: exp (Poisson), and
    # multi:softmax, whose predict gives class ids as output_class does.
    r.add("xgb_poisson", {"xgboost.json": xgb_saver(poisson, "json")}, config("xgboost_json", 1),
          lambda x: xgb_predict(poisson, x).reshape(-1, 1))
    r.add("xgb_softmax_class", {"xgboost.ubj": xgb_saver(softmax, "ubj")},
          config("xgboost_ubj", 1, {"output_class": "true"}),
          lambda x: xgb_predict(softmax, x).astype(np.float32).reshape(-1, 1))
    r.add("lgb_multi_proba", {"model.txt": lambda path: l_multi.save_model(path)},
          config("lightgbm", 3, {"output_class": "true", "predict_proba": "true"}),
          lambda x: l_multi.predict(x))
    r.add("lgb_reg", {"model.txt": lambda path: l_reg.save_model(path)}, config("lightgbm", 1),
          lambda x: l_reg.predict(x).reshape(-1, 1))
    r.add("lgb_bin_class", {"model.txt": lambda path: l_bin.save_model(path)},
          config("lightgbm", 1, {"output_class": "true"}),
          lambda x: (l_bin.predict(x) > 0.5).astype(np.float32).reshape(-1, 1))

    def checkpoint(path):
        treelite.frontend.from_xgboost(multi).serialize(path)
    r.add("tl_checkpoint", {"checkpoint.tl": checkpoint},
          config("treelite_checkpoint", 3, {"output_class": "true", "predict_proba": "true"}),
          lambda x: xgb_predict(multi, x))
    # A file name of the user's choosing, a JSON key XGBoost did not write
    # (xgboost_allow_unknown_field), and FIL's GPU-only parameters
    # (accepted and unused on the CPU, as FIL does there) with KIND_AUTO.
    gpu_only = {"algo": "TREE_REORG", "storage_type": "SPARSE", "threads_per_tree": "4", "blocks_per_sm": "2",
                "transfer_threshold": "2", "use_experimental_optimizations": "true", "layout": "breadth_first",
                "chunk_size": "4", "xgboost_allow_unknown_field": "true"}
    def with_unknown_key(path):
        xgb_saver(reg, "json")(path)
        with open(path) as f:
            doc = json.load(f)
        doc["learner"]["nereid_extra"] = 1
        with open(path, "w") as f:
            json.dump(doc, f)
    r.add("custom_name_gpu_params", {"trees.json": with_unknown_key},
          config("xgboost_json", 1, gpu_only, extra='default_model_filename: "trees.json"\n').replace(
              "KIND_CPU", "KIND_AUTO"),
          lambda x: xgb_predict(reg, x).reshape(-1, 1))
    # Without batching: [ rows, features ] in one request.
    r.add("unbatched", {"model.txt": lambda path: l_reg.save_model(path)},
          config("lightgbm", 1, max_batch_size=0).replace(f"dims: [ {FEATURES} ]", f"dims: [ -1, {FEATURES} ]").replace(
              "dims: [ 1 ]", "dims: [ -1, 1 ]"),
          lambda x: l_reg.predict(x).reshape(-1, 1))
    # Without batching, one row as [ features ].
    r.add("unbatched_row", {"model.txt": lambda path: l_reg.save_model(path)},
          config("lightgbm", 1, max_batch_size=0), lambda x: l_reg.predict(x.reshape(1, -1)).reshape(1))
    # Many small requests batched together by the dynamic batcher.
    r.add("batched", {"xgboost.json": xgb_saver(multi, "json")},
          config("xgboost_json", 3, {"predict_proba": "true", "output_class": "true"},
                 extra="dynamic_batching { max_queue_delay_microseconds: 200000 }\n"),
          lambda x: xgb_predict(multi, x))

    # Two instances sharing one loaded model, predicting at the same time.
    r.add("two_instances", {"model.txt": lambda path: l_multi.save_model(path)},
          config("lightgbm", 3, {"predict_proba": "true"}).replace("{ kind: KIND_CPU }", "{ count: 2 kind: KIND_CPU }"),
          lambda x: l_multi.predict(x))

    # Models that must fail their load, each with the words it must name.
    bad = {
        "bad_json": ({"xgboost.json": raw_bytes(b"{ this is not json")}, config("xgboost_json", 1),
                     ["Model failed to load into Treelite with error", "bad_json/1/xgboost.json"]),
        "bad_lightgbm": ({"model.txt": raw_bytes(b"tree\nnot a lightgbm model\n")}, config("lightgbm", 1),
                         ["Model failed to load into Treelite with error", "bad_lightgbm/1/model.txt"]),
        "bad_legacy": ({"xgboost.model": raw_bytes(b"\x00\x01garbage" * 7)}, config("xgboost", 1),
                       ["Model failed to load into Treelite with error", "bad_legacy/1/xgboost.model"]),
        "bad_checkpoint": ({"checkpoint.tl": raw_bytes(b"\x07" * 40)}, config("treelite_checkpoint", 1),
                           ["Model failed to load into Treelite with error", "bad_checkpoint/1/checkpoint.tl"]),
        "no_file": ({}, config("xgboost_ubj", 1), ["no_file/1/xgboost.ubj", "does not exist"]),
        "bad_type": ({"xgboost.json": xgb_saver(reg, "json")}, config("onnx_trees", 1),
                     ["onnx_trees not recognized as a valid serialization format."]),
        "bad_out_dims": ({"xgboost.json": xgb_saver(multi, "json")}, config("xgboost_json", 2, {"predict_proba": "true"}),
                         ["output 'output__0' holds 2 values per row but the model gives 3"]),
        "bad_features": ({"xgboost.json": xgb_saver(reg, "json")},
                         config("xgboost_json", 1).replace(f"dims: [ {FEATURES} ]", "dims: [ 9 ]"),
                         ["input 'input__0' has 9 features but the model", "uses 6"]),
        "bad_algo": ({"xgboost.json": xgb_saver(reg, "json")}, config("xgboost_json", 1, {"algo": "FAST"}),
                     ["Unknown FIL algorithm name: FAST"]),
        "bad_bool": ({"xgboost.json": xgb_saver(reg, "json")}, config("xgboost_json", 1, {"output_class": "yes"}),
                     ["parameter output_class: 'yes' is not true or false"]),
        "bad_dtype": ({"xgboost.json": xgb_saver(reg, "json")},
                      config("xgboost_json", 1).replace("TYPE_FP32", "TYPE_FP64", 1),
                      ["input 'input__0' is TYPE_FP64; the FIL backend takes and gives TYPE_FP32 only"]),
        "shap_output": ({"xgboost.json": xgb_saver(reg, "json")},
                        config("xgboost_json", 1).replace(
                            "instance_group", 'output [ { name: "treeshap_output" data_type: TYPE_FP32 dims: [ 7 ] } ]\n'
                            "instance_group"),
                        ["output 'treeshap_output' is not offered"]),
        "unknown_field": ({"xgboost.json": with_unknown_key}, config("xgboost_json", 1),
                          ["Model failed to load into Treelite with error", "could not be parsed as XGBoost model"]),
        "gpu_instance": ({"xgboost.json": xgb_saver(reg, "json")},
                         config("xgboost_json", 1).replace("KIND_CPU", "KIND_GPU"), None),
    }
    for name, (files, text, _) in bad.items():
        r.add(name, files, text)
    r.bad = {k: v[2] for k, v in bad.items()}
    return r


@pytest.fixture(scope="module")
def served():
    with tempfile.TemporaryDirectory() as root:
        repo = build(root)
        s = Server([f"--model-repository={root}", f"--backend-directory={BACKENDS}", "--http-port=0",
                    "--http-address=127.0.0.1", "--grpc-port=0", "--grpc-address=127.0.0.1",
                    "--allow-metrics=false", "--model-control-mode=explicit"])
        with running(s) as lines:
            s.ports = listening_ports(lines)
            s.port = s.ports["http"]
            with httpclient.InferenceServerClient(f"127.0.0.1:{s.port}") as c:
                for name in repo.expect:
                    c.load_model(name)
            yield s, repo


def infer(s, model, x, protocol="http"):
    if protocol == "grpc":
        with grpcclient.InferenceServerClient(f"127.0.0.1:{s.ports['grpc']}") as c:
            i = grpcclient.InferInput("input__0", list(x.shape), "FP32")
            i.set_data_from_numpy(x)
            return c.infer(model, [i]).as_numpy("output__0")
    binary = protocol != "json"  # "json": HTTP with the tensors as JSON numbers
    with httpclient.InferenceServerClient(f"127.0.0.1:{s.port}", network_timeout=120.0) as c:
        i = httpclient.InferInput("input__0", list(x.shape), "FP32")
        i.set_data_from_numpy(x, binary_data=binary)
        out = httpclient.InferRequestedOutput("output__0", binary_data=binary)
        return c.infer(model, [i], outputs=[out]).as_numpy("output__0")


def check(repo, model, x, got):
    want = np.asarray(repo.expect[model](x), dtype=np.float32)
    assert got.shape == want.shape, (model, got.shape, want.shape)
    # Class ids exactly; scores to float32 rounding (GTIL sums the trees in
    # another order than the training library).
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6, err_msg=model)


MODELS = ["xgb_reg_json", "xgb_bin_ubj_class", "xgb_bin_legacy_proba", "xgb_bin_score", "xgb_multi_class",
          "xgb_multi_proba", "xgb_poisson", "xgb_softmax_class", "lgb_multi_proba", "lgb_reg", "lgb_bin_class", "tl_checkpoint", "custom_name_gpu_params"]


@pytest.mark.parametrize("model", MODELS)
def test_outputs_equal_the_training_library(served, model):
    s, repo = served
    for protocol, x in (("http", TEST_X), ("grpc", TEST_X[:1]), ("json", TEST_X[4:9])):
        check(repo, model, x, infer(s, model, x, protocol))


def test_many_rows_in_one_request_on_several_threads(served):
    s, repo = served
    x = RNG.standard_normal((4096, FEATURES)).astype(np.float32)
    for model in ("xgb_multi_class", "lgb_multi_proba", "xgb_bin_legacy_proba"):
        check(repo, model, x, infer(s, model, x))


def test_model_without_batching(served):
    s, repo = served
    check(repo, "unbatched", TEST_X[:5], infer(s, "unbatched", TEST_X[:5]))
    for protocol in ("http", "grpc"):
        check(repo, "unbatched_row", TEST_X[7], infer(s, "unbatched_row", TEST_X[7], protocol))


def test_ragged_requests_batched_together(served):
    s, repo = served
    sizes = [1, 7, 3, 64, 2, 300, 1, 17]
    offsets = np.cumsum([0] + sizes)
    x = RNG.standard_normal((offsets[-1], FEATURES)).astype(np.float32)
    with concurrent.futures.ThreadPoolExecutor(len(sizes)) as pool:
        results = list(pool.map(lambda i: infer(s, "batched", x[offsets[i]:offsets[i + 1]]), range(len(sizes))))
    for i, got in enumerate(results):
        check(repo, "batched", x[offsets[i]:offsets[i + 1]], got)
    with httpclient.InferenceServerClient(f"127.0.0.1:{s.port}") as c:
        stats = c.get_inference_statistics("batched")["model_stats"][0]
    # Fewer executions than requests: the batcher put some together.
    assert stats["execution_count"] < len(sizes), stats


def test_instances_share_the_model(served):
    s, repo = served
    x = RNG.standard_normal((16 * 40, FEATURES)).astype(np.float32)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: infer(s, "two_instances", x[i * 40:(i + 1) * 40]), range(16)))
    for i, got in enumerate(results):
        check(repo, "two_instances", x[i * 40:(i + 1) * 40], got)


def test_bad_requests_get_errors_and_the_server_keeps_serving(served):
    s, repo = served
    for protocol in ("http", "grpc"):
        with pytest.raises(InferenceServerException) as e:
            infer(s, "xgb_reg_json", np.ones((2, FEATURES + 1), np.float32), protocol)
        assert "input__0" in e.value.message(), e.value
        with pytest.raises(InferenceServerException) as e:
            infer(s, "xgb_reg_json", np.ones((0 + 2, FEATURES), np.float64).astype(np.float32).reshape(1, 2, FEATURES),
                  protocol)
        assert "input__0" in e.value.message(), e.value
    check(repo, "xgb_reg_json", TEST_X, infer(s, "xgb_reg_json", TEST_X))


def test_bad_models_fail_their_load_clearly(served):
    s, repo = served
    with httpclient.InferenceServerClient(f"127.0.0.1:{s.port}") as h, \
            grpcclient.InferenceServerClient(f"127.0.0.1:{s.ports['grpc']}") as g:
        for name, words in repo.bad.items():
            messages = []
            for c in (h, g):
                with pytest.raises(InferenceServerException) as e:
                    c.load_model(name)
                messages.append(e.value.message())
            assert messages[0] == messages[1], messages
            for w in words or ["KIND_GPU"]:
                assert w in messages[0], (name, messages[0])
        states = {m["name"]: m.get("state") for m in h.get_model_repository_index()}
        assert states["bad_json"] == "UNAVAILABLE", states
        assert states["xgb_reg_json"] == "READY", states
    check(repo, "lgb_reg", TEST_X, infer(s, "lgb_reg", TEST_X))


def test_without_treelite_fil_models_fail_and_others_serve():
    # A backend folder holding libtriton_fil.so but not libtreelite.so: the
    # fil model fails to load naming where Treelite was looked for; the
    # identity model beside it serves.
    import shutil
    with tempfile.TemporaryDirectory() as backends, tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(backends, "fil"))
        shutil.copy(os.path.join(BACKENDS, "fil", "libtriton_fil.so"), os.path.join(backends, "fil"))
        shutil.copytree(os.path.join(BACKENDS, "identity"), os.path.join(backends, "identity"))
        repo = Repo(root)
        repo.add("trees", {"xgboost.json": xgb_saver(xgb_train("reg:squarederror", REG_Y, rounds=2), "json")},
                 config("xgboost_json", 1))
        shutil.copytree(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "models",
                                     "identity_fp32"), os.path.join(root, "identity_fp32"))
        env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
        s = Server([f"--model-repository={root}", f"--backend-directory={backends}", "--http-port=0",
                    "--http-address=127.0.0.1", "--grpc-port=0", "--grpc-address=127.0.0.1",
                    "--allow-metrics=false", "--exit-on-error=false"], env=env)
        with running(s) as lines:
            table = "".join(lines)
            assert "| identity_fp32 | 1       | READY" in table, table
            assert "cannot load Treelite" in table and "fil/libtreelite.so" in table, table
            port = listening_ports(lines)["http"]
            with httpclient.InferenceServerClient(f"127.0.0.1:{port}") as c:
                i = httpclient.InferInput("INPUT0", [1, 2], "FP32")
                i.set_data_from_numpy(np.array([[1, 2]], np.float32))
                assert c.infer("identity_fp32", [i]).as_numpy("OUTPUT0").tolist() == [[1, 2]]
