/* nrd_perf command line parser. Accepts "--flag value", "--flag=value",
 * "-f value" and "-fvalue"; any mistake is one line naming the flag. */
#include "options.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum opt_id {
  OPT_MODEL,
  OPT_VERSION,
  OPT_SERVICE,
  OPT_URL,
  OPT_REPO,
  OPT_BACKENDS,
  OPT_CONC,
  OPT_RATE,
  OPT_WINDOW,
  OPT_STABILITY,
  OPT_TRIALS,
  OPT_SHAPE,
  OPT_DATA,
  OPT_BATCH,
  OPT_CSV,
  OPT_JSON,
  OPT_PERCENTILE,
  OPT_HTTP_BINARY,
  OPT_MAX_OUT,
  OPT_SEED,
  OPT_STREAMING,
  OPT_VERBOSE,
  OPT_SSL, /* the --ssl-grpc-* options, OPT_SSL to OPT_SSL_CHAIN in a row */
  OPT_SSL_ROOT,
  OPT_SSL_KEY,
  OPT_SSL_CHAIN,
  OPT_HELP
} opt_id;

typedef struct opt_def {
  char short_name; /* 0: none */
  const char *long_name;
  bool has_arg;
  opt_id id;
} opt_def;

/* --ssl-grpc-use-ssl, alone or with "=true|false", is the one flag whose
 * value is optional (never taken from the next argument). */
static bool optional_arg(const opt_def *d) { return d->id == OPT_SSL; }

static const opt_def defs[] = {
    {'m', "model", true, OPT_MODEL},
    {'x', "model-version", true, OPT_VERSION},
    {0, "service-kind", true, OPT_SERVICE},
    {'u', "url", true, OPT_URL},
    {0, "model-repository", true, OPT_REPO},
    {0, "backend-directory", true, OPT_BACKENDS},
    {0, "concurrency-range", true, OPT_CONC},
    {0, "request-rate-range", true, OPT_RATE},
    {'p', "measurement-interval", true, OPT_WINDOW},
    {'s', "stability-percentage", true, OPT_STABILITY},
    {'r', "max-trials", true, OPT_TRIALS},
    {0, "shape", true, OPT_SHAPE},
    {0, "input-data", true, OPT_DATA},
    {'b', "batch-size", true, OPT_BATCH},
    {'f', "latency-report-file", true, OPT_CSV},
    {0, "json", true, OPT_JSON},
    {0, "percentile", true, OPT_PERCENTILE},
    {0, "http-binary", false, OPT_HTTP_BINARY},
    {0, "max-outstanding", true, OPT_MAX_OUT},
    {0, "seed", true, OPT_SEED},
    {0, "streaming", false, OPT_STREAMING},
    {'v', "verbose", false, OPT_VERBOSE},
    {0, "ssl-grpc-use-ssl", false, OPT_SSL},
    {0, "ssl-grpc-root-certifications-file", true, OPT_SSL_ROOT},
    {0, "ssl-grpc-private-key-file", true, OPT_SSL_KEY},
    {0, "ssl-grpc-certificate-chain-file", true, OPT_SSL_CHAIN},
    {'h', "help", false, OPT_HELP},
};

void nrd_perf_opts_usage(FILE *f, const char *argv0) {
  fprintf(f,
          "usage: %s -m MODEL [options]\n"
          "  -m MODEL                          model to load (required)\n"
          "  -x VERSION                        model version (default: the version policy's choice)\n"
          "  --service-kind=inprocess|http|grpc  how to reach the server (default http)\n"
          "  -u HOST:PORT                      server address (default localhost:8000; grpc: 8001)\n"
          "  --model-repository=DIR            inprocess: repository to serve\n"
          "  --backend-directory=DIR           inprocess: backend directory\n"
          "  --concurrency-range S[:E[:STEP]]  outstanding requests to sweep (default 1)\n"
          "  --request-rate-range S[:E[:STEP]] open loop at a constant request rate (req/s)\n"
          "  --measurement-interval MS         measurement window (default 5000)\n"
          "  --stability-percentage P          3 windows within P%% are stable (default 10)\n"
          "  --max-trials N                    windows at most per load level (default 10)\n"
          "  --shape NAME:D1,D2,...            dims for an input whose shape has -1 (repeatable)\n"
          "  --input-data zero|random          input contents (default random)\n"
          "  -b N                              batch size (default 1)\n"
          "  -f FILE.csv                       write a CSV report\n"
          "  --json FILE                       write a JSON report\n"
          "  --percentile P                    stabilize on and report pP latency (default p50)\n"
          "  --http-binary                     http: binary tensor extension instead of JSON data\n"
          "  --max-outstanding N               request-rate mode: requests in flight at most (default 256)\n"
          "  --streaming                       grpc: ModelStreamInfer, one stream per request slot\n"
          "  --seed N                          seed of the random input data (default 1)\n"
          "  -v                                inprocess: show the server's log\n"
          "  --ssl-grpc-use-ssl[=true|false]   grpc: TLS (alone: true)\n"
          "  --ssl-grpc-root-certifications-file=PEM  grpc TLS: CA that signs the server (default: system CAs)\n"
          "  --ssl-grpc-private-key-file=PEM   grpc TLS: client key, with the chain (mutual TLS)\n"
          "  --ssl-grpc-certificate-chain-file=PEM  grpc TLS: client certificate chain, with the key\n"
          "  -h, --help                        this text\n",
          argv0);
}

