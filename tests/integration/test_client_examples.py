"""What the Python examples of Triton's client repository (src/python/examples,
tritonclient 2.x) do, driven here with our own code in the same order of
calls, against the bundled example repository (examples/models), whose
models have the names, tensors and answers those examples expect: simple,
simple_string, simple_int8, simple_identity, simple_sequence,
simple_dyna_sequence and simple_string_dyna_sequence.

The examples themselves run unchanged against `scripts/serve.sh
--allow-client-shm=true` (docs/testing.md says how); these tests keep what
they check from regressing.

Run by ctest with NEREID_BIN and NEREID_BACKEND_DIR set (tests/CMakeLists.txt).
"""
import json
import os
import queue
import tempfile
import uuid

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException, serialize_byte_tensor, serialized_byte_size

from security_helpers import WatchedServer

MODELS = ["simple", "simple_string", "simple_int8", "simple_identity", "simple_sequence",
          "simple_dyna_sequence", "simple_string_dyna_sequence"]
# The values the sequence examples send after a first one (0, 100 or 20).
VALUES = [11, 7, 5, 3, 2, 0, 1]


@pytest.fixture(scope="module")
def server():
    args = ["--model-control-mode=explicit", "--allow-client-shm=true"] + [f"--load-model={m}" for m in MODELS]
    with WatchedServer(args) as s:
        yield s


def http(s):
    return httpclient.InferenceServerClient(f"127.0.0.1:{s.ports['http']}")


def grpc_client(s):
    return grpcclient.InferenceServerClient(f"127.0.0.1:{s.ports['grpc']}")


def sequence_inputs(module, value):
    data = np.full((1, 1), value, dtype=np.int32)
    x = module.InferInput("INPUT", data.shape, "INT32")
    x.set_data_from_numpy(data)
    return [x]


def expected(dyna, corrids, string_id):
    """What the examples expect of their three sequences: two with integer
    IDs on simple_sequence (or simple_dyna_sequence) and one with a string
    ID (simple_sequence, or simple_string_dyna_sequence, which sums)."""
    rows = []
    string_sum = None
    for i in range(len(VALUES) + 1):
        a = 1 if i == 0 else VALUES[i - 1]
        b = 101 if i == 0 else -VALUES[i - 1]
        if dyna:
            s = 20 if i == 0 else -VALUES[i - 1] + string_sum
        else:
            s = 21 if i == 0 else -VALUES[i - 1]
        string_sum = s
        if dyna and i == len(VALUES):
            a += corrids[0]
            b += corrids[1]
            s += int(string_id)
        rows.append((a, b, s))
    return rows


def sequences(dyna):
    ids = (1000, 1001)
    string_id = "1002" if dyna else str(uuid.uuid4())
    int_model = "simple_dyna_sequence" if dyna else "simple_sequence"
    string_model = "simple_string_dyna_sequence" if dyna else "simple_sequence"
    plan = [(ids[0], int_model, [0] + VALUES), (ids[1], int_model, [100] + [-v for v in VALUES]),
            (string_id, string_model, [20] + [-v for v in VALUES])]
    return plan, expected(dyna, ids, string_id)


@pytest.mark.parametrize("dyna", [False, True])
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_sequences_sent_one_request_at_a_time(server, protocol, dyna):
    """simple_{http,grpc}_sequence_sync_infer_client.py [-d]."""
    module, client = (httpclient, http(server)) if protocol == "http" else (grpcclient, grpc_client(server))
    plan, rows = sequences(dyna)
    got = [[] for _ in plan]
    for k, (sid, model, values) in enumerate(plan):
        for n, v in enumerate(values):
            r = client.infer(model, sequence_inputs(module, v), sequence_id=sid, sequence_start=n == 0,
                             sequence_end=n == len(values) - 1, outputs=[module.InferRequestedOutput("OUTPUT")])
            got[k].append(int(r.as_numpy("OUTPUT")[0][0]))
    assert [tuple(col) for col in zip(*got)] == rows


