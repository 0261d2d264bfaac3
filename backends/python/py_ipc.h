/*
 * The shared memory between libtriton_python.so and one stub process
 * (triton_python_backend_stub): a memfd the stub finds as descriptor 3.
 *
 *   [0, 4096)                 nrd_py_shm_header: the two futex words
 *   [4096, 4096 + META)       one message (JSON; a binary execute reply)
 *   [4096 + META, size)       tensor bytes
 *
 * The region grows (ftruncate) when a batch's tensors do not fit; old
 * mappings stay until the stub stops, so no pointer into them dangles.
 *
 * Strictly one exchange at a time: the server writes a message (and input
 * tensors) then bumps 'to_stub'; the stub answers in the same areas (outputs
 * after the inputs, from the offset the message names) and bumps
 * 'to_server'. Each side waits for its word as py_wait.h says: a spin
 * when recent waits were short, then futex(2) sleeps counted in its
 * '*_sleepers' word, which tells the poster whether to wake it.
 */
#ifndef NRD_PY_IPC_H
#define NRD_PY_IPC_H

#include <stdint.h>

#define NRD_PY_SHM_FD 3
#define NRD_PY_META_OFFSET 4096u
#define NRD_PY_META_SIZE (1u << 20)
#define NRD_PY_DATA_OFFSET (NRD_PY_META_OFFSET + NRD_PY_META_SIZE)

/*
 * Binary execute reply. Every message is JSON but this one: the stub's
 * reply to "execute" when each response is plain outputs (no error, no
 * parameters, every request released whole), which is most batches. It
 * starts with NRD_PY_REPLY_BINARY where JSON starts with '{'; all
 * little-endian:
 *
 *   'B', 3 pad bytes, u32 count (the batch's requests)
 *   per request: u32 outputs
 *     per output: u8 datatype (TRITONSERVER_DataType), u8 dims,
 *       u16 name bytes (with its NUL), 4 pad bytes, u64 offset of its
 *       data, u64 its bytes (NRD_PY_REPLY_OUT_BYTES in all); then dims x
 *       i64 shape; then the name and a NUL.
 *
 * Decoding and encoding the JSON reply took 5-9 us of the stub's Python
 * and a jansson tree on the server per batch.
 */
#define NRD_PY_REPLY_BINARY 'B'
#define NRD_PY_REPLY_OUT_BYTES 24u

typedef struct nrd_py_shm_header {
  uint32_t to_stub; /* futex: bumped by the server per message */
  uint32_t to_server; /* futex: bumped by the stub per reply */
  uint32_t msg_len; /* bytes of JSON at NRD_PY_META_OFFSET */
  uint32_t pad;
  uint64_t size; /* bytes of the whole region; whoever grows it (the
                   * server while the stub waits, the stub while the
                   * server waits) sets it, the other maps it anew */
  uint64_t growth; /* grow by multiples of this (shm-growth-byte-size) */
  uint32_t stub_sleepers; /* stub threads in a futex sleep on to_stub */
  uint32_t server_sleepers; /* server threads in a futex sleep on to_server */
} nrd_py_shm_header;

#endif
