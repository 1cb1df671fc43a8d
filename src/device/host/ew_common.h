// Shared machinery of the host element-wise kernels (elementwise.c,
// convert.c): the dtype lists that stamp out typed loops, the scalar helpers
// that carry XLA:CPU's edge semantics, and the run driver that handles
// broadcast scalars and splits work over the thread pool.
//
// A loop function computes out[begin, end) from the input base pointers. One
// is generated per (op, dtype, broadcast variant), so the inner loop has no
// per-element switch or indirect call and the compiler can vectorize it.
#ifndef IRON_DEVICE_HOST_EW_COMMON_H_
#define IRON_DEVICE_HOST_EW_COMMON_H_

#include <complex.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/cplx.h"
#include "base/half.h"
#include "device/host/host_kernel.h"

typedef void (*iron_ew_loop_fn_t)(void *out, const void *const *in,
                                  int64_t begin, int64_t end);

// Up to 3 inputs; variant index = mask of inputs that are broadcast scalars
// (bit i: input i has count 1 while the output has more). The mask with every
// input scalar is never used (run computes one element and replicates it).
#define IRON_EW_MAX_INPUTS 3
#define IRON_EW_VARIANTS 8

typedef struct iron_ew_params {
  uint32_t magic;  // 0 (see IRON_EW_NARROW_MAGIC)
  int num_inputs;
  size_t out_elem_size;
  iron_ew_loop_fn_t fn[IRON_EW_VARIANTS];
} iron_ew_params_t;

// Checks counts, picks the variant and runs it (in parallel when large).
iron_status_t iron_ew_run(const iron_kernel_ctx_t *ctx, const void *params,
                          const iron_tensor_t *const *inputs,
                          iron_tensor_t *const *outputs);

// Validates that every operand has the result's element count or is a
// single element, and that the op has the expected operand/result counts.
iron_status_t iron_ew_check_shapes(const iron_ir_op_t *op,
                                   uint32_t num_operands);

// Sets the calling thread's FP environment to XLA:CPU's (denormals flushed
// to zero) and returns what to restore; see ew_common.c. Cheap (a few
// cycles); kernels outside this file may use it too.
// True unless IRON_HOST_DENORMALS=keep: kernels then treat f32/f64
// denormal inputs as zero, as XLA:CPU does.
bool iron_ew_flush_enabled(void);
uint64_t iron_ew_fpenv_enter(void);
void iron_ew_fpenv_leave(uint64_t saved);

// Allocates params for a kernel with the given loops.
iron_status_t iron_ew_params_create(int num_inputs, iron_dtype_t out_dtype,
                                    const iron_ew_loop_fn_t *fns, int num_fns,
                                    void **out_params);

#define EW_CAT_(a, b) a##b
#define EW_CAT(a, b) EW_CAT_(a, b)
#define EW_ID(x) (x)

// ---------------------------------------------------------------------------
// Dtype lists: X(tok, DTYPE, storage type, compute type, libm suffix,
// load (storage -> compute), store (compute -> storage), ...)

#define EW_LIST_PRED(X, ...) \
  X(pred, PRED, uint8_t, uint8_t, , EW_ID, EW_ID, __VA_ARGS__)
#define EW_LIST_SINT(X, ...)                               \
  X(s8, S8, int8_t, int8_t, , EW_ID, EW_ID, __VA_ARGS__)     \
  X(s16, S16, int16_t, int16_t, , EW_ID, EW_ID, __VA_ARGS__) \
  X(s32, S32, int32_t, int32_t, , EW_ID, EW_ID, __VA_ARGS__) \
  X(s64, S64, int64_t, int64_t, , EW_ID, EW_ID, __VA_ARGS__)
#define EW_LIST_UINT(X, ...)                                  \
  X(u8, U8, uint8_t, uint8_t, , EW_ID, EW_ID, __VA_ARGS__)     \
  X(u16, U16, uint16_t, uint16_t, , EW_ID, EW_ID, __VA_ARGS__) \
  X(u32, U32, uint32_t, uint32_t, , EW_ID, EW_ID, __VA_ARGS__) \
  X(u64, U64, uint64_t, uint64_t, , EW_ID, EW_ID, __VA_ARGS__)
