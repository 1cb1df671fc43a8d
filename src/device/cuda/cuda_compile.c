// Generated kernels: per-device compiler (request dedup, pending batch,
// parallel NVRTC compile at plan_finish), memory and disk caches, launch.
//
// Every distinct source is one CUDA module; each requested (source, name)
// pair is one iron_cuda_function_t whose address stays valid as long as the
// device (kernels' params point at them). Compiling happens only in
// iron_cuda_compiler_flush, never on the execute path.
//
// Disk cache: one file per (source, arch, NVRTC version) under
// $IRON_CACHE_DIR/cuda (default $XDG_CACHE_HOME/ironjax/cuda or
// ~/.cache/ironjax/cuda), written to a temporary name and renamed, so readers
// never see half a file; a file that fails its header or checksum is ignored
// and rewritten. IRON_CUDA_CACHE=0 turns the disk cache off.
#include "device/cuda/cuda_compile.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "device/cuda/gen/prelude.h"
#include "device/cuda/gen/source.h"
#include "device/cuda/gen/types.h"

typedef struct cc_module {
  char *source;
  uint64_t hash[2];
  CUmodule mod;
  bool loaded;
  iron_status_t error;  // compile/load failure, kept (requests return it)
} cc_module_t;

typedef struct cc_function {
  iron_cuda_function_t f;  // first: callers get &f
  size_t module;
  char *name;
} cc_function_t;

struct iron_cuda_compiler {
  pthread_mutex_t mu;
  cc_module_t *mods;
  size_t num_mods, cap_mods;
  cc_function_t **funcs;
  size_t num_funcs, cap_funcs;
};

static pthread_mutex_t g_create_mu = PTHREAD_MUTEX_INITIALIZER;

static iron_status_t compiler_get(iron_cuda_device_t *dev,
                                  iron_cuda_compiler_t **out) {
  pthread_mutex_lock(&g_create_mu);
  if (!dev->compiler) {
    iron_cuda_compiler_t *c = calloc(1, sizeof(*c));
    if (c) pthread_mutex_init(&c->mu, NULL);
    dev->compiler = c;
  }
  iron_cuda_compiler_t *c = dev->compiler;
  pthread_mutex_unlock(&g_create_mu);
  if (!c) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (CUDA compiler)");
  *out = c;
  return IRON_OK;
}

