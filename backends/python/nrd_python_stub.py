"""The stub's message loop (run by triton_python_backend_stub): loads
model.py, answers the backend's init / execute / finalize messages through
the shared memory (_nrd_ipc, py_ipc.h)."""
import asyncio
import functools
import importlib.util
import inspect
import json
import os
import struct
import sys
import threading
import traceback

import numpy as np

import _nrd_ipc
import triton_python_backend_utils as pb_utils

META = _nrd_ipc.META_OFFSET
ALIGN = 64
# Outputs at least this large that are views of the batch's inputs are
# not copied again (smaller ones: a copy costs less than the check).
ZERO_COPY_MIN = 1 << 16
# numpy dtype of each datatype name (BYTES aside), and back: the hot path
# looks types up here instead of through pb_utils' conversions.
_NP_DTYPE = {name: np.dtype(t) for i, name in enumerate(pb_utils._NAMES)
             if (t := pb_utils.triton_to_numpy_type(i)) is not None and name != "BYTES"}
_DTYPE_NAME = {dt: name for name, dt in _NP_DTYPE.items()}
# TRITONSERVER_DataType of each numpy dtype (the index in pb_utils._NAMES).
_DTYPE_CODE = {dt: pb_utils._NAMES.index(name) for name, dt in _NP_DTYPE.items()}
_BYTES_CODE = pb_utils._NAMES.index("BYTES")
# The binary execute reply (py_ipc.h, "Binary execute reply"): a header,
# per response its output count, per output its fixed part, dims x int64
# and its name with a NUL.
_REPLY_HEAD = struct.Struct("<cxxxI")
_REPLY_COUNT = struct.Struct("<I")
_REPLY_OUT = struct.Struct("<BBHxxxxQQ")
_SHAPE = [struct.Struct(f"<{d}q") for d in range(65)]
_RELEASE_ALL = pb_utils.TRITONSERVER_REQUEST_RELEASE_ALL
_Tensor = pb_utils.Tensor
_new_tensor = object.__new__
# Message codecs: compact, no cycle check, no encoding sniffing (UTF-8).
_encode = json.JSONEncoder(check_circular=False, separators=(",", ":")).encode
_scan = json.JSONDecoder().scan_once


def _decode(text):
    """A message's JSON (the server writes exactly one value, no
    whitespace): the C scanner without JSONDecoder.decode's wrapper and
    its two whitespace matches."""
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        raise ValueError(f"python: unreadable message: {text[:80]!r}") from None
    if end != len(text):
        raise ValueError(f"python: unreadable message: {text[:80]!r}")
    return value