#define EW_LIST_INT(X, ...) \
  EW_LIST_SINT(X, __VA_ARGS__) EW_LIST_UINT(X, __VA_ARGS__)
// f16/bf16 compute through f32 per element and round back, as XLA:CPU does.
#define EW_LIST_HALF(X, ...)                                              \
  X(f16, F16, uint16_t, float, f, iron_f16_to_f32, iron_f32_to_f16,       \
    __VA_ARGS__)                                                          \
  X(bf16, BF16, uint16_t, float, f, iron_bf16_to_f32, iron_f32_to_bf16,   \
    __VA_ARGS__)
#define EW_LIST_FNATIVE(X, ...)                           \
  X(f32, F32, float, float, f, EW_ID, EW_ID, __VA_ARGS__) \
  X(f64, F64, double, double, , EW_ID, EW_ID, __VA_ARGS__)
#define EW_LIST_FLOAT(X, ...) \
  EW_LIST_HALF(X, __VA_ARGS__) EW_LIST_FNATIVE(X, __VA_ARGS__)
#define EW_LIST_CPLX(X, ...)                                              \
  X(c64, C64, float _Complex, float _Complex, f, EW_ID, EW_ID, __VA_ARGS__) \
  X(c128, C128, double _Complex, double _Complex, , EW_ID, EW_ID, __VA_ARGS__)

// ---------------------------------------------------------------------------
// Integer helpers with XLA:CPU's semantics (verified on jax 0.10.2 CPU):
// wrap-around arithmetic; x/0 = all ones (-1 signed); MIN/-1 = MIN; x%0 = x;
// MIN%-1 = 0; shifts by >= width (or negative) give 0, or the sign fill for
// arithmetic right shifts; x**negative = 0 except 1 and -1; 0**0 = 1.

#define EW_INT_COMMON_HELPERS(tok, T, UT, BITS)                             \
  static inline T ew_add_##tok(T x, T y) { return (T)((UT)x + (UT)y); }     \
  static inline T ew_sub_##tok(T x, T y) { return (T)((UT)x - (UT)y); }     \
  /* "* 1u": 16-bit operands would multiply as (signed) int and overflow */ \
  static inline T ew_mul_##tok(T x, T y) {                                  \
    return (T)((UT)x * 1u * (UT)y);                                         \
  }                                                                         \
  static inline T ew_neg_##tok(T x) { return (T)((UT)0 - (UT)x); }          \
  static inline T ew_shl_##tok(T x, T y) {                                  \
    return (UT)y >= (UT)(BITS) ? (T)0 : (T)((UT)x << (UT)y);                \
  }                                                                         \
  static inline T ew_shrl_##tok(T x, T y) {                                 \
    return (UT)y >= (UT)(BITS) ? (T)0 : (T)((UT)x >> (UT)y);                \
  }                                                                         \
  static inline T ew_popcnt_##tok(T x) {                                    \
    return (T)__builtin_popcountll((unsigned long long)(UT)x);              \
  }                                                                         \
  static inline T ew_clz_##tok(T x) {                                       \
    unsigned long long u = (unsigned long long)(UT)x;                       \
    return (T)(u == 0 ? (BITS) : __builtin_clzll(u) - (64 - (BITS)));       \
  }                                                                         \
  /* XLA:CPU squares over the low 6 bits of the exponent only (so */      \
  /* 2**64 == 1 for s64), and treats exponents that are negative as */    \
  /* signed (even for unsigned types): 0, except bases 1 and -1.     */    \
  static inline T ew_ipow_##tok(UT base, UT e) {                            \
    if ((T)(e >> ((BITS) - 1)) & 1) {                                      \
      if (base == 1) return 1;                                              \
      if (base == (UT)~(UT)0) return (e & 1) ? (T)base : (T)1;              \
      return 0;                                                             \
    }                                                                       \
    UT r = 1;                                                               \
    for (int bit = 0; bit < 6; ++bit) {                                     \
      if ((e >> bit) & 1) r = (UT)(r * 1u * base);                          \
      base = (UT)(base * 1u * base);                                        \
    }                                                                       \
    return (T)r;                                                            \
  }