@pytest.mark.parametrize("dyna", [False, True])
def test_sequences_interleaved_on_one_stream(server, dyna):
    """simple_grpc_sequence_stream_infer_client.py [-d]: three sequences
    on one stream, answers told apart by their request IDs."""
    plan, rows = sequences(dyna)
    answers = queue.Queue()
    client = grpc_client(server)
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    for sid, model, values in plan:
        for n, v in enumerate(values):
            client.async_stream_infer(model, sequence_inputs(grpcclient, v), request_id=f"{sid}_{n + 1}",
                                      sequence_id=sid, sequence_start=n == 0, sequence_end=n == len(values) - 1,
                                      outputs=[grpcclient.InferRequestedOutput("OUTPUT")])
    by_id = {}
    for _ in range(sum(len(v) for _, _, v in plan)):
        result, error = answers.get(timeout=60)
        assert error is None, error
        rid = result.get_response().id
        by_id[rid] = int(result.as_numpy("OUTPUT")[0][0])
    client.stop_stream()
    got = [[by_id[f"{sid}_{n + 1}"] for n in range(len(values))] for sid, _, values in plan]
    assert [tuple(col) for col in zip(*got)] == rows


def string_pair():
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.ones((1, 16), dtype=np.int32)
    return a, b, np.array([str(x).encode() for x in a.flatten()], dtype=object).reshape(1, 16), \
        np.array([str(x).encode() for x in b.flatten()], dtype=object).reshape(1, 16)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_strings_as_the_string_examples_send_them(server, protocol):
    """simple_{http,grpc}_string_infer_client.py: simple_string, then
    simple_identity with a string that holds a NUL."""
    module, client = (httpclient, http(server)) if protocol == "http" else (grpcclient, grpc_client(server))
    a, b, sa, sb = string_pair()
    inputs = [module.InferInput("INPUT0", [1, 16], "BYTES"), module.InferInput("INPUT1", [1, 16], "BYTES")]
    inputs[0].set_data_from_numpy(sa)
    inputs[1].set_data_from_numpy(sb)
    r = client.infer("simple_string", inputs)
    assert [int(x) for x in r.as_numpy("OUTPUT0").flatten()] == list((a + b).flatten())
    assert [int(x) for x in r.as_numpy("OUTPUT1").flatten()] == list((a - b).flatten())
    odd = np.array([["a\0b".encode(), b"", "\u00e9".encode()]], dtype=object)
    x = module.InferInput("INPUT0", odd.shape, "BYTES")
    x.set_data_from_numpy(odd)
    r = client.infer("simple_identity", [x])
    assert r.as_numpy("OUTPUT0").tolist() == odd.tolist()


