/* Model configuration validation of the schedulers: dynamic batching
 * (sizes, priorities, queue policies, preserve_ordering), sequence
 * batching (controls, sizes, slot utilization) and ensemble data flow. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_config.h"
#include "model_config_int.h"

/* Checks one sequence-batching control kind (Triton's boolean controls need
 * exactly one of the *_false_true lists with 2 entries; CORRID needs none). */
static int validate_control(nrd_mcv_ctx *v, const json_t *sb, const char *kind, int typed) {
  int seen = 0;
  const char *corrid_dt = NULL; /* CORRID's data type, checked after the scan as Triton does */
  size_t corrid_i = 0, corrid_c = 0;
  size_t nci = arr_size(sb, "control_input");
  for (size_t i = 0; i < nci; i++) {
    const json_t *ci = arr_get(sb, "control_input", i);
    const char *cname = get_str(ci, "name");
    if (*cname == '\0')
      return nrd_mcv_error(v, nrd_mcv_path(v, "sequence_batching.control_input[%zu].name", i), NULL,
                           "sequence batching control tensor must have a name for %s", v->name);
    for (size_t j = 0; j < i; j++)
      if (strcmp(get_str(arr_get(sb, "control_input", j), "name"), cname) == 0)
        return nrd_mcv_error(v, nrd_mcv_path(v, "sequence_batching.control_input[%zu].name", i),
                             nrd_mcv_detail(v, "'%s' (also control_input[%zu])", cname, j),
                             "sequence batching control tensor '%s' is specified for multiple "
                             "control kinds for %s",
                             cname, v->name);
    for (size_t c = 0; c < arr_size(ci, "control"); c++) {
      const json_t *ctl = arr_get(ci, "control", c);
      const char *ck = get_str(ctl, "kind");
      if (*ck == '\0') ck = "CONTROL_SEQUENCE_START";
      if (strcmp(ck, kind) != 0) continue;
      char at[96];
      snprintf(at, sizeof at, "sequence_batching.control_input[%zu].control[%zu]", i, c);
      if (seen)
        return nrd_mcv_error(v, nrd_mcv_path(v, "%s.kind", at), kind,
                             "sequence batching specifies multiple %s tensors for %s", kind, v->name);
      seen = 1;
      size_t ni = arr_size(ctl, "int32_false_true"), nf = arr_size(ctl, "fp32_false_true"),
             nb = arr_size(ctl, "bool_false_true");
      if (typed) {
        if (ni || nf || nb)
          return nrd_mcv_error(v, at, NULL,
                               "sequence batching must not specify either 'int32_false_true', "
                               "'fp32_false_true' or 'bool_false_true' for %s for %s",
                               kind, v->name);
        corrid_dt = get_str(ctl, "data_type");
        corrid_i = i;
        corrid_c = c;
        continue;
      }
      int lists = (ni != 0) + (nf != 0) + (nb != 0);
      if (lists == 0)
        return nrd_mcv_error(v, at, NULL,
                             "sequence batching must specify either 'int32_false_true', "
                             "'fp32_false_true' or 'bool_false_true' for %s for %s",
                             kind, v->name);
      if (lists > 1)
        return nrd_mcv_error(v, at, NULL,
                             "sequence batching specifies more than one from 'int32_false_true', "
                             "'fp32_false_true' and 'bool_false_true' for %s for %s",
                             kind, v->name);
      const char *which = ni ? "int32_false_true" : nf ? "fp32_false_true" : "bool_false_true";
      size_t count = ni ? ni : nf ? nf : nb;
      if (count != 2)
        return nrd_mcv_error(v, nrd_mcv_path(v, "%s.%s", at, which), nrd_mcv_detail(v, "%zu entries", count),
                             "sequence batching control '%s' must have exactly 2 entries for %s "
                             "for %s",
                             which, kind, v->name);
    }
  }
  if (corrid_dt != NULL && strcmp(corrid_dt, "TYPE_UINT64") != 0 && strcmp(corrid_dt, "TYPE_INT64") != 0 &&
      strcmp(corrid_dt, "TYPE_UINT32") != 0 && strcmp(corrid_dt, "TYPE_INT32") != 0 &&
      strcmp(corrid_dt, "TYPE_STRING") != 0)
    return nrd_mcv_error(
        v, nrd_mcv_path(v, "sequence_batching.control_input[%zu].control[%zu].data_type", corrid_i, corrid_c),
        *corrid_dt ? corrid_dt : "TYPE_INVALID",
        "unexpected data type for control %s for %s. Allowed data types are "
        "TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING",
        kind, v->name);
  return 0;
}