#define EW_SINT_HELPERS(tok, T, UT, BITS, TMIN)                               \
  EW_INT_COMMON_HELPERS(tok, T, UT, BITS)                                   \
  static inline T ew_div_##tok(T x, T y) {                                  \
    if (y == 0) return (T)-1;                                               \
    if (y == -1) return ew_neg_##tok(x);                                    \
    return (T)(x / y);                                                      \
  }                                                                         \
  static inline T ew_rem_##tok(T x, T y) {                                  \
    if (y == 0) return x;                                                   \
    if (y == -1) return 0;                                                  \
    return (T)(x % y);                                                      \
  }                                                                         \
  static inline T ew_shra_##tok(T x, T y) {                                 \
    return (UT)y >= (UT)(BITS) ? (T)(x < 0 ? -1 : 0) : (T)(x >> y);         \
  }                                                                         \
  static inline T ew_abs_##tok(T x) {                                       \
    return x < 0 ? ew_neg_##tok(x) : x;                                     \
  }                                                                         \
  static inline T ew_sign_##tok(T x) { return (T)((x > 0) - (x < 0)); }     \
  static inline T ew_pow_##tok(T x, T y) {                                  \
    return ew_ipow_##tok((UT)x, (UT)y);                                     \
  }

#define EW_UINT_HELPERS(tok, T, ST, BITS)                                     \
  EW_INT_COMMON_HELPERS(tok, T, T, BITS)                                    \
  static inline T ew_div_##tok(T x, T y) {                                  \
    return y == 0 ? (T)~(T)0 : (T)(x / y);                                  \
  }                                                                         \
  static inline T ew_rem_##tok(T x, T y) {                                  \
    return y == 0 ? x : (T)(x % y);                                         \
  }                                                                         \
  static inline T ew_shra_##tok(T x, T y) {                                 \
    return y >= (T)(BITS) ? (T)((ST)x < 0 ? ~(T)0 : 0) : (T)((ST)x >> y);   \
  }                                                                         \
  static inline T ew_abs_##tok(T x) { return x; }                           \
  static inline T ew_sign_##tok(T x) { return (T)(x != 0); }                \
  static inline T ew_pow_##tok(T x, T y) { return ew_ipow_##tok(x, y); }

EW_SINT_HELPERS(s8, int8_t, uint8_t, 8, INT8_MIN)
EW_SINT_HELPERS(s16, int16_t, uint16_t, 16, INT16_MIN)
EW_SINT_HELPERS(s32, int32_t, uint32_t, 32, INT32_MIN)
EW_SINT_HELPERS(s64, int64_t, uint64_t, 64, INT64_MIN)
EW_UINT_HELPERS(u8, uint8_t, int8_t, 8)
EW_UINT_HELPERS(u16, uint16_t, int16_t, 16)
EW_UINT_HELPERS(u32, uint32_t, int32_t, 32)
EW_UINT_HELPERS(u64, uint64_t, int64_t, 64)

// ---------------------------------------------------------------------------
// Float helpers (compute type float or double).

// XLA's maximum/minimum: NaN propagates; -0 orders below +0.
#define EW_FLOAT_HELPERS(FS, CT)                                            \
  static inline CT ew_fmax##FS(CT x, CT y) {                                \
    if (x != x) return x;                                                   \
    if (y != y) return y;                                                   \
    if (x == y) return signbit(x) ? y : x;                                  \
    return x > y ? x : y;                                                   \
  }                                                                         \
  static inline CT ew_fmin##FS(CT x, CT y) {                                \
    if (x != x) return x;                                                   \
    if (y != y) return y;                                                   \
    if (x == y) return signbit(x) ? x : y;                                  \
    return x < y ? x : y;                                                   \
  }                                                                         \
  /* sign: NaN stays NaN, +-0 stays +-0. */                                 \
  static inline CT ew_fsign##FS(CT x) {                                     \
    /* x * 0 keeps NaN and the sign of zero, and flushes a denormal. */     \
    return x > 0 ? (CT)1 : x < 0 ? (CT)-1 : x * (CT)0;                      \
  }                                                                         \
  /* Reads a denormal as zero for libm calls, which look at the bits     */ \
  /* (logf of a denormal is finite, XLA:CPU's is -inf).                  */ \
  static inline CT ew_daz##FS(CT x) {                                       \
    return fabs##FS(x) < (CT)EW_MIN_NORMAL##FS ? x * (CT)0 : x;             \
  }                                                                         \
  static inline CT ew_logistic##FS(CT x) {                                  \
    return (CT)1 / ((CT)1 + exp##FS(-x));                                   \
  }                                                                         \
  static inline CT ew_vlogistic##FS(CT x) {                                 \
    return (CT)1 / ((CT)1 + ew_vexp##FS(-x));                               \
  }