void iron_cuda_compiler_destroy(iron_cuda_compiler_t *c) {
  if (!c) return;
  for (size_t i = 0; i < c->num_mods; ++i) {
    // Modules are unloaded by the driver with the context; the device
    // destroys the compiler before releasing it, so unload explicitly
    // only through the device (see iron_cuda_compiler_unload).
    free(c->mods[i].source);
    iron_status_free(c->mods[i].error);
  }
  for (size_t i = 0; i < c->num_funcs; ++i) {
    free(c->funcs[i]->name);
    free(c->funcs[i]);
  }
  free(c->mods);
  free(c->funcs);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

void iron_cuda_compiler_unload(iron_cuda_device_t *dev) {
  iron_cuda_compiler_t *c = dev->compiler;
  if (!c || !dev->api) return;
  pthread_mutex_lock(&c->mu);
  for (size_t i = 0; i < c->num_mods; ++i) {
    if (c->mods[i].loaded && c->mods[i].mod) {
      dev->api->cuModuleUnload(c->mods[i].mod);
      c->mods[i].mod = NULL;
      c->mods[i].loaded = false;
    }
  }
  for (size_t i = 0; i < c->num_funcs; ++i) c->funcs[i]->f.fn = NULL;
  pthread_mutex_unlock(&c->mu);
}

iron_status_t iron_cuda_function_request(iron_cuda_device_t *dev,
                                         const char *source,
                                         const char *kernel_name,
                                         iron_cuda_function_t **out_fn) {
  iron_cuda_compiler_t *c = NULL;
  IRON_RETURN_IF_ERROR_PLAIN(compiler_get(dev, &c));
  uint64_t h[2];
  iron_cuda_hash128(source, strlen(source), 0, h);
  iron_status_t st = IRON_OK;
  pthread_mutex_lock(&c->mu);
  size_t m = c->num_mods;
  for (size_t i = 0; i < c->num_mods; ++i) {
    if (c->mods[i].hash[0] == h[0] && c->mods[i].hash[1] == h[1] &&
        strcmp(c->mods[i].source, source) == 0) {
      m = i;
      break;
    }
  }
  if (m < c->num_mods && c->mods[m].error) {
    st = iron_status_clone(c->mods[m].error);
    goto done;
  }
  if (m == c->num_mods) {
    if (c->num_mods == c->cap_mods) {
      size_t cap = c->cap_mods ? 2 * c->cap_mods : 16;
      cc_module_t *mods = realloc(c->mods, cap * sizeof(*mods));
      if (!mods) {
        st = IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (CUDA modules)");
        goto done;
      }
      c->mods = mods;
      c->cap_mods = cap;
    }
    char *copy = strdup(source);
    if (!copy) {
      st = IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (CUDA source)");
      goto done;
    }
    memset(&c->mods[m], 0, sizeof(c->mods[m]));
    c->mods[m].source = copy;
    c->mods[m].hash[0] = h[0];
    c->mods[m].hash[1] = h[1];
    c->num_mods++;
  }
  for (size_t i = 0; i < c->num_funcs; ++i) {
    if (c->funcs[i]->module == m && strcmp(c->funcs[i]->name, kernel_name) == 0) {
      *out_fn = &c->funcs[i]->f;
      goto done;
    }
  }
  if (c->num_funcs == c->cap_funcs) {
    size_t cap = c->cap_funcs ? 2 * c->cap_funcs : 16;
    cc_function_t **fs = realloc(c->funcs, cap * sizeof(*fs));
    if (!fs) {
      st = IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (CUDA functions)");
      goto done;
    }
    c->funcs = fs;
    c->cap_funcs = cap;
  }
  cc_function_t *f = calloc(1, sizeof(*f));
  char *name = strdup(kernel_name);
  if (!f || !name) {
    free(f);
    free(name);
    st = IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (CUDA function)");
    goto done;
  }
  f->module = m;
  f->name = name;
  f->f.name = name;
  // A function added to a module that is already loaded is looked up now.
  if (c->mods[m].loaded) {
    st = iron_cuda_device_enter(dev);
    if (!st) {
      CUresult r = dev->api->cuModuleGetFunction(&f->f.fn, c->mods[m].mod,
                                                 name);
      if (r != IRON_CU_SUCCESS) {
        st = IRON_ERR(INTERNAL, "cuModuleGetFunction(%s) failed: %d", name,
                      (int)r);
      }
    }
    if (st) {
      free(f);
      free(name);
      goto done;
    }
  }
  c->funcs[c->num_funcs++] = f;
  *out_fn = &f->f;
done:
  pthread_mutex_unlock(&c->mu);
  return st;
}

size_t iron_cuda_compiler_pending_count(iron_cuda_device_t *dev) {
  iron_cuda_compiler_t *c = dev->compiler;
  if (!c) return 0;
  pthread_mutex_lock(&c->mu);
  size_t n = 0;
  for (size_t i = 0; i < c->num_mods; ++i) {
    if (!c->mods[i].loaded && !c->mods[i].error) n++;
  }
  pthread_mutex_unlock(&c->mu);
  return n;
}

const char *iron_cuda_compiler_pending_source(iron_cuda_device_t *dev,
                                              size_t index) {
  iron_cuda_compiler_t *c = dev->compiler;
  if (!c) return NULL;
  const char *s = NULL;
  pthread_mutex_lock(&c->mu);
  size_t n = 0;
  for (size_t i = 0; i < c->num_mods; ++i) {
    if (!c->mods[i].loaded && !c->mods[i].error) {
      if (n++ == index) {
        s = c->mods[i].source;
        break;
      }
    }
  }
  pthread_mutex_unlock(&c->mu);
  return s;
}

// ---------------------------------------------------------------------------
// NVRTC

static iron_status_t nvrtc_error(const iron_cuda_api_t *api, nvrtcResult r,
                                 const char *what) {
  const char *s = api->nvrtcGetErrorString ? api->nvrtcGetErrorString(r) : "";
  return IRON_ERR(INTERNAL, "%s failed: %s (%d)", what, s ? s : "", (int)r);
}

// IRON_CUDA_NVRTC_OPT=0: every generated kernel without optimization;
// =0:NAME[,NAME...]: only the sources that contain one of the names (a
// kernel's name, e.g. iron_ew_9f4798e88c08b749), to find which kernel's
// optimized code differs.
static bool nvrtc_opt_off(const char *source) {
  const char *e = getenv("IRON_CUDA_NVRTC_OPT");  // compile time only
  if (!e || e[0] != '0') return false;
  if (e[1] == '\0') return true;
  if (e[1] != ':') return false;
  for (const char *p = e + 2; *p;) {
    const char *c = strchr(p, ',');
    size_t n = c ? (size_t)(c - p) : strlen(p);
    char name[128];
    if (n > 0 && n < sizeof(name)) {
      memcpy(name, p, n);
      name[n] = '\0';
      if (strstr(source, name)) return true;
    }
    if (!c) break;
    p = c + 1;
  }
  return false;
}

// IRON_CUDA_SOURCE_DIR=DIR (debugging a result that differs only on the
// GPU): every module NVRTC compiles is also written to DIR as <key>.cu
// (the whole source) and <key>.cubin, to disassemble (nvdisasm -c) or
// compile again by hand. Best effort: a write that fails is skipped.
static void write_file(const char *dir, const char *key, const char *ext,
                       const void *data, size_t size) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s%s", dir, key, ext);
  FILE *f = fopen(path, "wb");
  if (!f) return;
  fwrite(data, 1, size, f);
  fclose(f);
}