const char *nrd_perf_service_name(nrd_perf_service s) {
  switch (s) {
    case NRD_PERF_SERVICE_INPROCESS: return "inprocess";
    case NRD_PERF_SERVICE_HTTP: return "http";
    case NRD_PERF_SERVICE_GRPC: return "grpc";
  }
  return "?";
}

/* Whole number in [lo, hi]. */
static bool parse_int(const char *s, long long lo, long long hi, long long *out) {
  if (!*s) return false;
  errno = 0;
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (errno || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

static bool parse_double(const char *s, double *out) {
  if (!*s) return false;
  errno = 0;
  char *end = NULL;
  double v = strtod(s, &end);
  if (errno || *end || !isfinite(v)) return false;
  *out = v;
  return true;
}

/* "S", "S:E" or "S:E:STEP"; whole numbers unless `fractional`. */
static bool parse_range(const char *s, bool fractional, nrd_perf_range *r) {
  char buf[128];
  if (strlen(s) >= sizeof buf) return false;
  strcpy(buf, s);
  double v[3] = {0, 0, 1};
  int n = 0;
  char *save = NULL;
  for (char *tok = strtok_r(buf, ":", &save); tok; tok = strtok_r(NULL, ":", &save)) {
    if (n == 3) return false;
    long long iv;
    if (fractional) {
      if (!parse_double(tok, &v[n])) return false;
    } else {
      if (!parse_int(tok, 1, 1 << 20, &iv)) return false;
      v[n] = (double)iv;
    }
    n++;
  }
  if (n == 0 || s[strlen(s) - 1] == ':' || strstr(s, "::")) return false;
  if (n == 1) v[1] = v[0];
  if (v[0] <= 0 || v[1] < v[0] || v[2] <= 0) return false;
  *r = (nrd_perf_range){v[0], v[1], v[2]};
  return true;
}

/* NAME:D1,D2,... with every Di >= 1. */
static bool parse_shape(const char *s, nrd_perf_shape *sh) {
  const char *colon = strrchr(s, ':');
  if (!colon || colon == s || !colon[1]) return false;
  sh->name = s;
  sh->name_len = (size_t)(colon - s);
  sh->ndims = 0;
  const char *p = colon + 1;
  for (;;) {
    if (sh->ndims == NRD_PERF_MAX_DIMS) return false;
    char *end = NULL;
    errno = 0;
    long long d = strtoll(p, &end, 10);
    if (errno || end == p || d < 1 || d > (1ll << 40)) return false;
    sh->dims[sh->ndims++] = d;
    if (*end == 0) return true;
    if (*end != ',') return false;
    p = end + 1;
  }
}

static const opt_def *find_long(const char *name, size_t len) {
  for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++)
    if (strlen(defs[i].long_name) == len && !strncmp(defs[i].long_name, name, len)) return &defs[i];
  return NULL;
}

static const opt_def *find_short(char c) {
  for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++)
    if (defs[i].short_name == c) return &defs[i];
  return NULL;
}