int nrd_mcv_sequence(nrd_mcv_ctx *v, const json_t *cfg, const json_t *sb) {
  const json_t *rc = get_obj(cfg, "response_cache");
  if (rc != NULL && get_bool(rc, "enable"))
    return nrd_mcv_error(v, "response_cache.enable", "true",
                         "Response Cache does not currently support model %s with sequence "
                         "batching scheduler. Please disable the response cache.",
                         v->name);
  if (validate_control(v, sb, "CONTROL_SEQUENCE_START", 0) != 0 ||
      validate_control(v, sb, "CONTROL_SEQUENCE_END", 0) != 0 ||
      validate_control(v, sb, "CONTROL_SEQUENCE_READY", 0) != 0 ||
      validate_control(v, sb, "CONTROL_SEQUENCE_CORRID", 1) != 0)
    return -1;
  long long mbs = get_int(cfg, "max_batch_size");
  const json_t *oldest = get_obj(sb, "oldest");
  for (size_t i = 0; oldest != NULL && i < arr_size(oldest, "preferred_batch_size"); i++) {
    long long s = (long long)json_integer_value(arr_get(oldest, "preferred_batch_size", i));
    if (s <= 0)
      return nrd_mcv_error(v, nrd_mcv_path(v, "sequence_batching.oldest.preferred_batch_size[%zu]", i),
                           nrd_mcv_detail(v, "%lld", s),
                           "sequence batching preferred batch size must be positive for %s", v->name);
    if (s > mbs && !(v->early && mbs == 0))
      return nrd_mcv_error(v, nrd_mcv_path(v, "sequence_batching.oldest.preferred_batch_size[%zu]", i),
                           nrd_mcv_detail(v, "%lld, max_batch_size %lld", s, mbs),
                           "sequence batching preferred batch size must be <= max batch size for %s", v->name);
  }
  const json_t *direct = get_obj(sb, "direct");
  if (direct != NULL) {
    double u = get_real(direct, "minimum_slot_utilization");
    if (u < 0.0 || u > 1.0)
      return nrd_mcv_error(v, "sequence_batching.direct.minimum_slot_utilization", nrd_mcv_detail(v, "%g", u),
                           "sequence batching minimum slot utilization must be in range (0.0, 1.0] for %s", v->name);
  }
  return 0;
}

int nrd_mcv_dynamic(nrd_mcv_ctx *v, const json_t *cfg, const json_t *db) {
  long long mbs = get_int(cfg, "max_batch_size");
  for (size_t i = 0; i < arr_size(db, "preferred_batch_size"); i++) {
    long long s = (long long)json_integer_value(arr_get(db, "preferred_batch_size", i));
    if (s <= 0)
      return nrd_mcv_error(v, nrd_mcv_path(v, "dynamic_batching.preferred_batch_size[%zu]", i),
                           nrd_mcv_detail(v, "%lld", s), "dynamic batching preferred size must be positive for %s",
                           v->name);
    if (s > mbs && !(v->early && mbs == 0))
      return nrd_mcv_error(v, nrd_mcv_path(v, "dynamic_batching.preferred_batch_size[%zu]", i),
                           nrd_mcv_detail(v, "%lld, max_batch_size %lld", s, mbs),
                           "dynamic batching preferred size must be <= max batch size for %s", v->name);
  }
  uint64_t levels = get_uint(db, "priority_levels");
  const json_t *pqp = get_obj(db, "priority_queue_policy");
  if (levels != 0) {
    uint64_t def = get_uint(db, "default_priority_level");
    if (def == 0 || def > levels)
      return nrd_mcv_error(
          v, "dynamic_batching.default_priority_level", nrd_mcv_detail(v, "%llu", (unsigned long long)def),
          "default priority level must be in range [1, %llu] for %s", (unsigned long long)levels, v->name);
    const char *k;
    json_t *pol;
    json_object_foreach((json_t *)pqp, k, pol) {
      uint64_t lvl = strtoull(k, NULL, 10);
      if (lvl == 0 || lvl > levels)
        return nrd_mcv_error(v, nrd_mcv_path(v, "dynamic_batching.priority_queue_policy[%s]", k), NULL,
                             "priority queue policy must have priority level in range [1, %llu] for %s",
                             (unsigned long long)levels, v->name);
    }
  }
  if (get_bool(db, "preserve_ordering")) {
    if (levels > 1)
      return nrd_mcv_error(v, "dynamic_batching.priority_levels", nrd_mcv_detail(v, "%llu", (unsigned long long)levels),
                           "Only one priority level is allowed when 'preserve_ordering' is true "
                           "for %s",
                           v->name);
    const json_t *dq = get_obj(db, "default_queue_policy");
    if (dq != NULL && get_uint(dq, "default_timeout_microseconds") != 0 &&
        strcmp(get_str(dq, "timeout_action"), "DELAY") == 0)
      return nrd_mcv_error(v, "dynamic_batching.default_queue_policy.timeout_action", "DELAY",
                           "Queue policy can not have DELAY as timeout action when "
                           "'preserve_ordering' is true for %s",
                           v->name);
    const char *k;
    json_t *pol;
    json_object_foreach((json_t *)pqp, k, pol) {
      if (get_uint(pol, "default_timeout_microseconds") != 0 && strcmp(get_str(pol, "timeout_action"), "DELAY") == 0)
        return nrd_mcv_error(v, nrd_mcv_path(v, "dynamic_batching.priority_queue_policy[%s].timeout_action", k),
                             "DELAY",
                             "Queue policy can not have DELAY as timeout action when "
                             "'preserve_ordering' is true for %s",
                             v->name);
    }
  }
  return 0;
}

