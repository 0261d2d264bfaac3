"""The request corpus of the differential tests: hand-written cases for each
area, and mutations generated from the valid inference requests. A case is
(id, send), where send(server) returns a comparable answer (compare.py).
Ids are stable: docs/differences.md lists differences by id (globs allowed).
"""
import copy
import http.client
import json
import struct
import time

import numpy as np

from compare import parse_http

# accumulate_onnx again with a 0.3 s sequence idle time (the test adds it
# to its copy of the example repository).
SHORT_IDLE_MODEL = "accumulate_short_idle"

MODELS = ["accumulate_onnx", "accumulate_stateful", "add_sub_python", "identity_bytes", "identity_fp32",
          "repeat_int32", "simple", "simple_ensemble", "square_int32"]


def http_call(server, method, path, body=None, headers=None, port=None):
    conn = http.client.HTTPConnection("127.0.0.1", port or server.http, timeout=60)
    try:
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        return r.status, hdrs, data
    finally:
        conn.close()


def http_case(method, path, body=None, headers=None):
    def send(server):
        return parse_http(*http_call(server, method, path, body, headers))
    return send


# ---------------------------------------------------------------- routes

def route_cases():
    cases = []
    for path in ["/v2", "/v2/health/live", "/v2/health/ready", "/v2/models/stats", "/v2/logging",
                 "/v2/trace/setting", "/v2/systemsharedmemory/status", "/v2/cudasharedmemory/status",
                 "/v2/nothing", "/v2/models/no_such_model", "/v2/models/no_such_model/ready",
                 "/v2/models/no_such_model/config", "/v2/models/no_such_model/stats",
                 "/v2/models/no_such_model/versions/1"]:
        cases.append((f"get{path.replace('/', '.')}", http_case("GET", path)))
    for m in MODELS:
        for sub in ["", "/ready", "/config", "/versions/1", "/versions/1/ready", "/versions/7",
                    "/versions/7/ready", "/versions/x", "/trace/setting"]:
            cases.append((f"get.model.{m}{sub.replace('/', '.')}", http_case("GET", f"/v2/models/{m}{sub}")))
    cases += [
        ("post.health.live", http_case("POST", "/v2/health/live", "")),
        ("put.v2", http_case("PUT", "/v2", "")),
        ("delete.model", http_case("DELETE", "/v2/models/simple")),
        ("post.index", http_case("POST", "/v2/repository/index", {})),
        ("post.index.empty_body", http_case("POST", "/v2/repository/index", "")),
        ("post.index.ready", http_case("POST", "/v2/repository/index", {"ready": True})),
        ("post.index.not_json", http_case("POST", "/v2/repository/index", "{")),
        ("post.index.array", http_case("POST", "/v2/repository/index", [])),
        ("post.load.no_such", http_case("POST", "/v2/repository/models/no_such_model/load", {})),
        ("post.unload.no_such", http_case("POST", "/v2/repository/models/no_such_model/unload", {})),
        ("post.logging.bad_key", http_case("POST", "/v2/logging", {"no_such_setting": 1})),
        ("post.logging.bad_type", http_case("POST", "/v2/logging", {"log_info": "yes"})),
        ("post.logging.not_json", http_case("POST", "/v2/logging", "x")),
        ("post.trace.bad_level", http_case("POST", "/v2/trace/setting", {"trace_level": ["LOUD"]})),
        ("post.trace.bad_rate", http_case("POST", "/v2/trace/setting", {"trace_rate": "fast"})),
        ("post.trace.unknown", http_case("POST", "/v2/trace/setting", {"no_such": "1"})),
        ("post.trace.model.no_such", http_case("POST", "/v2/models/no_such_model/trace/setting", {})),
        ("post.shm.register.no_key", http_case("POST", "/v2/systemsharedmemory/region/r/register", {"offset": 0})),
        ("post.shm.register.bad_key", http_case("POST", "/v2/systemsharedmemory/region/r/register",
                                                {"key": "/nrd_diff_no_such_key", "offset": 0, "byte_size": 64})),
        ("post.shm.unregister.unknown", http_case("POST", "/v2/systemsharedmemory/region/nope/unregister", "")),
        ("get.shm.status.unknown", http_case("GET", "/v2/systemsharedmemory/region/nope/status")),
        ("post.cudashm.register", http_case("POST", "/v2/cudasharedmemory/region/c/register",
                                            {"raw_handle": {"b64": "AAAA"}, "device_id": 0, "byte_size": 64})),
    ]
    return cases


