#!/usr/bin/python3
"""Dynamic batcher benchmark: default scheduler vs dynamic batcher vs ideal.

    /usr/bin/python3 bench/batching_bench.py [BUILD_DIR]   (default: build)

Builds nothing. BUILD_DIR must hold tools/perf/nrd_perf and the test backend
test_backends/costly (NRD_BUILD_TESTS=ON, the default); Release gives the
meaningful figures:

    cmake -S . -B build-bb -DCMAKE_BUILD_TYPE=Release
    cmake --build build-bb -j2 --target nrd_perf triton_costly

The `costly` backend answers like identity; each Execute costs
F + c * rows microseconds (model parameters exec_us, row_us; see
backends/testing/costly/costly.c). For F = 10 ms and F = 1 ms (c = 0 unless
--row-us) it writes a temporary model repository with two models,
max_batch_size 8 and one instance each:

    default   no dynamic_batching: one request per Execute
    dynamic   dynamic_batching { max_queue_delay_microseconds: 2000 }

and runs `nrd_perf --service-kind=inprocess` once per concurrency level
(1 2 4 8 16 32), each with short windows. It prints throughput and p50/p99
latency per level; for the dynamic batcher also the share of the ideal
(max_batch_size rows every F + c * max_batch_size us), with what the server
statistics say about the loss: rows per Execute, the average Execute time
against its nominal cost, and how busy the instance was.

At the lowest level (concurrency 1 by default; its windows are
--low-window ms, longer so that the p99 rests on several hundred requests)
it compares the dynamic batcher's p50 and p99 with two bounds:

    nominal    max_queue_delay + F + c         (one execution as configured)
    measured   max_queue_delay + the default scheduler's latency at the same
               level, p50 against p50 and p99 against p99 (one execution as
               this machine delivered it, with the backend's own jitter and
               the request/response path)

and prints the server's average queue and compute times per request.

Prints figures only; asserts nothing about timing. Exits non-zero only when
a run fails (nrd_perf error, missing binaries). About 2 to 3 minutes.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

MAX_BATCH = 8

CONFIG = """name: "{name}"
backend: "costly"
max_batch_size: {mbs}
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
parameters {{ key: "exec_us" value {{ string_value: "{f}" }} }}
parameters {{ key: "row_us" value {{ string_value: "{c}" }} }}
parameters {{ key: "cost_mode" value {{ string_value: "{mode}" }} }}
{batching}"""


def write_model(repo, name, f, c, mode, delay_us):
    batching = ""
    if delay_us is not None:
        batching = ("dynamic_batching {{ max_queue_delay_microseconds: {} }}\n"
                    .format(delay_us))
    os.makedirs(os.path.join(repo, name, "1"))
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as out:
        out.write(CONFIG.format(name=name, mbs=MAX_BATCH, f=f, c=c, mode=mode,
                                batching=batching))


def run_level(args, perf, repo, backends, model, concurrency, tmp, window):
    report = os.path.join(tmp, "{}-{}.json".format(model, concurrency))
    cmd = [perf, "--service-kind=inprocess", "-m", model,
           "--model-repository=" + repo, "--backend-directory=" + backends,
           "--concurrency-range", str(concurrency),
           "--measurement-interval", str(window),
           "--max-trials", str(args.trials), "--json", report]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        sys.exit("batching_bench: nrd_perf failed ({}): {}".format(
            proc.returncode, " ".join(cmd)))
    with open(report) as src:
        return json.load(src)["results"][0]


def fmt_ms(us):
    return "{:8.2f}".format(us / 1000.0)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(root, "build"))
    ap.add_argument("--exec-us", default="10000,1000",
                    help="comma-separated F values in us (default 10000,1000)")
    ap.add_argument("--row-us", type=int, default=0, help="c in us (default 0)")
    ap.add_argument("--delay-us", type=int, default=2000,
                    help="max_queue_delay_microseconds (default 2000)")
    ap.add_argument("--concurrency", default="1,2,4,8,16,32")
    ap.add_argument("--window", type=int, default=1000,
                    help="nrd_perf measurement window in ms (default 1000)")
    ap.add_argument("--low-window", type=int, default=3000,
                    help="window in ms at the lowest concurrency, where the "
                    "p99 is compared with its bounds (default 3000)")
    ap.add_argument("--trials", type=int, default=4,
                    help="nrd_perf --max-trials (default 4)")
    ap.add_argument("--cost-mode", choices=("sleep", "spin"), default="sleep")
    args = ap.parse_args()

    build = os.path.abspath(args.build)
    perf = os.path.join(build, "tools", "perf", "nrd_perf")
    backends = os.path.join(build, "test_backends")
    costly = os.path.join(backends, "costly", "libtriton_costly.so")
    missing = [p for p in (perf, costly) if not os.path.exists(p)]
    if missing:
        sys.exit("batching_bench: missing {}\n  build them (test backends need "
                 "NRD_BUILD_TESTS=ON, the default):\n"
                 "  cmake -S {} -B {} -DCMAKE_BUILD_TYPE=Release\n"
                 "  cmake --build {} -j2 --target nrd_perf triton_costly"
                 .format(", ".join(missing), root, build, build))
    levels = [int(x) for x in args.concurrency.split(",")]
    costs = [int(x) for x in args.exec_us.split(",")]
    c = args.row_us

    started = time.time()
    summary = []
    with tempfile.TemporaryDirectory(prefix="nrd-batching-") as tmp:
        repo = os.path.join(tmp, "models")
        for f in costs:
            write_model(repo, "default_{}".format(f), f, c, args.cost_mode, None)
            write_model(repo, "dynamic_{}".format(f), f, c, args.cost_mode,
                        args.delay_us)
        print("nrd_perf in process, costly backend ({}), max_batch_size {}, "
              "1 instance, FP32[16] requests of 1 row;\nwindows of {} ms ({} ms "
              "at concurrency {}), at most {} per level; latencies in ms."
              .format(args.cost_mode, MAX_BATCH, args.window, args.low_window,
                      levels[0], args.trials))
        for f in costs:
            full = f + c * MAX_BATCH
            ideal = MAX_BATCH * 1e6 / full
            one_exec = f + c  # one execution at low load: a batch of 1 row
            bound = args.delay_us + one_exec
            print("\n== F = {} us, c = {} us: ideal {:.1f} infer/s "
                  "({} rows every {} us) ==".format(f, c, ideal, MAX_BATCH,
                                                    full))
            print("{:>5} | {:>9} {:>8} {:>8} | {:>9} {:>8} {:>8} {:>6} | "
                  "{:>8} {:>9} {:>6}".format(
                      "conc", "default/s", "p50", "p99", "dynamic/s", "p50",
                      "p99", "ideal%", "rows/exe", "exec(us)", "busy%"))
            best = None
            low = None
            for n in levels:
                window = args.low_window if n == levels[0] else args.window
                d = run_level(args, perf, repo, backends,
                              "default_{}".format(f), n, tmp, window)
                b = run_level(args, perf, repo, backends,
                              "dynamic_{}".format(f), n, tmp, window)
                pct = 100.0 * b["throughput_infer_per_sec"] / ideal
                srv = b.get("server") or {}
                execs = srv.get("executions") or 0
                rows = srv.get("requests", 0) / execs if execs else 0.0
                exec_us = srv.get("compute_infer_us", 0.0)
                busy = (100.0 * execs * exec_us / 1e6 / b["seconds"]
                        if b["seconds"] else 0.0)
                flag = "" if d["stable"] and b["stable"] else "  (unstable)"
                print("{:>5} | {:>9.1f} {} {} | {:>9.1f} {} {} {:>6.1f} | "
                      "{:>8.2f} {:>9.0f} {:>6.1f}{}".format(
                          n, d["throughput_infer_per_sec"],
                          fmt_ms(d["latency_us"]["p50"]),
                          fmt_ms(d["latency_us"]["p99"]),
                          b["throughput_infer_per_sec"],
                          fmt_ms(b["latency_us"]["p50"]),
                          fmt_ms(b["latency_us"]["p99"]), pct, rows, exec_us,
                          busy, flag))
                sys.stdout.flush()
                if best is None or pct > best[1]:
                    best = (n, pct, b["throughput_infer_per_sec"])
                if low is None:
                    dsrv = d.get("server") or {}
                    low = (n, b["latency_us"], d["latency_us"],
                           srv.get("queue_us", 0.0), exec_us, b["requests"],
                           dsrv.get("compute_infer_us", 0.0))
            summary.append((f, ideal, best, low, bound))
    print("\n== summary (c = {} us, max_queue_delay {} us) ==".format(
        c, args.delay_us))
    for f, ideal, best, low, bound in summary:
        print("F = {:>5} us: dynamic batcher best {:.1f} infer/s at concurrency "
              "{} = {:.1f}% of ideal {:.1f}".format(f, best[2], best[0],
                                                     best[1], ideal))
        lat, dlat = low[1], low[2]
        print("             concurrency {} ({} requests): dynamic p50 {:.3f} ms, "
              "p99 {:.3f} ms".format(low[0], low[5], lat["p50"] / 1000,
                                     lat["p99"] / 1000))
        print("               vs nominal  delay + F + c      = {:.3f} ms: "
              "p50 {:+5.0f} us, p99 {:+5.0f} us".format(
                  bound / 1000, lat["p50"] - bound, lat["p99"] - bound))
        for q in ("p50", "p99"):
            measured = args.delay_us + dlat[q]
            print("               vs measured delay + default {} = {:.3f} ms: "
                  "{} {:+5.0f} us".format(q, measured / 1000, q,
                                          lat[q] - measured))
        print("               (server, average per request: dynamic queue {:.0f} "
              "us + compute {:.0f} us; default compute {:.0f} us)".format(
                  low[3], low[4], low[6]))
    print("columns: exec(us) is the server's average compute-infer time per "
          "request (the Execute cost its batch paid, nominal F + c*rows); "
          "busy% is executions x exec time / wall time.")
    print("total {:.0f} s".format(time.time() - started))


if __name__ == "__main__":
    main()
