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

// False when IRON_CUDA_HW_ROUND=0: the prelude's f16/bf16 rounding of
// element-wise values (iron_rnd_f16/bf16) then runs the software
// round-to-nearest-even instead of one cvt.rn instruction (read once, when
// the prelude is built).
bool iron_cuda_hw_round_enabled(void);

// False when IRON_CUDA_FTZ_OPS=0: f32 (and f16/bf16 computed in f32)
// add/subtract/multiply/divide then flush their operands and result with
// explicit iron_daz calls; by default they rely on NVRTC's -ftz, whose
// add.ftz/sub.ftz/mul.ftz/div.rn.ftz flush both (scalar.c).
bool iron_cuda_ftz_ops_enabled(void);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_GEN_PRELUDE_H_
