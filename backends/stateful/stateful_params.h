/*
 * The stateful backend's configuration strings, parsed without Triton or
 * ONNX Runtime types so they can be tested on their own: the state_pairs
 * list and the lazy buffer settings.
 *
 * Threads: pure functions of their arguments; any thread.
 */
#ifndef NEREID_STATEFUL_PARAMS_H
#define NEREID_STATEFUL_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sf_state_pair {
  char *input; /* owned: the model input fed with the state */
  char *output; /* owned: the model output holding the next state */
} sf_state_pair;

/*
 * Parses "<<<In, Out>>>" entries separated by spaces or commas into a new
 * array of '*count' pairs ('*out', freed with sf_state_pairs_free). On
 * failure returns false, writes a message naming state_pairs and the
 * offending text into 'err' (size 'err_size') and allocates nothing.
 */
bool sf_state_pairs_parse(const char *text, sf_state_pair **out, size_t *count, char *err, size_t err_size);

/* Frees what sf_state_pairs_parse returned; NULL is fine. */
void sf_state_pairs_free(sf_state_pair *pairs, size_t count);

/* Lazy state buffers; 'enabled' false means one buffer of every slot. */
typedef struct sf_lazy {
  bool enabled;
  long initial, subsequent, alloc_threshold, dealloc_threshold;
} sf_lazy;

/*
 * Checks the four lazy buffer parameters as read from the configuration
 * (NULL when absent): all four or none, each a whole number, sizes at
 * least 1, initial no more than 'max_slots', thresholds not negative and
 * the alloc threshold below the dealloc threshold. False with a message
 * naming the parameter in 'err'.
 */
bool sf_lazy_parse(const char *initial, const char *subsequent, const char *alloc_threshold,
                   const char *dealloc_threshold, long max_slots, sf_lazy *out, char *err, size_t err_size);

/*
 * The lazy buffer rules of the seed README, given the free slots and the
 * buffers now held: whether to add one buffer of 'subsequent' slots (free
 * slots below the alloc threshold and room under 'max_slots' total), and
 * whether the last buffer may go (more than one buffer, free slots above
 * the dealloc threshold, and every slot of the last buffer free).
 */
bool sf_lazy_should_grow(const sf_lazy *l, long free_slots, long total_slots, long max_slots);
bool sf_lazy_should_shrink(const sf_lazy *l, long free_slots, size_t buffers, bool last_buffer_idle);

/*
 * IEEE 754 half precision, for store_states_as_fp16: float to half rounds
 * to nearest even (overflow gives infinity, NaN stays NaN); half to float
 * is exact. Pure; any thread.
 */
uint16_t sf_half_from_float(float f);
float sf_half_to_float(uint16_t h);

#endif /* NEREID_STATEFUL_PARAMS_H */
