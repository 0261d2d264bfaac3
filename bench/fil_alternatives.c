/* nrd_bench_fil_alternatives: the libraries the fil backend could predict
 * with, on the same 100-tree models and rows, one thread, one call at a
 * time: Treelite's GTIL (the backend's choice) against XGBoost's C API
 * (XGBoosterPredictFromDense) on an XGBoost model and against LightGBM's
 * C API (LGBM_BoosterPredictForMat) on a LightGBM model, at batch 1, 64
 * and 4096. bench/fil_bench.sh trains the models and runs this; the
 * figures are in docs/fil.md.
 *
 * Each library is opened with dlopen from the wheels in .deps/fil; the few
 * functions used are declared here from their C headers (the wheels ship
 * none). Prints figures, never judges them. Single-threaded program. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

#define MAX_ROWS 4096

typedef struct lib {
  const char *name;
  bool (*predict)(void *ctx, const float *in, int rows, int cols);
  void *ctx;
} lib;

/* ---- Treelite ------------------------------------------------------------ */
typedef struct tl_ctx {
  int (*predict)(void *model, const void *in, const char *type, uint64_t rows, void *out, void *config);
  void *model, *config;
  const char *in_type;
  double out[MAX_ROWS * 2];
  double wide[MAX_ROWS * 64];
} tl_ctx;

static bool tl_predict(void *p, const float *in, int rows, int cols) {
  tl_ctx *c = p;
  const void *x = in;
  if (strcmp(c->in_type, "float64") == 0) { /* as the backend widens */
    for (int i = 0; i < rows * cols; i++) c->wide[i] = in[i];
    x = c->wide;
  }
  return c->predict(c->model, x, c->in_type, (uint64_t)rows, c->out, c->config) == 0;
}

static bool tl_open(void *so, tl_ctx *c, const char *loader, const char *file) {
  int (*load3)(const char *, const char *, void **) = NULL;
  int (*parse)(const char *, void **) = NULL;
  int (*intype)(void *, const char **) = NULL;
  *(void **)&load3 = dlsym(so, loader);
  *(void **)&parse = dlsym(so, "TreeliteGTILParseConfig");
  *(void **)&intype = dlsym(so, "TreeliteGetInputType");
  *(void **)&c->predict = dlsym(so, "TreeliteGTILPredict");
  if (!load3 || !parse || !intype || !c->predict) return false;
  const char *t = NULL;
  if (load3(file, "{}", &c->model) != 0 || intype(c->model, &t) != 0) return false;
  c->in_type = strcmp(t, "float64") == 0 ? "float64" : "float32";
  return parse("{\"predict_type\": \"default\", \"nthread\": 1}", &c->config) == 0;
}

/* ---- XGBoost --------------------------------------------------------------- */
typedef struct xgb_ctx {
  int (*predict)(void *booster, const char *values, const char *config, void *proxy, const uint64_t **shape,
                 uint64_t *dim, const float **out);
  void *booster;
} xgb_ctx;

static bool xgb_predict(void *p, const float *in, int rows, int cols) {
  xgb_ctx *c = p;
  char values[256];
  snprintf(values, sizeof values, "{\"data\": [%llu, true], \"shape\": [%d, %d], \"typestr\": \"<f4\", \"version\": 3}",
           (unsigned long long)(uintptr_t)in, rows, cols);
  const uint64_t *shape = NULL;
  uint64_t dim = 0;
  const float *out = NULL;
  return c->predict(c->booster, values,
                    "{\"type\": 0, \"training\": false, \"iteration_begin\": 0, \"iteration_end\": 0, "
                    "\"strict_shape\": false, \"missing\": NaN}",
                    NULL, &shape, &dim, &out) == 0;
}

static bool xgb_open(const char *path, xgb_ctx *c, const char *file) {
  void *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!so) return false;
  int (*create)(void *const *, uint64_t, void **) = NULL;
  int (*load)(void *, const char *) = NULL;
  int (*set)(void *, const char *, const char *) = NULL;
  *(void **)&create = dlsym(so, "XGBoosterCreate");
  *(void **)&load = dlsym(so, "XGBoosterLoadModel");
  *(void **)&set = dlsym(so, "XGBoosterSetParam");
  *(void **)&c->predict = dlsym(so, "XGBoosterPredictFromDense");
  return create && load && set && c->predict && create(NULL, 0, &c->booster) == 0 && load(c->booster, file) == 0 &&
         set(c->booster, "nthread", "1") == 0;
}

/* ---- LightGBM -------------------------------------------------------------- */
typedef struct lgb_ctx {
  int (*predict)(void *booster, const void *data, int dtype, int32_t rows, int32_t cols, int row_major, int kind,
                 int start, int iterations, const char *params, int64_t *len, double *out);
  void *booster;
  double out[MAX_ROWS * 2];
} lgb_ctx;

