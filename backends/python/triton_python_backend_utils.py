"""triton_python_backend_utils for Nereid's python backend: the module
Triton Python-backend model files import as pb_utils. Written for Nereid
from the documented behaviour of Triton's python backend; runs inside the
stub process (triton_python_backend_stub)."""
import collections.abc
import enum
import json
import operator
import sys
import threading
import weakref

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
# Set by the stub: the instance's name (Triton's sentences name it).
_instance_name = ""


def _service(msg):
    if _service_hook is None:
        raise TritonModelException("only available in the stub, while the server waits for the model")
    return _service_hook(msg)


def triton_to_numpy_type(data_type):
    """numpy type of a TRITONSERVER_TYPE_* value (None when it has none)."""
    return _NUMPY.get(data_type)


# numpy dtype -> TRITONSERVER_TYPE_*, for the types with one numpy type.
_FROM_NUMPY = {np.dtype(v): k for k, v in _NUMPY.items() if k != TRITONSERVER_TYPE_BYTES}
# The order Triton's numpy_to_triton_type compares a type with (by ==, so a
# dtype, a numpy scalar type or a dtype string all match).
_NUMPY_ORDER = [(v, k) for k, v in _NUMPY.items() if k != TRITONSERVER_TYPE_BYTES]


def numpy_to_triton_type(data_type):
    """TRITONSERVER_TYPE_* of a numpy type or dtype (None when it has
    none), as Triton's: object and bytes_ are BYTES, a str dtype is not."""
    for np_type, code in _NUMPY_ORDER:
        if data_type == np_type:
            return code
    if data_type == np.object_ or data_type == np.bytes_:
        return TRITONSERVER_TYPE_BYTES
    return None


def _triton_type_of(dt):
    """The stub's own lookup: TRITONSERVER_TYPE_* of a numpy dtype, where
    str arrays (kind U) are BYTES too (None when it has none)."""
    found = _FROM_NUMPY.get(dt)
    if found is not None:
        return found
    if dt.kind in "OSU":
        return TRITONSERVER_TYPE_BYTES
    for k, v in _NUMPY.items():  # another byte order
        if k != TRITONSERVER_TYPE_BYTES and np.dtype(v) == dt:
            return k
    return None


TRITON_STRING_TO_NUMPY = {
    "TYPE_BOOL": bool,
    "TYPE_UINT8": np.uint8,
    "TYPE_UINT16": np.uint16,
    "TYPE_UINT32": np.uint32,
    "TYPE_UINT64": np.uint64,
    "TYPE_INT8": np.int8,
    "TYPE_INT16": np.int16,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_FP64": np.float64,
    "TYPE_STRING": np.object_,
}


def triton_string_to_numpy(triton_type_string):
    """numpy type of a configuration datatype ("TYPE_FP32"); KeyError for
    any other string, as in Triton."""
    return TRITON_STRING_TO_NUMPY[triton_type_string]


def _dtype_name(arr):
    t = _triton_type_of(arr.dtype)
    if t is None:
        raise TritonModelException("NumPy dtype is not supported.")
    return _NAMES[t]


def _serialize_bytes(arr):
    """Triton's BYTES layout: each element as a 4-byte little-endian length
    then its bytes (str() of what is not bytes, UTF-8)."""
    parts = []
    for item in np.asarray(arr, dtype=np.object_).reshape(-1):
        b = item if isinstance(item, bytes) else str(item).encode()
        parts.append(len(b).to_bytes(4, "little"))
        parts.append(b)
    return b"".join(parts)


def serialize_byte_tensor(input_tensor):
    """Triton's BYTES layout of an object or bytes_ array (C order); () for
    an empty array and None for an array of another dtype, as Triton's."""
    if input_tensor.size == 0:
        return ()
    if input_tensor.dtype == np.object_ or input_tensor.dtype.type == np.bytes_:
        return _serialize_bytes(input_tensor)
    return None


def deserialize_bytes_tensor(encoded_tensor, count=None):
    """An object array of bytes from Triton's BYTES layout (at most `count`
    elements when given)."""
    out = []
    mv = memoryview(encoded_tensor)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    i = 0
    while i + 4 <= len(mv) and (count is None or len(out) < count):
        n = int.from_bytes(mv[i:i + 4], "little")
        out.append(bytes(mv[i + 4:i + 4 + n]))
        i += 4 + n
    arr = np.empty(len(out), dtype=np.object_)
    arr[:] = out
    return arr


