"""Sum and difference of two vectors of integers written as strings."""
import numpy as np

import triton_python_backend_utils as pb_utils


def _ints(request, name):
    raw = pb_utils.get_input_tensor_by_name(request, name).as_numpy()
    return np.vectorize(lambda s: int(s.decode() if isinstance(s, bytes) else s), otypes=[np.int64])(raw)


def _strings(values):
    return np.vectorize(lambda v: str(v).encode(), otypes=[object])(values)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a, b = _ints(request, "INPUT0"), _ints(request, "INPUT1")
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("OUTPUT0", _strings(a + b)),
                pb_utils.Tensor("OUTPUT1", _strings(a - b))]))
        return responses