def test_explicit_contents_without_raw_bytes(server):
    """grpc_explicit_{int,int8,byte}_content_client.py: tensors in the
    typed `contents` fields of ModelInferRequest, answers in raw bytes."""
    stub = service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{server.ports['grpc']}"))
    a = list(range(16))
    b = [1] * 16

    def request(model, datatype, field):
        req = service_pb2.ModelInferRequest(model_name=model)
        for name, values in (("INPUT0", a), ("INPUT1", b)):
            t = req.inputs.add(name=name, datatype=datatype, shape=[1, 16])
            getattr(t.contents, field).extend(values)
        return stub.ModelInfer(req)

    r = request("simple", "INT32", "int_contents")
    assert np.frombuffer(r.raw_output_contents[0], dtype=np.int32).tolist() == [x + 1 for x in a]
    r = request("simple_int8", "INT8", "int_contents")
    names = [o.name for o in r.outputs]
    out1 = r.raw_output_contents[names.index("OUTPUT1")]
    assert np.frombuffer(out1, dtype=np.int8).tolist() == [x - 1 for x in a]
    req = service_pb2.ModelInferRequest(model_name="simple_string")
    for name, values in (("INPUT0", a), ("INPUT1", b)):
        t = req.inputs.add(name=name, datatype="BYTES", shape=[1, 16])
        t.contents.bytes_contents.extend(str(v).encode() for v in values)
    r = stub.ModelInfer(req)
    out0 = r.raw_output_contents[[o.name for o in r.outputs].index("OUTPUT0")]
    # BYTES in raw form: each element a 4-byte little-endian length, then it.
    got, at = [], 0
    while at < len(out0):
        n = int.from_bytes(out0[at:at + 4], "little")
        got.append(int(out0[at + 4:at + 4 + n]))
        at += 4 + n
    assert got == [x + 1 for x in a]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_strings_through_system_shared_memory(server, protocol):
    """simple_{http,grpc}_shm_string_client.py."""
    module, client = (httpclient, http(server)) if protocol == "http" else (grpcclient, grpc_client(server))
    client.unregister_system_shared_memory()
    a, b, sa, sb = string_pair()
    s0, s1 = serialize_byte_tensor(sa.flatten()), serialize_byte_tensor(sb.flatten())
    expect0 = np.array([str(x).encode() for x in (a + b).flatten()], dtype=object)
    size0, size1 = serialized_byte_size(s0), serialized_byte_size(s1)
    out_size = serialized_byte_size(serialize_byte_tensor(expect0))
    key = f"/nrd_ce_{os.getpid()}_{protocol}"
    handles = [shm.create_shared_memory_region("input0_data", key + "_in0", size0),
               shm.create_shared_memory_region("input1_data", key + "_in1", size1),
               shm.create_shared_memory_region("output_data", key + "_out", out_size)]
    try:
        shm.set_shared_memory_region(handles[0], [s0])
        shm.set_shared_memory_region(handles[1], [s1])
        client.register_system_shared_memory("input0_data", key + "_in0", size0)
        client.register_system_shared_memory("input1_data", key + "_in1", size1)
        client.register_system_shared_memory("output_data", key + "_out", out_size)
        inputs = [module.InferInput("INPUT0", [1, 16], "BYTES"), module.InferInput("INPUT1", [1, 16], "BYTES")]
        inputs[0].set_shared_memory("input0_data", size0)
        inputs[1].set_shared_memory("input1_data", size1)
        outputs = [module.InferRequestedOutput("OUTPUT0")]
        outputs[0].set_shared_memory("output_data", out_size)
        r = client.infer("simple_string", inputs, outputs=outputs)
        out = r.get_output("OUTPUT0")
        shape = out["shape"] if protocol == "http" else list(out.shape)
        got = shm.get_contents_as_numpy(handles[2], np.object_, shape)
        assert [int(x) for x in got.flatten()] == list((a + b).flatten())
        status = client.get_system_shared_memory_status()
        assert len(status) == 3 if protocol == "http" else len(status.regions) == 3
    finally:
        client.unregister_system_shared_memory()
        for h in handles:
            shm.destroy_shared_memory_region(h)


def test_model_control_as_the_example_does():
    """simple_{http,grpc}_model_control.py on a Python model whose
    configuration names no backend: Triton takes it from 1/model.py."""
    with tempfile.TemporaryDirectory() as top:
        os.makedirs(os.path.join(top, "addsub", "1"))
        with open(os.path.join(top, "addsub", "config.pbtxt"), "w") as f:
            f.write('max_batch_size: 8\n'
                    'input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] },\n'
                    '        { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]\n'
                    'output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] },\n'
                    '         { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]\n')
        src = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "models", "simple_int8", "1", "model.py")
        with open(src) as f, open(os.path.join(top, "addsub", "1", "model.py"), "w") as g:
            g.write(f.read())
        with WatchedServer(["--model-control-mode=explicit"], repo=top) as s:
            for client in (http(s), grpc_client(s)):
                client.load_model("addsub")
                assert client.is_model_ready("addsub")
                with pytest.raises(InferenceServerException) as e:
                    client.load_model("addsub", config='"parameters": {"config": {{"max_batch_size": "16"}}}')
                assert e.value.message().startswith("failed to load 'addsub', failed to poll from model repository")
                assert str(e.value.status()) in ("500", "StatusCode.INTERNAL")
                client.load_model("addsub", config='{"max_batch_size":"16"}')
                cfg = client.get_model_config("addsub")
                cfg = cfg if isinstance(cfg, dict) else json.loads(grpc_json(cfg))
                assert cfg["max_batch_size"] == 16 and cfg["backend"] == "python"
                client.unload_model("addsub")
                assert not client.is_model_ready("addsub")
                with pytest.raises(InferenceServerException) as e:
                    client.load_model("wrong_model_name")
                assert "failed to load" in e.value.message()


def grpc_json(message):
    from google.protobuf import json_format
    return json_format.MessageToJson(message.config, preserving_proto_field_name=True)
