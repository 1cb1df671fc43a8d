// Generated CUDA kernels: CUDA C text compiled by NVRTC straight to SASS for
// the device's architecture (sm_90a on H200), cached in memory and on disk
// (key: source, arch, NVRTC version; directory $IRON_CACHE_DIR, default
// $XDG_CACHE_HOME/ironjax or ~/.cache/ironjax). Kernels are requested while
// a plan is prepared and compiled together, in parallel, when the plan is
// finished (iron_device_vtable_t.plan_finish) — never on the execute path.
#ifndef IRON_DEVICE_CUDA_CUDA_COMPILE_H_
#define IRON_DEVICE_CUDA_CUDA_COMPILE_H_

#include <stdbool.h>
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

// --- Additions (cuda-gen) ----------------------------------------------------

// Unloads every module of the device's compiler (the context must still be
// alive); functions' `fn` become NULL. Call before releasing the context,
// then iron_cuda_compiler_destroy. Safe without a compiler.
void iron_cuda_compiler_unload(iron_cuda_device_t *dev);

// GPU-free inspection of the pending batch (tests compile these with
// iron_cuda_nvrtc_compile): the number of sources not yet compiled, and the
// index-th of them (borrowed; valid until the next flush or request).
size_t iron_cuda_compiler_pending_count(iron_cuda_device_t *dev);
const char *iron_cuda_compiler_pending_source(iron_cuda_device_t *dev,
                                              size_t index);

// Compiles `n` sources through the disk cache, in parallel (up to the
// number of CPUs, or IRON_CUDA_COMPILE_THREADS). Per source: a malloc'ed
// CUBIN or an owned error status. Fails only when out of memory.
iron_status_t iron_cuda_compile_sources(const iron_cuda_api_t *api,
                                        const char *arch, size_t n,
                                        const char *const *sources,
                                        void **out_cubins, size_t *out_sizes,
                                        iron_status_t *out_statuses);
// One source through the disk cache.
iron_status_t iron_cuda_compile_cached(const iron_cuda_api_t *api,
                                       const char *source, const char *arch,
                                       void **out_cubin, size_t *out_size,
                                       bool *out_from_cache);

// The disk cache directory ($IRON_CACHE_DIR/cuda, ...), created; false when
// there is none or IRON_CUDA_CACHE=0.
bool iron_cuda_cache_dir(char *out, size_t cap);
// Reads <dir>/<key>.cubin; false when absent or corrupt (bad header, size
// or checksum): the caller compiles and rewrites it.
bool iron_cuda_cache_read(const char *dir, const char *key, void **out_cubin,
                          size_t *out_size);
// Writes atomically (temporary file + rename); failures are ignored.
void iron_cuda_cache_write(const char *dir, const char *key, const void *cubin,
                           size_t size);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_CUDA_COMPILE_H_