static void source_dump(const char *source, const char *arch,
                        const void *cubin, size_t size) {
  const char *dir = getenv("IRON_CUDA_SOURCE_DIR");
  if (!dir || !dir[0]) return;
  char key[33];
  iron_cuda_cache_key(source, arch, 0, 0, key);
  write_file(dir, key, ".cu", source, strlen(source));
  write_file(dir, key, ".cubin", cubin, size);
}

iron_status_t iron_cuda_nvrtc_compile(const iron_cuda_api_t *api,
                                      const char *source, const char *arch,
                                      void **out_cubin, size_t *out_size) {
  if (!api || !api->nvrtcCreateProgram) {
    return IRON_ERR(FAILED_PRECONDITION, "NVRTC is not loaded%s%s",
                    api && api->nvrtc_error[0] ? ": " : "",
                    api ? api->nvrtc_error : "");
  }
  // The prelude's first line says whether f32 denormals are flushed.
  const char *nl = strchr(source, '\n');
  size_t first = nl ? (size_t)(nl - source) : strlen(source);
  bool keep = false;
  const char *f0 = strstr(source, "ftz=0");
  if (f0 && (size_t)(f0 - source) < first) keep = true;
  char arch_opt[64];
  snprintf(arch_opt, sizeof(arch_opt), "--gpu-architecture=%s", arch);
  // -fmad=false: XLA:CPU rounds a*b and then +c; contracting them would
  // change results in the last bit (helpers call fma where XLA does).
  // IRON_CUDA_NVRTC_OPT=0 (debugging: a result that differs only on the
  // GPU): device code compiled without optimization (-G).
  const char *opts[] = {arch_opt,         "-default-device",
                        "-std=c++17",     keep ? "-ftz=false" : "-ftz=true",
                        "-prec-div=true", "-prec-sqrt=true",
                        "-fmad=false",    "-G"};
  int nopts = (int)(sizeof(opts) / sizeof(opts[0])) - (nvrtc_opt_off(source) ? 0 : 1);
  nvrtcProgram prog = NULL;
  nvrtcResult r =
      api->nvrtcCreateProgram(&prog, source, "ironjax.cu", 0, NULL, NULL);
  if (r != 0) return nvrtc_error(api, r, "nvrtcCreateProgram");
  iron_status_t st = IRON_OK;
  r = api->nvrtcCompileProgram(prog, nopts, opts);
  if (r != 0) {
    size_t n = 0;
    char *log = NULL;
    if (api->nvrtcGetProgramLogSize(prog, &n) == 0 && n > 0) {
      log = malloc(n + 1);
      if (log && api->nvrtcGetProgramLog(prog, log) == 0) {
        log[n] = 0;
      } else if (log) {
        log[0] = 0;
      }
    }
    // The log names lines of the source; keep its first part readable.
    st = IRON_ERR(INVALID_ARGUMENT,
                  "NVRTC could not compile a generated kernel for %s: %s\n%.4000s",
                  arch, api->nvrtcGetErrorString(r), log ? log : "");
    free(log);
    api->nvrtcDestroyProgram(&prog);
    return st;
  }
  size_t size = 0;
  r = api->nvrtcGetCUBINSize(prog, &size);
  if (r != 0 || size == 0) {
    st = r ? nvrtc_error(api, r, "nvrtcGetCUBINSize")
           : IRON_ERR(INTERNAL, "NVRTC produced no CUBIN for %s", arch);
    api->nvrtcDestroyProgram(&prog);
    return st;
  }
  void *cubin = malloc(size);
  if (!cubin) {
    api->nvrtcDestroyProgram(&prog);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (%zu bytes of CUBIN)",
                    size);
  }
  r = api->nvrtcGetCUBIN(prog, cubin);
  api->nvrtcDestroyProgram(&prog);
  if (r != 0) {
    free(cubin);
    return nvrtc_error(api, r, "nvrtcGetCUBIN");
  }
  *out_cubin = cubin;
  *out_size = size;
  source_dump(source, arch, cubin, size);
  return IRON_OK;
}