def using_decoupled_model_transaction_policy(model_config):
    """Whether the configuration (a dict) says the model is decoupled."""
    if "model_transaction_policy" in model_config:
        return model_config["model_transaction_policy"]["decoupled"]
    return False


# ---- argument checks, as pybind11 makes them for Triton's bindings ----------


def _incompatible(fn, signature, args):
    """The TypeError pybind11 raises for arguments no overload takes."""
    kind = "constructor" if fn == "__init__" else "function"
    return TypeError(f"{fn}(): incompatible {kind} arguments. The following argument types are "
                     f"supported:\n    1. {signature}\n\nInvoked with: {args}")


def _str_arg(value):
    """A std::string argument: str, or bytes / bytearray (UTF-8); None when
    it is neither."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return None


def _int_arg(value, lo, hi):
    """An integer argument: int, bool, a numpy integer (anything with
    __index__), never a float; None when it is not one or out of range."""
    if type(value) is int:
        return value if lo <= value <= hi else None
    if isinstance(value, float):
        return None
    try:
        v = operator.index(value)
    except TypeError:
        return None
    return v if lo <= v <= hi else None


def _seq_arg(value):
    """A std::vector argument (a new list): any sequence but str and bytes."""
    if type(value) is list:
        return value[:]
    if isinstance(value, (str, bytes, bytearray)) or not isinstance(value, collections.abc.Sequence) \
            and not isinstance(value, np.ndarray):
        return None
    return list(value)


_I64 = (-(1 << 63), (1 << 63) - 1)
_U64 = (0, (1 << 64) - 1)
_U32 = (0, (1 << 32) - 1)


# ---- errors ---------------------------------------------------------------


class _ErrorCode(enum.IntEnum):
    """TRITONSERVER_Error_Code (Triton's TritonError.__ErrorCode)."""
    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7


class TritonError(Exception):
    """An error a model returns in a response (or BLS gets back). Unlike
    Triton's it is also an Exception (raising it is not refused)."""
    UNKNOWN = _ErrorCode.UNKNOWN
    INTERNAL = _ErrorCode.INTERNAL
    NOT_FOUND = _ErrorCode.NOT_FOUND
    INVALID_ARG = _ErrorCode.INVALID_ARG
    UNAVAILABLE = _ErrorCode.UNAVAILABLE
    UNSUPPORTED = _ErrorCode.UNSUPPORTED
    ALREADY_EXISTS = _ErrorCode.ALREADY_EXISTS
    CANCELLED = _ErrorCode.CANCELLED

    def __init__(self, message, code=_ErrorCode.INTERNAL):
        text = _str_arg(message)
        if text is None or not isinstance(code, _ErrorCode):  # an int is refused, as by pybind11's enum
            raise _incompatible("__init__", "TritonError(message: str, code: TritonError.__ErrorCode = "
                                "<__ErrorCode.INTERNAL: 1>)", (message, code))
        super().__init__(text)
        self._message = text
        self._code = code

    def message(self):
        return self._message

    def code(self):
        return self._code


setattr(TritonError, "__ErrorCode", _ErrorCode)


class TritonModelException(Exception):
    """Raised by pb_utils calls that fail (Triton's exception type)."""

    def message(self):
        return str(self)


# ---- memory placement and tracing -------------------------------------------


class MemoryType(enum.IntEnum):
    """Where a BLS caller prefers its outputs (only CPU here)."""
    TRITONSERVER_MEMORY_GPU = 0
    TRITONSERVER_MEMORY_CPU = 1


TRITONSERVER_MEMORY_GPU = MemoryType.TRITONSERVER_MEMORY_GPU
TRITONSERVER_MEMORY_CPU = MemoryType.TRITONSERVER_MEMORY_CPU


class PreferredMemory:
    """InferenceRequest(preferred_memory=...): outputs of a BLS request
    always come back in CPU memory here (no GPU)."""

    def __init__(self, preferred_memory_type, preferred_device_id=0):
        if not isinstance(preferred_memory_type, MemoryType) or preferred_device_id is None \
                or _int_arg(preferred_device_id, *_I64) is None:
            raise _incompatible("__init__", "PreferredMemory(preferred_memory_type: MemoryType, "
                                "preferred_device_id: int = 0)", (preferred_memory_type, preferred_device_id))
        self.preferred_memory_type = preferred_memory_type
        self.preferred_device_id = int(preferred_device_id)


class InferenceTrace:
    """A request's trace; get_context() is None (no OpenTelemetry context
    reaches a model here)."""

    def __init__(self, context=""):
        self._context = context

    def get_context(self):
        return self._context or None


# ---- tensors --------------------------------------------------------------

_TENSOR_SIG = "Tensor(arg0: str, arg1: numpy.ndarray)"
# numpy's type codes of the datatypes a Tensor takes without a second look.
_TRITON_CHARS = frozenset("?bBhHiIlLqQefdO")


class Tensor:
    """A named tensor over a numpy array (CPU only)."""

    def __init__(self, name, array, dtype_name=None):
        text = name if type(name) is str else _str_arg(name)
        if text is None or not isinstance(array, np.ndarray):
            raise _incompatible("__init__", _TENSOR_SIG, (name, array))
        if not text:
            raise TritonModelException("Tensor name cannot be an empty string.")
        if dtype_name is None and array.dtype.char not in _TRITON_CHARS:
            # Triton refuses every other dtype; a str array (kind U) is
            # kept (as BYTES) for the models written for Nereid that use it.
            if array.dtype.kind == "U":
                array = array.astype(np.object_)
            elif numpy_to_triton_type(array.dtype) is None and array.dtype.type is not np.bytes_:
                raise TritonModelException("NumPy dtype is not supported.")
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        self._name = text
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
        if self.triton_dtype() == TRITONSERVER_TYPE_BYTES:
            raise TritonModelException("DLPack does not have support for string tensors.")
        return self._array.__dlpack__()

    def __dlpack__(self, stream=None):
        return self.to_dlpack()

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()

    @staticmethod
    def from_dlpack(name, capsule):
        text = _str_arg(name)
        if text is None:
            raise _incompatible("from_dlpack", "from_dlpack(arg0: str, arg1: object) -> Tensor", (name, capsule))
        if text == "":
            raise TritonModelException("Tensor name cannot be an empty string.")
        if type(capsule).__name__ == "PyCapsule":
            capsule = _DLPackCapsule(capsule)
        elif not (hasattr(capsule, "__dlpack__") and hasattr(capsule, "__dlpack_device__")):
            raise TritonModelException(
                "Provided tensor is not supported. Tensor must be a DLPack capsule or have `__dlpack__` "
                "and `__dlpack_device__` attributes")
        try:
            array = np.from_dlpack(capsule)
        except (BufferError, RuntimeError, TypeError) as e:
            raise TritonModelException(f"DLPack tensor not taken (CPU memory only): {e}") from None
        return Tensor(text, array)


class _DLPackCapsule:
    """A bare DLPack capsule (to_dlpack's, PyTorch's torch.utils.dlpack
    one) as numpy.from_dlpack takes it: the protocol's two methods."""

    def __init__(self, capsule):
        self._capsule = capsule

    def __dlpack__(self, stream=None):
        return self._capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU: numpy refuses the capsule of any other device


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

_RESPONSE_SIG = ("InferenceResponse(output_tensors: List[Tensor] = [], error: TritonError = None, "
                 "parameters: object = None)")


class InferenceResponse:
    """The answer to one request: output tensors or an error."""

    def __init__(self, output_tensors=None, error=None, parameters=None):
        if type(output_tensors) is list:
            tensors = output_tensors[:]
        elif output_tensors is None:
            tensors = []
        else:
            tensors = _seq_arg(output_tensors)
            if tensors is None:
                raise _incompatible("__init__", _RESPONSE_SIG, (output_tensors, error, parameters))
        for t in tensors:
            if type(t) is not Tensor and not isinstance(t, Tensor):
                raise _incompatible("__init__", _RESPONSE_SIG, (output_tensors, error, parameters))
        if error is not None and not isinstance(error, TritonError):
            raise _incompatible("__init__", _RESPONSE_SIG, (output_tensors, error, parameters))
        self._tensors = tensors
        self._error = error
        self._params = _response_parameters(parameters) if parameters is not None else {}

    @classmethod
    def _wrap(cls, tensors, error=None, params=None):
        """The stub's constructor (BLS answers): skips the checks."""
        r = cls.__new__(cls)
        r._tensors = tensors
        r._error = error
        r._params = params or {}
        return r

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
    """Request or response parameters: a dict of str to bool, int or str,
    as Triton accepts them."""
    if parameters is None:
        return {}
    if not isinstance(parameters, dict):
        # Triton's sentence names pybind11's dict type by its C++ name.
        raise TritonModelException(f"Expect N8pybind114dictE, got {type(parameters)}")
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
    send(response, flags) any number of times (once in a model that is not
    decoupled), the last with TRITONSERVER_RESPONSE_COMPLETE_FINAL (with or
    without a response). Safe to use from the model's own threads."""

    def __init__(self, send_fn, cancelled_fn, decoupled=True):
        self._send_fn = send_fn
        self._cancelled_fn = cancelled_fn
        self._decoupled = decoupled
        self._sent = 0
        self._closed = False
        self._lock = threading.Lock()

    def send(self, response=None, flags=0):
        if response is not None and not isinstance(response, InferenceResponse) or \
                _int_arg(flags, *_U32) is None:
            raise _incompatible("send", "send(self: InferenceResponseSender, response: InferenceResponse "
                                "= None, flags: int = 0) -> None", (response, flags))
        # Triton's checks, in its order: the arguments, then what a model
        # that is not decoupled may send, then the closed sender.
        if flags != TRITONSERVER_RESPONSE_COMPLETE_FINAL and flags != 0:
            raise TritonModelException("Unable to send response. Unsupported flag provided.")
        if flags == 0 and response is None:
            raise TritonModelException(
                "Inference Response object must be provided when the response flags is set to zero.")
        with self._lock:
            if not self._decoupled:
                if response is not None and self._sent > 0:
                    raise TritonModelException(
                        "Unable to send response. Non-decoupled model cannot send more than one response.")
                if response is None and flags == TRITONSERVER_RESPONSE_COMPLETE_FINAL and self._sent == 0:
                    raise TritonModelException("Unable to send response. Non-decoupled model cannot send "
                                               "complete final before sending a response.")
            if self._closed:
                raise TritonModelException("Unable to send response. Response sender has been closed.")
            if flags == TRITONSERVER_RESPONSE_COMPLETE_FINAL:
                self._closed = True
            if response is not None:
                self._sent += 1
            self._send_fn(response, flags)

    def is_cancelled(self):
        return bool(self._cancelled_fn())

    def _is_closed(self):
        return self._closed


class ResponseIterator:
    """The responses of a decoupled BLS request (exec(decoupled=True)):
    every response the model sent, the last one carrying the final flag
    (without outputs when the model sent that flag alone). A finished
    iterator starts again from the first response when iterated anew."""

    def __init__(self, responses):
        self._responses = list(responses)
        self._idx = 0

    def __iter__(self):
        if self._idx >= len(self._responses):
            self._idx = 0
        return self

    def __next__(self):
        if self._idx >= len(self._responses):
            raise StopIteration("Iteration is done for the responses.")
        r = self._responses[self._idx]
        self._idx += 1
        return r

    def cancel(self):
        """The responses are all here when exec returns: nothing to cancel."""
        return None


_REQUEST_SIG = ("InferenceRequest(request_id: str = '', correlation_id: object = 0, inputs: List[Tensor], "
                "requested_output_names: List[str], model_name: str, model_version: int = -1, flags: int = 0, "
                "timeout: int = 0, preferred_memory: PreferredMemory = PreferredMemory(), "
                "trace: InferenceTrace = InferenceTrace(), parameters: object = None)")
_REQUIRED = object()


class InferenceRequest:
    """A request: one the model executes (built by the stub) or one it
    builds to run on the server (BLS), with Triton's arguments."""

    def __init__(self, request_id="", correlation_id=0, inputs=_REQUIRED, requested_output_names=_REQUIRED,
                 model_name=_REQUIRED, model_version=-1, flags=0, timeout=0, preferred_memory=None,
                 trace=None, parameters=None):
        rid = request_id if type(request_id) is str else _str_arg(request_id)
        name = model_name if type(model_name) is str else (None if model_name is _REQUIRED else _str_arg(model_name))
        tensors = None if inputs is _REQUIRED else _seq_arg(inputs)
        wanted = None if requested_output_names is _REQUIRED else _seq_arg(requested_output_names)
        if wanted is not None:
            wanted = [w if type(w) is str else _str_arg(w) for w in wanted]
        version = model_version if type(model_version) is int else (
            _int_arg(model_version, *_I64) if model_version is not None else None)
        flag_bits = _int_arg(flags, *_U32) if flags is not None else None
        wait = _int_arg(timeout, *_U64) if timeout is not None else None
        bad = rid is None or name is None or tensors is None or wanted is None or None in wanted \
            or version is None or not _I64[0] <= version <= _I64[1] or flag_bits is None or wait is None \
            or correlation_id is None \
            or preferred_memory is not None and not isinstance(preferred_memory, PreferredMemory) \
            or trace is not None and not isinstance(trace, InferenceTrace)
        if not bad:
            for t in tensors:
                if type(t) is not Tensor and not isinstance(t, Tensor):
                    bad = True
        if bad:
            args = dict(request_id=request_id, correlation_id=correlation_id, inputs=inputs,
                        requested_output_names=requested_output_names, model_name=model_name,
                        model_version=model_version, flags=flags, timeout=timeout, parameters=parameters)
            raise _incompatible("__init__", _REQUEST_SIG, "kwargs: " + ", ".join(
                f"{k}={v!r}" for k, v in args.items() if v is not _REQUIRED))
        params = "{}" if parameters is None else json.dumps(_response_parameters(parameters))
        if isinstance(correlation_id, int):
            if not 0 <= correlation_id < (1 << 64):
                # pybind11's cast to uint64_t fails so in Triton.
                raise RuntimeError("Unable to cast Python instance of type <class 'int'> to C++ type "
                                   "'unsigned long'")
        elif not isinstance(correlation_id, str):
            raise TritonModelException("Correlation ID must be integer or string")
        self._model_name = name
        self._inputs = tensors
        self._requested = wanted if len(wanted) < 2 else list(dict.fromkeys(wanted))
        self._id = rid
        self._correlation_id = int(correlation_id) if isinstance(correlation_id, int) else correlation_id
        self._flags = flag_bits
        self._timeout = wait
        self._parameters = params
        self._model_version = version
        self._trace = trace
        self._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL
        self._cancelled = None
        self._sender = None
        self._sender_factory = None

    @classmethod
    def _wrap(cls, inputs, requested, request_id, correlation_id, flags, timeout, parameters, factory):
        """The stub's constructor for a request the model executes:
        `parameters` is the JSON text, the rest as the accessors return
        them; `factory` makes (sender, cancelled) at first use."""
        r = cls.__new__(cls)
        r._model_name = ""
        r._inputs = inputs
        r._requested = requested
        r._id = request_id
        r._correlation_id = correlation_id
        r._flags = flags
        r._timeout = timeout
        r._parameters = parameters
        r._model_version = -1
        r._trace = None
        r._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL
        r._cancelled = None
        r._sender = None
        r._sender_factory = factory
        return r

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

    def set_flags(self, flags):
        v = _int_arg(flags, *_U32) if flags is not None else None
        if v is None:
            raise _incompatible("set_flags", "set_flags(self: InferenceRequest, arg0: int) -> None", (flags,))
        self._flags = v

    def timeout(self):
        return self._timeout

    def parameters(self):
        return self._parameters

    def trace(self):
        if self._trace is None:
            self._trace = InferenceTrace()
        return self._trace

    def model_name(self):
        return self._model_name

    def model_version(self):
        return self._model_version

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
        v = _int_arg(flags, *_U32) if flags is not None else None
        if v is None:
            raise _incompatible("set_release_flags", "set_release_flags(self: InferenceRequest, arg0: int) "
                                "-> None", (flags,))
        self._release_flags = v

    def exec(self, decoupled=False):
        """Runs this request on the server (business logic scripting): its
        InferenceResponse, or with decoupled=True a ResponseIterator over
        every response the model sends. Errors come back as responses with
        error() set. Only while the calling model executes."""
        if not isinstance(decoupled, bool):
            raise _incompatible("exec", "exec(self: InferenceRequest, decoupled: bool = False) -> object",
                                (decoupled,))
        if _bls_hook is None:
            raise TritonModelException("BLS is only available in the stub, while the model executes")
        responses = _bls_hook(self, decoupled)
        return ResponseIterator(responses) if decoupled else responses[0]

    def async_exec(self, decoupled=False):
        """exec in the running event loop's executor: an awaitable future,
        started at once (as Triton's)."""
        if not isinstance(decoupled, bool):
            raise _incompatible("async_exec", "async_exec(self: InferenceRequest, decoupled: bool = False) "
                                "-> object", (decoupled,))
        import asyncio
        return asyncio.get_running_loop().run_in_executor(None, self.exec, decoupled)


# ---- logging --------------------------------------------------------------


class _LogLevel(enum.IntEnum):
    INFO = 0
    WARNING = 1
    ERROR = 2
    VERBOSE = 3


class Logger:
    """Writes to the server's log (the stub's stderr)."""
    LogLevel = _LogLevel
    INFO = _LogLevel.INFO
    WARNING = _LogLevel.WARNING
    ERROR = _LogLevel.ERROR
    VERBOSE = _LogLevel.VERBOSE
    _lock = threading.Lock()
    _letters = {0: "I", 1: "W", 2: "E", 3: "V"}

    @classmethod
    def log(cls, message, level=_LogLevel.INFO):
        text = _str_arg(message)
        if text is None or not isinstance(level, _LogLevel):
            raise _incompatible("log", "log(message: str, level: Logger.LogLevel = <LogLevel.INFO: 0>) -> None",
                                (message, level))
        with cls._lock:
            sys.stderr.write(f"{cls._letters[int(level)]} python: {text}\n")
            sys.stderr.flush()

    @classmethod
    def log_info(cls, message):
        cls.log(message, _LogLevel.INFO)

    @classmethod
    def log_warn(cls, message):
        cls.log(message, _LogLevel.WARNING)

    @classmethod
    def log_error(cls, message):
        cls.log(message, _LogLevel.ERROR)

    @classmethod
    def log_verbose(cls, message):
        cls.log(message, _LogLevel.VERBOSE)


# Nereid's earlier name for Logger.LogLevel, kept for the models that use it.
LogLevel = _LogLevel


# ---- auto-complete --------------------------------------------------------


class ModelConfig:
    """The configuration auto_complete_config(auto_complete_model_config)
    receives and returns (format-1 JSON as a dict), with Triton's checks
    and sentences."""

    def __init__(self, model_config):
        self._config = json.loads(model_config) if isinstance(model_config, (str, bytes)) else dict(model_config)

    def as_dict(self):
        return self._config

    def _name(self):
        return str(self._config.get("name", ""))

    def max_batch_size(self):
        return int(self._config.get("max_batch_size", 0))

    def set_max_batch_size(self, max_batch_size):
        have = self.max_batch_size()
        if have > max_batch_size:
            raise ValueError(f"configuration specified max_batch_size {have}, but in auto-complete-config function "
                             f"for model '{self._name()}' specified max_batch_size {max_batch_size}")
        self._config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self):
        for other in ("sequence_batching", "ensemble_scheduling"):
            if other in self._config:
                raise ValueError(f"Configuration specified scheduling_choice as '{other}', but auto-complete-config "
                                 f"function for model '{self._name()}' tries to set scheduling_choice as "
                                 "'dynamic_batching'")
        self._config.setdefault("dynamic_batching", {})

    def set_model_transaction_policy(self, transaction_policy_dict):
        for key in transaction_policy_dict:
            if key != "decoupled":
                raise ValueError(f"model transaction property in auto-complete-config function for model "
                                 f"'{self._name()}' contains property other than 'decoupled'.")
        policy = self._config.setdefault("model_transaction_policy", {})
        if "decoupled" in transaction_policy_dict:
            want = transaction_policy_dict["decoupled"]
            if "decoupled" in policy and policy["decoupled"] != want:
                raise ValueError(f"trying to change decoupled property in auto-complete-config for model "
                                 f"'{self._name()}', which is already set to '{policy['decoupled']}'.")
            policy["decoupled"] = want

    def _add(self, section, tensor, allowed):
        for key in tensor:
            if key not in allowed:
                names = ", ".join(f"'{k}'" for k in allowed[:-1]) + f" and '{allowed[-1]}'"
                raise ValueError(f"{section} '{tensor.get('name')}' in auto-complete-config function for model "
                                 f"'{self._name()}' contains property other than {names}.")
        if "name" not in tensor:
            raise ValueError(f"{section} in auto-complete-config function for model '{self._name()}' is missing "
                             "'name' property.")
        for key in ("data_type", "dims"):
            if key not in tensor:
                raise ValueError(f"{section} '{tensor['name']}' in auto-complete-config function for model "
                                 f"'{self._name()}' is missing '{key}' property.")
        tensors = self._config.setdefault(section, [])
        for have in tensors:
            if have.get("name") != tensor["name"]:
                continue
            have_type = have.get("data_type", "TYPE_INVALID")
            have_dims = [int(d) for d in have.get("dims", [])]
            if have_type != "TYPE_INVALID" and have_type != tensor["data_type"]:
                raise ValueError(f"unable to load model '{self._name()}', configuration expects datatype "
                                 f"{have_type} for {section} '{tensor['name']}', model provides "
                                 f"{tensor['data_type']}")
            if have_dims and have_dims != [int(d) for d in tensor["dims"]]:
                raise ValueError(f"model '{self._name()}', tensor '{tensor['name']}': the model expects dims "
                                 f"{tensor['dims']} but the model configuration specifies dims {have_dims}")
            if "optional" in have and "optional" in tensor and have["optional"] != tensor["optional"]:
                raise ValueError(f"model '{self._name()}', tensor '{tensor['name']}': the model expects optional "
                                 f"{tensor['optional']} but the model configuration specifies optional "
                                 f"{have['optional']}")
            have["data_type"] = tensor["data_type"]
            have["dims"] = tensor["dims"]
            if "optional" in tensor:
                have["optional"] = tensor["optional"]
            return
        tensors.append(tensor)

    def add_input(self, input):  # noqa: A002 - Triton's parameter name
        self._add("input", input, ["name", "data_type", "dims", "optional"])

    def add_output(self, output):
        self._add("output", output, ["name", "data_type", "dims"])


