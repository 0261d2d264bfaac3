"""The running sum of INPUT over a sequence, plus the correlation ID (a
string holding an integer) on the sequence's last request."""
import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.sums = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            value = int(pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy().reshape(-1)[0])
            start = int(pb_utils.get_input_tensor_by_name(request, "START").as_numpy().reshape(-1)[0])
            end = int(pb_utils.get_input_tensor_by_name(request, "END").as_numpy().reshape(-1)[0])
            corrid = pb_utils.get_input_tensor_by_name(request, "CORRID").as_numpy().reshape(-1)[0]
            corrid = corrid.decode() if isinstance(corrid, bytes) else str(corrid)
            total = value + (0 if start else self.sums.get(corrid, 0))
            self.sums[corrid] = total
            out = total + int(corrid) if end else total
            if end:
                self.sums.pop(corrid, None)
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("OUTPUT", np.array([[out]], dtype=np.int32))]))
        return responses
