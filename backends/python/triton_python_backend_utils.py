"""triton_python_backend_utils for Nereid's python backend: the module
Triton Python-backend model files import as pb_utils. Written for Nereid
from the documented behaviour of Triton's python backend; runs inside the
stub process (triton_python_backend_stub)."""
import json
import sys
import threading

import numpy as np

# ---- datatypes ------------------------------------------------------------

TRITONSERVER_TYPE_INVALID = 0
TRITONSERVER_TYPE_BOOL = 1
TRITONSERVER_TYPE_UINT8 = 2
TRITONSERVER_TYPE_UINT16 = 3
TRITONSERVER_TYPE_UINT32 = 4
TRITONSERVER_TYPE_UINT64 = 5
TRITONSERVER_TYPE_INT8 = 6
TRITONSERVER_TYPE_INT16 = 7
TRITONSERVER_TYPE_INT32 = 8
TRITONSERVER_TYPE_INT64 = 9
TRITONSERVER_TYPE_FP16 = 10
TRITONSERVER_TYPE_FP32 = 11
TRITONSERVER_TYPE_FP64 = 12
TRITONSERVER_TYPE_BYTES = 13
TRITONSERVER_TYPE_BF16 = 14

_NAMES = ["INVALID", "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32",
          "INT64", "FP16", "FP32", "FP64", "BYTES", "BF16"]
_NUMPY = {1: np.bool_, 2: np.uint8, 3: np.uint16, 4: np.uint32, 5: np.uint64, 6: np.int8,
          7: np.int16, 8: np.int32, 9: np.int64, 10: np.float16, 11: np.float32,
          12: np.float64, 13: np.object_}

TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2

# Set by the stub: runs an InferenceRequest on the server (InferenceRequest.exec),
# and sends other requests to the server (model control, metrics).
_bls_hook = None
_service_hook = None


def _service(msg):
    if _service_hook is None:
        raise TritonModelException("only available in the stub, while the server waits for the model")
    return _service_hook(msg)


def triton_to_numpy_type(data_type):
    """numpy type of a TRITONSERVER_TYPE_* value (None when it has none)."""
    return _NUMPY.get(data_type)


# numpy dtype -> TRITONSERVER_TYPE_*, for the types with one numpy type.
_FROM_NUMPY = {np.dtype(v): k for k, v in _NUMPY.items() if k != TRITONSERVER_TYPE_BYTES}


def numpy_to_triton_type(data_type):
    """TRITONSERVER_TYPE_* of a numpy type (None when it has none)."""
    dt = data_type if isinstance(data_type, np.dtype) else np.dtype(data_type)
    found = _FROM_NUMPY.get(dt)
    if found is not None:
        return found
    if dt.kind in "OSU":
        return TRITONSERVER_TYPE_BYTES
    for k, v in _NUMPY.items():  # another byte order
        if k != TRITONSERVER_TYPE_BYTES and np.dtype(v) == dt:
            return k
    return None


def triton_string_to_numpy(triton_type_string):
    """numpy type of a configuration datatype ("TYPE_FP32")."""
    name = triton_type_string[5:] if triton_type_string.startswith("TYPE_") else triton_type_string
    if name == "STRING":
        name = "BYTES"
    return _NUMPY.get(_NAMES.index(name)) if name in _NAMES else None


def _dtype_name(arr):
    t = numpy_to_triton_type(arr.dtype)
    if t is None:
        raise TritonModelException(f"unsupported numpy dtype {arr.dtype}")
    return _NAMES[t]


def serialize_byte_tensor(arr):
    """Triton's BYTES layout: each element as a 4-byte little-endian length
    then its bytes."""
    parts = []
    for item in np.asarray(arr, dtype=np.object_).reshape(-1):
        b = item if isinstance(item, bytes) else str(item).encode()
        parts.append(len(b).to_bytes(4, "little"))
        parts.append(b)
    return b"".join(parts)


def deserialize_bytes_tensor(buf, count=None):
    """An object array of bytes from Triton's BYTES layout."""
    out = []
    mv = memoryview(buf)
    i = 0
    while i + 4 <= len(mv) and (count is None or len(out) < count):
        n = int.from_bytes(mv[i:i + 4], "little")
        out.append(bytes(mv[i + 4:i + 4 + n]))
        i += 4 + n
    arr = np.empty(len(out), dtype=np.object_)
    arr[:] = out
    return arr


# ---- errors ---------------------------------------------------------------