# ---- model control ---------------------------------------------------------


def load_model(model_name, config="", files=None):
    """Loads (or reloads) a model of the server's repository; with `config`
    (JSON text) and `files` ({"file:<path>": bytes}) as the repository
    load extension takes them. Raises TritonModelException on failure."""
    name, text = _str_arg(model_name), _str_arg(config)
    if name is None or text is None or files is not None and not isinstance(files, dict):
        raise _incompatible("load_model", "load_model(model_name: str, config: str = '', files: object = None) "
                            "-> None", (model_name, config, files))
    out = {}
    for key, data in (files or {}).items():
        if not isinstance(data, (bytes, bytearray)):
            raise TritonModelException(f"load_model: the contents of {key!r} must be bytes")
        out[key] = bytes(data).decode("latin-1")
    _service({"type": "load_model", "name": name, "config": text, "files": out})


def unload_model(model_name, unload_dependents=False):
    name = _str_arg(model_name)
    if name is None or not isinstance(unload_dependents, bool):
        raise _incompatible("unload_model", "unload_model(model_name: str, unload_dependents: bool = False) "
                            "-> None", (model_name, unload_dependents))
    _service({"type": "unload_model", "name": name, "unload_dependents": unload_dependents})


def is_model_ready(model_name, model_version=""):
    name, version = _str_arg(model_name), _str_arg(model_version)
    if name is None or version is None:
        raise _incompatible("is_model_ready", "is_model_ready(model_name: str, model_version: str = '') -> bool",
                            (model_name, model_version))
    return bool(_service({"type": "is_model_ready", "name": name, "version": version})["ready"])