# ---------------------------------------------------------------- inference

def infer_bodies():
    """Valid JSON inference requests, one or more per model."""
    f4 = [1.5, -2.0, 3.25, 4.0]
    i16 = list(range(16))
    ones = [1] * 16
    return {
        "identity_fp32": {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4], "data": f4}]},
        "simple": {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": i16},
                              {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": ones}]},
        "simple_ensemble": {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": i16},
                                       {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": ones}]},
        "identity_bytes": {"inputs": [{"name": "INPUT0", "datatype": "BYTES", "shape": [1, 3],
                                       "data": ["ab", "", "xyz"]}]},
        "add_sub_python": {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": f4},
                                      {"name": "INPUT1", "datatype": "FP32", "shape": [4], "data": [1, 1, 1, 1]}]},
        "square_int32": {"inputs": [{"name": "IN", "datatype": "INT32", "shape": [1], "data": [2]}]},
    }


def infer_case(model, body, headers=None):
    return http_case("POST", f"/v2/models/{model}/infer", body, headers)


def mutations(body):
    """(name, mutated body) pairs: each one breaks or bends one thing."""
    out = []

    def mut(name, fn):
        b = copy.deepcopy(body)
        fn(b)
        out.append((name, b))

    first = body["inputs"][0]
    mut("no_inputs", lambda b: b.pop("inputs"))
    mut("inputs_empty", lambda b: b.update(inputs=[]))
    mut("inputs_object", lambda b: b.update(inputs={}))
    mut("id_number", lambda b: b.update(id=5))
    mut("id_string", lambda b: b.update(id="req-7"))
    mut("unknown_top_key", lambda b: b.update(nonsense=1))
    mut("parameters_not_object", lambda b: b.update(parameters=[]))
    mut("param_priority_string", lambda b: b.update(parameters={"priority": "high"}))
    mut("param_timeout_negative", lambda b: b.update(parameters={"timeout": -1}))
    mut("param_custom", lambda b: b.update(parameters={"my_key": "v", "n": 3, "f": True}))
    mut("param_sequence_id_on_plain", lambda b: b.update(parameters={"sequence_id": 9}))
    mut("param_binary_data_output", lambda b: b.update(parameters={"binary_data_output": True}))
    for key in ("name", "datatype", "shape", "data"):
        mut(f"input_no_{key}", lambda b, key=key: b["inputs"][0].pop(key))
    for dt in ("FP64", "INT8", "UINT64", "BOOL", "BYTES", "XYZ", "fp32"):
        if dt != first["datatype"]:
            mut(f"datatype_{dt}", lambda b, dt=dt: b["inputs"][0].update(datatype=dt))
    shape = first["shape"]
    mut("shape_empty", lambda b: b["inputs"][0].update(shape=[]))
    mut("shape_negative", lambda b: b["inputs"][0].update(shape=[-1] + shape[1:]))
    mut("shape_zero", lambda b: b["inputs"][0].update(shape=[0] + shape[1:]))
    mut("shape_big_batch", lambda b: b["inputs"][0].update(shape=[64] + shape[1:]))
    mut("shape_extra_dim", lambda b: b["inputs"][0].update(shape=shape + [1]))
    mut("shape_string", lambda b: b["inputs"][0].update(shape=["1"] + shape[1:]))
    mut("shape_huge", lambda b: b["inputs"][0].update(shape=[1, 2 ** 40]))
    mut("data_short", lambda b: b["inputs"][0].update(data=b["inputs"][0]["data"][:-1]))
    mut("data_long", lambda b: b["inputs"][0].update(data=b["inputs"][0]["data"] + b["inputs"][0]["data"][:1]))
    mut("data_empty", lambda b: b["inputs"][0].update(data=[]))
    mut("data_nested", lambda b: b["inputs"][0].update(data=[b["inputs"][0]["data"]]))
    mut("data_string", lambda b: b["inputs"][0].update(data="abc"))
    mut("data_null_element", lambda b: b["inputs"][0]["data"].__setitem__(0, None))
    mut("data_bool_element", lambda b: b["inputs"][0]["data"].__setitem__(0, True))
    mut("name_unknown", lambda b: b["inputs"][0].update(name="NOPE"))
    mut("input_twice", lambda b: b["inputs"].append(copy.deepcopy(b["inputs"][0])))
    mut("input_unknown_key", lambda b: b["inputs"][0].update(extra=1))
    mut("input_parameters_bad", lambda b: b["inputs"][0].update(parameters={"binary_data_size": "x"}))
    mut("output_unknown", lambda b: b.update(outputs=[{"name": "NOPE"}]))
    mut("outputs_empty", lambda b: b.update(outputs=[]))
    mut("output_no_name", lambda b: b.update(outputs=[{}]))
    mut("output_binary", lambda b: b.update(outputs=[{"name": out_name(b), "parameters": {"binary_data": True}}]))
    mut("output_classification", lambda b: b.update(
        outputs=[{"name": out_name(b), "parameters": {"classification": 2}}]))
    mut("output_classification_zero", lambda b: b.update(
        outputs=[{"name": out_name(b), "parameters": {"classification": 0}}]))
    mut("output_classification_string", lambda b: b.update(
        outputs=[{"name": out_name(b), "parameters": {"classification": "2"}}]))
    mut("output_twice", lambda b: b.update(outputs=[{"name": out_name(b)}, {"name": out_name(b)}]))
    return out


def out_name(body):
    return "OUTPUT0" if body["inputs"][0]["name"].startswith("INPUT") else "OUT"


def binary_body(body):
    """The same request with its inputs in the binary extension and binary
    outputs asked for: (bytes, headers)."""
    header = copy.deepcopy(body)
    tails = []
    for inp in header["inputs"]:
        data = inp.pop("data")
        if inp["datatype"] == "BYTES":
            raw = b"".join(struct.pack("<I", len(s)) + s.encode() for s in data)
        else:
            dt = {"FP32": np.float32, "INT32": np.int32}[inp["datatype"]]
            raw = np.array(data, dtype=dt).tobytes()
        inp["parameters"] = {"binary_data_size": len(raw)}
        tails.append(raw)
    header["parameters"] = {"binary_data_output": True}
    text = json.dumps(header).encode()
    return text + b"".join(tails), {"Inference-Header-Content-Length": str(len(text)),
                                   "Content-Type": "application/octet-stream"}


def infer_cases():
    cases = []
    for model, body in infer_bodies().items():
        cases.append((f"infer.{model}.valid", infer_case(model, body)))
        raw, hdrs = binary_body(body)
        cases.append((f"infer.{model}.binary", infer_case(model, raw, hdrs)))
        cases.append((f"infer.{model}.binary.header_length_past_end",
                      infer_case(model, raw, dict(hdrs, **{"Inference-Header-Content-Length": str(len(raw) + 5)}))))
        cases.append((f"infer.{model}.binary.header_length_text",
                      infer_case(model, raw, dict(hdrs, **{"Inference-Header-Content-Length": "ten"}))))
        for name, mutated in mutations(body):
            cases.append((f"infer.{model}.{name}", infer_case(model, mutated)))
    cases += [
        ("infer.no_such_model", infer_case("no_such_model", infer_bodies()["simple"])),
        ("infer.simple.version_7", http_case("POST", "/v2/models/simple/versions/7/infer", infer_bodies()["simple"])),
        ("infer.simple.not_json", infer_case("simple", "{\"inputs\": [")),
        ("infer.simple.empty_body", infer_case("simple", "")),
        ("infer.simple.array_body", infer_case("simple", [])),
        ("infer.simple.get", http_case("GET", "/v2/models/simple/infer")),
    ]
    return cases


# ---------------------------------------------------------------- sequences

def sequence_cases():
    """accumulate_onnx: sequences with start/end flags and both id types,
    steps sent in order (each case is one step of a fixed story)."""
    def step(value, **params):
        return {"inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [1, 1], "data": [value]}],
                "parameters": params}
    story = [
        ("seq.start", step(5, sequence_id=101, sequence_start=True)),
        ("seq.middle", step(7, sequence_id=101)),
        ("seq.end", step(-2, sequence_id=101, sequence_end=True)),
        ("seq.after_end", step(1, sequence_id=101)),
        ("seq.no_id", step(1)),
        ("seq.string_id.start", step(3, sequence_id="alpha", sequence_start=True)),
        ("seq.string_id.end", step(4, sequence_id="alpha", sequence_end=True)),
        ("seq.id_zero_start", step(1, sequence_id=0, sequence_start=True)),
        ("seq.id_negative", step(1, sequence_id=-4, sequence_start=True)),
        ("seq.id_float", step(1, sequence_id=1.5, sequence_start=True)),
        ("seq.start_not_bool", step(1, sequence_id=102, sequence_start="yes")),
        ("seq.unknown_id_no_start", step(1, sequence_id=555)),
        ("seq.start_end_same", step(9, sequence_id=103, sequence_start=True, sequence_end=True)),
    ]
    cases = [(cid, infer_case("accumulate_onnx", body)) for cid, body in story]

    def after_idle(body):
        send = infer_case(SHORT_IDLE_MODEL, body)

        def run(server):
            time.sleep(1.0)  # past the model's 0.3 s sequence idle time
            return send(server)
        return run
    cases += [
        ("seq.idle.start", infer_case(SHORT_IDLE_MODEL, step(5, sequence_id=201, sequence_start=True))),
        ("seq.idle.within", infer_case(SHORT_IDLE_MODEL, step(1, sequence_id=201))),
        ("seq.idle.after_timeout", after_idle(step(1, sequence_id=201))),
        ("seq.idle.restart", infer_case(SHORT_IDLE_MODEL, step(2, sequence_id=201, sequence_start=True))),
        ("seq.idle.end", infer_case(SHORT_IDLE_MODEL, step(3, sequence_id=201, sequence_end=True))),
    ]
    return cases


# ---------------------------------------------------------------- gRPC

def grpc_case(call):
    """A gRPC call through tritonclient: its answer as JSON, or its error's
    status code and message."""
    def send(server):
        import tritonclient.grpc as grpcclient
        from tritonclient.utils import InferenceServerException
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc}")
        try:
            return {"ok": json_of(call(client, grpcclient))}
        except InferenceServerException as e:
            return {"status": str(e.status()), "json": {"error": e.message() or ""}}
        finally:
            client.close()
    return send


def json_of(value):
    from google.protobuf import json_format
    from compare import normalise
    if hasattr(value, "get_response"):  # an InferResult
        resp = value.get_response()
        d = json_format.MessageToDict(resp, preserving_proto_field_name=True)
        d.pop("raw_output_contents", None)
        for out, raw in zip(d.get("outputs", []), resp.raw_output_contents):
            out["raw"] = raw.hex()  # beside its output: outputs compare by name
        return normalise(d)
    if hasattr(value, "DESCRIPTOR"):
        return normalise(json_format.MessageToDict(value, preserving_proto_field_name=True))
    return normalise(value)


def grpc_infer(model, inputs, **kw):
    def call(client, g):
        ins = []
        for name, dt, arr in inputs:
            i = g.InferInput(name, list(arr.shape), dt)
            i.set_data_from_numpy(arr)
            ins.append(i)
        return client.infer(model, ins, **kw)
    return call


def grpc_cases():
    f = np.array([[1.5, -2.0, 3.25, 4.0]], np.float32)
    i16 = np.arange(16, dtype=np.int32).reshape(1, 16)
    cases = [
        ("grpc.server_live", grpc_case(lambda c, g: {"live": c.is_server_live()})),
        ("grpc.server_ready", grpc_case(lambda c, g: {"ready": c.is_server_ready()})),
        ("grpc.server_metadata", grpc_case(lambda c, g: c.get_server_metadata())),
        ("grpc.index", grpc_case(lambda c, g: c.get_model_repository_index())),
        ("grpc.log_settings", grpc_case(lambda c, g: c.get_log_settings())),
        ("grpc.trace_settings", grpc_case(lambda c, g: c.get_trace_settings())),
        ("grpc.shm_status", grpc_case(lambda c, g: c.get_system_shared_memory_status())),
        ("grpc.metadata.no_such", grpc_case(lambda c, g: c.get_model_metadata("no_such_model"))),
        ("grpc.config.no_such", grpc_case(lambda c, g: c.get_model_config("no_such_model"))),
        ("grpc.ready.no_such", grpc_case(lambda c, g: {"ready": c.is_model_ready("no_such_model")})),
        ("grpc.load.no_such", grpc_case(lambda c, g: c.load_model("no_such_model"))),
        ("grpc.infer.identity_fp32", grpc_case(grpc_infer("identity_fp32", [("INPUT0", "FP32", f)]))),
        ("grpc.infer.identity_fp32.request_id",
         grpc_case(grpc_infer("identity_fp32", [("INPUT0", "FP32", f)], request_id="r-1"))),
        ("grpc.infer.identity_fp32.wrong_dtype", grpc_case(grpc_infer("identity_fp32", [("INPUT0", "INT32", i16)]))),
        ("grpc.infer.identity_fp32.wrong_name", grpc_case(grpc_infer("identity_fp32", [("NOPE", "FP32", f)]))),
        ("grpc.infer.simple", grpc_case(grpc_infer("simple", [("INPUT0", "INT32", i16), ("INPUT1", "INT32", i16)]))),
        ("grpc.infer.simple.missing_input", grpc_case(grpc_infer("simple", [("INPUT0", "INT32", i16)]))),
        ("grpc.infer.simple_ensemble",
         grpc_case(grpc_infer("simple_ensemble", [("INPUT0", "INT32", i16), ("INPUT1", "INT32", i16)]))),
        ("grpc.infer.add_sub_python",
         grpc_case(grpc_infer("add_sub_python", [("INPUT0", "FP32", f[0]), ("INPUT1", "FP32", f[0])]))),
        ("grpc.infer.identity_bytes",
         grpc_case(grpc_infer("identity_bytes", [("INPUT0", "BYTES", np.array([[b"a", b"bc"]], np.object_))]))),
        ("grpc.infer.square_int32.unary",
         grpc_case(grpc_infer("square_int32", [("IN", "INT32", np.array([2], np.int32))]))),
        ("grpc.infer.no_such_model", grpc_case(grpc_infer("no_such_model", [("INPUT0", "FP32", f)]))),
        ("grpc.infer.priority_string_param",
         grpc_case(grpc_infer("identity_fp32", [("INPUT0", "FP32", f)], parameters={"my": "v"}))),
    ]
    for m in MODELS:
        cases.append((f"grpc.metadata.{m}", grpc_case(lambda c, g, m=m: c.get_model_metadata(m))))
        cases.append((f"grpc.config.{m}", grpc_case(lambda c, g, m=m: c.get_model_config(m))))
        cases.append((f"grpc.ready.{m}", grpc_case(lambda c, g, m=m: {"ready": c.is_model_ready(m)})))
    return cases


def stream_case(model, requests):
    """A decoupled stream: the responses (outputs and final flags) in order."""
    def send(server):
        import queue
        import tritonclient.grpc as grpcclient
        got = queue.Queue()
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc}")
        try:
            client.start_stream(callback=lambda result, error: got.put((result, error)))
            expect_finals = 0
            for inputs in requests:
                ins = []
                for name, dt, arr in inputs:
                    i = grpcclient.InferInput(name, list(arr.shape), dt)
                    i.set_data_from_numpy(arr)
                    ins.append(i)
                client.async_stream_infer(model, ins, enable_empty_final_response=True)
                expect_finals += 1
            answers, finals = [], 0
            while finals < expect_finals:
                result, error = got.get(timeout=60)
                if error is not None:
                    answers.append({"error": error.message()})
                    finals += 1
                    continue
                resp = result.get_response()
                final = resp.parameters["triton_final_response"].bool_param
                finals += final
                answers.append({"final": final, "outputs": sorted(o.name for o in resp.outputs),
                                "raw": [c.hex() for c in resp.raw_output_contents]})
            client.stop_stream()
            return {"responses": answers}
        finally:
            client.close()
    return send