void iron_cuda_cache_key(const char *source, const char *arch,
                         int nvrtc_major, int nvrtc_minor, char out_key[33]) {
  char tag[96];
  int n = snprintf(tag, sizeof(tag), "ironjax-cubin-1|%s|%d.%d|%s", arch,
                   nvrtc_major, nvrtc_minor, nvrtc_opt_off(source) ? "G|" : "");
  uint64_t seed[2];
  iron_cuda_hash128(tag, (size_t)n, 0, seed);
  uint64_t h[2];
  iron_cuda_hash128(source, strlen(source), seed[0] ^ seed[1], h);
  snprintf(out_key, 33, "%016llx%016llx", (unsigned long long)h[0],
           (unsigned long long)h[1]);
}

// ---------------------------------------------------------------------------
// Disk cache

#define CC_MAGIC "IRONCUB1"

static bool env_off(const char *name) {
  const char *e = getenv(name);
  return e && (strcmp(e, "0") == 0 || strcmp(e, "off") == 0);
}

// The cache directory (created), or false when there is none.
bool iron_cuda_cache_dir(char *out, size_t cap) {
  if (env_off("IRON_CUDA_CACHE")) return false;
  const char *base = getenv("IRON_CACHE_DIR");
  int n;
  if (base && base[0]) {
    n = snprintf(out, cap, "%s/cuda", base);
  } else {
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (xdg && xdg[0]) {
      n = snprintf(out, cap, "%s/ironjax/cuda", xdg);
    } else if (home && home[0]) {
      n = snprintf(out, cap, "%s/.cache/ironjax/cuda", home);
    } else {
      return false;
    }
  }
  if (n < 0 || (size_t)n >= cap) return false;
  // mkdir -p
  for (char *p = out + 1; *p; ++p) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(out, 0755) != 0 && errno != EEXIST) {
      *p = '/';
      return false;
    }
    *p = '/';
  }
  if (mkdir(out, 0755) != 0 && errno != EEXIST) return false;
  return true;
}

