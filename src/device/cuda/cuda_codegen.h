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

// Declares `long long <var>` = start index `value` (a scalar of dtype dt)
// clamped to [0, hi], XLA's rule for dynamic_slice/dynamic_update_slice
// starts (u64 values past INT64_MAX read as INT64_MAX). `indent` prefixes
// each line.
void iron_cuda_src_clamped_start(iron_cuda_src_t *s, const char *indent,
                                 const char *var, const char *value,
                                 iron_dtype_t dt, int64_t hi);
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

// Narrow floats (f8 family but f8E8M0FNU, f4E2M1FN), one per byte, in
// generated code of either prelude (this one and cuda_ops_gen's): decode
// to double (NaNs keep their sign) and encode with round-to-nearest-even
// from double, as the host's ew_narrow.c (measured against XLA:CPU).
// kind: 0 IEEE-like, 1 FN (no inf, NaN all ones), 2 FNUZ (NaN = sign bit
// alone, no -0), 3 SAT (no inf/NaN: saturates, NaN -> sign bit alone).
// (The op generators append it to their prelude only where a narrow dtype
// is involved: a fused reduce's source holds both preludes.)
#define IRON_CUDA_NF_HELPERS                                                   \
  "static __device__ __forceinline__ double iron_nf_decode(unsigned bits,\n"   \
  "    int eb, int mb, int bias, int kind) {\n"                                \
  "  int nb = 1 + eb + mb; unsigned emask = (1u << eb) - 1, mmask = (1u << mb) - 1;\n" \
  "  bits &= (1u << nb) - 1;\n"                                                \
  "  unsigned sign = bits >> (nb - 1), e = (bits >> mb) & emask, m = bits & mmask;\n" \
  "  const double pnan = __longlong_as_double(0x7ff8000000000000LL);\n"       \
  "  const double inf = __longlong_as_double(0x7ff0000000000000LL);\n"        \
  "  if (kind == 2 && bits == 1u << (nb - 1)) return pnan;\n"                  \
  "  const double nan = sign ? __longlong_as_double(0xfff8000000000000LL) : pnan;\n" \
  "  if (kind == 0 && e == emask) return m ? nan : sign ? -inf : inf;\n"       \
  "  if (kind == 1 && e == emask && m == mmask) return nan;\n"                 \
  "  double v = e == 0 ? ldexp((double)m, 1 - bias - mb)\n"                    \
  "                    : ldexp((double)((1u << mb) + m), (int)e - bias - mb);\n" \
  "  return sign ? -v : v;\n"                                                  \
  "}\n"                                                                        \
  "static __device__ __forceinline__ unsigned char iron_nf_encode(double x,\n" \
  "    int eb, int mb, int bias, int kind) {\n"                                \
  "  int nb = 1 + eb + mb; unsigned emask = (1u << eb) - 1, mmask = (1u << mb) - 1;\n" \
  "  unsigned sbit = 1u << (nb - 1);\n"                                        \
  "  unsigned sign = __double_as_longlong(x) < 0 ? sbit : 0;\n"                \
  "  unsigned maxbits = kind == 0 ? (((emask - 1) << mb) | mmask)\n"           \
  "                   : kind == 1 ? ((emask << mb) | (mmask - 1))\n"           \
  "                               : ((emask << mb) | mmask);\n"                \
  "  unsigned nan_bits = kind == 0 ? ((emask << mb) | (1u << (mb - 1)))\n"     \
  "                    : kind == 1 ? ((emask << mb) | mmask) : 0;\n"           \
  "  if (x != x) return (unsigned char)((kind >= 2) ? sbit : (sign | nan_bits));\n" \
  "  unsigned overflow = kind == 0 ? (sign | (emask << mb))\n"                 \
  "                    : kind == 1 ? (sign | nan_bits)\n"                      \
  "                    : kind == 2 ? sbit : (sign | maxbits);\n"               \
  "  double a = fabs(x);\n"                                                    \
  "  if (a == __longlong_as_double(0x7ff0000000000000LL))\n"                   \
  "    return (unsigned char)overflow;\n"                                      \
  "  if (a == 0) return (unsigned char)(kind == 2 ? 0 : sign);\n"              \
  "  int ex; frexp(a, &ex);\n"                                                 \
  "  int e = ex - 1, emin = 1 - bias;\n"                                       \
  "  int qexp = (e < emin ? emin : e) - mb;\n"                                 \
  "  double q = rint(ldexp(a, -qexp));\n"                                      \
  "  if (q == 0) return (unsigned char)(kind == 2 ? 0 : sign);\n"              \
  "  if (q >= (double)(2u << mb)) { q /= 2; qexp++; }\n"                       \
  "  unsigned qi = (unsigned)q, enc;\n"                                        \
  "  if (qi >= (1u << mb)) {\n"                                                \
  "    long long biased = (long long)qexp + mb + bias;\n"                      \
  "    if (biased > (long long)emask) return (unsigned char)overflow;\n"       \
  "    enc = ((unsigned)biased << mb) | (qi - (1u << mb));\n"                  \
  "  } else {\n"                                                               \
  "    enc = qi;\n"                                                            \
  "  }\n"                                                                      \
  "  if (enc > maxbits) return (unsigned char)overflow;\n"                     \
  "  return (unsigned char)(sign | enc);\n"                                    \
  "}\n"

// The format of a narrow float dtype for iron_nf_decode/encode (f8 family
// but f8E8M0FNU, f4E2M1FN); false for other dtypes.
bool iron_cuda_nf_format(iron_dtype_t dt, int *out_ebits, int *out_mbits,
                         int *out_bias, int *out_kind);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_CUDA_CODEGEN_H_
