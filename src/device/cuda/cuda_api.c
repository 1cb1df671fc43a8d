// Run-time loading of libcuda, libnvrtc and libcublasLt (cuda_api.h).
//
// Libraries are found without any Python API: the nvidia-*-cu12/cu13 wheels
// live in a site-packages directory, and under jax that directory already
// has shared objects mapped into the process (jaxlib, numpy), so the
// directories come from /proc/self/maps, from where this plugin itself was
// loaded, from $PYTHONPATH and from $VIRTUAL_ENV. A stub libcuda (the
// toolkit's lib64/stubs) is never on the search path; if one is picked up
// anyway (IRON_CUDA_LIB_DIR), cuInit fails with CUDA_ERROR_STUB_LIBRARY and
// iron_cuda_device_count reports that.
#define _GNU_SOURCE  // dladdr
#include "device/cuda/cuda_api.h"

#include <dlfcn.h>
#include <glob.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Candidate directories (besides the system loader path, tried as the bare
// soname). Enough for every realistic layout; extra ones are dropped.
#define MAX_DIRS 48
#define MAX_PATH 512

typedef struct {
  int n;
  char dirs[MAX_DIRS][MAX_PATH];
  // Index in `dirs` where the system loader path is tried (-1: never).
  int loader_slot;
} search_path_t;

static void dirs_add(search_path_t *sp, const char *dir) {
  if (!dir || !dir[0] || sp->n >= MAX_DIRS) return;
  size_t len = strlen(dir);
  while (len > 1 && dir[len - 1] == '/') len--;
  if (len >= MAX_PATH) return;
  for (int i = 0; i < sp->n; ++i)
    if (strlen(sp->dirs[i]) == len && memcmp(sp->dirs[i], dir, len) == 0)
      return;
  memcpy(sp->dirs[sp->n], dir, len);
  sp->dirs[sp->n][len] = '\0';
  sp->n++;
}

static void dirs_add_fmt(search_path_t *sp, const char *fmt, ...)
    IRON_PRINTF_LIKE(2, 3);
static void dirs_add_fmt(search_path_t *sp, const char *fmt, ...) {
  char buf[MAX_PATH];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n > 0 && (size_t)n < sizeof(buf)) dirs_add(sp, buf);
}

// Adds <site>/nvidia/*/lib for one site-packages directory.
static void add_nvidia_wheel_dirs(search_path_t *sp, const char *site) {
  char pattern[MAX_PATH];
  int n = snprintf(pattern, sizeof(pattern), "%s/nvidia/*/lib", site);
  if (n <= 0 || (size_t)n >= sizeof(pattern)) return;
  glob_t g;
  if (glob(pattern, GLOB_NOSORT | GLOB_ONLYDIR, NULL, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) dirs_add(sp, g.gl_pathv[i]);
  }
  globfree(&g);
}

// If `path` contains ".../site-packages" or ".../dist-packages", copies that
// prefix into `out`.
static bool site_prefix(const char *path, char out[MAX_PATH]) {
  const char *hit = NULL;
  const char *names[] = {"/site-packages", "/dist-packages"};
  for (int k = 0; k < 2; ++k) {
    const char *p = strstr(path, names[k]);
    if (p && (p[strlen(names[k])] == '/' || p[strlen(names[k])] == '\0') &&
        (!hit || p < hit))
      hit = p + strlen(names[k]);
  }
  if (!hit) return false;
  size_t len = (size_t)(hit - path);
  if (len >= MAX_PATH) return false;
  memcpy(out, path, len);
  out[len] = '\0';
  return true;
}

// The site-packages directories of the shared objects mapped into the
// process (jaxlib and numpy under jax).
static void add_mapped_site_dirs(search_path_t *sp) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return;
  char line[1024], site[MAX_PATH], last[MAX_PATH] = "";
  int sites = 0;
  while (fgets(line, sizeof(line), f) && sites < 8) {
    char *path = strchr(line, '/');
    if (!path) continue;
    path[strcspn(path, "\n")] = '\0';
    if (!site_prefix(path, site) || strcmp(site, last) == 0) continue;
    snprintf(last, sizeof(last), "%s", site);
    add_nvidia_wheel_dirs(sp, site);
    sites++;
  }
  fclose(f);
}