bool iron_cuda_cache_read(const char *dir, const char *key, void **out_cubin,
                          size_t *out_size) {
  char path[1200];
  snprintf(path, sizeof(path), "%s/%s.cubin", dir, key);
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  unsigned char hdr[24];
  bool ok = false;
  void *data = NULL;
  if (fread(hdr, 1, sizeof(hdr), f) == sizeof(hdr) &&
      memcmp(hdr, CC_MAGIC, 8) == 0) {
    uint64_t size, sum;
    memcpy(&size, hdr + 8, 8);
    memcpy(&sum, hdr + 16, 8);
    if (size > 0 && size < ((uint64_t)1 << 31)) {
      data = malloc((size_t)size);
      if (data && fread(data, 1, (size_t)size, f) == (size_t)size &&
          fgetc(f) == EOF) {
        uint64_t h[2];
        iron_cuda_hash128(data, (size_t)size, 0, h);
        if (h[0] == sum) {
          ok = true;
          *out_cubin = data;
          *out_size = (size_t)size;
        }
      }
    }
  }
  fclose(f);
  if (!ok) free(data);
  return ok;
}

void iron_cuda_cache_write(const char *dir, const char *key, const void *cubin,
                           size_t size) {
  static atomic_uint counter;
  char tmp[1300], path[1200];
  snprintf(path, sizeof(path), "%s/%s.cubin", dir, key);
  snprintf(tmp, sizeof(tmp), "%s/.%s.%ld.%u.tmp", dir, key, (long)getpid(),
           atomic_fetch_add(&counter, 1));
  FILE *f = fopen(tmp, "wb");
  if (!f) return;  // a cache that cannot be written is only slower
  uint64_t h[2];
  iron_cuda_hash128(cubin, size, 0, h);
  uint64_t sz = size;
  bool ok = fwrite(CC_MAGIC, 1, 8, f) == 8 && fwrite(&sz, 1, 8, f) == 8 &&
            fwrite(&h[0], 1, 8, f) == 8 && fwrite(cubin, 1, size, f) == size;
  ok = (fclose(f) == 0) && ok;
  if (!ok || rename(tmp, path) != 0) unlink(tmp);
}

// Compiles one source through the disk cache.
iron_status_t iron_cuda_compile_cached(const iron_cuda_api_t *api,
                                       const char *source, const char *arch,
                                       void **out_cubin, size_t *out_size,
                                       bool *out_from_cache) {
  int major = 0, minor = 0;
  if (api && api->nvrtcVersion) api->nvrtcVersion(&major, &minor);
  char dir[1024];
  bool have_dir = iron_cuda_cache_dir(dir, sizeof(dir));
  char key[33];
  iron_cuda_cache_key(source, arch, major, minor, key);
  if (out_from_cache) *out_from_cache = false;
  if (have_dir && iron_cuda_cache_read(dir, key, out_cubin, out_size)) {
    if (out_from_cache) *out_from_cache = true;
    return IRON_OK;
  }
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_cuda_nvrtc_compile(api, source, arch, out_cubin, out_size));
  if (have_dir) iron_cuda_cache_write(dir, key, *out_cubin, *out_size);
  return IRON_OK;
}

// ---------------------------------------------------------------------------
// Flush: compile pending modules in parallel, then load them.

typedef struct cc_job {
  const char *source;
  void *cubin;
  size_t size;
  bool from_cache;
  iron_status_t st;
} cc_job_t;

typedef struct cc_batch {
  const iron_cuda_api_t *api;
  const char *arch;
  cc_job_t *jobs;
  size_t n;
  atomic_size_t next;
} cc_batch_t;

