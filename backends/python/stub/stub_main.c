/*
 * triton_python_backend_stub: one model instance's Python. Embeds CPython,
 * maps the shared memory the backend passed as descriptor 3 (py_ipc.h),
 * offers it to Python as the module _nrd_ipc, and runs
 * nrd_python_stub.main() (beside the backend, argv[1] holds sys.path
 * entries) which serves the backend's messages until told to finalize.
 * argv[2], when given, is an execution environment (EXECUTION_ENV_PATH,
 * already activated by the backend): its Python is the one run, so its
 * prefix and site-packages are the interpreter's.
 *
 * Built without sanitizers: it runs CPython, none of the server's code.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../py_ipc.h"
#include "../py_wait.h"

static uint8_t *g_base;
static uint64_t g_size;
static uint32_t g_seen;
static pid_t g_parent;

/* g_base changes (under the GIL) when the region grows; ipc_wait reads
 * it without the GIL: any mapping serves, all show the same memory. */
static nrd_py_shm_header *hdr(void) { return (nrd_py_shm_header *)__atomic_load_n(&g_base, __ATOMIC_ACQUIRE); }

static PyObject *view(void) { return PyMemoryView_FromMemory((char *)g_base, (Py_ssize_t)g_size, PyBUF_WRITE); }

/* _nrd_ipc.buffer() -> writable memoryview of the whole region. */
static PyObject *ipc_buffer(PyObject *self, PyObject *args) {
  (void)self;
  (void)args;
  return view();
}

/* Maps the region anew at 'size' bytes; the old mapping stays, as Python
 * objects may still view it. 0, or -1 with errno. */
static int map_size(uint64_t size) {
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, NRD_PY_SHM_FD, 0);
  if (p == MAP_FAILED) {
    return -1;
  }
  g_size = size;
  __atomic_store_n(&g_base, (uint8_t *)p, __ATOMIC_RELEASE);
  return 0;
}

/* _nrd_ipc.remap() -> the region's new memoryview when the server grew
 * it, else None. */
static PyObject *ipc_remap(PyObject *self, PyObject *args) {
  (void)self;
  (void)args;
  uint64_t size = __atomic_load_n(&hdr()->size, __ATOMIC_ACQUIRE);
  if (size <= g_size) {
    Py_RETURN_NONE;
  }
  if (map_size(size) != 0) {
    return PyErr_SetFromErrno(PyExc_OSError);
  }
  return view();
}

/* _nrd_ipc.grow(need) -> the region's memoryview, grown (by multiples of
 * the header's growth size) to at least 'need' bytes. Only while the
 * server waits for this stub. */
static PyObject *ipc_grow(PyObject *self, PyObject *args) {
  (void)self;
  unsigned long long need = 0;
  if (!PyArg_ParseTuple(args, "K", &need)) {
    return NULL;
  }
  if (need > g_size) {
    uint64_t growth = hdr()->growth ? hdr()->growth : (64u << 20);
    uint64_t steps = (need - g_size + growth - 1) / growth;
    if (steps > (UINT64_MAX - g_size) / growth || g_size + steps * growth > (uint64_t)INT64_MAX) {
      errno = EOVERFLOW;
      return PyErr_SetFromErrno(PyExc_OSError);
    }
    uint64_t size = g_size + steps * growth;
    if (ftruncate(NRD_PY_SHM_FD, (off_t)size) != 0 || map_size(size) != 0) {
      return PyErr_SetFromErrno(PyExc_OSError);
    }
    __atomic_store_n(&hdr()->size, size, __ATOMIC_RELEASE);
  }
  return view();
}

/* How long the server took to send its next message after our reply
 * (idle) and to answer a message of ours (a BLS call, a sender's
 * response): each sizes the spin of its kind of wait (py_wait.h). */
static nrd_py_waiter g_idle, g_answer;

/* _nrd_ipc.wait(answer=False) -> length of the next message; sleeps
 * without the GIL. 'answer': the server is answering a message of ours.
 * Exits the process when the server is gone. */
static PyObject *ipc_wait(PyObject *self, PyObject *args) {
  (void)self;
  int answer = 0;
  if (!PyArg_ParseTuple(args, "|p", &answer)) {
    return NULL;
  }
  nrd_py_waiter *w = answer ? &g_answer : &g_idle;
  uint32_t len = 0;
  Py_BEGIN_ALLOW_THREADS;
  uint64_t t0 = nrd_py_now_ns();
  /* Between batches the stub spins whatever the server does: behind a
   * queue the stub is the bottleneck, and a wake-up there delays every
   * request (wrk at 8 connections: 13,200-13,400 req/s spinning, 9,700-
   * 12,300 sleeping at once, the same CPU per request). */
  if (!nrd_py_spin(w, &hdr()->to_stub, g_seen, t0)) {
    while (__atomic_load_n(&hdr()->to_stub, __ATOMIC_ACQUIRE) == g_seen) {
      nrd_py_sleep(&hdr()->to_stub, &hdr()->stub_sleepers, g_seen, 200);
      if (getppid() != g_parent) {
        _exit(0);
      }
    }
  }
  nrd_py_waited(w, nrd_py_now_ns() - t0);
  g_seen = __atomic_load_n(&hdr()->to_stub, __ATOMIC_ACQUIRE);
  len = hdr()->msg_len;
  Py_END_ALLOW_THREADS;
  return PyLong_FromUnsignedLong(len);
}

