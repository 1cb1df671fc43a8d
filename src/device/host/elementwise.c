// Host element-wise kernels: unary and binary arithmetic, compare, select,
// clamp, for every dtype jax uses, with XLA:CPU's edge semantics (verified
// against jax 0.10.2's CPU backend by tests/gen_ew_vectors.py).
//
// Every (op, dtype, broadcast variant) gets its own loop, stamped out by the
// macros below, so run does no per-element dispatch and the compiler can
// vectorize the simple ones. f16/bf16 compute through f32 and round back per
// element, as XLA:CPU does.
// The build compiles the core at -O2, where gcc only vectorizes loops whose
// trip count is a known multiple of the vector width; these loops are the
// ones that most need it. no-trapping-math lets it if-convert float selects
// (we never read FP exception flags); no-math-errno lets sqrt inline. Neither
// changes a result.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic", \
                     "no-trapping-math", "no-math-errno")
#endif

#include <stdlib.h>

#include "device/host/ew_common.h"
#include "device/host/ew_complex.h"
#include "device/host/ew_narrow.h"

// ---------------------------------------------------------------------------
// Loop stamps. x, y, z are the loaded operands (compute type) in EXPR.

#define EW_LOOP1(name, TI, TO, CT, LD, SV, EXPR)                          \
  static void name##_m0(void *out_, const void *const *in, int64_t b,     \
                        int64_t e) {                                      \
    TO *restrict o = (TO *)out_;                                          \
    const TI *restrict a = (const TI *)in[0];                             \
    for (int64_t i = b; i < e; ++i) {                                     \
      CT x = LD(a[i]);                                                    \
      o[i] = SV(EXPR);                                                    \
    }                                                                     \
  }

#define EW_LOOP2_V(name, TI, TO, CT, LD, SV, EXPR, IA, IB)                \
  static void name(void *out_, const void *const *in, int64_t b,          \
                   int64_t e) {                                           \
    TO *restrict o = (TO *)out_;                                          \
    const TI *restrict pa = (const TI *)in[0];                            \
    const TI *restrict pb = (const TI *)in[1];                            \
    for (int64_t i = b; i < e; ++i) {                                     \
      CT x = LD(pa[IA]);                                                  \
      CT y = LD(pb[IB]);                                                  \
      o[i] = SV(EXPR);                                                    \
    }                                                                     \
  }