/* ---- ensemble data flow ---- */

typedef struct tensor_node {
  const char *name;
  size_t step; /* where it first appears: step, map and key (for positions) */
  const char *map, *key;
  int is_output; /* produced by some step */
  int ready;
  int consumed; /* feeds some step */
  int seen; /* visited by not_connected */
} tensor_node;

static tensor_node *tensor_find(tensor_node *t, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(t[i].name, name) == 0) return &t[i];
  return NULL;
}

/* The step of `es` whose output_map writes tensor `name`, or NULL. */
static const json_t *producer_of(const json_t *es, const char *name) {
  for (size_t s = 0; s < arr_size(es, "step"); s++) {
    const char *k;
    json_t *val;
    json_object_foreach(json_object_get(arr_get(es, "step", s), "output_map"), k, val) {
      if (json_string_value(val) && strcmp(json_string_value(val), name) == 0) return arr_get(es, "step", s);
    }
  }
  return NULL;
}

/* For an output that is not written: follows, from it, the first input not
 * ready of the step that writes each tensor (each tensor once, as cycles
 * may exist) and returns the last one reached, or NULL when that is the
 * output itself (Triton's "depending tensor ... is not connected"). */
static const char *not_connected(const json_t *es, tensor_node *t, size_t n, const char *output) {
  const char *cur = output, *last = NULL;
  for (;;) {
    const json_t *st = producer_of(es, cur);
    const char *next = NULL;
    const char *k;
    json_t *val;
    json_object_foreach(json_object_get(st, "input_map"), k, val) {
      tensor_node *node = tensor_find(t, n, json_string_value(val) ? json_string_value(val) : "");
      if (node != NULL && !node->ready && !node->seen) {
        node->seen = 1;
        next = node->name;
        break;
      }
    }
    if (next == NULL) break;
    last = next;
    cur = next;
  }
  return last != NULL && strcmp(last, output) != 0 ? last : NULL;
}