static void add_self_site_dirs(search_path_t *sp) {
  Dl_info info;
  char site[MAX_PATH];
  if (dladdr((void *)&add_self_site_dirs, &info) && info.dli_fname &&
      site_prefix(info.dli_fname, site))
    add_nvidia_wheel_dirs(sp, site);
}

static void add_pythonpath_dirs(search_path_t *sp) {
  const char *pp = getenv("PYTHONPATH");
  if (pp) {
    char buf[4096];
    snprintf(buf, sizeof(buf), "%s", pp);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ":", &save); tok;
         tok = strtok_r(NULL, ":", &save))
      add_nvidia_wheel_dirs(sp, tok);
  }
  const char *venv = getenv("VIRTUAL_ENV");
  if (venv && venv[0]) {
    char pattern[MAX_PATH];
    int n = snprintf(pattern, sizeof(pattern), "%s/lib/python3*/site-packages",
                     venv);
    glob_t g;
    if (n > 0 && (size_t)n < sizeof(pattern) &&
        glob(pattern, GLOB_NOSORT | GLOB_ONLYDIR, NULL, &g) == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i)
        add_nvidia_wheel_dirs(sp, g.gl_pathv[i]);
      globfree(&g);
    }
  }
}

// The documented order: $IRON_CUDA_LIB_DIR, the system loader path,
// $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64, Python wheels.
static void search_path_init(search_path_t *sp) {
  sp->n = 0;
  dirs_add(sp, getenv("IRON_CUDA_LIB_DIR"));
  sp->loader_slot = sp->n;
  const char *home = getenv("CUDA_HOME");
  if (home && home[0]) dirs_add_fmt(sp, "%s/lib64", home);
  const char *path = getenv("CUDA_PATH");
  if (path && path[0]) dirs_add_fmt(sp, "%s/lib64", path);
  dirs_add(sp, "/usr/local/cuda/lib64");
  add_mapped_site_dirs(sp);
  add_self_site_dirs(sp);
  add_pythonpath_dirs(sp);
}

// Appends to a bounded message buffer, truncating with "..." when full.
static void msg_append(char *buf, size_t cap, const char *fmt, ...)
    IRON_PRINTF_LIKE(3, 4);
static void msg_append(char *buf, size_t cap, const char *fmt, ...) {
  size_t len = strlen(buf);
  if (len + 1 >= cap) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + len, cap - len, fmt, ap);
  va_end(ap);
  if (n >= 0 && (size_t)n >= cap - len && cap > 4)
    memcpy(buf + cap - 4, "...", 4);
}

