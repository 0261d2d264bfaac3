#!/usr/bin/python3
"""Writes the hand-made seed inputs of the wire fuzzers into
tests/fuzz/corpus/{http,grpc}/seed-*: one request of each kind the front
ends serve, shaped as tritonclient sends them. Run from anywhere with
Debian's python (the gRPC seeds need python3-grpc-tools for our proto).
The rest of each corpus is what libFuzzer kept (tests/fuzz/run.sh)."""
import gzip, json, os, struct, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def http_seeds():
    def req(method, path, body=b"", headers=()):
        h = [f"{method} {path} HTTP/1.1", "Host: localhost"] + list(headers)
        if body or method == "POST":
            h.append(f"Content-Length: {len(body)}")
        return ("\r\n".join(h) + "\r\n\r\n").encode() + body

    def infer_json(model, inputs, outputs=None, **extra):
        doc = {"inputs": inputs, **extra}
        if outputs is not None:
            doc["outputs"] = outputs
        return req("POST", f"/v2/models/{model}/infer", json.dumps(doc).encode(),
                   ["Content-Type: application/json"])

    def infer_binary(model, inputs, raws, outputs, **extra):
        header = json.dumps({"inputs": inputs, "outputs": outputs, **extra}).encode()
        return req("POST", f"/v2/models/{model}/infer", header + b"".join(raws),
                   ["Content-Type: application/octet-stream",
                    f"Inference-Header-Content-Length: {len(header)}"])

    fp32 = [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": [1.5, -2, 3e3, 0]}]
    s = {}
    s["health"] = req("GET", "/v2/health/live") + req("GET", "/v2/health/ready")
    s["metadata"] = req("GET", "/v2") + req("GET", "/v2/models/simple") + \
        req("GET", "/v2/models/simple/versions/1/ready")
    s["config_stats"] = req("GET", "/v2/models/identity_fp32/config") + \
        req("GET", "/v2/models/stats") + req("GET", "/v2/models/simple/versions/1/stats")
    s["infer_json_fp32"] = infer_json("identity_fp32", fp32, id="r1",
                                      parameters={"priority": 1, "timeout": 100000})
    s["infer_json_bytes"] = infer_json(
        "identity_bytes", [{"name": "INPUT0", "shape": [1, 2], "datatype": "BYTES",
                            "data": ["a\u00e9\\n", ""]}],
        [{"name": "OUTPUT0", "parameters": {"binary_data": True}}])
    ints = list(range(16))
    s["infer_json_simple"] = infer_json(
        "simple", [{"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": ints},
                   {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [[1] * 16]}],
        [{"name": "OUTPUT0", "parameters": {"classification": 3}}, {"name": "OUTPUT1"}])
    s["infer_binary_fp32"] = infer_binary(
        "identity_fp32", [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32",
                           "parameters": {"binary_data_size": 16}}],
        [struct.pack("<4f", 1, 2, 3, 4)], [{"name": "OUTPUT0", "parameters": {"binary_data": True}}],
        parameters={"binary_data_output": True})
    s["infer_binary_bytes"] = infer_binary(
        "identity_bytes", [{"name": "INPUT0", "shape": [1, 2], "datatype": "BYTES",
                            "parameters": {"binary_data_size": 11}}],
        [struct.pack("<I", 3) + b"abc" + struct.pack("<I", 0)], [{"name": "OUTPUT0"}])
    raw = struct.pack("<4f", 1, 2, 3, 4)
    s["infer_raw"] = req("POST", "/v2/models/identity_fp32/infer", raw,
                         ["Content-Type: application/octet-stream",
                          "Inference-Header-Content-Length: 0"])
    body = json.dumps({"inputs": fp32}).encode()
    s["infer_gzip"] = req("POST", "/v2/models/identity_fp32/infer", gzip.compress(body, mtime=0),
                          ["Content-Encoding: gzip", "Accept-Encoding: gzip, deflate"])
    s["infer_chunked"] = (b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\n"
                          b"Transfer-Encoding: chunked\r\n\r\n" +
                          b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")
    s["infer_sequence"] = infer_json("identity_fp32", fp32,
                                     parameters={"sequence_id": "s-1", "sequence_start": True,
                                                 "sequence_end": False})
    s["infer_shm"] = infer_json(
        "identity_fp32", [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32",
                           "parameters": {"shared_memory_region": "r0",
                                          "shared_memory_byte_size": 16,
                                          "shared_memory_offset": 0}}],
        [{"name": "OUTPUT0", "parameters": {"shared_memory_region": "r0",
                                            "shared_memory_byte_size": 16}}])
    s["shm_routes"] = req("GET", "/v2/systemsharedmemory/status") + \
        req("POST", "/v2/systemsharedmemory/region/r0/register",
            json.dumps({"key": "/nrd_fuzz_none", "offset": 0, "byte_size": 64}).encode()) + \
        req("POST", "/v2/systemsharedmemory/region/r0/unregister") + \
        req("POST", "/v2/cudasharedmemory/region/c/register",
            json.dumps({"raw_handle": {"b64": "AAAA"}, "device_id": 0, "byte_size": 4}).encode())
    s["repository"] = req("POST", "/v2/repository/index", b"{\"ready\": true}") + \
        req("POST", "/v2/repository/models/simple/load",
            json.dumps({"parameters": {"config": "{\"max_batch_size\": 0}",
                                       "file:1/model.bin": "AAEC"}}).encode()) + \
        req("POST", "/v2/repository/models/simple/unload",
            b"{\"parameters\": {\"unload_dependents\": true}}")
    # Loads with a whole config as the override; they change the model set
    # only when the fuzzer runs with NRD_FUZZ_EXPLICIT=1.
    cfg = {"backend": "identity", "max_batch_size": 8,
           "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
           "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
           "instance_group": [{"kind": "KIND_CPU", "count": 2}],
           "dynamic_batching": {"max_queue_delay_microseconds": 100}}
    s["load_override"] = req("POST", "/v2/repository/models/identity_fp32/load",
                             json.dumps({"parameters": {"config": json.dumps(cfg)}}).encode()) + \
        infer_json("identity_fp32", fp32) + \
        req("POST", "/v2/repository/models/made_up/load",
            json.dumps({"parameters": {"config": json.dumps(cfg), "file:1/weights.bin": "AAECAw=="}}).encode()) + \
        infer_json("made_up", fp32) + req("POST", "/v2/repository/models/made_up/unload")
    s["logging_trace"] = req("GET", "/v2/logging") + \
        req("POST", "/v2/logging", b"{\"log_verbose_level\": 0, \"log_info\": false}") + \
        req("GET", "/v2/trace/setting") + req("POST", "/v2/models/simple/trace/setting", b"{}")
    gen = json.dumps({"IN": [1, 2, 3], "DELAY": [0, 1, 0], "WAIT": 0}).encode()
    s["generate"] = req("POST", "/v2/models/repeat_int32/generate", gen) + \
        req("POST", "/v2/models/square_int32/generate_stream", b"{\"IN\": 3}")
    s["infer_decoupled"] = infer_json(
        "square_int32", [{"name": "IN", "shape": [1], "datatype": "INT32", "data": [2]}])
    s["pipelined_close"] = req("GET", "/v2/health/live", headers=["Connection: keep-alive"]) + \
        req("HEAD", "/v2/models/simple", headers=["Connection: close"])
    s["expect_continue"] = req("POST", "/v2/models/identity_fp32/infer",
                               json.dumps({"inputs": fp32}).encode(), ["Expect: 100-continue"])
    s["http10"] = b"GET /v2/health/ready HTTP/1.0\r\n\r\n"
    return s