// exp for f32 as straight-line code the compiler vectorizes (libm's expf
// is a call per element, ~10x slower). Cephes' degree-6 polynomial on
// [-ln2/2, ln2/2] with a two-part ln2: max error ~1 ulp. Like XLA:CPU
// (which also uses its own polynomial, with denormals flushed), results
// below the smallest normal are 0. IRON_HOST_LIBM_EXP=1 selects libm.
static inline float ew_vexpf(float x) {
  const float hi = 88.72283935546875f, lo = -87.33654022216797f;
  // NaN clamps to hi (a NaN converted to int below is undefined behaviour);
  // the last line returns the NaN.
  float xc = x < hi ? (x > lo ? x : lo) : hi;
  float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // 2^n as two factors so that n = 128 and n = -126 both stay in range.
  int32_t ni = (int32_t)n;
  int32_t n1 = ni >> 1, n2 = ni - n1;
  uint32_t b1 = (uint32_t)(n1 + 127) << 23, b2 = (uint32_t)(n2 + 127) << 23;
  float s1, s2;
  memcpy(&s1, &b1, 4);
  memcpy(&s2, &b2, 4);
  float v = p * s1 * s2;
  v = x > hi ? (float)INFINITY : v;
  v = x < lo ? 0.0f : v;
  return x != x ? x : v;
}
static inline double ew_vexp(double x) { return exp(x); }

#define EW_MIN_NORMALf 1.17549435e-38f
#define EW_MIN_NORMAL 2.2250738585072014e-308
EW_FLOAT_HELPERS(f, float)
EW_FLOAT_HELPERS(, double)

// TOTALORDER keys: sign-magnitude bits mapped to two's complement order, so
// -NaN < -inf < ... < -0 < +0 < ... < inf < NaN compares as integers.
static inline int16_t ew_tkey16(uint16_t b) {
  int16_t k = (int16_t)b;
  return k < 0 ? (int16_t)(k ^ INT16_MAX) : k;
}
static inline int32_t ew_tkey32(float f) {
  uint32_t b;
  memcpy(&b, &f, 4);
  int32_t k = (int32_t)b;
  return k < 0 ? (k ^ INT32_MAX) : k;
}
static inline int64_t ew_tkey64(double f) {
  uint64_t b;
  memcpy(&b, &f, 8);
  int64_t k = (int64_t)b;
  return k < 0 ? (k ^ INT64_MAX) : k;
}

// float -> int conversion, as XLA:CPU: NaN -> 0, saturate at the bounds.
static inline int64_t ew_f2s(double v, int bits) {
  double lo = -ldexp(1.0, bits - 1);
  if (v != v) return 0;
  if (v <= lo) return bits == 64 ? INT64_MIN : (int64_t)lo;
  if (v >= -lo) return bits == 64 ? INT64_MAX : (int64_t)(-lo) - 1;
  return (int64_t)v;
}
static inline uint64_t ew_f2u(double v, int bits) {
  double hi = ldexp(1.0, bits);
  if (v != v || v <= 0) return 0;
  if (v >= hi) return bits == 64 ? UINT64_MAX : (uint64_t)hi - 1;
  return (uint64_t)v;
}

#endif  // IRON_DEVICE_HOST_EW_COMMON_H_