// Copies `src` into `dst` (capacity `cap`), truncating.
static void str_set(char *dst, size_t cap, const char *src) {
  size_t n = strlen(src);
  if (n >= cap) n = cap - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

// Opens the first of `names` found in the search path. On failure, fills
// `error` naming the library, the places searched and the loader's last
// message.
static void *open_library(const char *what, const char *const *names,
                          const char *explicit_path, char *out_path,
                          size_t path_cap, char *error, size_t error_cap) {
  char last[256] = "";
  error[0] = '\0';
  out_path[0] = '\0';
  if (explicit_path) {
    void *h = dlopen(explicit_path, RTLD_NOW | RTLD_LOCAL);
    if (h) {
      snprintf(out_path, path_cap, "%s", explicit_path);
      return h;
    }
    const char *e = dlerror();
    snprintf(error, error_cap, "%s not found: cannot load %s (%s)", what,
             explicit_path, e ? e : "unknown error");
    return NULL;
  }
  search_path_t *sp = malloc(sizeof(*sp));
  if (!sp) {
    snprintf(error, error_cap, "%s: out of memory", what);
    return NULL;
  }
  search_path_init(sp);
  void *h = NULL;
  for (int slot = 0; slot <= sp->n && !h; ++slot) {
    if (slot == sp->loader_slot) {
      for (int k = 0; names[k] && !h; ++k) {
        h = dlopen(names[k], RTLD_NOW | RTLD_LOCAL);
        if (h) {
          snprintf(out_path, path_cap, "%s", names[k]);
        } else {
          const char *e = dlerror();
          if (e) snprintf(last, sizeof(last), "%s", e);
        }
      }
    }
    if (slot == sp->n || h) continue;
    for (int k = 0; names[k] && !h; ++k) {
      char full[MAX_PATH + 64];
      snprintf(full, sizeof(full), "%s/%s", sp->dirs[slot], names[k]);
      h = dlopen(full, RTLD_NOW | RTLD_LOCAL);
      if (h) {
        str_set(out_path, path_cap, full);
      } else {
        const char *e = dlerror();
        // "No such file" for most candidates; a present but broken library
        // is the interesting message, so keep the last of those.
        if (e && !strstr(e, "No such file"))
          snprintf(last, sizeof(last), "%s", e);
        else if (e && !last[0])
          snprintf(last, sizeof(last), "%s", e);
      }
    }
  }
  if (!h) {
    msg_append(error, error_cap, "%s not found (tried ", what);
    for (int k = 0; names[k]; ++k)
      msg_append(error, error_cap, "%s%s", k ? ", " : "", names[k]);
    msg_append(error, error_cap, ")");
    msg_append(error, error_cap,
               "; set IRON_CUDA_LIB_DIR to the directory that holds it; "
               "searched:");
    bool first = true;
    for (int slot = 0; slot <= sp->n; ++slot) {
      if (slot == sp->loader_slot) {
        msg_append(error, error_cap, "%s the system loader path",
                   first ? "" : ",");
        first = false;
      }
      if (slot < sp->n) {
        msg_append(error, error_cap, "%s %s", first ? "" : ",",
                   sp->dirs[slot]);
        first = false;
      }
    }
    if (last[0]) msg_append(error, error_cap, "; last error: %s", last);
  }
  free(sp);
  return h;
}

void *iron_cuda_api_open_library(const char *what, const char *const *names,
                                 const char *explicit_path, char *out_path,
                                 size_t path_cap, char *error,
                                 size_t error_cap) {
  return open_library(what, names, explicit_path, out_path, path_cap, error,
                      error_cap);
}

static const char *const kDriverNames[] = {"libcuda.so.1", NULL};
static const char *const kNvrtcNames[] = {"libnvrtc.so.13", "libnvrtc.so.12",
                                          "libnvrtc.so", NULL};
static const char *const kCublasLtNames[] = {
    "libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so", NULL};

// cuFFT 12 ships with CUDA 12 and 13 (libcufft.so.12); .so.11 is CUDA 11.
static const char *const kCufftNames[] = {"libcufft.so.12", "libcufft.so.11",
                                          "libcufft.so", NULL};

// Resolves every symbol of one library; on a missing one, records it in
// `error` and returns false (the library counts as absent).
#define RESOLVE_ONE(field, sym, ret, params)                                 \
  if (ok) {                                                                  \
    void *p_ = dlsym(h, sym);                                                \
    if (!p_) {                                                               \
      error[0] = '\0';                                                       \
      msg_append(error, error_cap, "%s (%s) lacks the symbol %s", what,      \
                 path, sym);                                                 \
      ok = false;                                                            \
    } else {                                                                 \
      memcpy(&api->field, &p_, sizeof(p_));                                  \
    }                                                                        \
  }

static void resolve_conditional(iron_cuda_api_t *api, void *h);
static bool resolve_driver(iron_cuda_api_t *api, void *h, const char *what,
                           const char *path, char *error, size_t error_cap) {
  bool ok = true;
  IRON_CUDA_DRIVER_SYMBOLS(RESOLVE_ONE)
  if (ok) resolve_conditional(api, h);
  return ok;
}
static bool resolve_nvrtc(iron_cuda_api_t *api, void *h, const char *what,
                          const char *path, char *error, size_t error_cap) {
  bool ok = true;
  IRON_NVRTC_SYMBOLS(RESOLVE_ONE)
  return ok;
}
static bool resolve_cublaslt(iron_cuda_api_t *api, void *h, const char *what,
                             const char *path, char *error,
                             size_t error_cap) {
  bool ok = true;
  IRON_CUBLASLT_SYMBOLS(RESOLVE_ONE)
  return ok;
}
static bool resolve_cufft(iron_cuda_api_t *api, void *h, const char *what,
                          const char *path, char *error, size_t error_cap) {
  bool ok = true;
  IRON_CUFFT_SYMBOLS(RESOLVE_ONE)
  return ok;
}
#undef RESOLVE_ONE

// The optional conditional-node entry points of a loaded driver: missing
// ones leave has_conditional false, never the driver absent.
static void resolve_conditional(iron_cuda_api_t *api, void *h) {
  bool ok = true;
#define RESOLVE_OPTIONAL(field, sym, ret, params) \
  {                                               \
    void *p_ = dlsym(h, sym);                     \
    if (!p_) ok = false;                          \
    memcpy(&api->field, &p_, sizeof(p_));         \
  }
  IRON_CUDA_CONDITIONAL_SYMBOLS(RESOLVE_OPTIONAL)
#undef RESOLVE_OPTIONAL
  int version = 0;
  if (ok && (api->cuDriverGetVersion(&version) != IRON_CU_SUCCESS ||
             version < 12040))
    ok = false;
  api->has_conditional = ok;
}

// Handles stay open for the life of the process (the plugin is never
// unloaded while CUDA objects exist), so nothing is dlclose'd on success;
// a library lacking a symbol is closed.
static bool load_one(iron_cuda_api_t *api, const char *what,
                     const char *const *names, const char *explicit_path,
                     char *path, char *error,
                     bool (*resolve)(iron_cuda_api_t *, void *, const char *,
                                     const char *, char *, size_t)) {
  void *h = open_library(what, names, explicit_path, path, 512, error, 512);
  if (!h) return false;
  if (!resolve(api, h, what, path, error, 512)) {
    dlclose(h);
    path[0] = '\0';
    return false;
  }
  return true;
}

void iron_cuda_api_load_from(const char *driver, const char *nvrtc,
                             const char *cublaslt, iron_cuda_api_t *out_api) {
  memset(out_api, 0, sizeof(*out_api));
  out_api->has_driver =
      load_one(out_api, "libcuda (the NVIDIA driver)", kDriverNames, driver,
               out_api->driver_path, out_api->driver_error, resolve_driver);
  out_api->has_nvrtc =
      load_one(out_api, "libnvrtc", kNvrtcNames, nvrtc, out_api->nvrtc_path,
               out_api->nvrtc_error, resolve_nvrtc);
  out_api->has_cublaslt = load_one(out_api, "libcublasLt", kCublasLtNames,
                                   cublaslt, out_api->cublaslt_path,
                                   out_api->cublaslt_error, resolve_cublaslt);
}

void iron_cuda_api_load_cufft_from(const char *path,
                                   iron_cuda_api_t *out_api) {
  memset(out_api, 0, sizeof(*out_api));
  out_api->has_cufft = load_one(out_api, "libcufft", kCufftNames, path,
                                out_api->cufft_path, out_api->cufft_error,
                                resolve_cufft);
}

iron_status_t iron_cuda_cufft_status(cufftResult r, const char *what) {
  if (r == 0) return IRON_OK;
  // cufftResult: 2 CUFFT_ALLOC_FAILED.
  if (r == 2)
    return IRON_ERR(RESOURCE_EXHAUSTED, "%s failed: CUFFT_ALLOC_FAILED", what);
  return IRON_ERR(INTERNAL, "%s failed: cufftResult %d", what, (int)r);
}

// The process-wide table, filled library by library: a machine without a
// driver never pays for loading NVRTC and cuBLASLt (half a gigabyte) just
// to find out there is no GPU.
static iron_cuda_api_t g_api;
static pthread_once_t g_driver_once = PTHREAD_ONCE_INIT;
static pthread_once_t g_nvrtc_once = PTHREAD_ONCE_INIT;
static pthread_once_t g_cublaslt_once = PTHREAD_ONCE_INIT;

static void init_driver(void) {
  g_api.has_driver =
      load_one(&g_api, "libcuda (the NVIDIA driver)", kDriverNames, NULL,
               g_api.driver_path, g_api.driver_error, resolve_driver);
}
static void init_nvrtc(void) {
  g_api.has_nvrtc = load_one(&g_api, "libnvrtc", kNvrtcNames, NULL,
                             g_api.nvrtc_path, g_api.nvrtc_error,
                             resolve_nvrtc);
}
static void init_cublaslt(void) {
  g_api.has_cublaslt =
      load_one(&g_api, "libcublasLt", kCublasLtNames, NULL,
               g_api.cublaslt_path, g_api.cublaslt_error, resolve_cublaslt);
}

static pthread_once_t g_cufft_once = PTHREAD_ONCE_INIT;
static void init_cufft(void) {
  g_api.has_cufft = load_one(&g_api, "libcufft", kCufftNames, NULL,
                             g_api.cufft_path, g_api.cufft_error,
                             resolve_cufft);
}

const iron_cuda_api_t *iron_cuda_api_get_cufft(void) {
  pthread_once(&g_driver_once, init_driver);
  pthread_once(&g_cufft_once, init_cufft);
  return &g_api;
}

const iron_cuda_api_t *iron_cuda_api_get_driver(void) {
  pthread_once(&g_driver_once, init_driver);
  return &g_api;
}

const iron_cuda_api_t *iron_cuda_api_get(void) {
  pthread_once(&g_driver_once, init_driver);
  pthread_once(&g_nvrtc_once, init_nvrtc);
  pthread_once(&g_cublaslt_once, init_cublaslt);
  return &g_api;
}

iron_status_t iron_cuda_api_require(const iron_cuda_api_t *api) {
  if (api->has_driver && api->has_nvrtc && api->has_cublaslt) return IRON_OK;
  char msg[1700] = "";
  if (!api->has_driver) msg_append(msg, sizeof(msg), "%s", api->driver_error);
  if (!api->has_nvrtc)
    msg_append(msg, sizeof(msg), "%s%s", msg[0] ? "; " : "",
               api->nvrtc_error);
  if (!api->has_cublaslt)
    msg_append(msg, sizeof(msg), "%s%s", msg[0] ? "; " : "",
               api->cublaslt_error);
  return IRON_ERR(FAILED_PRECONDITION, "CUDA is not usable: %s", msg);
}

iron_status_t iron_cuda_status(const iron_cuda_api_t *api, CUresult r,
                               const char *what) {
  if (r == IRON_CU_SUCCESS) return IRON_OK;
  const char *name = NULL, *desc = NULL;
  if (api && api->cuGetErrorName && api->cuGetErrorName(r, &name) != 0)
    name = NULL;
  if (api && api->cuGetErrorString && api->cuGetErrorString(r, &desc) != 0)
    desc = NULL;
  char fallback[32];
  if (!name) {
    snprintf(fallback, sizeof(fallback), "CUresult %d", (int)r);
    name = fallback;
  }
  if (!desc) {
    // cuGetErrorString fails before cuInit succeeded, which is exactly when
    // these are the answer.
    switch (r) {
      case 3: desc = "CUDA_ERROR_NOT_INITIALIZED"; break;
      case 34:
        desc = "CUDA_ERROR_STUB_LIBRARY: this libcuda is the toolkit's stub, "
               "not an NVIDIA driver";
        break;
      case 35:
        desc = "CUDA_ERROR_INSUFFICIENT_DRIVER: the driver is older than the "
               "CUDA runtime";
        break;
      case 100: desc = "CUDA_ERROR_NO_DEVICE: no CUDA-capable GPU"; break;
      default: break;
    }
  }
  iron_status_code_t code = r == IRON_CU_ERROR_OUT_OF_MEMORY
                                ? IRON_STATUS_RESOURCE_EXHAUSTED
                                : IRON_STATUS_INTERNAL;
  return iron_status_make(code, "%s: %s (%s)", what ? what : "CUDA call", name,
                          desc ? desc : "no description");
}

bool iron_cuda_error_is_sticky(CUresult r) {
  switch (r) {
    case IRON_CU_ERROR_DEINITIALIZED:
    case IRON_CU_ERROR_ECC_UNCORRECTABLE:
    case IRON_CU_ERROR_NVLINK_UNCORRECTABLE:
    case IRON_CU_ERROR_CONTAINED:
    case IRON_CU_ERROR_ILLEGAL_ADDRESS:
    case IRON_CU_ERROR_LAUNCH_TIMEOUT:
    case IRON_CU_ERROR_CONTEXT_IS_DESTROYED:
    case IRON_CU_ERROR_ASSERT:
    case IRON_CU_ERROR_HARDWARE_STACK_ERROR:
    case IRON_CU_ERROR_ILLEGAL_INSTRUCTION:
    case IRON_CU_ERROR_MISALIGNED_ADDRESS:
    case IRON_CU_ERROR_INVALID_ADDRESS_SPACE:
    case IRON_CU_ERROR_INVALID_PC:
    case IRON_CU_ERROR_LAUNCH_FAILED:
    case IRON_CU_ERROR_TENSOR_MEMORY_LEAK:
    case IRON_CU_ERROR_MPS_CLIENT_TERMINATED:
    case IRON_CU_ERROR_EXTERNAL_DEVICE:
    case IRON_CU_ERROR_UNKNOWN:
      return true;
    default:
      return false;
  }
}
