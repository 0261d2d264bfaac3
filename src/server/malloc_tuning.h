/* glibc malloc settings for a server's allocation pattern, applied by
 * re-executing the binary once with GLIBC_TUNABLES set (glibc reads its
 * tunables only at process start). */
#ifndef NRD_SRV_MALLOC_TUNING_H
#define NRD_SRV_MALLOC_TUNING_H

/* The GLIBC_TUNABLES value nereid runs with unless the user set their own. */
#define NRD_SRV_MALLOC_TUNABLES "glibc.malloc.tcache_count=64"

/* When GLIBC_TUNABLES is unset, sets it to NRD_SRV_MALLOC_TUNABLES and
 * re-executes the program (/proc/self/exe) with argv; returns only when there is nothing
 * to do or the exec failed (the process then runs untuned). Sanitizer
 * builds do the same (their allocator ignores the setting). Call first in
 * main, before any thread exists. argv is borrowed. */
void nrd_srv_malloc_tuning_apply(char **argv);

#endif
