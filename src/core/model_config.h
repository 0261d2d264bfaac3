/* Model configuration: reading config.pbtxt (protobuf text format) or JSON,
 * applying Triton's defaults, validating, and rendering the JSON that
 * TRITONBACKEND_ModelConfig (config version 1) hands to backends.
 *
 * In-memory form: a jansson object shaped like the protobuf JSON of
 * inference.ModelConfig with proto field names; enums are their value names,
 * every integer field (32- or 64-bit) is a JSON integer, float/double are
 * reals (non-finite values are the strings "NaN", "Infinity", "-Infinity"),
 * bools are booleans, repeated fields arrays and maps objects (integer map
 * keys in decimal). uint64 values above INT64_MAX keep their bit pattern in
 * the json_int_t: read them with (uint64_t)json_integer_value(). Fields that
 * were never set are absent; readers must apply proto3 defaults (0, "",
 * false, first enum value) for missing scalars.
 *
 * Errors are returned as malloc'd strings that the caller frees; no function
 * here depends on the public Triton headers. None of these functions keep
 * global state: all may be called from any thread, as long as one config
 * object is not mutated by two threads at once. */
#ifndef NRD_MODEL_CONFIG_H
#define NRD_MODEL_CONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Platform name Triton uses for ensembles. */
#define NRD_ENSEMBLE_PLATFORM "ensemble"

/* Default for sequence_batching.max_sequence_idle_microseconds (1 s). */
#define NRD_SEQUENCE_IDLE_DEFAULT_US 1000000

/* Member of a parsed config that records where each field was read, for
 * the validation messages: {"file": FILE, "at": {PATH: position}} (see
 * nrd_pbtxt_parse_pos for PATH). It is not a ModelConfig field (no field
 * name has a ':'), so JSON input cannot set it and rendering skips it;
 * normalization keeps it. Code that hands the raw object out must drop it
 * (nrd_model_config_without_positions). */
#define NRD_MODEL_CONFIG_POSITIONS ":positions"

/* Parses text[0..len) as a text-format ModelConfig. filename appears in
 * error messages and the positions member (NULL: "<input>").
 * Returns a new reference (caller json_decref()s it) that carries
 * NRD_MODEL_CONFIG_POSITIONS (unless memory ran out recording them), or
 * NULL with *err set to a malloc'd "FILE:LINE:COL: message" the caller
 * frees (err may be NULL). Never crashes or leaks on any input. Any
 * thread. */
json_t *nrd_model_config_parse(const char *text, size_t len, const char *filename, char **err);

/* Reads a ModelConfig from protobuf-style JSON (backend auto-complete via
 * TRITONBACKEND_ModelSetConfig, or a client's config override). Field names
 * may be proto names or lowerCamelCase; null values mean "unset"; integers
 * may be numbers or decimal strings; enums names (any case) or numbers.
 * Unknown fields, wrong types and out-of-range numbers are errors naming the
 * JSON path ("input[0].dimz: unknown field ...").
 * Returns a new reference in the in-memory form above, or NULL with *err
 * malloc'd (caller frees; err may be NULL). Any thread. */
json_t *nrd_model_config_from_json(const char *json, size_t len, char **err);

/* Our detail for field `path` of cfg, after a sentence of Triton's:
 * " (FILE:LINE:COL: field 'PATH')", with the position of the field (or of
 * the nearest enclosing one) when cfg has positions, " (field 'PATH')"
 * without. A malloc'd string the caller frees; NULL when out of memory.
 * Any thread, cfg not being mutated at the same time. */
char *nrd_model_config_where(const json_t *cfg, const char *path);

/* A shallow copy of cfg without NRD_MODEL_CONFIG_POSITIONS (a new reference
 * the caller json_decref()s; NULL when out of memory or cfg is not an
 * object). Any thread, cfg not being mutated at the same time. */
json_t *nrd_model_config_without_positions(const json_t *cfg);

/* For a configuration `to` that replaces `from` (a backend's
 * auto-complete): gives `to` the file of `from`'s positions and those of
 * its positions still true, that is whose path leads in both to the same
 * value (a number, string or bool), or to an array, or to an object with
 * the same "name" as every object on the way (an input moved to another
 * index loses its positions). Nothing happens when `from` has none; on
 * out of memory `to` may get fewer. Any thread, neither being mutated
 * at the same time. */
void nrd_model_config_carry_positions(json_t *to, const json_t *from);

/* Gives cfg the backend (and platform) that the files of the model's first
 * version directory tell, as Triton's auto-complete does when the
 * configuration names no platform, default_model_filename or backend
 * (other than tensorflow): model.savedmodel/ or model.graphdef, model.plan,
 * model.onnx, model.xml, model.pt, model.pt2, model.py, in Triton's order.
 * Nothing changes when none is there. Returns 0, or -1 when out of memory.
 * Any thread, cfg not being used by another at the same time. */