/* _nrd_ipc.post(len): the reply of 'len' bytes is in place. */
static PyObject *ipc_post(PyObject *self, PyObject *args) {
  (void)self;
  unsigned long len = 0;
  if (!PyArg_ParseTuple(args, "k", &len)) {
    return NULL;
  }
  hdr()->msg_len = (uint32_t)len;
  nrd_py_post(&hdr()->to_server, &hdr()->server_sleepers);
  Py_RETURN_NONE;
}

static PyMethodDef ipc_methods[] = {{"buffer", ipc_buffer, METH_NOARGS, "the shared memory"},
                                    {"remap", ipc_remap, METH_NOARGS, "the grown shared memory, or None"},
                                    {"grow", ipc_grow, METH_VARARGS, "grows the shared memory"},
                                    {"wait", ipc_wait, METH_VARARGS, "waits for a message; its length"},
                                    {"post", ipc_post, METH_VARARGS, "posts a reply of the given length"},
                                    {NULL, NULL, 0, NULL}};

static struct PyModuleDef ipc_module = {
    PyModuleDef_HEAD_INIT, "_nrd_ipc", NULL, -1, ipc_methods, NULL, NULL, NULL, NULL};

static PyObject *ipc_init(void) {
  PyObject *m = PyModule_Create(&ipc_module);
  if (m != NULL) {
    PyModule_AddIntConstant(m, "META_OFFSET", NRD_PY_META_OFFSET);
    PyModule_AddIntConstant(m, "META_SIZE", NRD_PY_META_SIZE);
    PyModule_AddIntConstant(m, "DATA_OFFSET", NRD_PY_DATA_OFFSET);
  }
  return m;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s <python path>\n", argv[0]);
    return 2;
  }
  g_parent = getppid();
  /* Ctrl-C at a terminal reaches the whole process group: the server
   * drains and finalizes its stubs itself, so the stub ignores it (and
   * exits by itself once the server is gone). */
  signal(SIGINT, SIG_IGN);
  struct stat st;
  if (fstat(NRD_PY_SHM_FD, &st) != 0) {
    perror("triton_python_backend_stub: shared memory");
    return 2;
  }
  g_size = (uint64_t)st.st_size;
  g_base = mmap(NULL, g_size, PROT_READ | PROT_WRITE, MAP_SHARED, NRD_PY_SHM_FD, 0);
  if (g_base == MAP_FAILED) {
    perror("triton_python_backend_stub: mmap");
    return 2;
  }
  g_seen = 0;
  PyImport_AppendInittab("_nrd_ipc", ipc_init);
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  config.install_signal_handlers = 0;
  config.parse_argv = 0;
  /* The environment's python3 as the program: CPython then takes the
   * environment's prefix (a venv's pyvenv.cfg, or a conda-pack tree's own
   * lib/pythonX.Y) and its site-packages. */
  const char *env = argc > 2 && argv[2][0] ? argv[2] : NULL;
  char program[PATH_MAX] = "/usr/bin/python3";
  bool env_python = false;
  if (env != NULL) {
    snprintf(program, sizeof program, "%s/bin/python3", env);
    env_python = access(program, X_OK) == 0;
    if (!env_python) {
      snprintf(program, sizeof program, "/usr/bin/python3");
    }
  }
  PyStatus status = PyConfig_SetBytesString(&config, &config.program_name, program);
  if (!PyStatus_Exception(status)) {
    status = Py_InitializeFromConfig(&config);
  }
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) {
    Py_ExitStatusException(status);
  }
  PyObject *sys_path = PySys_GetObject("path");
  char *paths = strdup(argv[1]);
  for (char *save = NULL, *p = strtok_r(paths, ":", &save); p != NULL; p = strtok_r(NULL, ":", &save)) {
    PyObject *s = PyUnicode_DecodeFSDefault(p);
    PyList_Insert(sys_path, 0, s);
    Py_XDECREF(s);
  }
  free(paths);
  if (env != NULL && !env_python) {
    /* An environment without an interpreter of its own: its
     * site-packages on the path (and its .pth files read). */
    char site[PATH_MAX];
    snprintf(site, sizeof site, "%s/lib/python%d.%d/site-packages", env, PY_MAJOR_VERSION, PY_MINOR_VERSION);
    PyObject *mod_site = PyImport_ImportModule("site");
    PyObject *r = mod_site ? PyObject_CallMethod(mod_site, "addsitedir", "s", site) : NULL;
    if (r == NULL) {
      PyErr_Print();
    }
    Py_XDECREF(r);
    Py_XDECREF(mod_site);
  }
  int rc = 0;
  PyObject *mod = PyImport_ImportModule("nrd_python_stub");
  PyObject *res = mod ? PyObject_CallMethod(mod, "main", NULL) : NULL;
  if (res == NULL) {
    PyErr_Print();
    rc = 1;
  }
  Py_XDECREF(res);
  Py_XDECREF(mod);
  fflush(stderr);
  /* No Py_Finalize: model threads may still run; the process just ends. */
  _exit(rc);
}
