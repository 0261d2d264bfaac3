/* Unit tests for the client shared memory registry's switch
 * (src/server/common/shm_registry.c, --allow-client-shm) and the reserved
 * names of header forwarding (src/server/common/header_forward.c). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "header_forward.h"
#include "shm_registry.h"

/* A 4 KiB POSIX shared memory object; returns its name in key. */
static void make_object(char *key, size_t cap) {
  snprintf(key, cap, "/nrd_unit_shm_%d", (int)getpid());
  int fd = shm_open(key, O_CREAT | O_RDWR, 0600);
  cr_assert(fd >= 0);
  cr_assert_eq(ftruncate(fd, 4096), 0);
  close(fd);
}

Test(shm_registry, switched_off_registers_nothing_even_when_called_directly) {
  char key[64];
  make_object(key, sizeof key);
  nrd_srv_shm *s = nrd_srv_shm_new(false);
  cr_assert_not_null(s);
  cr_assert(!nrd_srv_shm_client_allowed(s));
  TRITONSERVER_Error *err = nrd_srv_shm_register(s, "r", key, 0, 64);
  cr_assert_not_null(err);
  cr_assert_eq(TRITONSERVER_ErrorCode(err), TRITONSERVER_ERROR_UNSUPPORTED);
  cr_assert_str_eq(TRITONSERVER_ErrorMessage(err), NRD_SRV_SHM_DISABLED_MSG);
  TRITONSERVER_ErrorDelete(err);
  nrd_srv_shm_region *ref = NULL;
  void *addr = NULL;
  err = nrd_srv_shm_acquire(s, "r", 0, 8, &ref, &addr);
  cr_assert_not_null(err);
  cr_assert_eq(TRITONSERVER_ErrorCode(err), TRITONSERVER_ERROR_NOT_FOUND);
  TRITONSERVER_ErrorDelete(err);
  nrd_srv_shm_free(s);
  shm_unlink(key);
}

Test(shm_registry, switched_on_registers_and_acquires) {
  char key[64];
  make_object(key, sizeof key);
  nrd_srv_shm *s = nrd_srv_shm_new(true);
  cr_assert(nrd_srv_shm_client_allowed(s));
  cr_assert_null(nrd_srv_shm_register(s, "r", key, 0, 64));
  nrd_srv_shm_region *ref = NULL;
  void *addr = NULL;
  cr_assert_null(nrd_srv_shm_acquire(s, "r", 0, 8, &ref, &addr));
  nrd_srv_shm_release(ref);
  nrd_srv_shm_free(s);
  shm_unlink(key);
  cr_assert(!nrd_srv_shm_client_allowed(NULL));
}

Test(header_forward, reserved_names_are_triton_s_list_and_prefix) {
  static const char *const reserved[] = {"sequence_id", "sequence_start", "sequence_end", "priority", "timeout",
                                         "headers",     "binary_data_output", "triton_", "triton_x"};
  for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
    cr_assert(nrd_srv_header_forward_reserved(reserved[i], strlen(reserved[i])), "%s", reserved[i]);
  /* Byte for byte, as Triton compares: other spellings and longer or
   * shorter names are ordinary headers. */
  static const char *const plain[] = {"sequence_idx", "sequence", "priorit", "Priority", "Triton_x", "tritonx",
                                      "my_triton_x",  "timeouts", "header", ""};
  for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
    cr_assert(!nrd_srv_header_forward_reserved(plain[i], strlen(plain[i])), "%s", plain[i]);
  /* The length given counts, not a terminating zero. */
  cr_assert(nrd_srv_header_forward_reserved("timeout-and-more", 7));
}