def stream_cases():
    one = lambda n: [("IN", "INT32", np.array([n], np.int32))]  # noqa: E731
    rep = [("IN", "INT32", np.array([4, 5, 6], np.int32)), ("DELAY", "UINT32", np.array([0, 0, 0], np.uint32)),
           ("WAIT", "UINT32", np.array([0], np.uint32))]
    return [
        ("stream.square.3", stream_case("square_int32", [one(3)])),
        ("stream.square.0", stream_case("square_int32", [one(0)])),
        ("stream.square.two_requests", stream_case("square_int32", [one(1), one(2)])),
        ("stream.repeat.3", stream_case("repeat_int32", [rep])),
        ("stream.identity_fp32", stream_case("identity_fp32", [[("INPUT0", "FP32", np.ones((1, 2), np.float32))]])),
    ]


# Requests that make Triton 2.51 abort (found by this corpus; each is a
# bounds check Triton added later): sent to Nereid only, which must refuse
# them cleanly. docs/differences.md lists them.
TRITON_ABORTS = ("infer.*.shape_huge", "infer.*.data_short", "infer.*.data_empty",
                 "infer.identity_bytes.output_classification")


def triton_aborts(case_id):
    import fnmatch
    return any(fnmatch.fnmatchcase(case_id, p) for p in TRITON_ABORTS)