class TritonError(Exception):
    """An error a model returns in a response (or BLS gets back)."""
    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    def __init__(self, message, code=INTERNAL):
        super().__init__(message)
        self._message = message
        self._code = code

    def message(self):
        return self._message

    def code(self):
        return self._code


class TritonModelException(Exception):
    """Raised by pb_utils calls that fail (Triton's exception type)."""

    def message(self):
        return str(self)


# ---- tensors --------------------------------------------------------------


class Tensor:
    """A named tensor over a numpy array (CPU only)."""

    def __init__(self, name, array, dtype_name=None):
        if not isinstance(array, np.ndarray):
            array = np.asarray(array)
        if array.dtype.kind in "SU":
            array = array.astype(np.object_)
        self._name = name
        self._array = array
        self._dtype = dtype_name

    @classmethod
    def _wrap(cls, name, array, dtype_name):
        """The stub's constructor: `array` is already an ndarray of a
        Triton type (skips __init__'s checks)."""
        t = cls.__new__(cls)
        t._name = name
        t._array = array
        t._dtype = dtype_name
        return t

    def name(self):
        return self._name

    def as_numpy(self):
        return self._array

    def shape(self):
        return list(self._array.shape)

    def triton_dtype(self):
        return _NAMES.index(self._dtype or _dtype_name(self._array))

    def is_cpu(self):
        return True

    def to_dlpack(self):
        return self._array.__dlpack__()

    @staticmethod
    def from_dlpack(name, capsule):
        if hasattr(capsule, "__dlpack__"):
            return Tensor(name, np.from_dlpack(capsule))
        raise TritonModelException("from_dlpack needs an object with __dlpack__ on CPU")


def get_input_tensor_by_name(inference_request, name):
    for t in inference_request.inputs():
        if t.name() == name:
            return t
    return None


def get_output_tensor_by_name(inference_response, name):
    for t in inference_response.output_tensors():
        if t.name() == name:
            return t
    return None


def get_input_config_by_name(model_config, name):
    for c in model_config.get("input", []):
        if c.get("name") == name:
            return c
    return None


def get_output_config_by_name(model_config, name):
    for c in model_config.get("output", []):
        if c.get("name") == name:
            return c
    return None


# ---- requests and responses -----------------------------------------------


class InferenceResponse:
    """The answer to one request: output tensors or an error."""

    def __init__(self, output_tensors=None, error=None, parameters=None):
        self._tensors = list(output_tensors or [])
        if isinstance(error, str):
            error = TritonError(error)
        self._error = error
        self._params = _response_parameters(parameters)

    def output_tensors(self):
        return self._tensors

    def has_error(self):
        return self._error is not None

    def error(self):
        return self._error

    def parameters(self):
        """The response's parameters as a JSON object text."""
        return json.dumps(self._params) if self._params else "{}"


def _response_parameters(parameters):
    """A response's parameters as a dict of str to bool, int or str, as
    Triton accepts them (a JSON object text is read first)."""
    if parameters is None:
        return {}
    if isinstance(parameters, str):
        try:
            parameters = json.loads(parameters)
        except ValueError as e:
            raise TritonModelException(f"Expect parameters to be a JSON object text: {e}") from None
    if not isinstance(parameters, dict):
        raise TritonModelException(f"Expect parameters to be a dictionary, got {type(parameters)}")
    for key, value in parameters.items():
        if not isinstance(key, str):
            raise TritonModelException(f"Expect parameters keys to have type str, found type {type(key)}")
        if not isinstance(value, (bool, int, str)):
            raise TritonModelException(
                f"Expect parameters values to have type bool/int/str, found type {type(value)}")
        if isinstance(value, int) and not -(1 << 63) <= value < (1 << 63):
            raise TritonModelException(f"Expect parameter '{key}' to fit in 64 bits, got {value}")
    return parameters


class InferenceResponseSender:
    """Sends a request's responses to the server (built by the stub):
    send(response, flags) any number of times, the last with
    TRITONSERVER_RESPONSE_COMPLETE_FINAL (with or without a response).
    Safe to use from the model's own threads."""

    def __init__(self, send_fn, cancelled_fn):
        self._send_fn = send_fn
        self._cancelled_fn = cancelled_fn
        self._closed = False
        self._lock = threading.Lock()

    def send(self, response=None, flags=0):
        with self._lock:
            if self._closed:
                raise TritonModelException("Unable to send response. Response sender has been closed.")
            if response is not None and not isinstance(response, InferenceResponse):
                raise TritonModelException(
                    f"send() takes an InferenceResponse, got {type(response).__name__}")
            if response is None and not flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL:
                raise TritonModelException("Inference Response object is needed when the flag is not final")
            self._send_fn(response, flags)
            if flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL:
                self._closed = True

    def is_cancelled(self):
        return bool(self._cancelled_fn())

    def _is_closed(self):
        return self._closed


