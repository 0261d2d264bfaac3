"""Per-response statistics of decoupled models (`response_stats` in
/v2/models/<m>/stats and the gRPC ModelStatistics), as Triton's QA checks
them (server qa/L0_response_statistics, r25.07): the square backend with
Triton's CUSTOM_* parameters sends, of n responses, successes, then
CUSTOM_FAIL_COUNT failures, then CUSTOM_EMPTY_COUNT empty ones; a
cancelled stream stops at the next response, which counts as `cancel`.
Counts must match exactly, durations must cover the configured delays,
and HTTP and gRPC must report the same figures.

Run by ctest with NEREID_BIN and NEREID_BACKEND_DIR set (tests/CMakeLists.txt).
"""
import os
import queue
import tempfile
import time

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from security_helpers import WatchedServer

INFER_NS, OUTPUT_NS, CANCEL_NS = 60_000_000, 30_000_000, 40_000_000
FAIL, EMPTY = 2, 1


def square_config(name, params):
    ps = ",\n".join(f'  {{ key: "{k}" value: {{ string_value: "{v}" }} }}' for k, v in params.items())
    return f"""name: "{name}"
backend: "square"
max_batch_size: 0
model_transaction_policy {{ decoupled: true }}
input [ {{ name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }} ]
parameters [
{ps}
]
"""


def make_repo(top):
    models = {
        "sq": {"CUSTOM_INFER_DELAY_NS": INFER_NS, "CUSTOM_OUTPUT_DELAY_NS": OUTPUT_NS,
               "CUSTOM_FAIL_COUNT": FAIL, "CUSTOM_EMPTY_COUNT": EMPTY},
        "sq_slow": {"CUSTOM_INFER_DELAY_NS": 4 * INFER_NS, "CUSTOM_OUTPUT_DELAY_NS": 2 * OUTPUT_NS,
                    "CUSTOM_CANCEL_DELAY_NS": CANCEL_NS},
    }
    for name, params in models.items():
        os.makedirs(os.path.join(top, name, "1"))
        with open(os.path.join(top, name, "config.pbtxt"), "w") as f:
            f.write(square_config(name, params))


def stream(grpc_url, model, n, cancel_after=None):
    """Sends IN = n on a gRPC stream; waits for every non-empty response,
    or cancels the stream once `cancel_after` responses came. Returns them."""
    got = queue.Queue()
    client = grpcclient.InferenceServerClient(grpc_url)
    client.start_stream(callback=lambda result, error: got.put((result, error)))
    inp = grpcclient.InferInput("IN", [1], "INT32")
    inp.set_data_from_numpy(np.array([n], dtype=np.int32))
    client.async_stream_infer(model_name=model, inputs=[inp], outputs=[grpcclient.InferRequestedOutput("OUT")])
    want = (n - EMPTY) if cancel_after is None else cancel_after
    out = [got.get(timeout=60) for _ in range(want)]
    client.stop_stream(cancel_requests=cancel_after is not None)
    client.close()
    return out


def stats_both(http_url, grpc_url, model):
    """response_stats over HTTP, checked equal to gRPC's (as JSON). A
    response may be counted between the two reads: they are compared
    only when HTTP reads the same before and after gRPC's."""
    http = httpclient.InferenceServerClient(http_url)
    grpc_client = grpcclient.InferenceServerClient(grpc_url)
    deadline = time.monotonic() + 10
    while True:
        hs = http.get_inference_statistics(model_name=model)["model_stats"][0]["response_stats"]
        g = grpc_client.get_inference_statistics(model_name=model, as_json=True)
        again = http.get_inference_statistics(model_name=model)["model_stats"][0]["response_stats"]
        if hs == again or time.monotonic() > deadline:
            break
    gs = g["model_stats"][0]["response_stats"]
    assert sorted(hs) == sorted(gs)
    for idx, kinds in hs.items():
        for kind, v in kinds.items():
            gv = gs[idx].get(kind, {})
            assert (v["count"], v["ns"]) == (int(gv.get("count", 0)), int(gv.get("ns", 0))), (idx, kind)
    return hs


def expected_counts(runs, cancel_at=None):
    """Per index: the counts Triton's square makes for requests of n
    responses (runs: list of (n, cancel_at or None))."""
    want = {}
    for n, cancel in runs:
        for i in range(n if cancel is None else cancel + 1):
            c = want.setdefault(i, dict(compute_infer=0, compute_output=0, success=0, fail=0, empty_response=0,
                                        cancel=0))
            if i == cancel:
                c["cancel"] += 1
            elif i + FAIL + EMPTY < n:
                c["compute_infer"] += 1
                c["compute_output"] += 1
                c["success"] += 1
            elif i + EMPTY < n:
                c["compute_infer"] += 1
                c["compute_output"] += 1
                c["fail"] += 1
            else:
                c["compute_infer"] += 1
                c["empty_response"] += 1
    return want


def check(stats, want, infer_ns, output_ns, cancel_ns):
    for i, counts in want.items():
        got = stats[str(i)]
        for kind, count in counts.items():
            assert got[kind]["count"] == count, (i, kind, got)
            floor = {"compute_infer": infer_ns, "empty_response": infer_ns, "compute_output": output_ns,
                     "cancel": cancel_ns}.get(kind, infer_ns + output_ns)
            assert got[kind]["ns"] >= 0.9 * floor * count, (i, kind, got)
            if count == 0:
                assert got[kind]["ns"] == 0, (i, kind, got)


def test_success_fail_and_empty_responses_are_counted_per_index():
    with tempfile.TemporaryDirectory() as top:
        make_repo(top)
        with WatchedServer(repo=top) as s:
            http_url, grpc_url = f"127.0.0.1:{s.ports['http']}", f"127.0.0.1:{s.ports['grpc']}"
            runs = []
            for n in (4, 6):
                replies = stream(grpc_url, "sq", n)
                errors = [e for _, e in replies if e is not None]
                assert len(errors) == FAIL, replies
                assert all("simulated failure" in str(e) for e in errors)
                runs.append((n, None))
                check(stats_both(http_url, grpc_url, "sq"), expected_counts(runs), INFER_NS, OUTPUT_NS, 0)
            # The final flag has no statistics of its own: 6 responses, 6 indexes.
            assert len(stats_both(http_url, grpc_url, "sq")) == 6


def test_a_cancelled_stream_counts_its_cancelled_response():
    with tempfile.TemporaryDirectory() as top:
        make_repo(top)
        with WatchedServer(repo=top) as s:
            http_url, grpc_url = f"127.0.0.1:{s.ports['http']}", f"127.0.0.1:{s.ports['grpc']}"
            # Cancelled while the 2nd response is being made: the 3rd
            # (index 2) sees the cancellation.
            stream(grpc_url, "sq_slow", 4, cancel_after=1)
            deadline = time.monotonic() + 20
            while True:
                stats = stats_both(http_url, grpc_url, "sq_slow")
                if "2" in stats and stats["2"]["cancel"]["count"] == 1:
                    break
                assert time.monotonic() < deadline, stats
                time.sleep(0.05)
            for i in (0, 1):
                assert stats[str(i)]["success"]["count"] == 1, stats
            assert stats["2"]["cancel"]["ns"] >= 0.9 * CANCEL_NS, stats
            assert stats["2"]["compute_infer"]["count"] == 0 and stats["2"]["success"]["count"] == 0, stats
            assert "3" not in stats, stats
