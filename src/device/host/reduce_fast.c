#include "device/host/reduce_fast.h"

#include <string.h>

#include "base/half.h"
#include "device/host/ew_common.h"

typedef struct { float re, im; } rc64_t;
typedef struct { double re, im; } rc128_t;

// Loads/stores between storage (TI) and accumulation (TA) types.
#define LD_ID(x) (x)
#define ST_ID(x) (x)
#define LD_F16(x) iron_f16_to_f32(x)
#define ST_F16(x) iron_f32_to_f16(x)
#define LD_BF16(x) iron_bf16_to_f32(x)
#define ST_BF16(x) iron_f32_to_bf16(x)
// Max/min read f32/f64 denormals as zero while the host flushes them, as
// XLA:CPU's maxss/minss do: the compares alone would see a zero but return
// the denormal's bits. (f16 values are normal in f32.)
#define LD_DAZ_F32(x) ew_dazf(x)
#define LD_DAZ_F64(x) ew_daz(x)
#define LD_DAZ_BF16(x) ew_dazf(iron_bf16_to_f32(x))

// Combiners. Float max/min: NaN wins; for equal values +0 beats -0 in max
// and -0 beats +0 in min (what XLA:CPU returns for jnp.max/min).
#define OP_ADD(a, b) ((a) + (b))
#define OP_MUL(a, b) ((a) * (b))
#define OP_UADD(T, a, b) ((T)((a) + (b)))
#define OP_UMUL(T, a, b) ((T)((a) * (b)))
#define OP_AND(a, b) ((a) & (b))
#define OP_OR(a, b) ((a) | (b))
#define OP_XOR(a, b) ((a) ^ (b))
#define OP_IMAX(a, b) ((a) > (b) ? (a) : (b))
#define OP_IMIN(a, b) ((a) < (b) ? (a) : (b))
#define OP_FMAX(a, b)                                             \
  ((a) != (a) ? (a)                                               \
   : (b) != (b) ? (b)                                             \
   : (a) > (b) ? (a)                                              \
   : (b) > (a) ? (b)                                              \
   : (__builtin_signbit(a) ? (b) : (a)))
#define OP_FMIN(a, b)                                             \
  ((a) != (a) ? (a)                                               \
   : (b) != (b) ? (b)                                             \
   : (a) < (b) ? (a)                                              \
   : (b) < (a) ? (b)                                              \
   : (__builtin_signbit(a) ? (a) : (b)))