# ---- custom metrics ----------------------------------------------------------


class MetricKind(enum.IntEnum):
    COUNTER = 0
    GAUGE = 1
    HISTOGRAM = 2


class MetricFamily:
    """A family of custom metrics in the server's Prometheus endpoint."""
    COUNTER = MetricKind.COUNTER
    GAUGE = MetricKind.GAUGE
    HISTOGRAM = MetricKind.HISTOGRAM

    def __init__(self, name, description, kind):
        text, desc = _str_arg(name), _str_arg(description)
        if text is None or desc is None or not isinstance(kind, MetricKind):
            raise _incompatible("__init__", "MetricFamily(name: str, description: str, kind: MetricKind)",
                                (name, description, kind))
        self._kind = kind
        try:
            self._id = _service({"type": "metric_family", "name": text, "description": desc,
                                 "kind": int(self._kind)})["id"]
        except TritonModelException as e:
            raise TritonModelException(f"Error when creating MetricFamily: {e}") from None

    def Metric(self, labels=None, buckets=None):
        return Metric(self, labels, buckets)


class Metric:
    """One labelled metric of a family (made by MetricFamily.Metric)."""

    def __init__(self, family, labels=None, buckets=None):
        if labels is not None and not isinstance(labels, dict):
            raise TritonModelException("Failed to create metric. Labels must be a dictionary.")
        if buckets is not None:
            if not isinstance(buckets, list):
                raise TritonModelException("Failed to create metric. Buckets must be a list.")
            if family._kind != MetricKind.HISTOGRAM:
                raise TritonModelException("Failed to create metric. Unexpected buckets found.")
        elif family._kind == MetricKind.HISTOGRAM:
            raise TritonModelException("Failed to create metric. Missing required buckets.")
        labels = labels or {}
        for k, v in labels.items():
            if type(k) is not str or type(v) is not str:
                # Triton's parent process reads the labels as JSON strings.
                raise TritonModelException(
                    f"Error when creating Metric: Failed to process the request for model '{_instance_name}', "
                    "message: attempt to access JSON non-string as string")
        msg = {"type": "metric", "family": family._id, "labels": dict(labels)}
        if buckets is not None:
            msg["buckets"] = [float(b) for b in buckets]
        try:
            self._id = _service(msg)["id"]
        except TritonModelException as e:
            raise TritonModelException(f"Error when creating Metric: {e}") from None
        # Triton's metrics stop working once their family is gone.
        self._family = weakref.ref(family)

    def _op(self, op, what, value=0.0):
        try:
            number = float(value) if not isinstance(value, (str, bytes, bytearray)) else None
        except (TypeError, ValueError):
            number = None
        if number is None:
            raise _incompatible(op, f"{op}(self: Metric, arg0: float) -> None", (value,))
        if self._family() is None:
            raise TritonModelException(
                f"Failed to {what} metric value: Invalid metric operation as the corresponding 'MetricFamily' has "
                "been deleted. The 'MetricFamily' object should be deleted AFTER its corresponding 'Metric' "
                "objects have been deleted.")
        try:
            return _service({"type": "metric_op", "metric": self._id, "op": op, "value": number})["value"]
        except TritonModelException as e:
            raise TritonModelException(f"Failed to {what} metric value: {e}") from None

    def increment(self, value):
        self._op("increment", "increment", value)

    def set(self, value):
        self._op("set", "set", value)

    def observe(self, value):
        self._op("observe", "observe", value)

    def value(self):
        return self._op("value", "get")


# ---- the names of Triton's C++ module ----------------------------------------

# A model.py may import Triton's binding module by its own name.
_c_module = type(sys)("c_python_backend_utils")
for _name in ("TritonError", "TritonModelException", "PreferredMemory", "MemoryType", "TRITONSERVER_MEMORY_GPU",
              "TRITONSERVER_MEMORY_CPU", "InferenceTrace", "InferenceRequest", "Tensor", "InferenceResponse",
              "InferenceResponseSender", "ResponseIterator", "Logger", "Metric", "MetricKind", "MetricFamily",
              "load_model", "unload_model", "is_model_ready"):
    setattr(_c_module, _name, globals()[_name])
sys.modules.setdefault("c_python_backend_utils", _c_module)
del _name