# ---------------------------------------------------------------- shared memory

SHM_KEY = "/nrd_diff_region"
SHM_SIZE = 4096
_shm = {}


def shm_region():
    """One POSIX shared memory object both servers map (created once per
    run; the suite removes it): the simple model's inputs at 0 and 64,
    its outputs written at 1024 and 1088."""
    if "h" not in _shm:
        import tritonclient.utils.shared_memory as shm
        try:
            shm.destroy_shared_memory_region(shm.create_shared_memory_region("stale", SHM_KEY, SHM_SIZE))
        except Exception:  # noqa: BLE001 - nothing left over
            pass
        h = shm.create_shared_memory_region("diff", SHM_KEY, SHM_SIZE)
        shm.set_shared_memory_region(h, [np.arange(16, dtype=np.int32), np.full(16, 2, np.int32)])
        _shm["h"], _shm["mod"] = h, shm
    return _shm["h"]


def shm_close():
    if "h" in _shm:
        _shm["mod"].destroy_shared_memory_region(_shm.pop("h"))


def shm_case(method, path, body=None, read_outputs=False):
    """A shared memory call; with read_outputs the answer also holds what
    the server wrote into the region's output area (cleared first)."""
    def send(server):
        h = shm_region()
        mod = _shm["mod"]
        if read_outputs:
            mod.set_shared_memory_region(h, [np.zeros(32, np.int32)], offset=1024)
        out = parse_http(*http_call(server, method, path, body))
        if read_outputs:
            out["region"] = mod.get_contents_as_numpy(h, np.int32, [32], offset=1024).tolist()
        return out
    return send