int nrd_model_config_detect_backend(json_t *cfg, const char *model_dir);

/* The GPUs a configuration is normalized and validated against: those
 * with at least the minimum compute capability, as Triton's "supported
 * GPUs". A NULL set means a server without GPU support (Triton built
 * without it); `any` takes every listed id as present (the int API's
 * has_gpu = 1). */
#define NRD_MC_GPUS_MAX 64
typedef struct nrd_mc_gpus {
  bool any;
  uint32_t n;
  int32_t ids[NRD_MC_GPUS_MAX]; /* ascending */
  double min_cc;
} nrd_mc_gpus;

/* Applies Triton's defaults in place, as Triton does for a server with
 * (has_gpu != 0) or without GPUs:
 *  - name from model_name when empty; a different non-empty name is an error
 *    (directory name must equal model name); model_name may be NULL to skip;
 *  - backend/platform/default_model_filename filled from each other for the
 *    well-known frameworks, or "model.<backend>" from a model name of the form
 *    "x.<backend>" when all three are empty (callers that inspect the version
 *    directory should set backend before calling);
 *  - version_policy latest{num_versions:1}; dynamic/oldest preferred batch
 *    size [max_batch_size]; max_sequence_idle_microseconds 1000000;
 *    pinned-memory optimization defaults; instance groups (default group named
 *    after the model, "<model>_<i>" names, KIND_AUTO resolved, count 1, or 2
 *    for CPU groups of the tensorflow/onnxruntime backends). Ensembles get no
 *    optimization or instance group defaults.
 * Returns 0, or -1 with *err malloc'd (caller frees); on failure cfg may be
 * partially normalized. Any thread. */
int nrd_model_config_normalize(json_t *cfg, const char *model_name, int has_gpu, char **err);

/* As nrd_model_config_normalize against the GPU set `gpus` (NULL: no GPU
 * support): KIND_AUTO becomes KIND_GPU when there are GPUs and every
 * listed id is among them, and a KIND_GPU group without `gpus` gets every
 * one, as Triton's NormalizeInstanceGroup does. Same contract. */
int nrd_model_config_normalize_gpus(json_t *cfg, const char *model_name, const nrd_mc_gpus *gpus, char **err);

/* Checks a normalized config the way Triton does before loading a model
 * (ValidateModelConfig, ValidateInstanceGroup, ValidateModelIOConfig, ensemble
 * data-flow checks) plus unique input/output names. Error messages start with
 * Triton's sentence, followed by ours in parentheses:
 * "(FILE:LINE:COL: field 'PATH', value V)" where cfg carries the position of
 * the field (NRD_MODEL_CONFIG_POSITIONS; FILE is the one it was read from),
 * else "(FILE: field 'PATH', value V)" with FILE = filename, or without
 * "FILE: " when filename is NULL; parts that do not apply are left out.
 * Returns 0, or -1 with *err malloc'd (caller frees). cfg is not modified.
 * Any thread. */
int nrd_model_config_validate(const json_t *cfg, const char *filename, int has_gpu, char **err);

/* As nrd_model_config_validate, before any backend call: what the backend's
 * auto-complete may still fill in (an input's or output's missing data_type
 * or dims, a max_batch_size of 0 below a preferred batch size) is not an
 * error yet; everything else is. Same ownership; any thread. */
int nrd_model_config_validate_early(const json_t *cfg, const char *filename, int has_gpu, char **err);

/* Both validations against the GPU set `gpus` (NULL: no GPU support; see
 * nrd_model_config_normalize_gpus), early when `early` is true. Same
 * contract. */
int nrd_model_config_validate_gpus(const json_t *cfg, const char *filename, const nrd_mc_gpus *gpus, bool early,
                                   char **err);

/* Renders cfg as compact JSON the way Triton's ModelConfigToJson (version 1)
 * does: declaration order, proto field names, every primitive printed with
 * its default, empty repeated fields as [] and maps as {}, unset messages and
 * unset oneof members omitted, enums as names, and 64-bit integers as JSON
 * strings except the ones Triton converts back to numbers (dims, reshape,
 * batching delays/levels, timeouts, sequence idle, state dims, ensemble
 * model_version, warmup dims, version_policy.specific.versions).
 * Returns a malloc'd NUL-terminated string the caller free()s, or NULL if
 * out of memory. Values of the wrong JSON type render as the field default.
 * Any thread. */
char *nrd_model_config_render(const json_t *cfg);

#endif /* NRD_MODEL_CONFIG_H */
