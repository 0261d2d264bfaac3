"""OUTPUT = INPUT, plus 1 on a sequence's first request and plus its
correlation ID on its last."""
import numpy as np

import triton_python_backend_utils as pb_utils


def _control(request, name, shape):
    return pb_utils.get_input_tensor_by_name(request, name).as_numpy().reshape(shape)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            value = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()
            start = _control(request, "START", value.shape)
            end = _control(request, "END", value.shape)
            corrid = _control(request, "CORRID", value.shape).astype(np.int64)
            out = value.astype(np.int64) + start + end * corrid
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("OUTPUT", out.astype(np.int32))]))
        return responses
