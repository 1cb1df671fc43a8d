// Generated CUDA kernels: CUDA C text compiled by NVRTC straight to SASS for
// the device's architecture (sm_90a on H200), cached in memory and on disk
// (key: source, arch, NVRTC version; directory $IRON_CACHE_DIR, default
// $XDG_CACHE_HOME/ironjax or ~/.cache/ironjax). Kernels are requested while
// a plan is prepared and compiled together, in parallel, when the plan is
// finished (iron_device_vtable_t.plan_finish) — never on the execute path.
#ifndef IRON_DEVICE_CUDA_CUDA_COMPILE_H_
#define IRON_DEVICE_CUDA_CUDA_COMPILE_H_

#include <stddef.h>

#include "device/cuda/cuda_device.h"

#ifdef __cplusplus
extern "C" {
#endif

// A kernel function of a generated module. Owned by the device's compiler
// (lives as long as the device); `fn` is set once the batch it belongs to
// was compiled and loaded.
typedef struct iron_cuda_function {
  CUfunction fn;
  const char *name;  // the extern "C" __global__ name
} iron_cuda_function_t;

// Asks for `kernel_name` from `source` (a complete CUDA C translation unit
// with extern "C" __global__ functions; no #include of CUDA headers: the
// generated prelude in cuda_codegen provides what is needed). Identical
// requests share one function. The returned function's `fn` is valid after
// iron_cuda_compiler_flush succeeds.
iron_status_t iron_cuda_function_request(iron_cuda_device_t *dev,
                                         const char *source,
                                         const char *kernel_name,
                                         iron_cuda_function_t **out_fn);

// Compiles every pending source (parallel, cached) and loads them. Errors
// carry the NVRTC log and the kernel names.
iron_status_t iron_cuda_compiler_flush(iron_cuda_device_t *dev);

// Launches `f` on the device's stream. `params` as for cuLaunchKernel.
iron_status_t iron_cuda_launch(iron_cuda_device_t *dev,
                               const iron_cuda_function_t *f, unsigned grid_x,
                               unsigned grid_y, unsigned grid_z,
                               unsigned block_x, unsigned shared_bytes,
                               void **params);

// GPU-free: compiles `source` with NVRTC for `arch` ("sm_90a") into a CUBIN
// (malloc'ed). On a compile error, INVALID_ARGUMENT with the NVRTC log.
// Used by the compiler and by CI's tests (NVRTC runs without a GPU).
iron_status_t iron_cuda_nvrtc_compile(const iron_cuda_api_t *api,
                                      const char *source, const char *arch,
                                      void **out_cubin, size_t *out_size);

// The on-disk cache key of (source, arch, NVRTC version) as 32 hex chars.
void iron_cuda_cache_key(const char *source, const char *arch,
                         int nvrtc_major, int nvrtc_minor, char out_key[33]);

void iron_cuda_compiler_destroy(iron_cuda_compiler_t *c);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_CUDA_COMPILE_H_
