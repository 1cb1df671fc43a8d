// Pieces shared by every generator of CUDA C text (elementwise, fusion,
// reductions, data movement, ...).
#ifndef IRON_DEVICE_CUDA_CUDA_CODEGEN_H_
#define IRON_DEVICE_CUDA_CUDA_CODEGEN_H_

#include <stdarg.h>
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

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_CUDA_CODEGEN_H_