static inline rc64_t c64_add(rc64_t a, rc64_t b) {
  return (rc64_t){a.re + b.re, a.im + b.im};
}
static inline rc64_t c64_mul(rc64_t a, rc64_t b) {
  return (rc64_t){a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}
static inline rc128_t c128_add(rc128_t a, rc128_t b) {
  return (rc128_t){a.re + b.re, a.im + b.im};
}
static inline rc128_t c128_mul(rc128_t a, rc128_t b) {
  return (rc128_t){a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}

#define IRON_REDUCE_DEFINE_(NAME, TI, TA, LD, ST, OP)                          \
  static TA NAME##_row_(const TI *x, int64_t n) {                              \
    if (n <= 256) {                                                            \
      if (n < 16) {                                                            \
        TA a = LD(x[0]);                                                       \
        for (int64_t i = 1; i < n; ++i) a = OP(a, LD(x[i]));                   \
        return a;                                                              \
      }                                                                        \
      TA l[8];                                                                 \
      for (int k = 0; k < 8; ++k) l[k] = LD(x[k]);                             \
      int64_t i = 8;                                                           \
      for (; i + 8 <= n; i += 8)                                               \
        for (int k = 0; k < 8; ++k) l[k] = OP(l[k], LD(x[i + k]));             \
      for (; i < n; ++i) l[i & 7] = OP(l[i & 7], LD(x[i]));                    \
      l[0] = OP(l[0], l[1]);                                                   \
      l[2] = OP(l[2], l[3]);                                                   \
      l[4] = OP(l[4], l[5]);                                                   \
      l[6] = OP(l[6], l[7]);                                                   \
      l[0] = OP(l[0], l[2]);                                                   \
      l[4] = OP(l[4], l[6]);                                                   \
      return OP(l[0], l[4]);                                                   \
    }                                                                          \
    int64_t h = n / 2;                                                         \
    TA a = NAME##_row_(x, h);                                                  \
    TA b = NAME##_row_(x + h, n - h);                                          \
    return OP(a, b);                                                           \
  }                                                                            \
  static void NAME##_row(const void *x, int64_t n, void *out) {                \
    *(TA *)out = NAME##_row_((const TI *)x, n);                                \
  }                                                                            \
  static inline void NAME##_acc_(TA *restrict cur, const TI *restrict row,   \
                                 int64_t w) {                                \
    for (int64_t i = 0; i < w; ++i) cur[i] = OP(cur[i], LD(row[i]));         \
  }                                                                          \
  static inline void NAME##_merge_(TA *restrict a, const TA *restrict b,     \
                                   int64_t w) {                              \
    for (int64_t i = 0; i < w; ++i) a[i] = OP(a[i], b[i]);                   \
  }                                                                          \
  static void NAME##_cols(const void *xv, int64_t n, int64_t stride,         \
                          int64_t w, void *out, void *scratch) {             \
    const TI *x = xv;                                                        \
    TA *s = scratch;                                                         \
    int lvl[64];                                                             \
    int top = 0;                                                             \
    for (int64_t r0 = 0; r0 < n; r0 += 16) {                                 \
      int64_t r1 = n - r0 < 16 ? n : r0 + 16;                                \
      TA *cur = s + (int64_t)top * w;                                        \
      const TI *row = x + r0 * stride;                                       \
      for (int64_t i = 0; i < w; ++i) cur[i] = LD(row[i]);                   \
      for (int64_t r = r0 + 1; r < r1; ++r)                                  \
        NAME##_acc_(cur, x + r * stride, w);                                 \
      lvl[top++] = 0;                                                        \
      while (top >= 2 && lvl[top - 1] == lvl[top - 2]) {                     \
        TA *a = s + (int64_t)(top - 2) * w;                                  \
        NAME##_merge_(a, a + w, w);                                          \
        lvl[top - 2]++;                                                      \
        top--;                                                               \
      }                                                                      \
    }                                                                        \
    while (top >= 2) {                                                       \
      TA *a = s + (int64_t)(top - 2) * w;                                    \
      NAME##_merge_(a, a + w, w);                                            \
      top--;                                                                 \
    }                                                                        \
    memcpy(out, s, sizeof(TA) * (size_t)w);                                  \
  }                                                                          \
  static void NAME##_combine(void *av, const void *bv, int64_t n) {            \
    TA *a = av;                                                                \
    const TA *b = bv;                                                          \
    for (int64_t i = 0; i < n; ++i) a[i] = OP(a[i], b[i]);                     \
  }                                                                            \
  static void NAME##_finish(const void *accv, const void *initv, void *outv,   \
                            int64_t n) {                                       \
    const TA *acc = accv;                                                      \
    TA init = LD(*(const TI *)initv);                                          \
    TI *out = outv;                                                            \
    for (int64_t i = 0; i < n; ++i) out[i] = ST(OP(init, acc[i]));             \
  }                                                                            \
  static const iron_host_reduce_impl_t NAME = {                                \
      NAME##_row, NAME##_cols, NAME##_combine, NAME##_finish, sizeof(TA)};

// Floats.
// `LDZ`: the load of max/min while denormals are flushed (P##_max, _min);
// P##_max_keep and _min_keep load with LD (IRON_HOST_DENORMALS=keep).
#define F_OPS(P, TI, TA, LD, LDZ, ST)                             \
  IRON_REDUCE_DEFINE_(P##_add, TI, TA, LD, ST, OP_ADD)            \
  IRON_REDUCE_DEFINE_(P##_mul, TI, TA, LD, ST, OP_MUL)            \
  IRON_REDUCE_DEFINE_(P##_max, TI, TA, LDZ, ST, OP_FMAX)          \
  IRON_REDUCE_DEFINE_(P##_min, TI, TA, LDZ, ST, OP_FMIN)          \
  IRON_REDUCE_DEFINE_(P##_max_keep, TI, TA, LD, ST, OP_FMAX)      \
  IRON_REDUCE_DEFINE_(P##_min_keep, TI, TA, LD, ST, OP_FMIN)
F_OPS(r_f32, float, float, LD_ID, LD_DAZ_F32, ST_ID)
F_OPS(r_f64, double, double, LD_ID, LD_DAZ_F64, ST_ID)
F_OPS(r_f16, uint16_t, float, LD_F16, LD_F16, ST_F16)
F_OPS(r_bf16, uint16_t, float, LD_BF16, LD_DAZ_BF16, ST_BF16)

IRON_REDUCE_DEFINE_(r_c64_add, rc64_t, rc64_t, LD_ID, ST_ID, c64_add)
IRON_REDUCE_DEFINE_(r_c64_mul, rc64_t, rc64_t, LD_ID, ST_ID, c64_mul)
IRON_REDUCE_DEFINE_(r_c128_add, rc128_t, rc128_t, LD_ID, ST_ID, c128_add)
IRON_REDUCE_DEFINE_(r_c128_mul, rc128_t, rc128_t, LD_ID, ST_ID, c128_mul)

// Integers: add/mul/bitwise in unsigned arithmetic (wraps; same bits for
// signed), max/min in the signedness of the dtype.
#define U_OPS(P, T)                                                      \
  static inline T P##_uadd(T a, T b) { return OP_UADD(T, a, b); }       \
  static inline T P##_umul(T a, T b) { return OP_UMUL(T, a, b); }       \
  IRON_REDUCE_DEFINE_(P##_add, T, T, LD_ID, ST_ID, P##_uadd)            \
  IRON_REDUCE_DEFINE_(P##_mul, T, T, LD_ID, ST_ID, P##_umul)            \
  IRON_REDUCE_DEFINE_(P##_and, T, T, LD_ID, ST_ID, OP_AND)              \
  IRON_REDUCE_DEFINE_(P##_or, T, T, LD_ID, ST_ID, OP_OR)                \
  IRON_REDUCE_DEFINE_(P##_xor, T, T, LD_ID, ST_ID, OP_XOR)              \
  IRON_REDUCE_DEFINE_(P##_max, T, T, LD_ID, ST_ID, OP_IMAX)             \
  IRON_REDUCE_DEFINE_(P##_min, T, T, LD_ID, ST_ID, OP_IMIN)
U_OPS(r_u8, uint8_t)
U_OPS(r_u16, uint16_t)
U_OPS(r_u32, uint32_t)
U_OPS(r_u64, uint64_t)
#define S_OPS(P, T)                                               \
  IRON_REDUCE_DEFINE_(P##_max, T, T, LD_ID, ST_ID, OP_IMAX)       \
  IRON_REDUCE_DEFINE_(P##_min, T, T, LD_ID, ST_ID, OP_IMIN)
S_OPS(r_s8, int8_t)
S_OPS(r_s16, int16_t)
S_OPS(r_s32, int32_t)
S_OPS(r_s64, int64_t)

#define PICK_F(P)                                            \
  switch (kind) {                                            \
    case IRON_OP_ADD: return &P##_add;                       \
    case IRON_OP_MULTIPLY: return &P##_mul;                  \
    case IRON_OP_MAXIMUM: return daz ? &P##_max : &P##_max_keep; \
    case IRON_OP_MINIMUM: return daz ? &P##_min : &P##_min_keep; \
    default: return NULL;                                    \
  }
#define PICK_U(P)                               \
  switch (kind) {                               \
    case IRON_OP_ADD: return &P##_add;          \
    case IRON_OP_MULTIPLY: return &P##_mul;     \
    case IRON_OP_AND: return &P##_and;          \
    case IRON_OP_OR: return &P##_or;            \
    case IRON_OP_XOR: return &P##_xor;          \
    case IRON_OP_MAXIMUM: return &P##_max;      \
    case IRON_OP_MINIMUM: return &P##_min;      \
    default: return NULL;                       \
  }
#define PICK_S(P, U)                            \
  switch (kind) {                               \
    case IRON_OP_MAXIMUM: return &P##_max;      \
    case IRON_OP_MINIMUM: return &P##_min;      \
    default: PICK_U(U)                          \
  }

const iron_host_reduce_impl_t *iron_host_reduce_impl_lookup(
    iron_op_kind_t kind, iron_dtype_t dtype) {
  bool daz = iron_ew_flush_enabled();
  switch (dtype) {
    case IRON_DTYPE_F32: PICK_F(r_f32)
    case IRON_DTYPE_F64: PICK_F(r_f64)
    case IRON_DTYPE_F16: PICK_F(r_f16)
    case IRON_DTYPE_BF16: PICK_F(r_bf16)
    case IRON_DTYPE_C64:
      return kind == IRON_OP_ADD ? &r_c64_add
             : kind == IRON_OP_MULTIPLY ? &r_c64_mul : NULL;
    case IRON_DTYPE_C128:
      return kind == IRON_OP_ADD ? &r_c128_add
             : kind == IRON_OP_MULTIPLY ? &r_c128_mul : NULL;
    case IRON_DTYPE_U8: PICK_U(r_u8)
    case IRON_DTYPE_U16: PICK_U(r_u16)
    case IRON_DTYPE_U32: PICK_U(r_u32)
    case IRON_DTYPE_U64: PICK_U(r_u64)
    case IRON_DTYPE_S8: PICK_S(r_s8, r_u8)
    case IRON_DTYPE_S16: PICK_S(r_s16, r_u16)
    case IRON_DTYPE_S32: PICK_S(r_s32, r_u32)
    case IRON_DTYPE_S64: PICK_S(r_s64, r_u64)
    case IRON_DTYPE_PRED:
      // Booleans are 0/1 bytes: max is or, min is and. add/multiply on i1
      // go through the generic path.
      switch (kind) {
        case IRON_OP_AND:
        case IRON_OP_MINIMUM: return &r_u8_and;
        case IRON_OP_OR:
        case IRON_OP_MAXIMUM: return &r_u8_or;
        case IRON_OP_XOR: return &r_u8_xor;
        default: return NULL;
      }
    default: return NULL;
  }
}