/* Applies one option; false with a message in `err` on a bad value. */
static bool apply(nrd_perf_opts *o, const opt_def *d, const char *flag, const char *v, FILE *err) {
  long long iv;
  double dv;
  switch (d->id) {
    case OPT_MODEL:
      if (!*v) goto bad;
      o->model = v;
      return true;
    case OPT_VERSION:
      if (!parse_int(v, 0, INT64_MAX, &iv)) goto bad;
      o->version = iv;
      return true;
    case OPT_SERVICE:
      if (!strcmp(v, "inprocess") || !strcmp(v, "triton_c_api"))
        o->service = NRD_PERF_SERVICE_INPROCESS;
      else if (!strcmp(v, "http") || !strcmp(v, "triton"))
        o->service = NRD_PERF_SERVICE_HTTP;
      else if (!strcmp(v, "grpc"))
        o->service = NRD_PERF_SERVICE_GRPC;
      else
        goto bad;
      return true;
    case OPT_URL:
      if (!*v) goto bad;
      o->url = v;
      return true;
    case OPT_REPO:
      if (!*v) goto bad;
      o->repository = v;
      return true;
    case OPT_BACKENDS:
      if (!*v) goto bad;
      o->backend_dir = v;
      return true;
    case OPT_CONC:
      if (!parse_range(v, false, &o->concurrency)) goto bad;
      return true;
    case OPT_RATE:
      if (!parse_range(v, true, &o->rate)) goto bad;
      o->rate_mode = true;
      return true;
    case OPT_WINDOW:
      if (!parse_int(v, 10, 3600 * 1000, &iv)) goto bad;
      o->window_ms = (int)iv;
      return true;
    case OPT_STABILITY:
      if (!parse_double(v, &dv) || dv <= 0 || dv > 1000) goto bad;
      o->stability_pct = dv;
      return true;
    case OPT_TRIALS:
      if (!parse_int(v, 1, 1000000, &iv)) goto bad;
      o->max_trials = (int)iv;
      return true;
    case OPT_SHAPE:
      if (o->nshapes == NRD_PERF_MAX_SHAPES || !parse_shape(v, &o->shapes[o->nshapes])) goto bad;
      o->nshapes++;
      return true;
    case OPT_DATA:
      if (!strcmp(v, "zero"))
        o->data = NRD_PERF_DATA_ZERO;
      else if (!strcmp(v, "random"))
        o->data = NRD_PERF_DATA_RANDOM;
      else
        goto bad;
      return true;
    case OPT_BATCH:
      if (!parse_int(v, 1, 1 << 20, &iv)) goto bad;
      o->batch = iv;
      return true;
    case OPT_CSV:
      if (!*v) goto bad;
      o->csv_path = v;
      return true;
    case OPT_JSON:
      if (!*v) goto bad;
      o->json_path = v;
      return true;
    case OPT_PERCENTILE:
      if (!parse_int(v, 1, 99, &iv)) goto bad;
      o->percentile = (int)iv;
      return true;
    case OPT_HTTP_BINARY: o->http_binary = true; return true;
    case OPT_MAX_OUT:
      if (!parse_int(v, 1, 65536, &iv)) goto bad;
      o->max_outstanding = (int)iv;
      return true;
    case OPT_SEED:
      if (!parse_int(v, 0, UINT32_MAX, &iv)) goto bad;
      o->seed = (unsigned)iv;
      return true;
    case OPT_STREAMING: o->streaming = true; return true;
    case OPT_VERBOSE: o->verbose = true; return true;
    case OPT_SSL: /* "" (the flag alone), "true" or "false" */
      if (*v && strcmp(v, "true") && strcmp(v, "false")) goto bad;
      o->ssl_grpc = strcmp(v, "false") != 0;
      return true;
    case OPT_SSL_ROOT:
    case OPT_SSL_KEY:
    case OPT_SSL_CHAIN: {
      if (!*v) goto bad;
      const char **slot = d->id == OPT_SSL_ROOT  ? &o->ssl_root_file
                          : d->id == OPT_SSL_KEY ? &o->ssl_key_file
                                                 : &o->ssl_chain_file;
      *slot = v;
      return true;
    }
    case OPT_HELP: return true;
  }
bad:
  fprintf(err, "error: invalid value '%s' for %s\n", v, flag);
  return false;
}

/* The --ssl-grpc-* options together: grpc only, key and chain in pairs,
 * files only with TLS on. `first` is the first of them given, or NULL. */
static bool check_ssl(const nrd_perf_opts *o, const opt_def *first, FILE *err) {
  if (!first) return true;
  if (o->service != NRD_PERF_SERVICE_GRPC) {
    fprintf(err, "error: --%s needs --service-kind=grpc\n", first->long_name);
    return false;
  }
  if (!o->ssl_key_file != !o->ssl_chain_file) {
    fprintf(err, "error: %s needs %s (mutual TLS takes both)\n",
            o->ssl_key_file ? "--ssl-grpc-private-key-file" : "--ssl-grpc-certificate-chain-file",
            o->ssl_key_file ? "--ssl-grpc-certificate-chain-file" : "--ssl-grpc-private-key-file");
    return false;
  }
  const char *file_flag = o->ssl_root_file  ? "--ssl-grpc-root-certifications-file"
                          : o->ssl_key_file ? "--ssl-grpc-private-key-file"
                                            : NULL;
  if (file_flag && !o->ssl_grpc) {
    fprintf(err, "error: %s needs --ssl-grpc-use-ssl\n", file_flag);
    return false;
  }
  return true;
}