def grpc_seeds():
    with tempfile.TemporaryDirectory() as work:
        from grpc_tools import protoc
        assert protoc.main(["protoc", f"-I{ROOT}/proto", f"--python_out={work}",
                            "grpc_service.proto", "model_config.proto", "health.proto"]) == 0
        sys.path.insert(0, work)
        import grpc_service_pb2 as pb
        import health_pb2 as hpb

    def call(method, *msgs, flags=0, timeout=b""):
        return bytes([method, flags, len(timeout)]) + timeout + b"NRD|".join(
            m.SerializeToString(deterministic=True) for m in msgs)

    def infer(model, tensors, raw=True, **params):
        r = pb.ModelInferRequest(model_name=model, id="q1")
        for name, dt, shape, values in tensors:
            t = r.inputs.add(name=name, datatype=dt, shape=shape)
            fmt = {"FP32": "f", "INT32": "i", "UINT32": "I"}.get(dt)
            if raw and fmt:
                r.raw_input_contents.append(struct.pack(f"<{len(values)}{fmt}", *values))
            elif dt == "FP32":
                t.contents.fp32_contents.extend(values)
            elif dt == "INT32":
                t.contents.int_contents.extend(values)
            elif dt == "UINT32":
                t.contents.uint_contents.extend(values)
            elif dt == "BYTES":
                t.contents.bytes_contents.extend(values)
        for k, v in params.items():
            if isinstance(v, bool):
                r.parameters[k].bool_param = v
            elif isinstance(v, int):
                r.parameters[k].int64_param = v
            else:
                r.parameters[k].string_param = v
        return r

    # Method indexes follow `paths` in fuzz_grpc_wire.c.
    fp32 = [("INPUT0", "FP32", [1, 4], [1.0, 2.0, 3.0, 4.0])]
    s = {}
    s["infer_raw"] = call(0, infer("identity_fp32", fp32, priority=1))
    s["infer_typed"] = call(0, infer("simple", [("INPUT0", "INT32", [1, 16], list(range(16))),
                                                ("INPUT1", "INT32", [1, 16], [1] * 16)], raw=False))
    s["infer_bytes"] = call(0, infer("identity_bytes", [("INPUT0", "BYTES", [1, 2], [b"ab", b""])],
                                     raw=False))
    s["infer_timeout"] = call(0, infer("identity_fp32", fp32), timeout=b"5S")
    s["infer_gzip"] = call(0, infer("identity_fp32", fp32), flags=0b1001)
    s["infer_deflate"] = call(0, infer("identity_fp32", fp32), flags=0b1011)
    s["stream_square"] = call(1, infer("square_int32", [("IN", "INT32", [1], [3])],
                                       triton_enable_empty_final_response=True),
                              infer("identity_fp32", fp32))
    s["stream_repeat"] = call(1, infer("repeat_int32", [("IN", "INT32", [3], [4, 5, 6]),
                                                        ("DELAY", "UINT32", [3], [0, 2, 1]),
                                                        ("WAIT", "UINT32", [1], [1])]))
    s["stream_sequence"] = call(1, infer("identity_fp32", fp32, sequence_id=7, sequence_start=True),
                                infer("identity_fp32", fp32, sequence_id=7, sequence_end=True))
    s["stream_cancel"] = call(1, infer("square_int32", [("IN", "INT32", [1], [50])]), flags=0b1100000)
    s["server_live"] = call(2, pb.ServerLiveRequest())
    s["server_ready"] = call(3, pb.ServerReadyRequest())
    s["model_ready"] = call(4, pb.ModelReadyRequest(name="simple", version="1"))
    s["server_metadata"] = call(5, pb.ServerMetadataRequest())
    s["model_metadata"] = call(6, pb.ModelMetadataRequest(name="identity_bytes"))
    s["model_config"] = call(7, pb.ModelConfigRequest(name="repeat_int32"))
    s["model_statistics"] = call(8, pb.ModelStatisticsRequest(name=""))
    s["repository_index"] = call(9, pb.RepositoryIndexRequest(ready=True))
    load = pb.RepositoryModelLoadRequest(model_name="simple")
    load.parameters["config"].string_param = "{\"max_batch_size\": 0}"
    load.parameters["file:1/model.bin"].bytes_param = b"\0\1"
    s["repository_load"] = call(10, load)
    unload = pb.RepositoryModelUnloadRequest(model_name="simple")
    unload.parameters["unload_dependents"].bool_param = True
    s["repository_unload"] = call(11, unload)
    s["shm_status"] = call(12, pb.SystemSharedMemoryStatusRequest(name=""))
    s["shm_register"] = call(13, pb.SystemSharedMemoryRegisterRequest(
        name="r0", key="/nrd_fuzz_none", offset=0, byte_size=64))
    s["shm_unregister"] = call(14, pb.SystemSharedMemoryUnregisterRequest(name="r0"))
    s["cuda_status"] = call(15, pb.CudaSharedMemoryStatusRequest())
    trace = pb.TraceSettingRequest(model_name="")
    trace.settings["trace_level"].value.append("OFF")
    s["trace_setting"] = call(18, trace)
    logs = pb.LogSettingsRequest()
    logs.settings["log_verbose_level"].uint32_param = 0
    s["log_settings"] = call(19, logs)
    s["health_check"] = call(20, hpb.HealthCheckRequest(service=""))
    s["unknown_method"] = call(21, pb.ServerLiveRequest())
    return s


for proto, seeds in (("http", http_seeds()), ("grpc", grpc_seeds())):
    out = os.path.join(HERE, "corpus", proto)
    os.makedirs(out, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(out, f"seed-{name}"), "wb") as f:
            f.write(data)
    print(f"{len(seeds)} {proto} seeds in {out}")
