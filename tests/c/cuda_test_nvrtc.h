// Shared by the GPU-free CUDA tests that compile generated kernels: loads
// NVRTC into an iron_cuda_api_t (no GPU, no libcuda), and stubs the device
// context switch that the device code calls only with a GPU.
#ifndef IRON_TESTS_C_CUDA_TEST_NVRTC_H_
#define IRON_TESTS_C_CUDA_TEST_NVRTC_H_

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/status.h"
#include "device/cuda/cuda_api.h"
#include "device/cuda/cuda_device.h"

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

#endif  // IRON_TESTS_C_CUDA_TEST_NVRTC_H_