static void *cc_worker(void *arg) {
  cc_batch_t *b = arg;
  for (;;) {
    size_t i = atomic_fetch_add(&b->next, 1);
    if (i >= b->n) break;
    cc_job_t *j = &b->jobs[i];
    j->st = iron_cuda_compile_cached(b->api, j->source, b->arch, &j->cubin,
                                     &j->size, &j->from_cache);
  }
  return NULL;
}

static int compile_threads(size_t jobs) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  const char *e = getenv("IRON_CUDA_COMPILE_THREADS");
  if (e && atoi(e) > 0) n = atoi(e);
  if (n < 1) n = 1;
  if (n > 64) n = 64;
  if ((size_t)n > jobs) n = (long)jobs;
  return (int)n;
}

iron_status_t iron_cuda_compile_sources(const iron_cuda_api_t *api,
                                        const char *arch, size_t n,
                                        const char *const *sources,
                                        void **out_cubins, size_t *out_sizes,
                                        iron_status_t *out_statuses) {
  cc_job_t *jobs = calloc(n ? n : 1, sizeof(*jobs));
  if (!jobs) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  for (size_t i = 0; i < n; ++i) jobs[i].source = sources[i];
  cc_batch_t b = {.api = api, .arch = arch, .jobs = jobs, .n = n};
  atomic_init(&b.next, 0);
  int nt = compile_threads(n);
  pthread_t th[64];
  int started = 0;
  for (int t = 1; t < nt; ++t) {
    if (pthread_create(&th[started], NULL, cc_worker, &b) != 0) break;
    started++;
  }
  cc_worker(&b);  // the calling thread works too
  for (int t = 0; t < started; ++t) pthread_join(th[t], NULL);
  for (size_t i = 0; i < n; ++i) {
    out_cubins[i] = jobs[i].cubin;
    out_sizes[i] = jobs[i].size;
    out_statuses[i] = jobs[i].st;
  }
  free(jobs);
  return IRON_OK;
}

static iron_status_t cu_error(const iron_cuda_api_t *api, CUresult r,
                              const char *what, const char *name) {
  const char *en = NULL, *es = NULL;
  if (api->cuGetErrorName) api->cuGetErrorName(r, &en);
  if (api->cuGetErrorString) api->cuGetErrorString(r, &es);
  return iron_status_make(r == IRON_CU_ERROR_OUT_OF_MEMORY
                              ? IRON_STATUS_RESOURCE_EXHAUSTED
                              : IRON_STATUS_INTERNAL,
                          "%s(%s): %s (%s)", what, name ? name : "",
                          en ? en : "CUDA error", es ? es : "");
}

static iron_status_t load_module(iron_cuda_device_t *dev, cc_module_t *m,
                                 const void *cubin) {
  CUresult r = dev->api->cuModuleLoadData(&m->mod, cubin);
  if (r != IRON_CU_SUCCESS) {
    m->mod = NULL;
    return cu_error(dev->api, r, "cuModuleLoadData", "generated kernels");
  }
  return IRON_OK;
}