int nrd_mcv_ensemble(nrd_mcv_ctx *v, const json_t *cfg) {
  const json_t *es = get_obj(cfg, "ensemble_scheduling");
  if (strcmp(get_str(cfg, "platform"), NRD_ENSEMBLE_PLATFORM) != 0)
    return nrd_mcv_error(v, "ensemble_scheduling", NULL,
                         "ensemble scheduling cannot be set for model '%s' whose platform is not "
                         "ensemble",
                         v->name);
  if (arr_size(cfg, "instance_group") != 0)
    return nrd_mcv_error(v, "instance_group", NULL, "instance group should not be specified for ensemble '%s'",
                         v->name);
  if (get_obj(cfg, "optimization") != NULL)
    return nrd_mcv_error(v, "optimization", NULL, "optimization should not be specified for ensemble '%s'", v->name);
  if (arr_size(cfg, "model_warmup") != 0)
    return nrd_mcv_error(v, "model_warmup", NULL, "model_warmup can not be specified for ensemble '%s'", v->name);
  size_t nsteps = arr_size(es, "step");
  if (nsteps == 0)
    return nrd_mcv_error(v, "ensemble_scheduling.step", NULL, "must specify 'step' for ensemble '%s'", v->name);

  size_t cap = 0;
  for (size_t s = 0; s < nsteps; s++) {
    const json_t *st = arr_get(es, "step", s);
    cap += map_size(st, "input_map") + map_size(st, "output_map");
  }
  cap += arr_size(cfg, "input") + arr_size(cfg, "output");
  tensor_node *t = calloc(cap ? cap : 1, sizeof *t);
  if (t == NULL) return nrd_mcv_error(v, NULL, NULL, "out of memory");
  size_t n = 0;
  int rc = -1;
  const char *k;
  json_t *val;
  for (size_t s = 0; s < nsteps; s++) {
    const json_t *st = arr_get(es, "step", s);
    if (*get_str(st, "model_name") == '\0') {
      nrd_mcv_error(v, nrd_mcv_path(v, "ensemble_scheduling.step[%zu].model_name", s), NULL,
                    "must specify 'model_name' in step %zu of ensemble '%s'", s, v->name);
      goto out;
    }
    if (map_size(st, "input_map") == 0) {
      nrd_mcv_error(v, nrd_mcv_path(v, "ensemble_scheduling.step[%zu].input_map", s), NULL,
                    "must specify 'input_map' in step %zu of ensemble '%s'", s, v->name);
      goto out;
    }
    if (map_size(st, "output_map") == 0) {
      nrd_mcv_error(v, nrd_mcv_path(v, "ensemble_scheduling.step[%zu].output_map", s), NULL,
                    "must specify 'output_map' in step %zu of ensemble '%s'", s, v->name);
      goto out;
    }
    json_object_foreach(json_object_get(st, "output_map"), k, val) {
      const char *tn = json_string_value(val) ? json_string_value(val) : "";
      tensor_node *node = tensor_find(t, n, tn);
      if (node != NULL && node->is_output) {
        nrd_mcv_error(v, nrd_mcv_path(v, "ensemble_scheduling.step[%zu].output_map[%s]", s, k),
                      nrd_mcv_detail(v, "'%s'", tn),
                      "ensemble tensor '%s' can appear in an output map only once for ensemble "
                      "'%s' step %zu",
                      tn, v->name, s);
        goto out;
      }
      if (node == NULL) {
        node = &t[n++];
        *node = (tensor_node){.name = tn, .step = s, .map = "output_map", .key = k};
      }
      node->is_output = 1;
    }
    json_object_foreach(json_object_get(st, "input_map"), k, val) {
      const char *tn = json_string_value(val) ? json_string_value(val) : "";
      tensor_node *node = tensor_find(t, n, tn);
      if (node == NULL) {
        node = &t[n++];
        *node = (tensor_node){.name = tn, .step = s, .map = "input_map", .key = k};
      }
      node->consumed = 1;
    }
  }
  for (size_t i = 0; i < arr_size(cfg, "input"); i++) {
    const char *in = get_str(arr_get(cfg, "input", i), "name");
    tensor_node *node = tensor_find(t, n, in);
    if (node == NULL) {
      nrd_mcv_error(v, nrd_mcv_path(v, "input[%zu].name", i), nrd_mcv_detail(v, "'%s'", in),
                    "ensemble input '%s' for ensemble %s' is not used", in, v->name);
      goto out;
    }
    node->ready = 1;
  }
  /* Fixed point: a step's outputs become ready once all its inputs are. */
  for (int changed = 1; changed;) {
    changed = 0;
    for (size_t s = 0; s < nsteps; s++) {
      const json_t *st = arr_get(es, "step", s);
      int all = 1;
      json_object_foreach(json_object_get(st, "input_map"), k, val) {
        tensor_node *node = tensor_find(t, n, json_string_value(val) ? json_string_value(val) : "");
        if (node == NULL || !node->ready) all = 0;
      }
      if (!all) continue;
      json_object_foreach(json_object_get(st, "output_map"), k, val) {
        tensor_node *node = tensor_find(t, n, json_string_value(val) ? json_string_value(val) : "");
        if (node != NULL && !node->ready) {
          node->ready = 1;
          changed = 1;
        }
      }
    }
  }
  for (size_t i = 0; i < arr_size(cfg, "output"); i++) {
    const char *on = get_str(arr_get(cfg, "output", i), "name");
    tensor_node *node = tensor_find(t, n, on);
    if (node == NULL) {
      nrd_mcv_error(v, nrd_mcv_path(v, "output[%zu].name", i), nrd_mcv_detail(v, "'%s'", on),
                    "ensemble output '%s' for ensemble %s' is not used", on, v->name);
      goto out;
    }
    if (!node->ready) {
      const char *dep = not_connected(es, t, n, on);
      if (dep != NULL)
        nrd_mcv_error(v, nrd_mcv_path(v, "output[%zu].name", i), nrd_mcv_detail(v, "'%s'", on),
                      "output '%s' for ensemble '%s' is not written: at least one "
                      "of its depending tensors, '%s', is not connected",
                      on, v->name, dep);
      else
        nrd_mcv_error(v, nrd_mcv_path(v, "output[%zu].name", i), nrd_mcv_detail(v, "'%s'", on),
                      "output '%s' for ensemble '%s' is not written", on, v->name);
      goto out;
    }
  }
  for (size_t i = 0; i < n; i++) {
    if (nrd_mc_has_name(cfg, "output", t[i].name)) continue;
    if (!t[i].ready || !t[i].consumed) {
      nrd_mcv_error(v, nrd_mcv_path(v, "ensemble_scheduling.step[%zu].%s[%s]", t[i].step, t[i].map, t[i].key),
                    nrd_mcv_detail(v, "'%s'", t[i].name), "ensemble tensor '%s' is unused in ensemble '%s'", t[i].name,
                    v->name);
      goto out;
    }
  }
  rc = 0;
out:
  free(t);
  return rc;
}