class Stub:
    def __init__(self):
        self.buf = None
        self.maps = []  # (address, size) of each mapping of the region, newest last
        self.grow_lock = threading.Lock()
        self.adopt(_nrd_ipc.buffer())
        # The executing batch's inputs lie in [DATA_OFFSET, in_end): an
        # output that is one of them (an identity) is sent from there.
        self.in_end = 0
        self.model = None
        self.model_file = None
        self.instance_name = ""
        self.loop = None
        self.decoupled = False
        # One message at a time on the shared memory: the main loop's
        # replies and the response senders' messages (from any thread).
        self.ipc_lock = threading.Lock()
        self.out_off = 0
        self.used = []
        self.closed = []
        self.active = False  # handling a server message: the server answers ours
        self.generation = 0  # of the message being handled: senders belong to one
        # senders_lock is senders_done's lock: `with` on it directly costs
        # a third of the Condition's Python-level __enter__/__exit__.
        self.senders_lock = threading.Lock()
        self.senders_done = threading.Condition(self.senders_lock)

    # -- helpers --
    def adopt(self, buf):
        """Uses `buf`, the region's newest mapping (older ones stay valid)."""
        self.buf = buf
        self.maps.append((np.frombuffer(buf, np.uint8).__array_interface__["data"][0], len(buf)))

    def refresh(self):
        """After the server's message: maps the region anew if it grew."""
        buf = _nrd_ipc.remap()
        if buf is not None:
            self.adopt(buf)

    def ensure(self, need, what):
        """Grows the region to `need` bytes when smaller (the server waits
        for us meanwhile)."""
        if need <= len(self.buf):
            return
        with self.grow_lock:
            if need > len(self.buf):
                try:
                    self.adopt(_nrd_ipc.grow(need))
                except OSError as e:
                    raise pb_utils.TritonModelException(
                        f"python: {what} need {need} bytes of shared memory: {e}") from None

    def offset_of(self, arr):
        """Where `arr`'s data lies in the region, or None."""
        addr = arr.__array_interface__["data"][0]
        for base, size in self.maps:
            if base <= addr < base + size:
                return addr - base
        return None

    def where(self, tb):
        """'file line N' of the deepest frame in the model file (or the last)."""
        frames = traceback.extract_tb(tb)
        pick = None
        for f in frames:
            if f.filename == self.model_file:
                pick = f
        if pick is None and frames:
            pick = frames[-1]
        return f" ({os.path.basename(pick.filename)} line {pick.lineno})" if pick else ""

    def describe(self, e):
        return f"{type(e).__name__}: {e}{self.where(e.__traceback__)}"

    def run(self, fn, *args):
        res = fn(*args)
        if type(res) is not list and res is not None and inspect.isawaitable(res):
            if self.loop is None:
                self.loop = asyncio.new_event_loop()
            res = self.loop.run_until_complete(res)
        return res

    # -- messages --
    def load(self):
        """Imports model.py; returns (module, None) or (None, error reply)."""
        try:
            spec = importlib.util.spec_from_file_location("model", self.model_file)
            module = importlib.util.module_from_spec(spec)
            sys.modules["model"] = module
            spec.loader.exec_module(module)
        # Triton's text (the exception as Python prints it) comes first,
        # then the file.
        except SyntaxError as e:
            traceback.print_exc()
            return None, {"error": f"SyntaxError: {e} in {self.model_file}", "code": 3}
        except BaseException as e:  # noqa: BLE001 - any failure fails the load
            traceback.print_exc()
            return None, {"error": f"{self.describe(e)} in {self.model_file}", "code": 3}
        cls = getattr(module, "TritonPythonModel", None)
        if cls is None:
            # Triton imports model.py as the module "<version>.model".
            version = os.path.basename(os.path.dirname(self.model_file))
            return None, {"error": f"AttributeError: module '{version}.model' has no attribute 'TritonPythonModel' "
                                   f"in {self.model_file}", "code": 3}
        return cls, None

    def auto_complete(self, msg):
        self.model_file = msg["model_file"]
        cls, err = self.load()
        if err is not None:
            return err
        config = pb_utils.ModelConfig(msg["config"])
        if hasattr(cls, "auto_complete_config"):
            try:
                config = cls.auto_complete_config(config)
            except BaseException as e:  # noqa: BLE001
                traceback.print_exc()
                return {"error": f"python: auto_complete_config failed: {self.describe(e)}", "code": 3}
        return {"config": config.as_dict()}

    def init(self, msg):
        args = msg["args"]
        self.model_file = args.pop("model_file")
        self.instance_name = args.get("model_instance_name", "")
        pb_utils._instance_name = self.instance_name
        try:
            policy = json.loads(args.get("model_config", "{}")).get("model_transaction_policy", {})
            self.decoupled = bool(policy.get("decoupled", False))
        except ValueError:
            self.decoupled = False
        cls, err = self.load()
        if err is not None:
            return err
        self.model = cls()
        if hasattr(self.model, "initialize"):
            try:
                self.run(self.model.initialize, args)
            except BaseException as e:  # noqa: BLE001
                traceback.print_exc()
                return {"error": f"{self.describe(e)} in initialize of {self.model_file}", "code": 1}
        return {}

    def tensor_in(self, d):
        dtype = d["dtype"]
        shape = d["shape"]
        off, size = d["off"], d["size"]
        dt = _NP_DTYPE.get(dtype)
        if dt is not None:
            # A view of the region (one call: a third of frombuffer's and
            # reshape's time).
            arr = np.ndarray(shape, dt, self.buf, off)
        elif dtype == "BYTES":
            count = int(np.prod(shape)) if shape else 1
            arr = pb_utils.deserialize_bytes_tensor(self.buf[off:off + size], count).reshape(shape)
        else:
            raise pb_utils.TritonModelException(f"unsupported input datatype {dtype}")
        return pb_utils.Tensor._wrap(d["name"], arr, dtype)

    def request(self, d, factory):
        """The InferenceRequest of message entry `d`; `factory` makes its
        response sender at first use."""
        inputs = []
        for i in d["inputs"]:
            dt = _NP_DTYPE.get(i["dtype"])
            if dt is None:
                inputs.append(self.tensor_in(i))
                continue
            # tensor_in's common case inline (a view of the region).
            t = _new_tensor(_Tensor)
            t._name = i["name"]
            t._array = np.ndarray(i["shape"], dt, self.buf, i["off"])
            t._dtype = i["dtype"]
            inputs.append(t)
        return pb_utils.InferenceRequest._wrap(inputs, d["requested"], d["id"], d.get("correlation_id", 0),
                                               d["flags"], d["timeout"], d["parameters"], factory)

    def response_out(self, resp, off):
        """The reply entry (JSON) of one response, its outputs written from
        `off` on; returns (entry, next offset)."""
        if resp is None:
            return {"error": "python: execute returned None for a request of a model that is not decoupled"}, off
        if not isinstance(resp, pb_utils.InferenceResponse):
            return {"error": f"python: execute returned a {type(resp).__name__}, not an InferenceResponse"}, off
        if resp.has_error():
            err = resp.error()
            code = err.code() if isinstance(err, pb_utils.TritonError) else 1
            msg = err.message() if hasattr(err, "message") else str(err)
            return {"error": msg, "code": code or 1}, off
        outs, off = self.outputs_out(resp, off)
        outs = [{"name": name, "dtype": pb_utils._NAMES[code], "shape": list(shape), "off": at, "size": n}
                for name, code, shape, at, n in outs]
        if resp._params:
            return {"outputs": outs, "parameters": resp._params}, off
        return {"outputs": outs}, off

    def outputs_out(self, resp, off):
        """Writes a response's output tensors from `off` on (an identity's
        large output stays where its input lies); returns ([(name,
        datatype code, shape, offset, bytes)], next offset)."""
        outs = []
        for t in resp._tensors:
            arr = t._array
            if type(arr) is not np.ndarray:
                arr = np.asarray(arr)
            off = (off + ALIGN - 1) & -ALIGN
            code = _DTYPE_CODE.get(arr.dtype)
            if code is None:
                if arr.dtype.kind in "OSU":
                    data = pb_utils._serialize_bytes(arr)
                    n = len(data)
                    self.ensure(off + n, "the outputs")
                    self.buf[off:off + n] = data
                    outs.append((t._name, _BYTES_CODE, arr.shape, off, n))
                    off += n
                    continue
                code = pb_utils._NAMES.index(pb_utils._dtype_name(arr))
            n = arr.nbytes
            if n < ZERO_COPY_MIN:
                # Small: tobytes (C order) and a slice store cost less
                # than a numpy view of the region and a copy into it.
                if off + n > len(self.buf):
                    self.ensure(off + n, "the outputs")
                self.buf[off:off + n] = arr.tobytes()
                outs.append((t._name, code, arr.shape, off, n))
                off += n
                continue
            if arr.flags.c_contiguous:
                at = self.offset_of(arr)
                if at is not None and _nrd_ipc.DATA_OFFSET <= at and at + n <= self.in_end:
                    outs.append((t._name, code, arr.shape, at, n))
                    continue
            self.ensure(off + n, "the outputs")
            dst = np.ndarray(arr.shape, dtype=arr.dtype, buffer=self.buf, offset=off)
            dst[...] = arr
            outs.append((t._name, code, arr.shape, off, n))
            off += n
        return outs, off

    def binary_reply(self, responses, off):
        """The execute reply in binary (py_ipc.h) when every response is a
        plain InferenceResponse (no error, no parameters) of a request
        released whole; else None (the JSON reply says the rest)."""
        parts = [_REPLY_HEAD.pack(b"B", len(responses))]
        append = parts.append
        for resp in responses:
            if type(resp) is not pb_utils.InferenceResponse or resp._error is not None or resp._params:
                return None
            outs, off = self.outputs_out(resp, off)
            append(_REPLY_COUNT.pack(len(outs)))
            for name, code, shape, at, n in outs:
                dims = len(shape)
                name = name.encode()
                if dims > 64 or len(name) >= 0xffff:
                    return None  # the JSON reply carries it (or refuses it)
                append(_REPLY_OUT.pack(code, dims, len(name) + 1, at, n))
                append(_SHAPE[dims].pack(*shape))
                append(name)
                append(b"\0")
        return b"".join(parts)

    # -- messages to the server while a batch executes --
    def converse(self, make, read=None):
        """One message to the server and its answer, holding the shared
        memory: make() writes any tensors from self.out_off on and returns
        the message; read(answer) runs before the memory is let go (to copy
        tensors out). Returns read's result, or the answer."""
        with self.ipc_lock:
            if not self.active:
                raise pb_utils.TritonModelException(
                    "python: the request's batch has ended; its response sender is closed")
            data = _encode(make()).encode()
            if len(data) > _nrd_ipc.META_SIZE:
                raise pb_utils.TritonModelException("python: message too large for the shared memory")
            self.buf[META:META + len(data)] = data
            _nrd_ipc.post(len(data))
            n = _nrd_ipc.wait(True)
            self.refresh()
            answer = _decode(str(self.buf[META:META + n], "utf-8"))
            return read(answer) if read is not None else answer

    def sender_for(self, index, generation):

        def send(response, flags):
            final = bool(flags & pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

            def make():
                if generation != self.generation:
                    raise pb_utils.TritonModelException(
                        "python: the request's batch has ended; its response sender is closed")
                if response is not None:
                    entry, _ = self.response_out(response, self.out_off)
                    return {"type": "response", "request": index, "final": final, "response": entry}
                # The final flag alone: in a model that is not decoupled it
                # follows its one response (InferenceResponseSender checks
                # so), and the server has nothing more to send.
                return {"type": "response", "request": index, "final": final, "response": None,
                        "answered": not self.decoupled}
            with self.senders_done:
                self.used[index] = True
            ack = self.converse(make)
            if final:
                with self.senders_done:
                    self.closed[index] = True
                    self.senders_done.notify_all()
            if "error" in ack:
                raise pb_utils.TritonModelException(ack["error"])

        def cancelled():
            if self.closed[index] or generation != self.generation:
                return False
            try:
                return self.converse(lambda: {"type": "is_cancelled", "request": index}).get("cancelled", False)
            except pb_utils.TritonModelException:
                return False

        return pb_utils.InferenceResponseSender(send, cancelled, self.decoupled), cancelled

    def tensor_out(self, d):
        """A copy of a tensor the server placed in the shared memory."""
        t = self.tensor_in(d)
        arr = t.as_numpy()
        return pb_utils.Tensor._wrap(d["name"], arr.copy(), d["dtype"])

    def bls(self, request, decoupled):
        """InferenceRequest.exec: runs `request` on the server (any model),
        waits for its responses."""
        def make():
            off = self.out_off
            inputs = []
            for t in request.inputs():
                arr = t.as_numpy()
                off = (off + ALIGN - 1) // ALIGN * ALIGN
                if arr.dtype.kind in "OSU":
                    data = pb_utils._serialize_bytes(arr)
                    dname = "BYTES"
                else:
                    data = np.ascontiguousarray(arr).tobytes()
                    dname = pb_utils._dtype_name(arr)
                self.ensure(off + len(data), "the BLS inputs")
                self.buf[off:off + len(data)] = data
                inputs.append({"name": t.name(), "dtype": dname, "shape": list(arr.shape), "off": off,
                               "size": len(data)})
                off += len(data)
            corr = request.correlation_id()
            return {"type": "bls", "model": request.model_name(), "version": request.model_version(),
                    "inputs": inputs, "outputs": request.requested_output_names(), "id": request.request_id(),
                    "correlation_id": corr, "flags": request.flags(), "timeout": request.timeout(),
                    "parameters": request.parameters(), "decoupled": bool(decoupled),
                    "out_off": (off + ALIGN - 1) // ALIGN * ALIGN}

        def read(answer):
            if "error" in answer:
                return [pb_utils.InferenceResponse._wrap([], pb_utils.TritonError(answer["error"]))]
            out = []
            for r in answer["responses"]:
                if "error" in r:
                    out.append(pb_utils.InferenceResponse._wrap([], pb_utils.TritonError(r["error"])))
                else:
                    out.append(pb_utils.InferenceResponse._wrap([self.tensor_out(d) for d in r["outputs"]],
                                                                None, r.get("parameters")))
            return out

        return self.converse(make, read)

    def service(self, msg):
        """A request to the server (model control, metrics): its answer."""
        answer = self.converse(lambda: msg)
        if "error" in answer:
            raise pb_utils.TritonModelException(answer["error"])
        return answer

    @staticmethod
    def release_flags(request):
        flags = getattr(request, "_release_flags", pb_utils.TRITONSERVER_REQUEST_RELEASE_ALL)
        return flags if flags in (pb_utils.TRITONSERVER_REQUEST_RELEASE_ALL,
                                  pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE) else \
            pb_utils.TRITONSERVER_REQUEST_RELEASE_ALL

    def rescheduled(self, request):
        return self.release_flags(request) == pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE

    def wait_for_senders(self, indices):
        """Until the senders of these requests have sent their final flag."""
        with self.senders_done:
            self.senders_done.wait_for(lambda: all(self.closed[i] for i in indices))

    def execute(self, msg):
        generation = self.generation
        sender_for = self.sender_for
        requests = [self.request(d, functools.partial(sender_for, i, generation))
                    for i, d in enumerate(msg["requests"])]
        self.out_off = msg["out_off"]
        self.in_end = msg["out_off"]
        with self.senders_lock:
            self.used = [False] * len(requests)
            self.closed = [False] * len(requests)
        execute = getattr(self.model, "execute", None)
        if execute is None:
            return self.failed(f"Python model {self.model_file} does not implement `execute` method.")
        try:
            responses = execute(requests)
            if type(responses) is not list and responses is not None and inspect.isawaitable(responses):
                if self.loop is None:
                    self.loop = asyncio.new_event_loop()
                responses = self.loop.run_until_complete(responses)
        except BaseException as e:  # noqa: BLE001 - the model's failure answers its requests
            traceback.print_exc()
            return self.failed(self.describe(e))
        if self.decoupled or responses is None:
            if responses is not None:
                return self.failed(f"Python model '{self.instance_name}' is using the decoupled mode and the "
                                   "execute function must return None.")
            # Answered through the senders: a decoupled model's every request
            # (its threads may still be sending), else those it used; the
            # server fails any other.
            # A rescheduled request keeps its sender open for its next batch.
            with self.senders_done:
                wait = [i for i in range(len(requests))
                        if (self.decoupled or self.used[i]) and not self.rescheduled(requests[i])]
            self.wait_for_senders(wait)
            return {"senders": True, "release": [self.release_flags(r) for r in requests]}
        if not isinstance(responses, list):
            return self.failed(f"Expected a list in the execute return, found type '{type(responses)}'.")
        if len(responses) != len(requests):
            return self.failed("Number of InferenceResponse objects do not match the number of InferenceRequest "
                               f"objects. InferenceRequest(s) size is:{len(requests)}, and InferenceResponse(s) "
                               f"size is:{len(responses)}\n")
        off = msg["out_off"]
        for r in requests:
            if r._release_flags != _RELEASE_ALL:
                break
        else:
            data = self.binary_reply(responses, off)
            if data is not None:
                return data
        out = []
        release = [self.release_flags(r) for r in requests]
        for flags, resp in zip(release, responses):
            if flags == pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE:
                if resp is None:
                    out.append({"rescheduled": True})  # it comes back in a later batch
                    continue
                # (Triton's sentence, its spelling.)
                return self.failed("Expected a None object in the execute function return list for reschduled "
                                   f"request, found type '{type(resp)}'.")
            if resp is not None and type(resp) is not pb_utils.InferenceResponse and \
                    not isinstance(resp, pb_utils.InferenceResponse):
                return self.failed("Expected an 'InferenceResponse' object in the execute function return list, "
                                   f"found type '{type(resp)}'.")
            entry, off = self.response_out(resp, off)
            out.append(entry)
        return {"responses": out, "release": release}

    def failed(self, text):
        """A batch's failure, in Triton's sentence (the instance's name)."""
        return {"error": f"Failed to process the request(s) for model '{self.instance_name}', message: {text}"}

    def finalize(self, msg):
        if self.model is not None and hasattr(self.model, "finalize"):
            try:
                self.run(self.model.finalize)
            except BaseException as e:  # noqa: BLE001
                traceback.print_exc()
                return {"error": f"python: finalize failed: {self.describe(e)}"}
        return {}

    def serve(self):
        handlers = {"init": self.init, "execute": self.execute, "finalize": self.finalize,
                    "auto_complete": self.auto_complete}
        while True:
            n = _nrd_ipc.wait()
            self.refresh()
            msg = _decode(str(self.buf[META:META + n], "utf-8"))
            kind = msg.get("type")
            with self.ipc_lock:
                self.active = True  # the server answers our messages until our reply
                self.generation += 1
            try:
                reply = handlers[kind](msg)
            except BaseException as e:  # noqa: BLE001 - never leave the server waiting
                traceback.print_exc()
                reply = {"error": f"python: {kind}: {type(e).__name__}: {e}"}
            data = reply if type(reply) is bytes else _encode(reply).encode()
            if len(data) > _nrd_ipc.META_SIZE:
                data = json.dumps({"error": "python: reply too large"}).encode()
            with self.ipc_lock:
                self.active = False
                self.buf[META:META + len(data)] = data
                _nrd_ipc.post(len(data))
            if kind in ("finalize", "auto_complete"):
                return


def main():
    stub = Stub()
    pb_utils._bls_hook = stub.bls
    pb_utils._service_hook = stub.service
    stub.serve()