iron_status_t iron_cuda_compiler_flush(iron_cuda_device_t *dev) {
  iron_cuda_compiler_t *c = dev->compiler;
  if (!c) return IRON_OK;
  pthread_mutex_lock(&c->mu);
  size_t n = 0;
  for (size_t i = 0; i < c->num_mods; ++i) {
    if (!c->mods[i].loaded && !c->mods[i].error) n++;
  }
  if (n == 0) {
    pthread_mutex_unlock(&c->mu);
    return IRON_OK;
  }
  size_t *idx = calloc(n, sizeof(*idx));
  const char **srcs = calloc(n, sizeof(*srcs));
  void **cubins = calloc(n, sizeof(*cubins));
  size_t *sizes = calloc(n, sizeof(*sizes));
  iron_status_t *sts = calloc(n, sizeof(*sts));
  iron_status_t st = IRON_OK;
  if (!idx || !srcs || !cubins || !sizes || !sts) {
    st = IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (CUDA compile batch)");
    goto out;
  }
  n = 0;
  for (size_t i = 0; i < c->num_mods; ++i) {
    if (!c->mods[i].loaded && !c->mods[i].error) {
      idx[n] = i;
      srcs[n] = c->mods[i].source;
      n++;
    }
  }
  st = iron_cuda_compile_sources(dev->api, dev->arch, n, srcs, cubins, sizes,
                                 sts);
  if (st) goto out;
  st = iron_cuda_device_enter(dev);
  if (st) goto out;
  for (size_t k = 0; k < n; ++k) {
    cc_module_t *m = &c->mods[idx[k]];
    iron_status_t e = sts[k];
    sts[k] = IRON_OK;
    if (!e) {
      e = load_module(dev, m, cubins[k]);
      if (e) {
        // A cached CUBIN the driver refuses is rebuilt once from source.
        free(cubins[k]);
        cubins[k] = NULL;
        iron_status_free(e);
        e = iron_cuda_nvrtc_compile(dev->api, m->source, dev->arch,
                                    &cubins[k], &sizes[k]);
        if (!e) e = load_module(dev, m, cubins[k]);
      }
    }
    for (size_t i = 0; !e && i < c->num_funcs; ++i) {
      cc_function_t *f = c->funcs[i];
      if (f->module != idx[k]) continue;
      CUresult r = dev->api->cuModuleGetFunction(&f->f.fn, m->mod, f->name);
      if (r != IRON_CU_SUCCESS) {
        e = cu_error(dev->api, r, "cuModuleGetFunction", f->name);
      }
    }
    if (e) {
      if (m->mod) dev->api->cuModuleUnload(m->mod);
      m->mod = NULL;
      m->error = e;
      if (!st) st = iron_status_clone(e);
    } else {
      m->loaded = true;
    }
  }
out:
  if (sts) {
    for (size_t k = 0; k < n; ++k) iron_status_free(sts[k]);
  }
  if (cubins) {
    for (size_t k = 0; k < n; ++k) free(cubins[k]);
  }
  free(idx);
  free(srcs);
  free(cubins);
  free(sizes);
  free(sts);
  pthread_mutex_unlock(&c->mu);
  return st;
}

iron_status_t iron_cuda_launch(iron_cuda_device_t *dev,
                               const iron_cuda_function_t *f, unsigned grid_x,
                               unsigned grid_y, unsigned grid_z,
                               unsigned block_x, unsigned shared_bytes,
                               void **params) {
  if (!f || !f->fn) {
    return IRON_ERR(FAILED_PRECONDITION,
                    "generated kernel %s was not compiled (plan_finish not run?)",
                    f && f->name ? f->name : "?");
  }
  if (grid_x == 0 || grid_y == 0 || grid_z == 0) return IRON_OK;
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_device_enter(dev));
  // Named in the message of a fault seen later (cuda_device.h).
  iron_device_note_kernel(&dev->base, f->name);
  if (dev->test_fault_fn) {
    const iron_cuda_function_t *fault = iron_cuda_device_test_fault(dev, f->name);
    if (fault && fault->fn) {
      f = fault;
      grid_x = grid_y = grid_z = 1;
      block_x = 32;
      shared_bytes = 0;
      params = NULL;
    }
  }
  CUresult r = dev->api->cuLaunchKernel((CUfunction)f->fn, grid_x, grid_y,
                                        grid_z, block_x, 1, 1, shared_bytes,
                                        dev->stream, params, NULL);
  if (r != IRON_CU_SUCCESS) {
    // A sticky fault (an earlier kernel's, or this one's under
    // CUDA_LAUNCH_BLOCKING=1) retires the device; anything else (too many
    // resources, a recording that was invalidated) fails this step only.
    iron_status_t st = cu_error(dev->api, r, "cuLaunchKernel", f->name);
    if (iron_cuda_error_is_sticky(r)) return iron_cuda_device_fail(dev, st);
    return st;
  }
  return IRON_OK;
}