class InferenceRequest:
    """A request the model executes (built by the stub)."""

    def __init__(self, model_name=None, inputs=None, requested_output_names=None,
                 request_id="", correlation_id=0, flags=0, timeout=0, parameters=None,
                 model_version=-1, **kwargs):
        self._model_name = model_name
        self._inputs = list(inputs or [])
        self._requested = list(requested_output_names or [])
        self._id = request_id
        self._correlation_id = correlation_id
        self._flags = flags
        self._timeout = timeout
        if parameters is None:
            parameters = {}
        self._parameters = parameters if isinstance(parameters, str) else json.dumps(parameters)
        self._model_version = model_version
        self._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL
        self._cancelled = None
        self._sender = None
        # Set by the stub: makes (sender, cancelled) at first use.
        self._sender_factory = None

    def _bind_sender(self):
        if self._sender is None and self._sender_factory is not None:
            self._sender, self._cancelled = self._sender_factory()

    def inputs(self):
        return self._inputs

    def requested_output_names(self):
        return self._requested

    def request_id(self):
        return self._id

    def correlation_id(self):
        return self._correlation_id

    def flags(self):
        return self._flags

    def timeout(self):
        return self._timeout

    def parameters(self):
        return self._parameters

    def model_name(self):
        return self._model_name

    def is_cancelled(self):
        self._bind_sender()
        return bool(self._cancelled and self._cancelled())

    def get_response_sender(self):
        """The sender of this request's responses (decoupled models send any
        number of them, then the final flag)."""
        self._bind_sender()
        if self._sender is None:
            raise TritonModelException("this request has no response sender (it is not being executed)")
        return self._sender

    def set_release_flags(self, flags):
        self._release_flags = flags

    def model_version(self):
        return self._model_version

    def exec(self, decoupled=False):
        """Runs this request on the server (business logic scripting): its
        InferenceResponse, or with decoupled=True an iterator over every
        response the model sends. Errors come back as responses with
        error() set. Only while the calling model executes."""
        if _bls_hook is None:
            raise TritonModelException("BLS is only available in the stub, while the model executes")
        responses = _bls_hook(self, decoupled)
        return iter(responses) if decoupled else responses[0]

    async def async_exec(self, decoupled=False):
        import asyncio
        return await asyncio.get_running_loop().run_in_executor(None, self.exec, decoupled)


# ---- logging --------------------------------------------------------------


class Logger:
    """Writes to the server's log (the stub's stderr)."""
    INFO = 0
    WARNING = 1
    ERROR = 2
    VERBOSE = 3
    _lock = threading.Lock()
    _letters = {0: "I", 1: "W", 2: "E", 3: "V"}

    @classmethod
    def log(cls, message, level=0):
        with cls._lock:
            sys.stderr.write(f"{cls._letters.get(level, 'I')} python: {message}\n")
            sys.stderr.flush()

    @classmethod
    def log_info(cls, message):
        cls.log(message, cls.INFO)

    @classmethod
    def log_warn(cls, message):
        cls.log(message, cls.WARNING)

    @classmethod
    def log_error(cls, message):
        cls.log(message, cls.ERROR)

    @classmethod
    def log_verbose(cls, message):
        cls.log(message, cls.VERBOSE)


class LogLevel:
    INFO = Logger.INFO
    WARNING = Logger.WARNING
    ERROR = Logger.ERROR
    VERBOSE = Logger.VERBOSE


# ---- auto-complete --------------------------------------------------------