#define EW_LOOP2(name, TI, TO, CT, LD, SV, EXPR)                          \
  EW_LOOP2_V(name##_m0, TI, TO, CT, LD, SV, EXPR, i, i)                   \
  EW_LOOP2_V(name##_m1, TI, TO, CT, LD, SV, EXPR, 0, i)                   \
  EW_LOOP2_V(name##_m2, TI, TO, CT, LD, SV, EXPR, i, 0)
#define EW_FNS2(name) {name##_m0, name##_m1, name##_m2}

// Ternary loops: F(CT, LD, SV, a, b, c) is a macro giving the output value.
#define EW_LOOP3_V(name, TX, TY, TZ, TO, CT, LD, SV, F, IA, IB, IC)       \
  static void name(void *out_, const void *const *in, int64_t b,          \
                   int64_t e) {                                           \
    TO *restrict o = (TO *)out_;                                          \
    const TX *restrict pa = (const TX *)in[0];                            \
    const TY *restrict pb = (const TY *)in[1];                            \
    const TZ *restrict pc = (const TZ *)in[2];                            \
    for (int64_t i = b; i < e; ++i) {                                     \
      o[i] = F(CT, LD, SV, pa[IA], pb[IB], pc[IC]);                       \
    }                                                                     \
  }
#define EW_LOOP3(name, TX, TY, TZ, TO, CT, LD, SV, F)                     \
  EW_LOOP3_V(name##_m0, TX, TY, TZ, TO, CT, LD, SV, F, i, i, i)           \
  EW_LOOP3_V(name##_m1, TX, TY, TZ, TO, CT, LD, SV, F, 0, i, i)           \
  EW_LOOP3_V(name##_m2, TX, TY, TZ, TO, CT, LD, SV, F, i, 0, i)           \
  EW_LOOP3_V(name##_m3, TX, TY, TZ, TO, CT, LD, SV, F, 0, 0, i)           \
  EW_LOOP3_V(name##_m4, TX, TY, TZ, TO, CT, LD, SV, F, i, i, 0)           \
  EW_LOOP3_V(name##_m5, TX, TY, TZ, TO, CT, LD, SV, F, 0, i, 0)           \
  EW_LOOP3_V(name##_m6, TX, TY, TZ, TO, CT, LD, SV, F, i, 0, 0)
#define EW_FNS3(name)                                                     \
  {name##_m0, name##_m1, name##_m2, name##_m3, name##_m4, name##_m5,      \
   name##_m6}

// ---------------------------------------------------------------------------
// Expressions, E(tok, FS, CT): tok names the dtype's helpers, FS is the libm
// suffix (f or nothing), CT the compute type.

#define E_iabs(t, FS, CT) ew_abs_##t(x)
#define E_ineg(t, FS, CT) ew_neg_##t(x)
#define E_inot(t, FS, CT) (CT)~x
#define E_isign(t, FS, CT) ew_sign_##t(x)
#define E_popcnt(t, FS, CT) ew_popcnt_##t(x)
#define E_clz(t, FS, CT) ew_clz_##t(x)
#define E_iadd(t, FS, CT) ew_add_##t(x, y)
#define E_isub(t, FS, CT) ew_sub_##t(x, y)
#define E_imul(t, FS, CT) ew_mul_##t(x, y)
#define E_idiv(t, FS, CT) ew_div_##t(x, y)
#define E_irem(t, FS, CT) ew_rem_##t(x, y)
#define E_ipow(t, FS, CT) ew_pow_##t(x, y)
#define E_shl(t, FS, CT) ew_shl_##t(x, y)
#define E_shra(t, FS, CT) ew_shra_##t(x, y)
#define E_shrl(t, FS, CT) ew_shrl_##t(x, y)
#define E_imax(t, FS, CT) (x > y ? x : y)
#define E_imin(t, FS, CT) (x < y ? x : y)
#define E_and(t, FS, CT) (CT)(x & y)
#define E_or(t, FS, CT) (CT)(x | y)
#define E_xor(t, FS, CT) (CT)(x ^ y)
#define E_pnot(t, FS, CT) (CT)(x == 0)

#define E_add(t, FS, CT) (x + y)
#define E_sub(t, FS, CT) (x - y)
#define E_mul(t, FS, CT) (x * y)
#define E_div(t, FS, CT) (x / y)
#define E_neg(t, FS, CT) (-x)
// XLA:CPU's remainder keeps a denormal dividend (rem(d, 1) = d) and reads
// a denormal divisor as zero (NaN), on the dev machine's glibc 2.36 and on
// the GPU machine's newer one alike (measured with
// scripts/debug/rem_denormal_probe.py). The divisor is flushed here rather
// than by the C library: a newer fmod computes in integers and ignores the
// DAZ flag, which gave the exact remainder on the GPU machine's host.
#define E_frem(t, FS, CT) fmod##FS(x, ew_daz##FS(y))
#define E_fpow(t, FS, CT) pow##FS(ew_daz##FS(x), ew_daz##FS(y))
#define E_atan2(t, FS, CT) atan2##FS(ew_daz##FS(x), ew_daz##FS(y))
// XLA:CPU's max/min/clamp see denormal operands as zero (max(d, d) = 0).
#define E_fmax(t, FS, CT) ew_fmax##FS(ew_daz##FS(x), ew_daz##FS(y))
#define E_fmin(t, FS, CT) ew_fmin##FS(ew_daz##FS(x), ew_daz##FS(y))
#define E_fabs(t, FS, CT) fabs##FS(x)
#define E_fsign(t, FS, CT) ew_fsign##FS(x)
#define E_floor(t, FS, CT) floor##FS(ew_daz##FS(x))
#define E_ceil(t, FS, CT) ceil##FS(ew_daz##FS(x))
#define E_round(t, FS, CT) round##FS(ew_daz##FS(x))
// rint rounds half to even in the default rounding mode, which the host
// device never changes (clang 14 has no __builtin_roundeven).
#define E_roundeven(t, FS, CT) rint##FS(ew_daz##FS(x))
#define E_exp(t, FS, CT) ew_vexp##FS(x)
#define E_exp_libm(t, FS, CT) exp##FS(ew_daz##FS(x))
#define E_expm1(t, FS, CT) expm1##FS(ew_daz##FS(x))
#define E_log(t, FS, CT) log##FS(ew_daz##FS(x))
#define E_log1p(t, FS, CT) log1p##FS(ew_daz##FS(x))
#define E_logistic(t, FS, CT) ew_vlogistic##FS(ew_daz##FS(x))
#define E_logistic_libm(t, FS, CT) ew_logistic##FS(ew_daz##FS(x))
#define E_sqrt(t, FS, CT) sqrt##FS(x)
#define E_rsqrt(t, FS, CT) ((CT)1 / sqrt##FS(x))
#define E_cbrt(t, FS, CT) cbrt##FS(ew_daz##FS(x))
#define E_sin(t, FS, CT) sin##FS(ew_daz##FS(x))
#define E_cos(t, FS, CT) cos##FS(ew_daz##FS(x))
#define E_tan(t, FS, CT) tan##FS(ew_daz##FS(x))
#define E_tanh(t, FS, CT) tanh##FS(ew_daz##FS(x))
#define E_self(t, FS, CT) (x)
#define E_zero(t, FS, CT) ((void)x, (CT)0)

#define E_cmul(t, FS, CT) ew_cmul##FS(x, y)
#define E_cdiv(t, FS, CT) ew_cdiv##FS(x, y)
#define E_cpow(t, FS, CT) ew_cpow##FS(x, y)
#define E_cmax(t, FS, CT) ew_cmax##FS(x, y)
#define E_cmin(t, FS, CT) ew_cmin##FS(x, y)
#define E_csign(t, FS, CT) ew_csign##FS(x)
#define E_cexp(t, FS, CT) ew_cexp##FS(x)
#define E_cexpm1(t, FS, CT) ew_cexpm1##FS(x)
#define E_clog(t, FS, CT) ew_clog##FS(x)
#define E_clog1p(t, FS, CT) ew_clog1p##FS(x)
#define E_clogistic(t, FS, CT) ew_clogistic##FS(x)
#define E_csqrt(t, FS, CT) ew_csqrt##FS(x)
#define E_crsqrt(t, FS, CT) ew_crsqrt##FS(x)
#define E_csin(t, FS, CT) ew_csin##FS(x)
#define E_ccos(t, FS, CT) ew_ccos##FS(x)
#define E_ctan(t, FS, CT) ew_xctan##FS(x)
#define E_ctanh(t, FS, CT) ew_xctanh##FS(x)

// C99 has ctanh(+-0 + i inf) = +-0 + i NaN (and the same for a NaN
// imaginary part); XLA:CPU gives NaN + i NaN there. tan(z) = -i tanh(iz):
// the same for an infinite or NaN real part with a zero imaginary part.
// Everywhere else libm's results are within rounding of XLA:CPU's
// (measured on a grid of specials and finite values, jax 0.10.2).
#define EW_XCTAN(FS, CT)                                                 \
  static inline CT ew_xctanh##FS(CT x) {                                 \
    if (creal##FS(x) == 0 && !isfinite(cimag##FS(x))) {                  \
      return CMPLX##FS##_(NAN, NAN);                                     \
    }                                                                    \
    return ctanh##FS(x);                                                 \
  }                                                                      \
  static inline CT ew_xctan##FS(CT x) {                                  \
    if (cimag##FS(x) == 0 && !isfinite(creal##FS(x))) {                  \
      return CMPLX##FS##_(NAN, NAN);                                     \
    }                                                                    \
    return ctan##FS(x);                                                  \
  }
#define CMPLXf_(a, b) CMPLXF(a, b)
#define CMPLX_(a, b) CMPLX(a, b)
EW_XCTAN(f, float _Complex)
EW_XCTAN(, double _Complex)

// ---------------------------------------------------------------------------
// Op x dtype-list tables. Y(list, OP, expression).

#define EW_UNARY_OPS(Y)                                                  \
  Y(EW_LIST_SINT, ABS, E_iabs)                                           \
  Y(EW_LIST_FLOAT, ABS, E_fabs)                                          \
  Y(EW_LIST_INT, NEGATE, E_ineg)                                         \
  Y(EW_LIST_FLOAT, NEGATE, E_neg)                                        \
  Y(EW_LIST_CPLX, NEGATE, E_neg)                                         \
  Y(EW_LIST_PRED, NOT, E_pnot)                                           \
  Y(EW_LIST_INT, NOT, E_inot)                                            \
  Y(EW_LIST_SINT, SIGN, E_isign)                                         \
  Y(EW_LIST_FLOAT, SIGN, E_fsign)                                        \
  Y(EW_LIST_CPLX, SIGN, E_csign)                                         \
  Y(EW_LIST_FLOAT, FLOOR, E_floor)                                       \
  Y(EW_LIST_FLOAT, CEIL, E_ceil)                                         \
  Y(EW_LIST_FLOAT, ROUND_NEAREST_AFZ, E_round)                           \
  Y(EW_LIST_FLOAT, ROUND_NEAREST_EVEN, E_roundeven)                      \
  Y(EW_LIST_FLOAT, EXPONENTIAL, E_exp)                                   \
  Y(EW_LIST_CPLX, EXPONENTIAL, E_cexp)                                   \
  Y(EW_LIST_FLOAT, EXPONENTIAL_MINUS_ONE, E_expm1)                       \
  Y(EW_LIST_CPLX, EXPONENTIAL_MINUS_ONE, E_cexpm1)                       \
  Y(EW_LIST_FLOAT, LOG, E_log)                                           \
  Y(EW_LIST_CPLX, LOG, E_clog)                                           \
  Y(EW_LIST_FLOAT, LOG_PLUS_ONE, E_log1p)                                \
  Y(EW_LIST_CPLX, LOG_PLUS_ONE, E_clog1p)                                \
  Y(EW_LIST_FLOAT, LOGISTIC, E_logistic)                                 \
  Y(EW_LIST_CPLX, LOGISTIC, E_clogistic)                                 \
  Y(EW_LIST_FLOAT, SQRT, E_sqrt)                                         \
  Y(EW_LIST_CPLX, SQRT, E_csqrt)                                         \
  Y(EW_LIST_FLOAT, RSQRT, E_rsqrt)                                       \
  Y(EW_LIST_CPLX, RSQRT, E_crsqrt)                                       \
  Y(EW_LIST_FLOAT, CBRT, E_cbrt)                                         \
  Y(EW_LIST_FLOAT, SINE, E_sin)                                          \
  Y(EW_LIST_CPLX, SINE, E_csin)                                          \
  Y(EW_LIST_FLOAT, COSINE, E_cos)                                        \
  Y(EW_LIST_CPLX, COSINE, E_ccos)                                        \
  Y(EW_LIST_FLOAT, TAN, E_tan)                                           \
  Y(EW_LIST_CPLX, TAN, E_ctan)                                           \
  Y(EW_LIST_FLOAT, TANH, E_tanh)                                         \
  Y(EW_LIST_CPLX, TANH, E_ctanh)                                         \
  Y(EW_LIST_INT, POPCNT, E_popcnt)                                       \
  Y(EW_LIST_INT, CLZ, E_clz)                                             \
  Y(EW_LIST_FLOAT, REAL, E_self)                                         \
  Y(EW_LIST_FLOAT, IMAG, E_zero)

#define EW_BINARY_OPS(Y)                                                 \
  Y(EW_LIST_INT, ADD, E_iadd)                                            \
  Y(EW_LIST_FLOAT, ADD, E_add)                                           \
  Y(EW_LIST_CPLX, ADD, E_add)                                            \
  Y(EW_LIST_PRED, ADD, E_or)                                             \
  Y(EW_LIST_INT, SUBTRACT, E_isub)                                       \
  Y(EW_LIST_FLOAT, SUBTRACT, E_sub)                                      \
  Y(EW_LIST_CPLX, SUBTRACT, E_sub)                                       \
  Y(EW_LIST_INT, MULTIPLY, E_imul)                                       \
  Y(EW_LIST_FLOAT, MULTIPLY, E_mul)                                      \
  Y(EW_LIST_CPLX, MULTIPLY, E_cmul)                                      \
  Y(EW_LIST_PRED, MULTIPLY, E_and)                                       \
  Y(EW_LIST_INT, DIVIDE, E_idiv)                                         \
  Y(EW_LIST_FLOAT, DIVIDE, E_div)                                        \
  Y(EW_LIST_CPLX, DIVIDE, E_cdiv)                                        \
  Y(EW_LIST_INT, REMAINDER, E_irem)                                      \
  Y(EW_LIST_FLOAT, REMAINDER, E_frem)                                    \
  Y(EW_LIST_INT, POWER, E_ipow)                                          \
  Y(EW_LIST_FLOAT, POWER, E_fpow)                                        \
  Y(EW_LIST_CPLX, POWER, E_cpow)                                         \
  Y(EW_LIST_FLOAT, ATAN2, E_atan2)                                       \
  Y(EW_LIST_INT, MAXIMUM, E_imax)                                        \
  Y(EW_LIST_FLOAT, MAXIMUM, E_fmax)                                      \
  Y(EW_LIST_CPLX, MAXIMUM, E_cmax)                                       \
  Y(EW_LIST_PRED, MAXIMUM, E_or)                                         \
  Y(EW_LIST_INT, MINIMUM, E_imin)                                        \
  Y(EW_LIST_FLOAT, MINIMUM, E_fmin)                                      \
  Y(EW_LIST_CPLX, MINIMUM, E_cmin)                                       \
  Y(EW_LIST_PRED, MINIMUM, E_and)                                        \
  Y(EW_LIST_INT, AND, E_and)                                             \
  Y(EW_LIST_PRED, AND, E_and)                                            \
  Y(EW_LIST_INT, OR, E_or)                                               \
  Y(EW_LIST_PRED, OR, E_or)                                              \
  Y(EW_LIST_INT, XOR, E_xor)                                             \
  Y(EW_LIST_PRED, XOR, E_xor)                                            \
  Y(EW_LIST_INT, SHIFT_LEFT, E_shl)                                      \
  Y(EW_LIST_INT, SHIFT_RIGHT_ARITHMETIC, E_shra)                         \
  Y(EW_LIST_INT, SHIFT_RIGHT_LOGICAL, E_shrl)

typedef struct ew_entry {
  iron_op_kind_t op;
  iron_dtype_t in, out;
  iron_ew_loop_fn_t fn[IRON_EW_VARIANTS];
} ew_entry_t;

#define EW_DEF_U(tok, DT, ST, CT, FS, LD, SV, OP, E) \
  EW_LOOP1(ew_##OP##_##tok, ST, ST, CT, LD, SV, E(tok, FS, CT))
#define EW_ENT_U(tok, DT, ST, CT, FS, LD, SV, OP, E) \
  {IRON_OP_##OP, IRON_DTYPE_##DT, IRON_DTYPE_##DT, {ew_##OP##_##tok##_m0}},
#define EW_DEF_B(tok, DT, ST, CT, FS, LD, SV, OP, E) \
  EW_LOOP2(ew_##OP##_##tok, ST, ST, CT, LD, SV, E(tok, FS, CT))
#define EW_ENT_B(tok, DT, ST, CT, FS, LD, SV, OP, E) \
  {IRON_OP_##OP, IRON_DTYPE_##DT, IRON_DTYPE_##DT, EW_FNS2(ew_##OP##_##tok)},

#define Y_DEF_U(L, OP, E) L(EW_DEF_U, OP, E)
#define Y_ENT_U(L, OP, E) L(EW_ENT_U, OP, E)
#define Y_DEF_B(L, OP, E) L(EW_DEF_B, OP, E)
#define Y_ENT_B(L, OP, E) L(EW_ENT_B, OP, E)

EW_UNARY_OPS(Y_DEF_U)

// libm variants of the f32 fast paths (IRON_HOST_LIBM_EXP=1).
#define EW_LIST_F32ISH(X, ...) \
  EW_LIST_HALF(X, __VA_ARGS__) \
  X(f32, F32, float, float, f, EW_ID, EW_ID, __VA_ARGS__)
#define EW_DEF_UL(tok, DT, ST, CT, FS, LD, SV, OP, E) \
  EW_LOOP1(ew_libm_##OP##_##tok, ST, ST, CT, LD, SV, E(tok, FS, CT))
#define EW_ENT_UL(tok, DT, ST, CT, FS, LD, SV, OP, E) \
  {IRON_OP_##OP, IRON_DTYPE_##DT, IRON_DTYPE_##DT, {ew_libm_##OP##_##tok##_m0}},
EW_LIST_F32ISH(EW_DEF_UL, EXPONENTIAL, E_exp_libm)
EW_LIST_F32ISH(EW_DEF_UL, LOGISTIC, E_logistic_libm)
static const ew_entry_t kUnaryLibm[] = {
    EW_LIST_F32ISH(EW_ENT_UL, EXPONENTIAL, E_exp_libm)
    EW_LIST_F32ISH(EW_ENT_UL, LOGISTIC, E_logistic_libm)};
EW_BINARY_OPS(Y_DEF_B)

// Ops whose result dtype differs from the operand's.
#define EW_DEF_FINITE(tok, DT, ST, CT, FS, LD, SV, u) \
  EW_LOOP1(ew_IS_FINITE_##tok, ST, uint8_t, CT, LD, EW_ID, (uint8_t)isfinite(x))
#define EW_ENT_FINITE(tok, DT, ST, CT, FS, LD, SV, u) \
  {IRON_OP_IS_FINITE, IRON_DTYPE_##DT, IRON_DTYPE_PRED, {ew_IS_FINITE_##tok##_m0}},
EW_LIST_FLOAT(EW_DEF_FINITE, 0)

EW_LOOP1(ew_ABS_c64, float _Complex, float, float _Complex, EW_ID, EW_ID, ew_cabsf(x))
EW_LOOP1(ew_ABS_c128, double _Complex, double, double _Complex, EW_ID, EW_ID, ew_cabs(x))
EW_LOOP1(ew_REAL_c64, float _Complex, float, float _Complex, EW_ID, EW_ID, crealf(x))
EW_LOOP1(ew_REAL_c128, double _Complex, double, double _Complex, EW_ID, EW_ID, creal(x))
EW_LOOP1(ew_IMAG_c64, float _Complex, float, float _Complex, EW_ID, EW_ID, cimagf(x))
EW_LOOP1(ew_IMAG_c128, double _Complex, double, double _Complex, EW_ID, EW_ID, cimag(x))
EW_LOOP2(ew_COMPLEX_f32, float, float _Complex, float, EW_ID, EW_ID, CMPLXF(x, y))
EW_LOOP2(ew_COMPLEX_f64, double, double _Complex, double, EW_ID, EW_ID, CMPLX(x, y))

// 4-bit ints: XLA:CPU computes shifts right and count_leading_zeros in 4
// bits (every other op in s8/u8, see ew_narrow.h). They act on the 4-bit
// pattern alone, so s4 and u4 share them: shift counts >= 4 (unsigned) give
// 0, or the sign fill (bit 3) for arithmetic shifts.
static inline int ew_n4_sext(unsigned v) {
  v &= 0xfu;
  return (v & 8u) ? (int)v - 16 : (int)v;
}
static inline uint8_t ew_n4_clz(unsigned v) {
  v &= 0xfu;
  uint8_t n = 4;
  while (v) {
    v >>= 1;
    n--;
  }
  return n;
}
#define EW_N4MASK(v) ((uint8_t)((v) & 0xfu))
#define EW_LIST_N4(X, ...)                                          \
  X(s4, S4, uint8_t, uint8_t, , EW_ID, EW_N4MASK, __VA_ARGS__)      \
  X(u4, U4, uint8_t, uint8_t, , EW_ID, EW_N4MASK, __VA_ARGS__)
#define E_n4_shrl(t, FS, CT) \
  ((y & 0xfu) >= 4u ? 0u : (unsigned)(x & 0xfu) >> (y & 0xfu))
#define E_n4_shra(t, FS, CT) \
  ((unsigned)(ew_n4_sext(x) >> ((y & 0xfu) >= 4u ? 3u : (y & 0xfu))))
#define E_n4_clz(t, FS, CT) ew_n4_clz(x)
EW_LIST_N4(EW_DEF_U, CLZ, E_n4_clz)
EW_LIST_N4(EW_DEF_B, SHIFT_RIGHT_LOGICAL, E_n4_shrl)
EW_LIST_N4(EW_DEF_B, SHIFT_RIGHT_ARITHMETIC, E_n4_shra)

static const ew_entry_t kUnary[] = {
    EW_LIST_N4(EW_ENT_U, CLZ, E_n4_clz)
    EW_UNARY_OPS(Y_ENT_U)
    EW_LIST_FLOAT(EW_ENT_FINITE, 0)
    {IRON_OP_ABS, IRON_DTYPE_C64, IRON_DTYPE_F32, {ew_ABS_c64_m0}},
    {IRON_OP_ABS, IRON_DTYPE_C128, IRON_DTYPE_F64, {ew_ABS_c128_m0}},
    {IRON_OP_REAL, IRON_DTYPE_C64, IRON_DTYPE_F32, {ew_REAL_c64_m0}},
    {IRON_OP_REAL, IRON_DTYPE_C128, IRON_DTYPE_F64, {ew_REAL_c128_m0}},
    {IRON_OP_IMAG, IRON_DTYPE_C64, IRON_DTYPE_F32, {ew_IMAG_c64_m0}},
    {IRON_OP_IMAG, IRON_DTYPE_C128, IRON_DTYPE_F64, {ew_IMAG_c128_m0}},
};

static const ew_entry_t kBinary[] = {
    EW_BINARY_OPS(Y_ENT_B)
    EW_LIST_N4(EW_ENT_B, SHIFT_RIGHT_LOGICAL, E_n4_shrl)
    EW_LIST_N4(EW_ENT_B, SHIFT_RIGHT_ARITHMETIC, E_n4_shra)
    {IRON_OP_COMPLEX, IRON_DTYPE_F32, IRON_DTYPE_C64, EW_FNS2(ew_COMPLEX_f32)},
    {IRON_OP_COMPLEX, IRON_DTYPE_F64, IRON_DTYPE_C128, EW_FNS2(ew_COMPLEX_f64)},
};

// ---------------------------------------------------------------------------
// compare

#define EW_CMP_DIRS(Y, L)                                                \
  Y(L, EQ, ==) Y(L, NE, !=) Y(L, GE, >=) Y(L, GT, >) Y(L, LE, <=) Y(L, LT, <)

// TOTALORDER: compare the integer keys (ew_tkey*) instead of the floats.
#define EW_LIST_TKEY(X, ...)                                                \
  X(f16t, F16, uint16_t, int16_t, , ew_tkey16, EW_ID, __VA_ARGS__)          \
  X(bf16t, BF16, uint16_t, int16_t, , ew_tkey16, EW_ID, __VA_ARGS__)        \
  X(f32t, F32, float, int32_t, , ew_tkey32, EW_ID, __VA_ARGS__)             \
  X(f64t, F64, double, int64_t, , ew_tkey64, EW_ID, __VA_ARGS__)

#define EW_DEF_CMP(tok, DT, ST, CT, FS, LD, SV, DIR, OPR) \
  EW_LOOP2(ew_cmp_##DIR##_##tok, ST, uint8_t, CT, LD, EW_ID, (uint8_t)(x OPR y))
#define EW_ENT_CMP(tok, DT, ST, CT, FS, LD, SV, DIR, OPR) \
  {IRON_CMP_##DIR, false, IRON_DTYPE_##DT, EW_FNS2(ew_cmp_##DIR##_##tok)},
#define EW_ENT_CMPT(tok, DT, ST, CT, FS, LD, SV, DIR, OPR) \
  {IRON_CMP_##DIR, true, IRON_DTYPE_##DT, EW_FNS2(ew_cmp_##DIR##_##tok)},
#define Y_DEF_CMP(L, DIR, OPR) L(EW_DEF_CMP, DIR, OPR)
#define Y_ENT_CMP(L, DIR, OPR) L(EW_ENT_CMP, DIR, OPR)
#define Y_ENT_CMPT(L, DIR, OPR) L(EW_ENT_CMPT, DIR, OPR)
#define EW_LIST_CMPN(X, ...)                                           \
  EW_LIST_PRED(X, __VA_ARGS__) EW_LIST_INT(X, __VA_ARGS__)             \
  EW_LIST_FLOAT(X, __VA_ARGS__)

EW_CMP_DIRS(Y_DEF_CMP, EW_LIST_CMPN)
EW_CMP_DIRS(Y_DEF_CMP, EW_LIST_TKEY)
EW_LOOP2(ew_cmp_EQ_c64, float _Complex, uint8_t, float _Complex, EW_ID, EW_ID,
         (uint8_t)(x == y))
EW_LOOP2(ew_cmp_NE_c64, float _Complex, uint8_t, float _Complex, EW_ID, EW_ID,
         (uint8_t)(x != y))
EW_LOOP2(ew_cmp_EQ_c128, double _Complex, uint8_t, double _Complex, EW_ID,
         EW_ID, (uint8_t)(x == y))
EW_LOOP2(ew_cmp_NE_c128, double _Complex, uint8_t, double _Complex, EW_ID,
         EW_ID, (uint8_t)(x != y))
#define EW_DEF_CCMP(tok, DT, ST, CT, FS, LD, SV, u)                          \
  EW_LOOP2(ew_cmp_GE_##tok, ST, uint8_t, CT, LD, EW_ID, ew_cge##FS(x, y))    \
  EW_LOOP2(ew_cmp_GT_##tok, ST, uint8_t, CT, LD, EW_ID, ew_cgt##FS(x, y))    \
  EW_LOOP2(ew_cmp_LE_##tok, ST, uint8_t, CT, LD, EW_ID, ew_cle##FS(x, y))    \
  EW_LOOP2(ew_cmp_LT_##tok, ST, uint8_t, CT, LD, EW_ID, ew_clt##FS(x, y))
#define EW_ENT_CCMP(tok, DT, ST, CT, FS, LD, SV, u)                          \
  {IRON_CMP_GE, false, IRON_DTYPE_##DT, EW_FNS2(ew_cmp_GE_##tok)},           \
  {IRON_CMP_GT, false, IRON_DTYPE_##DT, EW_FNS2(ew_cmp_GT_##tok)},           \
  {IRON_CMP_LE, false, IRON_DTYPE_##DT, EW_FNS2(ew_cmp_LE_##tok)},           \
  {IRON_CMP_LT, false, IRON_DTYPE_##DT, EW_FNS2(ew_cmp_LT_##tok)},
EW_LIST_CPLX(EW_DEF_CCMP, 0)

typedef struct ew_cmp_entry {
  int dir;
  bool total;  // TOTALORDER variant
  iron_dtype_t dt;
  iron_ew_loop_fn_t fn[IRON_EW_VARIANTS];
} ew_cmp_entry_t;

static const ew_cmp_entry_t kCompare[] = {
    EW_CMP_DIRS(Y_ENT_CMP, EW_LIST_CMPN)
    EW_CMP_DIRS(Y_ENT_CMPT, EW_LIST_TKEY)
    {IRON_CMP_EQ, false, IRON_DTYPE_C64, EW_FNS2(ew_cmp_EQ_c64)},
    {IRON_CMP_NE, false, IRON_DTYPE_C64, EW_FNS2(ew_cmp_NE_c64)},
    {IRON_CMP_EQ, false, IRON_DTYPE_C128, EW_FNS2(ew_cmp_EQ_c128)},
    {IRON_CMP_NE, false, IRON_DTYPE_C128, EW_FNS2(ew_cmp_NE_c128)},
    EW_LIST_CPLX(EW_ENT_CCMP, 0)
};

// ---------------------------------------------------------------------------
// select (by element size) and clamp (by dtype)

typedef struct ew_b16 {
  uint64_t lo, hi;
} ew_b16_t;


#define EW_SEL(CT, LD, SV, p, t, f) ((p) ? (t) : (f))
#define EW_DEF_SEL(size, T) \
  EW_LOOP3(ew_select_##size, uint8_t, T, T, T, T, EW_ID, EW_ID, EW_SEL)
EW_DEF_SEL(1, uint8_t)
EW_DEF_SEL(2, uint16_t)
EW_DEF_SEL(4, uint32_t)
EW_DEF_SEL(8, uint64_t)
EW_DEF_SEL(16, ew_b16_t)

static const iron_ew_loop_fn_t kSelect[5][IRON_EW_VARIANTS] = {
    EW_FNS3(ew_select_1), EW_FNS3(ew_select_2), EW_FNS3(ew_select_4),
    EW_FNS3(ew_select_8), EW_FNS3(ew_select_16),
};

// clamp(min, operand, max) = min(max(operand, min), max) with the dtype's
// maximum/minimum semantics.
#define EW_CLAMP_I(CT, LD, SV, lo, v, hi) \
  EW_IMIN(EW_IMAX((v), (lo)), (hi))
#define EW_IMAX(a, b) ((a) > (b) ? (a) : (b))
#define EW_IMIN(a, b) ((a) < (b) ? (a) : (b))
#define EW_CLAMP_Ff(CT, LD, SV, lo, v, hi) \
  SV(ew_fminf(ew_fmaxf(ew_dazf(LD(v)), ew_dazf(LD(lo))), ew_dazf(LD(hi))))
#define EW_CLAMP_F(CT, LD, SV, lo, v, hi) \
  SV(ew_fmin(ew_fmax(ew_daz(LD(v)), ew_daz(LD(lo))), ew_daz(LD(hi))))
#define EW_DEF_CLAMP_I(tok, DT, ST, CT, FS, LD, SV, u) \
  EW_LOOP3(ew_clamp_##tok, ST, ST, ST, ST, CT, LD, SV, EW_CLAMP_I)
#define EW_DEF_CLAMP_F(tok, DT, ST, CT, FS, LD, SV, u) \
  EW_LOOP3(ew_clamp_##tok, ST, ST, ST, ST, CT, LD, SV, EW_CLAMP_F##FS)
#define EW_ENT_CLAMP(tok, DT, ST, CT, FS, LD, SV, u) \
  {IRON_OP_CLAMP, IRON_DTYPE_##DT, IRON_DTYPE_##DT, EW_FNS3(ew_clamp_##tok)},
EW_LIST_INT(EW_DEF_CLAMP_I, 0)
EW_LIST_FLOAT(EW_DEF_CLAMP_F, 0)
// Complex clamp is refused: XLA:CPU's results (clamp(0, 1, 3-4i) == 0) fit
// no max/min or select composition we tried, and jax never emits it.
static const ew_entry_t kClamp[] = {EW_LIST_INT(EW_ENT_CLAMP, 0)
                                        EW_LIST_FLOAT(EW_ENT_CLAMP, 0)};

// ---------------------------------------------------------------------------
// Kernels

static iron_dtype_t ew_operand_dtype(const iron_ir_op_t *op, uint32_t i) {
  return op->operands[i]->type->dtype;
}

static iron_status_t ew_refuse(const iron_ir_op_t *op, iron_dtype_t dt) {
  return iron_ir_op_unimplemented(op, "for dtype %s", iron_dtype_name(dt));
}

static const ew_entry_t *ew_find(const ew_entry_t *table, size_t n,
                                 iron_op_kind_t kind, iron_dtype_t in) {
  for (size_t i = 0; i < n; ++i) {
    if (table[i].op == kind && table[i].in == in) return &table[i];
  }
  return NULL;
}

static iron_status_t ew_prepare_table(const iron_ir_op_t *op,
                                      const ew_entry_t *table, size_t n,
                                      uint32_t arity, void **out_params) {
  IRON_RETURN_IF_ERROR_PLAIN(iron_ew_check_shapes(op, arity));
  iron_dtype_t in = ew_operand_dtype(op, 0);
  for (uint32_t i = 1; i < arity; ++i) {
    if (ew_operand_dtype(op, i) != in) {
      return IRON_ERR(INVALID_ARGUMENT, "%s: operand dtypes differ (%s, %s)",
                      op->name, iron_dtype_name(in),
                      iron_dtype_name(ew_operand_dtype(op, i)));
    }
  }
  const ew_entry_t *e = ew_find(table, n, op->kind, in);
  iron_dtype_t out = op->results[0].type->dtype;
  iron_dtype_t wide = iron_ew_narrow_wide(in);
  if (!e && wide != IRON_DTYPE_INVALID) {
    e = ew_find(table, n, op->kind, wide);
    if (!e) return ew_refuse(op, in);
    iron_dtype_t want = e->out == wide ? in : e->out;
    if (out != want) {
      return IRON_ERR(INVALID_ARGUMENT, "%s: result dtype %s, expected %s",
                      op->name, iron_dtype_name(out), iron_dtype_name(want));
    }
    const iron_dtype_t ins[3] = {in, in, in}, wides[3] = {wide, wide, wide};
    return iron_ew_narrow_wrap_create((int)arity, ins, wides, e->out, out,
                                      e->fn, out_params);
  }
  if (!e) return ew_refuse(op, in);
  if (out != e->out) {
    return IRON_ERR(INVALID_ARGUMENT, "%s: result dtype %s, expected %s",
                    op->name, iron_dtype_name(out), iron_dtype_name(e->out));
  }
  return iron_ew_params_create((int)arity, out, e->fn, IRON_EW_VARIANTS,
                               out_params);
}

static bool ew_libm_exp(void) {
  const char *e = getenv("IRON_HOST_LIBM_EXP");
  return e && e[0] == '1';
}

static iron_status_t ew_unary_prepare(const iron_ir_op_t *op,
                                      iron_region_t *const *regions,
                                      void **out_params) {
  (void)regions;
  if (op->num_operands == 1 && op->operands[0]->type && ew_libm_exp() &&
      ew_find(kUnaryLibm, sizeof(kUnaryLibm) / sizeof(kUnaryLibm[0]),
              op->kind, op->operands[0]->type->dtype)) {
    return ew_prepare_table(op, kUnaryLibm,
                            sizeof(kUnaryLibm) / sizeof(kUnaryLibm[0]), 1,
                            out_params);
  }
  return ew_prepare_table(op, kUnary, sizeof(kUnary) / sizeof(kUnary[0]), 1,
                          out_params);
}

static iron_status_t ew_binary_prepare(const iron_ir_op_t *op,
                                       iron_region_t *const *regions,
                                       void **out_params) {
  (void)regions;
  return ew_prepare_table(op, kBinary, sizeof(kBinary) / sizeof(kBinary[0]),
                          2, out_params);
}

static iron_status_t ew_clamp_prepare(const iron_ir_op_t *op,
                                      iron_region_t *const *regions,
                                      void **out_params) {
  (void)regions;
  return ew_prepare_table(op, kClamp, sizeof(kClamp) / sizeof(kClamp[0]), 3,
                          out_params);
}

static iron_status_t ew_compare_prepare(const iron_ir_op_t *op,
                                        iron_region_t *const *regions,
                                        void **out_params) {
  (void)regions;
  IRON_RETURN_IF_ERROR_PLAIN(iron_ew_check_shapes(op, 2));
  iron_dtype_t in = ew_operand_dtype(op, 0);
  if (ew_operand_dtype(op, 1) != in) {
    return IRON_ERR(INVALID_ARGUMENT, "%s: operand dtypes differ", op->name);
  }
  if (op->results[0].type->dtype != IRON_DTYPE_PRED) {
    return IRON_ERR(INVALID_ARGUMENT, "%s: result must be i1", op->name);
  }
  int32_t dir = iron_ir_op_enum(op, "comparison_direction", -1);
  if (dir < IRON_CMP_EQ || dir > IRON_CMP_LT) {
    return IRON_ERR(INVALID_ARGUMENT, "%s: bad comparison_direction %d",
                    op->name, (int)dir);
  }
  int32_t type = iron_ir_op_enum(op, "compare_type", IRON_CMP_TYPE_NOTYPE);
  // Integers compare by their dtype's signedness (jax always emits the
  // matching SIGNED/UNSIGNED); floats honour TOTALORDER.
  bool total = type == IRON_CMP_TYPE_TOTALORDER && iron_dtype_is_float(in);
  // Narrow dtypes compare in their wide dtype (see ew_narrow.h).
  iron_dtype_t wide = iron_ew_narrow_wide(in);
  iron_dtype_t look = wide != IRON_DTYPE_INVALID ? wide : in;
  if (wide != IRON_DTYPE_INVALID) {
    total = type == IRON_CMP_TYPE_TOTALORDER && iron_dtype_is_float(wide);
  }
  for (size_t i = 0; i < sizeof(kCompare) / sizeof(kCompare[0]); ++i) {
    const ew_cmp_entry_t *e = &kCompare[i];
    if (e->dir == dir && e->total == total && e->dt == look) {
      if (look != in) {
        const iron_dtype_t ins[2] = {in, in}, wides[2] = {wide, wide};
        return iron_ew_narrow_wrap_create(2, ins, wides, IRON_DTYPE_PRED,
                                          IRON_DTYPE_PRED, e->fn, out_params);
      }
      return iron_ew_params_create(2, IRON_DTYPE_PRED, e->fn,
                                   IRON_EW_VARIANTS, out_params);
    }
  }
  return iron_ir_op_unimplemented(op, "for dtype %s, direction %d%s",
                                  iron_dtype_name(in), (int)dir,
                                  total ? " (TOTALORDER)" : "");
}

static iron_status_t ew_select_prepare(const iron_ir_op_t *op,
                                       iron_region_t *const *regions,
                                       void **out_params) {
  (void)regions;
  IRON_RETURN_IF_ERROR_PLAIN(iron_ew_check_shapes(op, 3));
  iron_dtype_t dt = op->results[0].type->dtype;
  if (ew_operand_dtype(op, 0) != IRON_DTYPE_PRED ||
      ew_operand_dtype(op, 1) != dt || ew_operand_dtype(op, 2) != dt) {
    return IRON_ERR(INVALID_ARGUMENT, "%s: expects (i1, T, T) -> T", op->name);
  }
  int idx;
  switch (iron_dtype_size(dt)) {
    case 1: idx = 0; break;
    case 2: idx = 1; break;
    case 4: idx = 2; break;
    case 8: idx = 3; break;
    case 16: idx = 4; break;
    default: return ew_refuse(op, dt);
  }
  return iron_ew_params_create(3, dt, kSelect[idx], IRON_EW_VARIANTS,
                               out_params);
}

// Params of the narrow-dtype ops (ew_narrow.h) start with their magic;
// iron_ew_params_t's is 0.
static iron_status_t ew_run(const iron_kernel_ctx_t *ctx, const void *params,
                            const iron_tensor_t *const *inputs,
                            iron_tensor_t *const *outputs) {
  if (*(const uint32_t *)params == IRON_EW_WRAP_MAGIC) {
    return iron_ew_narrow_wrap_run(ctx, params, inputs, outputs);
  }
  return iron_ew_run(ctx, params, inputs, outputs);
}

static const iron_kernel_t kUnaryKernel = {
    .name = "elementwise_unary",
    .prepare = ew_unary_prepare,
    .run = ew_run,
    .destroy = NULL,
    .inplace_ok = true,
    .elementwise = true,
};
static const iron_kernel_t kBinaryKernel = {
    .name = "elementwise_binary",
    .prepare = ew_binary_prepare,
    .run = ew_run,
    .destroy = NULL,
    .inplace_ok = true,
    .elementwise = true,
};
static const iron_kernel_t kCompareKernel = {
    .name = "compare",
    .prepare = ew_compare_prepare,
    .run = ew_run,
    .destroy = NULL,
    .inplace_ok = true,
    .elementwise = true,
};
static const iron_kernel_t kSelectKernel = {
    .name = "select",
    .prepare = ew_select_prepare,
    .run = ew_run,
    .destroy = NULL,
    .inplace_ok = true,
    .elementwise = true,
};
static const iron_kernel_t kClampKernel = {
    .name = "clamp",
    .prepare = ew_clamp_prepare,
    .run = ew_run,
    .destroy = NULL,
    .inplace_ok = true,
    .elementwise = true,
};

void iron_host_register_elementwise(iron_kernel_table_t table) {
  for (size_t i = 0; i < sizeof(kUnary) / sizeof(kUnary[0]); ++i) {
    table[kUnary[i].op] = &kUnaryKernel;
  }
  for (size_t i = 0; i < sizeof(kBinary) / sizeof(kBinary[0]); ++i) {
    table[kBinary[i].op] = &kBinaryKernel;
  }
  // Ops in the element-wise classes with no loop at all (none today) still
  // get the kernel so that prepare names the op and dtype it refuses.
  for (int k = 0; k < IRON_OP_COUNT; ++k) {
    iron_op_class_t c = iron_op_kind_class((iron_op_kind_t)k);
    if (!table[k] && c == IRON_OP_CLASS_UNARY) table[k] = &kUnaryKernel;
    if (!table[k] && c == IRON_OP_CLASS_BINARY) table[k] = &kBinaryKernel;
  }
  table[IRON_OP_COMPARE] = &kCompareKernel;
  table[IRON_OP_SELECT] = &kSelectKernel;
  table[IRON_OP_CLAMP] = &kClampKernel;
}
