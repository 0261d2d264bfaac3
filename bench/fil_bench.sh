#!/usr/bin/env bash
# The fil backend against Treelite's bare GTIL call (bench/fil_inprocess.c):
# trains a 100-tree XGBoost model (32 features) with the xgboost wheel in
# .deps/fil/py, writes it as a FIL model repository and runs nrd_bench_fil
# on it; then GTIL against XGBoost's and LightGBM's own C APIs on that
# model and a 100-tree LightGBM one (bench/fil_alternatives.c). Figures
# only, never judged.
#   bench/fil_bench.sh BUILD_DIR [--quick | nrd_bench_fil options...]
# --quick (the test suite's run) measures batches 1 and 64 briefly.
# Use a Release tree for real figures:
#   cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DNRD_BUILD_TESTS=OFF
#   cmake --build build-bench -j2 --target nrd_bench_fil nrd_bench_fil_alternatives triton_fil
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: bench/fil_bench.sh BUILD_DIR [options]}
shift
repo=$(mktemp -d)
trap 'rm -rf "$repo"' EXIT
# NRD_FIL_BENCH_THREADS=N caps GTIL's threads on both sides (cpu_nthread;
# default every core). The TSan test run sets 1: the wheel's OpenMP
# threads are invisible to TSan.
threads=${NRD_FIL_BENCH_THREADS:-}
PYTHONPATH=$src/.deps/fil/py /usr/bin/python3 - "$repo" "$threads" <<'PY'
import os, sys, warnings
import numpy as np
import xgboost as xgb
repo = sys.argv[1]
rng = np.random.default_rng(47)
x = rng.uniform(-2, 2, (5000, 32)).astype(np.float32)
y = (x[:, 0] + x[:, 1] * x[:, 2] > 0).astype(np.int32)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    b = xgb.train({"objective": "binary:logistic", "max_depth": 6, "nthread": 1}, xgb.DMatrix(x, label=y), 100)
os.makedirs(f"{repo}/fil100/1")
b.save_model(f"{repo}/fil100/1/xgboost.json")
import lightgbm as lgb
l = lgb.train({"objective": "binary", "num_leaves": 64, "verbose": -1, "num_threads": 1}, lgb.Dataset(x, label=y), 100)
l.save_model(f"{repo}/model.txt")
with open(f"{repo}/fil100/config.pbtxt", "w") as f:
    f.write("""backend: "fil"
max_batch_size: 4096
input [ { name: "input__0" data_type: TYPE_FP32 dims: [ 32 ] } ]
output [ { name: "output__0" data_type: TYPE_FP32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU } ]
parameters { key: "model_type" value { string_value: "xgboost_json" } }
""")
    if sys.argv[2]:
        f.write('parameters { key: "cpu_nthread" value { string_value: "%s" } }\n' % sys.argv[2])
PY
"$build/bench/nrd_bench_fil" "$repo" --features 32 --backend-dir "$build/backends" ${threads:+--threads "$threads"} "$@"
cp "$repo/fil100/1/xgboost.json" "$repo/xgboost.json"
# NRD_FIL_BENCH_ALTERNATIVES=0 leaves the libraries' comparison out (the
# TSan test run: XGBoost's OpenMP threads are invisible to TSan).
[ "${NRD_FIL_BENCH_ALTERNATIVES:-1}" = 0 ] && exit 0
alt=()
[ "${1:-}" = --quick ] && alt=(0.05 64)
"$build/bench/nrd_bench_fil_alternatives" "$repo" "$build/backends/fil/libtreelite.so" "$src/.deps/fil/py" "${alt[@]}"