nrd_perf_parse_result nrd_perf_opts_parse(int argc, char **argv, nrd_perf_opts *o, FILE *err) {
  *o = (nrd_perf_opts){.version = -1,
                       .service = NRD_PERF_SERVICE_HTTP,
                       .concurrency = {1, 1, 1},
                       .window_ms = 5000,
                       .stability_pct = 10,
                       .max_trials = 10,
                       .data = NRD_PERF_DATA_RANDOM,
                       .batch = 1,
                       .max_outstanding = 256,
                       .seed = 1};
  bool conc_given = false;
  const opt_def *ssl_given = NULL; /* the first --ssl-grpc-* option */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const opt_def *d = NULL;
    const char *value = NULL;
    char flag[64];
    if (a[0] == '-' && a[1] == '-' && a[2]) {
      const char *eq = strchr(a + 2, '=');
      size_t len = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
      d = find_long(a + 2, len);
      snprintf(flag, sizeof flag, "--%.*s", (int)(len < 50 ? len : 50), a + 2);
      if (!d) {
        fprintf(err, "error: unknown option %s\n", flag);
        return NRD_PERF_PARSE_ERROR;
      }
      if (eq) {
        if (!d->has_arg && !optional_arg(d)) {
          fprintf(err, "error: %s takes no value\n", flag);
          return NRD_PERF_PARSE_ERROR;
        }
        value = eq + 1;
        if (optional_arg(d) && !*value) {
          fprintf(err, "error: invalid value '' for %s\n", flag);
          return NRD_PERF_PARSE_ERROR;
        }
      }
    } else if (a[0] == '-' && a[1] && a[1] != '-') {
      d = find_short(a[1]);
      snprintf(flag, sizeof flag, "-%c", a[1]);
      if (!d) {
        fprintf(err, "error: unknown option %s\n", flag);
        return NRD_PERF_PARSE_ERROR;
      }
      if (a[2]) {
        if (!d->has_arg) {
          fprintf(err, "error: %s takes no value\n", flag);
          return NRD_PERF_PARSE_ERROR;
        }
        value = a + 2;
      }
    } else {
      fprintf(err, "error: unexpected argument '%s'\n", a);
      return NRD_PERF_PARSE_ERROR;
    }
    if (d->id == OPT_HELP) return NRD_PERF_PARSE_HELP;
    if (d->has_arg && !value) {
      if (i + 1 >= argc) {
        fprintf(err, "error: %s needs a value\n", flag);
        return NRD_PERF_PARSE_ERROR;
      }
      value = argv[++i];
    }
    if (d->id == OPT_CONC) conc_given = true;
    if (!ssl_given && d->id >= OPT_SSL && d->id <= OPT_SSL_CHAIN) ssl_given = d;
    if (!apply(o, d, flag, value ? value : "", err)) return NRD_PERF_PARSE_ERROR;
  }
  if (!o->model) {
    fprintf(err, "error: -m MODEL is required\n");
    return NRD_PERF_PARSE_ERROR;
  }
  if (conc_given && o->rate_mode) {
    fprintf(err, "error: --concurrency-range and --request-rate-range cannot be used together\n");
    return NRD_PERF_PARSE_ERROR;
  }
  if (o->service == NRD_PERF_SERVICE_INPROCESS) {
    if (!o->repository) {
      fprintf(err, "error: --model-repository is required with --service-kind=inprocess\n");
      return NRD_PERF_PARSE_ERROR;
    }
    if (o->url) {
      fprintf(err, "error: -u has no meaning with --service-kind=inprocess\n");
      return NRD_PERF_PARSE_ERROR;
    }
  } else {
    if (o->repository || o->backend_dir) {
      fprintf(err, "error: %s needs --service-kind=inprocess\n",
              o->repository ? "--model-repository" : "--backend-directory");
      return NRD_PERF_PARSE_ERROR;
    }
    if (!o->url) o->url = o->service == NRD_PERF_SERVICE_GRPC ? "localhost:8001" : "localhost:8000";
  }
  if (o->http_binary && o->service != NRD_PERF_SERVICE_HTTP) {
    fprintf(err, "error: --http-binary needs --service-kind=http\n");
    return NRD_PERF_PARSE_ERROR;
  }
  if (o->streaming && o->service != NRD_PERF_SERVICE_GRPC) {
    fprintf(err, "error: --streaming needs --service-kind=grpc\n");
    return NRD_PERF_PARSE_ERROR;
  }
  return check_ssl(o, ssl_given, err) ? NRD_PERF_PARSE_OK : NRD_PERF_PARSE_ERROR;
}