static bool lgb_predict(void *p, const float *in, int rows, int cols) {
  lgb_ctx *c = p;
  int64_t len = 0;
  return c->predict(c->booster, in, 0 /* float32 */, rows, cols, 1, 0 /* normal */, 0, -1, "num_threads=1", &len,
                    c->out) == 0;
}

static bool lgb_open(const char *path, lgb_ctx *c, const char *file) {
  void *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!so) return false;
  int (*load)(const char *, int *, void **) = NULL;
  *(void **)&load = dlsym(so, "LGBM_BoosterCreateFromModelfile");
  *(void **)&c->predict = dlsym(so, "LGBM_BoosterPredictForMat");
  int iterations = 0;
  return load && c->predict && load(file, &iterations, &c->booster) == 0;
}

/* p50 in ns of one call at 'rows' rows, over 'seconds' (at least 10 calls). */
static uint64_t p50(const lib *l, const float *in, int rows, int cols, double seconds) {
  enum { kCap = 1 << 18 };
  static uint64_t lat[kCap];
  size_t n = 0;
  for (int i = 0; i < 3; i++) l->predict(l->ctx, in, rows, cols);
  uint64_t until = now_ns() + (uint64_t)(seconds * 1e9);
  while (n < kCap && (n < 10 || now_ns() < until)) {
    uint64_t t0 = now_ns();
    if (!l->predict(l->ctx, in, rows, cols)) {
      fprintf(stderr, "error: %s failed\n", l->name);
      return 0;
    }
    lat[n++] = now_ns() - t0;
  }
  qsort(lat, n, sizeof lat[0], cmp_u64);
  return lat[n / 2];
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s MODELS_DIR TREELITE_SO FIL_PY_DIR [SECONDS [MAX_ROWS]]\n", argv[0]);
    return 2;
  }
  const char *dir = argv[1], *tl_so = argv[2], *py = argv[3];
  double seconds = argc > 4 ? atof(argv[4]) : 0.5;
  int max_rows = argc > 5 ? atoi(argv[5]) : MAX_ROWS;
  const int cols = 32;
  char xgb_file[4096], lgb_file[4096], xgb_so[4096], lgb_so[4096];
  snprintf(xgb_file, sizeof xgb_file, "%s/xgboost.json", dir);
  snprintf(lgb_file, sizeof lgb_file, "%s/model.txt", dir);
  snprintf(xgb_so, sizeof xgb_so, "%s/xgboost/lib/libxgboost.so", py);
  snprintf(lgb_so, sizeof lgb_so, "%s/lightgbm/lib/lib_lightgbm.so", py);
  void *so = dlopen(tl_so, RTLD_NOW | RTLD_LOCAL);
  static tl_ctx tl_x, tl_l;
  static xgb_ctx xc;
  static lgb_ctx lc;
  if (!so || !tl_open(so, &tl_x, "TreeliteLoadXGBoostModelJSON", xgb_file) ||
      !tl_open(so, &tl_l, "TreeliteLoadLightGBMModel", lgb_file) || !xgb_open(xgb_so, &xc, xgb_file) ||
      !lgb_open(lgb_so, &lc, lgb_file)) {
    fprintf(stderr, "error: cannot open the libraries or models (%s)\n", dlerror() ? dlerror() : "see above");
    return 1;
  }
  static float in[MAX_ROWS * 32];
  uint64_t seed = 47;
  for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    in[i] = (float)((double)(seed >> 11) / (double)(1ull << 53) * 4.0 - 2.0);
  }
  const lib pairs[2][2] = {
      {{"GTIL (xgboost.json)", tl_predict, &tl_x}, {"XGBoost C API", xgb_predict, &xc}},
      {{"GTIL (model.txt)", tl_predict, &tl_l}, {"LightGBM C API", lgb_predict, &lc}},
  };
  setvbuf(stdout, NULL, _IOLBF, 0);
  printf("100-tree models, %d features, one thread, p50 per call; ratio = library / GTIL\n", cols);
  printf("%-22s %-16s %6s %12s %12s %8s\n", "floor", "alternative", "batch", "floor us", "alt us", "ratio");
  static const int kBatches[] = {1, 64, 4096};
  for (int k = 0; k < 2; k++) {
    for (size_t b = 0; b < 3; b++) {
      int rows = kBatches[b];
      if (rows > max_rows) break;
      uint64_t f = p50(&pairs[k][0], in, rows, cols, seconds);
      uint64_t a = p50(&pairs[k][1], in, rows, cols, seconds);
      if (f == 0 || a == 0) return 1;
      printf("%-22s %-16s %6d %12.2f %12.2f %8.2f\n", pairs[k][0].name, pairs[k][1].name, rows, f / 1e3, a / 1e3,
             (double)a / (double)f);
    }
  }
  return 0;
}