class ModelConfig:
    """The configuration auto_complete_config(auto_complete_model_config)
    receives and returns (format-1 JSON as a dict)."""

    def __init__(self, model_config):
        self._config = json.loads(model_config) if isinstance(model_config, str) else dict(model_config)

    def as_dict(self):
        return self._config

    def max_batch_size(self):
        return int(self._config.get("max_batch_size", 0))

    def set_max_batch_size(self, max_batch_size):
        current = self.max_batch_size()
        if current != 0 and current != max_batch_size:
            raise ValueError(f"configuration specified max_batch_size {current}, "
                             f"but model tries to set {max_batch_size}")
        self._config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self):
        if "sequence_batching" in self._config:
            raise ValueError("configuration specified sequence batching, cannot set dynamic batching")
        self._config.setdefault("dynamic_batching", {})

    def set_model_transaction_policy(self, transaction_policy_dict):
        for key in transaction_policy_dict:
            if key != "decoupled":
                raise ValueError(f"model transaction property '{key}' is not supported")
        self._config.setdefault("model_transaction_policy", {}).update(transaction_policy_dict)

    def _add(self, section, tensor):
        if not isinstance(tensor, dict):
            raise ValueError(f"{section} must be a dict")
        for key in tensor:
            if key not in ("name", "data_type", "dims", "optional", "format", "reshape", "is_shape_tensor",
                           "label_filename"):
                raise ValueError(f"{section} '{tensor.get('name')}' has an unknown property '{key}'")
        for key in ("name", "data_type", "dims"):
            if key not in tensor:
                raise ValueError(f"{section} '{tensor.get('name')}' has no '{key}'")
        tensors = self._config.setdefault(section, [])
        for have in tensors:
            if have.get("name") == tensor["name"]:
                for key, value in tensor.items():
                    if key == "dims":
                        value = [int(d) for d in value]
                        old = [int(d) for d in have.get("dims", [])]
                        if have.get("dims") and old != value:
                            raise ValueError(f"{section} '{tensor['name']}': configuration dims {old} "
                                             f"disagree with the model's {value}")
                    elif key in have and have[key] != value:
                        raise ValueError(f"{section} '{tensor['name']}': configuration {key} "
                                         f"{have[key]!r} disagrees with the model's {value!r}")
                    have[key] = value
                return
        tensors.append({**tensor, "dims": [int(d) for d in tensor["dims"]]})

    def add_input(self, input):  # noqa: A002 - Triton's parameter name
        self._add("input", input)

    def add_output(self, output):
        self._add("output", output)


# ---- model control ---------------------------------------------------------


def load_model(model_name, config="", files=None):
    """Loads (or reloads) a model of the server's repository; with `config`
    (JSON text) and `files` ({"file:<path>": bytes}) as the repository
    load extension takes them. Raises TritonModelException on failure."""
    out = {}
    for key, data in (files or {}).items():
        if not isinstance(data, (bytes, bytearray)):
            raise TritonModelException(f"load_model: the contents of {key!r} must be bytes")
        out[key] = bytes(data).decode("latin-1")
    _service({"type": "load_model", "name": model_name, "config": config or "", "files": out})


def unload_model(model_name, unload_dependents=False):
    _service({"type": "unload_model", "name": model_name, "unload_dependents": bool(unload_dependents)})


def is_model_ready(model_name, model_version=""):
    return bool(_service({"type": "is_model_ready", "name": model_name, "version": str(model_version)})["ready"])


# ---- custom metrics ----------------------------------------------------------


class MetricFamily:
    """A family of custom metrics in the server's Prometheus endpoint."""
    COUNTER = 0
    GAUGE = 1
    HISTOGRAM = 2

    def __init__(self, name, description, kind):
        if kind not in (self.COUNTER, self.GAUGE, self.HISTOGRAM):
            raise TritonModelException("MetricFamily kind must be COUNTER, GAUGE or HISTOGRAM")
        self._kind = kind
        self._id = _service({"type": "metric_family", "name": name, "description": description,
                             "kind": kind})["id"]

    def Metric(self, labels=None, buckets=None):
        return Metric(self, labels, buckets)


class Metric:
    """One labelled metric of a family."""

    def __init__(self, family, labels=None, buckets=None):
        if buckets is not None and family._kind != MetricFamily.HISTOGRAM:
            raise TritonModelException("buckets are only for a HISTOGRAM metric family")
        msg = {"type": "metric", "family": family._id,
               "labels": {str(k): str(v) for k, v in (labels or {}).items()}}
        if buckets is not None:
            msg["buckets"] = [float(b) for b in buckets]
        self._id = _service(msg)["id"]

    def _op(self, op, value=0.0):
        return _service({"type": "metric_op", "metric": self._id, "op": op, "value": float(value)})["value"]

    def increment(self, value):
        self._op("increment", value)

    def set(self, value):
        self._op("set", value)

    def observe(self, value):
        self._op("observe", value)

    def value(self):
        return self._op("value")
