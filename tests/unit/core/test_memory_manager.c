/* Unit tests for memory_manager.c and version.c. */
#include <criterion/criterion.h>
#include <string.h>

#include "memory_manager.h"

Test(memory_manager, cpu_and_pinned_allocate_and_free) {
  TRITONBACKEND_MemoryManager *mm = nrd_memory_manager();
  cr_assert_not_null(mm);
  cr_assert_eq(mm, nrd_memory_manager());
  void *buf = NULL;
  cr_assert_null(TRITONBACKEND_MemoryManagerAllocate(mm, &buf, TRITONSERVER_MEMORY_CPU, 0, 1024));
  cr_assert_not_null(buf);
  memset(buf, 1, 1024);
  cr_assert_null(TRITONBACKEND_MemoryManagerFree(mm, buf, TRITONSERVER_MEMORY_CPU, 0));
  buf = NULL;
  cr_assert_null(TRITONBACKEND_MemoryManagerAllocate(mm, &buf, TRITONSERVER_MEMORY_CPU_PINNED, 0, 64));
  cr_assert_not_null(buf);
  cr_assert_null(TRITONBACKEND_MemoryManagerFree(mm, buf, TRITONSERVER_MEMORY_CPU_PINNED, 0));
  buf = NULL;
  cr_assert_null(TRITONBACKEND_MemoryManagerAllocate(mm, &buf, TRITONSERVER_MEMORY_CPU, 0, 0));
  cr_assert_not_null(buf);
  cr_assert_null(TRITONBACKEND_MemoryManagerFree(mm, buf, TRITONSERVER_MEMORY_CPU, 0));
  cr_assert_null(TRITONBACKEND_MemoryManagerFree(mm, NULL, TRITONSERVER_MEMORY_CPU, 0));
}

Test(memory_manager, gpu_is_unsupported) {
  void *buf = (void *)0x1;
  TRITONSERVER_Error *e =
      TRITONBACKEND_MemoryManagerAllocate(nrd_memory_manager(), &buf, TRITONSERVER_MEMORY_GPU, 0, 16);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_UNSUPPORTED);
  cr_assert_not_null(strstr(TRITONSERVER_ErrorMessage(e), "GPU"));
  cr_assert_null(buf);
  TRITONSERVER_ErrorDelete(e);
  e = TRITONBACKEND_MemoryManagerFree(nrd_memory_manager(), NULL, TRITONSERVER_MEMORY_GPU, 0);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_UNSUPPORTED);
  TRITONSERVER_ErrorDelete(e);
}

Test(memory_manager, bad_arguments) {
  void *buf;
  TRITONSERVER_Error *e = TRITONBACKEND_MemoryManagerAllocate(NULL, &buf, TRITONSERVER_MEMORY_CPU, 0, 1);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ErrorDelete(e);
  e = TRITONBACKEND_MemoryManagerAllocate(nrd_memory_manager(), NULL, TRITONSERVER_MEMORY_CPU, 0, 1);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ErrorDelete(e);
  e = TRITONBACKEND_MemoryManagerAllocate(nrd_memory_manager(), &buf, (TRITONSERVER_MemoryType)5, 0, 1);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ErrorDelete(e);
  e = TRITONBACKEND_MemoryManagerFree(nrd_memory_manager(), NULL, (TRITONSERVER_MemoryType)5, 0);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ErrorDelete(e);
}

Test(version, api_versions) {
  uint32_t major = 0, minor = 0;
  cr_assert_null(TRITONSERVER_ApiVersion(&major, &minor));
  cr_assert_eq(major, 1);
  cr_assert_eq(minor, 34);
  cr_assert_null(TRITONBACKEND_ApiVersion(&major, &minor));
  cr_assert_eq(major, 1);
  cr_assert_eq(minor, 19);
  TRITONSERVER_Error *e = TRITONSERVER_ApiVersion(NULL, &minor);
  cr_assert_eq(TRITONSERVER_ErrorCode(e), TRITONSERVER_ERROR_INVALID_ARG);
  TRITONSERVER_ErrorDelete(e);
}
