// Shared by the GPU-free CUDA tests that compile generated kernels: loads
// NVRTC into an iron_cuda_api_t (no GPU, no libcuda), and stubs the device
// context switch that the device code calls only with a GPU.
#ifndef IRON_TESTS_C_CUDA_TEST_NVRTC_H_
#define IRON_TESTS_C_CUDA_TEST_NVRTC_H_

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "device/cuda/cuda_api.h"
#include "device/cuda/cuda_compile.h"
#include "device/cuda/cuda_device.h"
#include "device/cuda/gen/prelude.h"
#include "device/cuda/gen/text.h"
#include "test.h"

// cuda-rt's definition (when linked) takes precedence over this one.
__attribute__((weak)) iron_status_t iron_cuda_device_enter(
    iron_cuda_device_t *d) {
  (void)d;
  return IRON_ERR(FAILED_PRECONDITION, "no GPU in this test");
}

// Fills api's NVRTC symbols from $CUDA_HOME/lib64, the loader path or
// /usr/local/cuda/lib64; true when every symbol was found.
static inline bool cuda_test_load_nvrtc(iron_cuda_api_t *api) {
  const char *names[] = {NULL, "libnvrtc.so", "libnvrtc.so.13",
                         "libnvrtc.so.12", "/usr/local/cuda/lib64/libnvrtc.so"};
  char path[1024];
  const char *home = getenv("CUDA_HOME");
  if (home) {
    snprintf(path, sizeof(path), "%s/lib64/libnvrtc.so", home);
    names[0] = path;
  }
  void *h = NULL;
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !h; ++i) {
    if (names[i]) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  }
  if (!h) {
    fprintf(stderr, "NVRTC not found (CUDA_HOME, libnvrtc.so*, "
                    "/usr/local/cuda/lib64)\n");
    return false;
  }
  bool ok = true;
#define CUDA_TEST_LOAD_SYM(field, sym, ret, params) \
  api->field = (ret(*) params)dlsym(h, sym);        \
  if (!api->field) {                                \
    fprintf(stderr, "NVRTC lacks %s\n", sym);       \
    ok = false;                                     \
  }
  IRON_NVRTC_SYMBOLS(CUDA_TEST_LOAD_SYM)
#undef CUDA_TEST_LOAD_SYM
  api->has_nvrtc = ok;
  return ok;
}

static inline bool cuda_test_is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

// The text with numbers and kernel-name hashes ("_" and 16 hex digits)
// replaced by "0": kernels that differ only in sizes, strides, constants
// and names compile alike (malloc'd).
static inline char *cuda_test_normalize(const char *t) {
  size_t n = strlen(t);
  char *o = malloc(n + 1);
  size_t j = 0;
  for (size_t i = 0; i < n;) {
    if (t[i] == '_' && i + 16 < n && cuda_test_is_hex(t[i + 1])) {
      size_t k = 1;
      while (k <= 16 && i + k < n && cuda_test_is_hex(t[i + k])) ++k;
      if (k == 17) {
        o[j++] = '_';
        o[j++] = '0';
        i += 17;
        continue;
      }
    }
    bool start = t[i] >= '0' && t[i] <= '9' &&
                 (i == 0 || t[i - 1] == '_' ||
                  !((t[i - 1] >= 'a' && t[i - 1] <= 'z') ||
                    (t[i - 1] >= 'A' && t[i - 1] <= 'Z') ||
                    (t[i - 1] >= '0' && t[i - 1] <= '9')));
    if (!start) {
      o[j++] = t[i++];
      continue;
    }
    o[j++] = '0';
    while (i < n && ((t[i] >= '0' && t[i] <= '9') ||
                     (t[i] >= 'a' && t[i] <= 'f') || t[i] == 'x'))
      i++;
  }
  o[j] = 0;
  return o;
}

// Compiles every one of `n` generated kernel sources (each the prelude and
// a body) once per text shape (cuda_test_normalize) with NVRTC for sm_90a,
// 120 bodies per program; each must compile. Says so and returns when
// NVRTC is absent.
static inline void cuda_test_nvrtc_compile_all(size_t n,
                                               const char *const *sources) {
  static iron_cuda_api_t api;
  if (!cuda_test_load_nvrtc(&api)) {
    fprintf(stderr, "NVRTC not found: generated kernels not compiled\n");
    return;
  }
  setenv("IRON_CUDA_CACHE", "0", 1);
  const char *prelude = iron_cuda_prelude();
  size_t pl = strlen(prelude), nu = 0;
  char **norms = calloc(n + 1, sizeof(char *));
  const char **bodies = calloc(n + 1, sizeof(char *));
  for (size_t i = 0; i < n; ++i) {
    CHECK(strncmp(sources[i], prelude, pl) == 0);
    const char *body = sources[i] + pl;
    char *nm = cuda_test_normalize(body);
    bool seen = false;
    for (size_t j = 0; j < nu && !seen; ++j) seen = strcmp(norms[j], nm) == 0;
    if (seen) {
      free(nm);
      continue;
    }
    norms[nu] = nm;
    bodies[nu++] = body;
  }
  const size_t per = 120;
  size_t nprog = (nu + per - 1) / per;
  char **srcs = calloc(nprog + 1, sizeof(char *));
  for (size_t q = 0; q < nprog; ++q) {
    iron_cuda_text_t s;
    iron_cuda_text_init(&s);
    iron_cuda_text_printf(&s, "%s", prelude);
    for (size_t k = q * per; k < nu && k < (q + 1) * per; ++k)
      iron_cuda_text_printf(&s, "namespace tk%zu {\n%s}\n", k, bodies[k]);
    CHECK_OK(iron_cuda_text_finish(&s, &srcs[q]));
  }
  void **cubins = calloc(nprog + 1, sizeof(void *));
  size_t *sizes = calloc(nprog + 1, sizeof(size_t));
  iron_status_t *sts = calloc(nprog + 1, sizeof(iron_status_t));
  CHECK_OK(iron_cuda_compile_sources(&api, "sm_90a", nprog,
                                     (const char *const *)srcs, cubins, sizes,
                                     sts));
  for (size_t q = 0; q < nprog; ++q) {
    if (sts[q]) fprintf(stderr, "NVRTC: %s\n", iron_status_message(sts[q]));
    CHECK(sts[q] == IRON_OK && sizes[q] > 0);
    iron_status_free(sts[q]);
    free(cubins[q]);
    free(srcs[q]);
  }
  fprintf(stderr, "NVRTC compiled %zu kernel texts (of %zu kernels) in %zu "
                  "programs\n", nu, n, nprog);
  for (size_t j = 0; j < nu; ++j) free(norms[j]);
  free(norms);
  free(bodies);
  free(srcs);
  free(cubins);
  free(sizes);
  free(sts);
}

#endif  // IRON_TESTS_C_CUDA_TEST_NVRTC_H_
