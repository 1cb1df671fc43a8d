// The prelude of every generated CUDA translation unit: one text for the
// element-wise, fusion, reduction, data-movement, sort, rng, ... kernels.
#ifndef IRON_DEVICE_CUDA_GEN_PRELUDE_H_
#define IRON_DEVICE_CUDA_GEN_PRELUDE_H_

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

// Fixed-width integer typedefs (int8_t .. uint64_t), complex types
// (iron_c64, iron_c128), f16/bf16 (uint16_t storage) <-> float, narrow
// dtypes, and the XLA:CPU semantics helpers the scalar emitter (scalar.h)
// and the kernel generators call. Its first line names the denormal mode,
// which picks NVRTC's -ftz (cuda_compile.c). Static text, built once;
// thread-safe.
const char *iron_cuda_prelude(void);

// True unless IRON_CUDA_DENORMALS=keep: generated code then flushes f32/f64
// denormals as XLA:CPU does (NVRTC -ftz=true for f32, explicit iron_daz
// calls for f64 and where -ftz does not reach).
bool iron_cuda_flush_denormals(void);

// False when IRON_CUDA_VECTORIZE=0: generated element-wise and reduce
// kernels then move one element per thread instead of 16-byte vectors.
bool iron_cuda_vectorize_enabled(void);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_GEN_PRELUDE_H_