def shm_cases():
    reg = {"key": SHM_KEY, "offset": 0, "byte_size": SHM_SIZE}

    def ref(region, size, offset=0):
        p = {"shared_memory_region": region, "shared_memory_byte_size": size}
        if offset:
            p["shared_memory_offset"] = offset
        return p
    good = {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "parameters": ref("r", 64)},
                       {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "parameters": ref("r", 64, 64)}],
            "outputs": [{"name": "OUTPUT0", "parameters": ref("r", 64, 1024)},
                        {"name": "OUTPUT1", "parameters": ref("r", 64, 1088)}]}
    cases = [
        ("shm.register", shm_case("POST", "/v2/systemsharedmemory/region/r/register", reg)),
        ("shm.register.again", shm_case("POST", "/v2/systemsharedmemory/region/r/register", reg)),
        ("shm.register.same_key_other_name", shm_case("POST", "/v2/systemsharedmemory/region/r2/register", reg)),
        ("shm.register.past_end", shm_case("POST", "/v2/systemsharedmemory/region/r3/register",
                                           dict(reg, offset=SHM_SIZE, byte_size=64))),
        ("shm.register.no_byte_size", shm_case("POST", "/v2/systemsharedmemory/region/r4/register",
                                               {"key": SHM_KEY, "offset": 0})),
        ("shm.status", shm_case("GET", "/v2/systemsharedmemory/status")),
        ("shm.status.r", shm_case("GET", "/v2/systemsharedmemory/region/r/status")),
        ("shm.infer.in_and_out", shm_case("POST", "/v2/models/simple/infer", good, read_outputs=True)),
        ("shm.infer.out_of_range", shm_case("POST", "/v2/models/simple/infer", dict(good, inputs=[
            dict(good["inputs"][0], parameters=ref("r", 64, SHM_SIZE - 32)), good["inputs"][1]]))),
        ("shm.infer.unknown_region", shm_case("POST", "/v2/models/simple/infer", dict(good, inputs=[
            dict(good["inputs"][0], parameters=ref("nope", 64)), good["inputs"][1]]))),
        ("shm.infer.size_mismatch", shm_case("POST", "/v2/models/simple/infer", dict(good, inputs=[
            dict(good["inputs"][0], parameters=ref("r", 60)), good["inputs"][1]]))),
        ("shm.infer.output_too_small", shm_case("POST", "/v2/models/simple/infer", dict(good, outputs=[
            {"name": "OUTPUT0", "parameters": ref("r", 32, 1024)}]))),
        ("shm.unregister.r", shm_case("POST", "/v2/systemsharedmemory/region/r/unregister", "")),
        ("shm.unregister.r.again", shm_case("POST", "/v2/systemsharedmemory/region/r/unregister", "")),
        ("shm.infer.after_unregister", shm_case("POST", "/v2/models/simple/infer", good)),
        ("shm.unregister.all", shm_case("POST", "/v2/systemsharedmemory/unregister", "")),
        ("shm.status.after", shm_case("GET", "/v2/systemsharedmemory/status")),
    ]
    return cases


def all_cases():
    """Every case in the order it is sent (sequences' steps in story order)."""
    cases = route_cases() + infer_cases() + sequence_cases() + shm_cases() + grpc_cases() + stream_cases()
    ids = [c[0] for c in cases]
    assert len(ids) == len(set(ids)), "duplicate case ids"
    return cases
