/*
 * OpenVINO, loaded at run time: libopenvino_c and the table of the C API
 * functions the backend calls (ov_api.h), plus the type mapping between
 * OpenVINO and Triton.
 *
 * The backend never links OpenVINO: TRITONBACKEND_Initialize opens it with
 * dlopen (ov_runtime_open), first from the backend's own directory, where
 * the build copies the libraries of the fetched wheel (the core then finds
 * its CPU plugin and frontends beside itself), so the backend builds
 * without OpenVINO and a server without OpenVINO models never maps it.
 *
 * Threads: an ov_runtime is immutable once opened; any thread may use it.
 */
#ifndef NEREID_OV_RUNTIME_H
#define NEREID_OV_RUNTIME_H

#include "ov_api.h"
#include "triton/core/tritonserver.h"

typedef struct ov_runtime {
  void *library; /* dlopen handle; stays mapped until the process ends */
  void *pinned[3]; /* the CPU plugin and frontends, kept mapped (ov_runtime_open) */
  nrd_ov_api api;
  char path[4096]; /* where the library was found */
  char version[128]; /* OpenVINO's build number */
} ov_runtime;

/* The library's file name, as the wheel ships it. */
#define NRD_OV_LIBRARY "libopenvino_c.so.2520"

/*
 * Opens NRD_OV_LIBRARY from 'backend_dir' (may be NULL), then through the
 * loader's search path, and resolves every function of ov_api.h. The CPU
 * plugin and the IR and ONNX frontends beside it are opened too and never
 * closed: OpenVINO unloads them with the last core or model that used them,
 * so each model load would map them again, and what their static
 * initializers allocated would be lost with them (LeakSanitizer reports it). On failure
 * the error names the places tried or the missing function and '*out' is
 * left zeroed. The caller owns '*out' (ov_runtime_close). Thread: any; the
 * backend calls it from TRITONBACKEND_Initialize.
 */
TRITONSERVER_Error *ov_runtime_open(const char *backend_dir, ov_runtime *out);

/* Forgets the table; safe on a zeroed struct. The library stays mapped:
 * OpenVINO keeps process-wide state (plugins, TBB) past its objects. */
void ov_runtime_close(ov_runtime *rt);

/*
 * Turns a failed status into a server error of 'code', "openvino error in
 * <what> : <OpenVINO's message>" as Triton's backend words it (the message
 * is OpenVINO's last error message, else the status's name). NULL for
 * NRD_OV_OK. OpenVINO keeps one last message per process: under concurrent
 * failures the detail may be another call's. Any thread.
 */
TRITONSERVER_Error *ov_runtime_error(const ov_runtime *rt, nrd_ov_status status, TRITONSERVER_Error_Code code,
                                     const char *what);

/* The element type of a Triton datatype, or NRD_OV_DYNAMIC for none. */
nrd_ov_element ov_element_of(TRITONSERVER_DataType dt);

/* The Triton datatype of an element type, or TRITONSERVER_TYPE_INVALID. */
TRITONSERVER_DataType ov_triton_type_of(nrd_ov_element et);

#endif /* NEREID_OV_RUNTIME_H */
