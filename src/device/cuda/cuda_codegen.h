// Pieces shared by every generator of CUDA C text (elementwise, fusion,
// reductions, data movement, ...).
#ifndef IRON_DEVICE_CUDA_CUDA_CODEGEN_H_
#define IRON_DEVICE_CUDA_CUDA_CODEGEN_H_

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "base/dtype.h"
#include "base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

// The text every generated translation unit starts with: fixed-width integer
// typedefs, f16/bf16 (16-bit storage, float arithmetic, round-to-nearest-even
// conversions), complex types, and the XLA semantics helpers the generated
// code calls (integer division/shift rules, float->int saturation, ...).
const char *iron_cuda_prelude(void);

// The storage type of a dtype in generated code ("float", "int32_t",
// "iron_bf16", "iron_c64", ...); NULL for dtypes generated code cannot
// handle yet.
const char *iron_cuda_ctype(iron_dtype_t dt);

// A growable text buffer for generators. Appending never fails; an
// allocation failure is remembered and reported by iron_cuda_src_finish.
typedef struct iron_cuda_src {
  char *text;
  size_t len, cap;
  int oom;
} iron_cuda_src_t;
void iron_cuda_src_init(iron_cuda_src_t *s);
void iron_cuda_src_printf(iron_cuda_src_t *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
// On success *out_text is the malloc'ed text (the buffer is reset).
iron_status_t iron_cuda_src_finish(iron_cuda_src_t *s, char **out_text);
void iron_cuda_src_free(iron_cuda_src_t *s);


// --- Additions (cuda-gen) ----------------------------------------------------

// The compute type of a dtype in generated code: "bool" for pred, "float"
// for f16/bf16 (values are rounded back after every op), else the storage
// type. NULL where iron_cuda_ctype is NULL.
const char *iron_cuda_compute_ctype(iron_dtype_t dt);
// An unsigned storage type of `elem_size` bytes for dtype-agnostic copies
// ("uint8_t" .. "uint64_t", "iron_b16"); NULL for other sizes.
const char *iron_cuda_bytes_ctype(size_t elem_size);

// True unless IRON_CUDA_DENORMALS=keep: generated code then flushes f32/f64
// denormals as XLA:CPU does (NVRTC -ftz=true for f32, explicit flushes for
// f64). The prelude's first line names the mode, so cache keys differ.
bool iron_cuda_flush_denormals(void);

// Generators write the kernel's name as this placeholder;
// iron_cuda_source_make replaces it with "<prefix>_<hash of the body>", so
// that distinct kernels have distinct names (many can share one program).
#define IRON_CUDA_KERNEL_PLACEHOLDER "IRON_KERNEL_NAME"

// Finishes `body` (consumed, also on error) into a complete translation unit
// (prelude + body with the placeholder replaced) and the kernel name; both
// malloc'ed.
iron_status_t iron_cuda_source_make(iron_cuda_src_t *body, const char *prefix,
                                    char **out_source, char **out_name);

// A stable 128-bit fingerprint of bytes (cache keys, kernel names).
void iron_cuda_hash128(const void *data, size_t n, uint64_t seed,
                       uint64_t out[2]);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_CUDA_CODEGEN_H_
