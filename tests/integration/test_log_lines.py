"""Verbose log lines Triton's QA reads (server qa/L0_logging,
log_format_test.py, r25.07): every HTTP request ("HTTP request: <method
number> <path>") and every failed inference ("[request id: <id>] Infer
failed: <message>"), whose message carries client text. With the
default escaping (TRITON_SERVER_ESCAPE_LOG_MESSAGES unset or 1) a client
cannot forge a log record with newlines in an input name; with 0 the
message is written raw, as Triton writes it.

Run by ctest with NEREID_BIN and NEREID_BACKEND_DIR set (tests/CMakeLists.txt).
"""
import os
import re
import tempfile

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from security_helpers import WatchedServer

FORGED = "I0205 18:34:18.707423 1 file.cc:123] THIS ENTRY WAS INJECTED"
CONFIG = """name: "simple"
backend: "identity"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 3 ] } ]
"""


@pytest.mark.parametrize("escape", ["1", "0"])
def test_requests_and_failed_inferences_are_logged_verbosely(escape):
    with tempfile.TemporaryDirectory() as top:
        os.makedirs(os.path.join(top, "simple", "1"))
        with open(os.path.join(top, "simple", "config.pbtxt"), "w") as f:
            f.write(CONFIG)
        log = os.path.join(top, "server.log")
        env = dict(os.environ, TRITON_SERVER_ESCAPE_LOG_MESSAGES=escape)
        with WatchedServer(["--log-verbose=1", f"--log-file={log}"], repo=top, env=env) as s:
            client = httpclient.InferenceServerClient(f"127.0.0.1:{s.ports['http']}")
            x = httpclient.InferInput(f"\n{FORGED}\n{FORGED}", [1, 3], "FP32")
            x.set_data_from_numpy(np.ones((1, 3), dtype=np.float32))
            with pytest.raises(InferenceServerException):
                client.infer("simple", [x])
        with open(log) as f:
            text = f.read()
    assert re.search(r"\] \"?HTTP request: 2 /v2/models/simple/infer", text), text
    assert "[request id: <id_unknown>] Infer failed: " in text, text
    lines = text.splitlines()
    if escape == "1":
        assert FORGED not in lines, text
    else:
        assert FORGED in lines, text
