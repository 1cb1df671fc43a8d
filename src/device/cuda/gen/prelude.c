// The prelude every generated CUDA translation unit starts with (see
// prelude.h). C++17 compiled by NVRTC without any CUDA header: it declares
// its own fixed-width integers, complex types, f16/bf16 conversions, and
// the helpers that carry XLA:CPU's edge semantics (the same rules as the
// host kernels in src/device/host/ew_*.h: integer division by zero, shifts
// past the width, float -> int saturation, NaN-propagating max/min with
// -0 < +0, complex formulas). Helpers are overloaded by type, so the
// scalar emitter (scalar.c) writes one spelling for every dtype.
#include "device/cuda/gen/prelude.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cuda/gen/text.h"
#include "device/cuda/gen/types.h"

// Narrow floats (f8 family but f8E8M0FNU, f4E2M1FN, f6), one per byte:
// decode to double (NaNs keep their sign) and encode with
// round-to-nearest-even from double, as the host's ew_narrow.c (measured
// against XLA:CPU). kind: 0 IEEE-like, 1 FN (no inf, NaN all ones), 2 FNUZ
// (NaN = sign bit alone, no -0), 3 SAT (no inf/NaN: saturates, NaN -> sign
// bit alone). The formats are types.c's.
#define NARROW_FLOAT_HELPERS                                                   \
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

// The part that does not depend on the denormal mode.
static const char kPreludeBody[] =
    "typedef signed char int8_t;\n"
    "typedef short int16_t;\n"
    "typedef int int32_t;\n"
    "typedef long long int64_t;\n"
    "typedef unsigned char uint8_t;\n"
    "typedef unsigned short uint16_t;\n"
    "typedef unsigned int uint32_t;\n"
    "typedef unsigned long long uint64_t;\n"
    "#define IRON_D static __device__ __forceinline__\n"
    "struct __align__(8) iron_c64 { float re, im; };\n"
    "struct __align__(16) iron_c128 { double re, im; };\n"
    // 16-byte element for dtype-agnostic data movement (c128).
    "struct __align__(16) iron_b16 { uint64_t lo, hi; };\n"
    "#define IRON_INFF __int_as_float(0x7f800000)\n"
    "#define IRON_NANF __int_as_float(0x7fc00000)\n"
    "#define IRON_INF __longlong_as_double(0x7ff0000000000000LL)\n"
    "#define IRON_NAN __longlong_as_double(0x7ff8000000000000LL)\n"
    // --- f16/bf16 (stored as uint16_t bits) <-> float. Two f16 loads:
    // iron_ld_f16 is bit-exact with src/base/half.h, NaN payloads included
    // (kernels that hand values on: reductions, sorts, windows, scatters,
    // loops); iron_ld_f16_hw is the PTX conversion, one instruction, for
    // the element-wise kernels (memory-bound: the software decode would
    // make f16 kernels ALU-bound).
    "IRON_D float iron_ld_f16(uint16_t h) {\n"
    "  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;\n"
    "  uint32_t e = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;\n"
    "  if (e == 0) {\n"
    "    if (man == 0) { u = sign; } else {\n"
    "      int k = -1;\n"
    "      do { k++; man <<= 1; } while ((man & 0x400u) == 0);\n"
    "      man &= 0x3ffu;\n"
    "      u = sign | ((uint32_t)(127 - 15 - k) << 23) | (man << 13);\n"
    "    }\n"
    "  } else if (e == 0x1f) { u = sign | 0x7f800000u | (man << 13); }\n"
    "  else { u = sign | ((e + 127 - 15) << 23) | (man << 13); }\n"
    "  return __uint_as_float(u);\n"
    "}\n"
    "IRON_D float iron_ld_f16_hw(uint16_t h) {\n"
    "#ifndef IRON_CUDA_EMU\n"
    "  float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h));\n"
    "#else\n"
    "  float f = iron_emu_h2f(h);\n"
    "#endif\n"
    "  return f;\n"
    "}\n"
    "IRON_D float iron_ld_bf16(uint16_t h) {\n"
    "  return __uint_as_float((uint32_t)h << 16);\n"
    "}\n"
    // Round to nearest even; NaN keeps its top mantissa bits and is made
    // quiet, as the host does.
    "IRON_D uint16_t iron_st_f16(float f) {\n"
    "  uint32_t u = __float_as_uint(f);\n"
    "  if ((u & 0x7fffffffu) > 0x7f800000u)\n"
    "    return (uint16_t)(((u >> 16) & 0x8000u) | 0x7e00u |\n"
    "                      (((u & 0x7fffffffu) >> 13) & 0x3ffu));\n"
    "  uint16_t h;\n"
    "#ifndef IRON_CUDA_EMU\n"
    "  asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n"
    "#else\n"
    "  h = iron_emu_f2h(f);\n"
    "#endif\n"
    "  return h;\n"
    "}\n"
    "IRON_D uint16_t iron_st_bf16(float f) {\n"
    "  uint32_t u = __float_as_uint(f);\n"
    "  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);\n"
    "  u += 0x7fffu + ((u >> 16) & 1u);\n"
    "  return (uint16_t)(u >> 16);\n"
    "}\n"
    // A float that holds a bf16 value exactly (rounded already): its bits.
    "IRON_D uint16_t iron_st_bf16r(float f) {\n"
    "  return (uint16_t)(__float_as_uint(f) >> 16);\n"
    "}\n"
    // f16/bf16 values of element-wise ops live in float registers, rounded
    // after every op. IRON_HW_ROUND (IRON_CUDA_HW_ROUND, on by default):
    // one cvt.rn instruction each way, the same round-to-nearest-even as
    // the software path for every non-NaN value (denormals kept: no .ftz);
    // a NaN comes out as the canonical NaN, as every GPU float op returns
    // it, where the software path keeps its top payload bits (stores,
    // iron_st_*, still keep them). The software rounding cost ~8 integer
    // instructions per op: chains of bf16 ops were ALU-bound on it.
    "IRON_D float iron_rnd_f16(float f) {\n"
    "#if IRON_HW_ROUND && !defined(IRON_CUDA_EMU)\n"
    "  uint16_t h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n"
    "  return iron_ld_f16_hw(h);\n"
    "#elif IRON_HW_ROUND\n"
    "  return f != f ? iron_ld_f16_hw(0x7fffu) : iron_ld_f16_hw(iron_emu_f2h(f));\n"
    "#else\n"
    "  return iron_ld_f16_hw(iron_st_f16(f));\n"
    "#endif\n"
    "}\n"
    "IRON_D float iron_rnd_bf16(float f) {\n"
    // cvt.rn.bf16.f32 needs sm_80.
    "#if IRON_HW_ROUND && !defined(IRON_CUDA_EMU) && __CUDA_ARCH__ >= 800\n"
    "  uint16_t h; asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n"
    "  return iron_ld_bf16(h);\n"
    "#elif IRON_HW_ROUND && defined(IRON_CUDA_EMU)\n"
    "  return f != f ? iron_ld_bf16(0x7fffu) : iron_ld_bf16(iron_st_bf16(f));\n"
    "#else\n"
    "  return iron_ld_bf16(iron_st_bf16(f));\n"
    "#endif\n"
    "}\n"
    // --- denormals (XLA:CPU reads them as zero in most float ops).
    // One mul.ftz (x * 1 with the flush) instead of a compare and a
    // select (IRON_FTZ_OPS, IRON_CUDA_FTZ_OPS): the same value, NaN
    // payloads aside.
    "IRON_D float iron_daz(float x) {\n"
    "#if IRON_FTZ_OPS && !defined(IRON_CUDA_EMU)\n"
    "  float y; asm(\"mul.ftz.f32 %0, %1, 0f3F800000;\" : \"=f\"(y) : \"f\"(x));\n"
    "  return y;\n"
    "#else\n"
    "  return fabsf(x) < 1.17549435e-38f ? x * 0.0f : x;\n"
    "#endif\n"
    "}\n"
    "IRON_D double iron_daz(double x) {\n"
    "  return fabs(x) < 2.2250738585072014e-308 ? x * 0.0 : x;\n"
    "}\n"
    "IRON_D bool iron_signbit(float x) { return (__float_as_uint(x) >> 31) != 0; }\n"
    "IRON_D bool iron_signbit(double x) { return __double_as_longlong(x) < 0; }\n"
    "IRON_D bool iron_isnan(float x) { return x != x; }\n"
    "IRON_D bool iron_isnan(double x) { return x != x; }\n"
    "IRON_D bool iron_isinf(float x) { return fabsf(x) == IRON_INFF; }\n"
    "IRON_D bool iron_isinf(double x) { return fabs(x) == IRON_INF; }\n"
    "IRON_D bool iron_isfinite(float x) {\n"
    "  return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u;\n"
    "}\n"
    "IRON_D bool iron_isfinite(double x) {\n"
    "  return (__double_as_longlong(x) & 0x7ff0000000000000LL) !=\n"
    "         0x7ff0000000000000LL;\n"
    "}\n"
    // --- float selects. IRON_PICK(c, a, b) is c ? a : b. The GPU
    // compares (setp, which reads denormals as zero under -ftz) and then
    // moves the chosen operand's bits (selp): a denormal winner comes out
    // unflushed. The CPU emulation does the same through integer bits;
    // `x > y ? x : y` on floats would compile to maxss, which flushes
    // under the emulation's DAZ and so would hide a missing flush.
    "#ifdef IRON_CUDA_EMU\n"
    "IRON_D float iron_pick(bool c, float a, float b) {\n"
    "  return __uint_as_float(c ? __float_as_uint(a) : __float_as_uint(b));\n"
    "}\n"
    "IRON_D double iron_pick(bool c, double a, double b) {\n"
    "  return __longlong_as_double(c ? __double_as_longlong(a)\n"
    "                                : __double_as_longlong(b));\n"
    "}\n"
    "#define IRON_PICK(c, a, b) iron_pick((c), (a), (b))\n"
    "#else\n"
    "#define IRON_PICK(c, a, b) ((c) ? (a) : (b))\n"
    "#endif\n"
    // --- float helpers (float and double overloads).
    // max/min propagating NaN (x's first), -0 < +0. IRON_SELECT_MINMAX
    // (IRON_CUDA_SELECT_MINMAX): the same tests as selects, no branches:
    // the early returns compiled to 3 branches and a reconvergence per
    // call, the inner loop of a row max (softmax).
    "#if IRON_SELECT_MINMAX\n"
    "#define IRON_FLOAT_MINMAX(R)                                         \\\n"
    "  IRON_D R iron_fmax(R x, R y) {                                     \\\n"
    "    R m = IRON_PICK(x > y, x, y);                                    \\\n"
    "    m = x == y ? (iron_signbit(x) ? y : x) : m;                      \\\n"
    "    m = y != y ? y : m;                                              \\\n"
    "    return x != x ? x : m;                                           \\\n"
    "  }                                                                  \\\n"
    "  IRON_D R iron_fmin(R x, R y) {                                     \\\n"
    "    R m = IRON_PICK(x < y, x, y);                                    \\\n"
    "    m = x == y ? (iron_signbit(x) ? x : y) : m;                      \\\n"
    "    m = y != y ? y : m;                                              \\\n"
    "    return x != x ? x : m;                                           \\\n"
    "  }\n"
    "#else\n"
    "#define IRON_FLOAT_MINMAX(R)                                         \\\n"
    "  IRON_D R iron_fmax(R x, R y) {                                     \\\n"
    "    if (x != x) return x; if (y != y) return y;                      \\\n"
    "    if (x == y) return iron_signbit(x) ? y : x;                      \\\n"
    "    return IRON_PICK(x > y, x, y);                                   \\\n"
    "  }                                                                  \\\n"
    "  IRON_D R iron_fmin(R x, R y) {                                     \\\n"
    "    if (x != x) return x; if (y != y) return y;                      \\\n"
    "    if (x == y) return iron_signbit(x) ? x : y;                      \\\n"
    "    return IRON_PICK(x < y, x, y);                                   \\\n"
    "  }\n"
    "#endif\n"
    "IRON_FLOAT_MINMAX(float)\n"
    "IRON_FLOAT_MINMAX(double)\n"
    // Max/min as the combiner of a kernel that folds values itself
    // (cumulative scans, row reduces, scatter): in the flush mode a
    // denormal operand reads as zero, as XLA:CPU's DAZ has it (the
    // compare and select above would return a denormal winner's bits).
    "#if IRON_FLUSH\n"
    "#define IRON_FLOAT_ZMINMAX(R) \\\n"
    "  IRON_D R iron_zmax(R x, R y) { return iron_fmax(iron_daz(x), iron_daz(y)); } \\\n"
    "  IRON_D R iron_zmin(R x, R y) { return iron_fmin(iron_daz(x), iron_daz(y)); }\n"
    "#else\n"
    "#define IRON_FLOAT_ZMINMAX(R) \\\n"
    "  IRON_D R iron_zmax(R x, R y) { return iron_fmax(x, y); } \\\n"
    "  IRON_D R iron_zmin(R x, R y) { return iron_fmin(x, y); }\n"
    "#endif\n"
    "IRON_FLOAT_ZMINMAX(float)\n"
    "IRON_FLOAT_ZMINMAX(double)\n"
    "#define IRON_FLOAT_HELPERS(R, F)                                     \\\n"
    "  IRON_D R iron_fsign(R x) {                                         \\\n"
    "    return x > (R)0 ? (R)1 : x < (R)0 ? (R)-1 : x * (R)0;            \\\n"
    "  }                                                                  \\\n"
    "  IRON_D R iron_logistic(R x) { return (R)1 / ((R)1 + exp##F(-x)); } \\\n"
    "  IRON_D R iron_rsqrt(R x) { return (R)1 / sqrt##F(x); }\n"
    "IRON_FLOAT_HELPERS(float, f)\n"
    // XLA:CPU's remainder (libm's fmodf on a flushing thread) reads a
    // denormal divisor as zero (NaN), keeps a denormal dividend smaller
    // than the divisor (rem(d, 1) = d) and keeps an exact remainder that
    // is a denormal (rem(0.25, 2.4e-38)). Under -ftz fmodf would flush
    // the last two, so with IRON_FLUSH the remainder is taken in f64
    // (exact, never flushed) and a denormal result's float bits are built
    // by hand (a conversion to float would flush it). |x| < |y| (false
    // for NaNs) returns x as is.
    "IRON_D float iron_frem(float x, float y) {\n"
    "#if IRON_FLUSH\n"
    "  y = iron_daz(y);\n"
    "  if (fabsf(x) < fabsf(y)) return x;\n"
    "  double r = fmod((double)x, (double)y), a = fabs(r);\n"
    "  if (!(a < 0x1p-126)) return (float)r;\n"
    "  return __uint_as_float((unsigned)(a * 0x1p149) |\n"
    "                         (__double_as_longlong(r) < 0 ? 0x80000000u : 0u));\n"
    "#else\n"
    "  return fabsf(x) < fabsf(y) ? x : fmodf(x, y);\n"
    "#endif\n"
    "}\n"
    "IRON_FLOAT_HELPERS(double, )\n"
    // float -> int: NaN -> 0, saturate at the bounds (XLA:CPU).
    "template <class T> IRON_D T iron_f2s(double v, int bits) {\n"
    "  double lo = -ldexp(1.0, bits - 1);\n"
    "  if (v != v) return (T)0;\n"
    "  if (v <= lo) return bits == 64 ? (T)(-9223372036854775807LL - 1)\n"
    "                                 : (T)(int64_t)lo;\n"
    "  if (v >= -lo) return bits == 64 ? (T)9223372036854775807LL\n"
    "                                  : (T)((int64_t)(-lo) - 1);\n"
    "  return (T)(int64_t)v;\n"
    "}\n"
    "template <class T> IRON_D T iron_f2u(double v, int bits) {\n"
    "  double hi = ldexp(1.0, bits);\n"
    "  if (v != v || v <= 0) return (T)0;\n"
    "  if (v >= hi) return bits == 64 ? (T)~0ULL : (T)((uint64_t)hi - 1);\n"
    "  return (T)(uint64_t)v;\n"
    "}\n"
    // TOTALORDER keys: sign-magnitude bits as two's complement order.
    "IRON_D int32_t iron_tkey(float f) {\n"
    "  int32_t k = (int32_t)__float_as_uint(f);\n"
    "  return k < 0 ? (k ^ 0x7fffffff) : k;\n"
    "}\n"
    "IRON_D int64_t iron_tkey(double f) {\n"
    "  int64_t k = __double_as_longlong(f);\n"
    "  return k < 0 ? (k ^ 0x7fffffffffffffffLL) : k;\n"
    "}\n"
    "IRON_D int16_t iron_tkey16(uint16_t b) {\n"
    "  int16_t k = (int16_t)b;\n"
    "  return k < 0 ? (int16_t)(k ^ 0x7fff) : k;\n"
    "}\n"
    // --- integers: wrap-around arithmetic; x/0 = -1 (all ones);
    // MIN/-1 = MIN; x%0 = x; MIN%-1 = 0; shifts by >= width (or negative)
    // give 0, or the sign fill for arithmetic right shifts.
    "template <class T> struct iron_it;\n"
    "#define IRON_IT(T, U, S, W, B)                                       \\\n"
    "  template <> struct iron_it<T> {                                    \\\n"
    "    typedef U u; typedef S s; typedef W w; enum { bits = B };        \\\n"
    "  };\n"
    "IRON_IT(int8_t, uint8_t, int8_t, uint32_t, 8)\n"
    "IRON_IT(int16_t, uint16_t, int16_t, uint32_t, 16)\n"
    "IRON_IT(int32_t, uint32_t, int32_t, uint32_t, 32)\n"
    "IRON_IT(int64_t, uint64_t, int64_t, uint64_t, 64)\n"
    "IRON_IT(uint8_t, uint8_t, int8_t, uint32_t, 8)\n"
    "IRON_IT(uint16_t, uint16_t, int16_t, uint32_t, 16)\n"
    "IRON_IT(uint32_t, uint32_t, int32_t, uint32_t, 32)\n"
    "IRON_IT(uint64_t, uint64_t, int64_t, uint64_t, 64)\n"
    "#define IRON_ITY(T) typedef typename iron_it<T>::u U; \\\n"
    "  typedef typename iron_it<T>::w W; typedef typename iron_it<T>::s S; \\\n"
    "  (void)sizeof(S); enum { B = iron_it<T>::bits }\n"
    "template <class T> IRON_D T iron_iadd(T x, T y) {\n"
    "  IRON_ITY(T); return (T)(U)((W)(U)x + (W)(U)y);\n"
    "}\n"
    "template <class T> IRON_D T iron_isub(T x, T y) {\n"
    "  IRON_ITY(T); return (T)(U)((W)(U)x - (W)(U)y);\n"
    "}\n"
    "template <class T> IRON_D T iron_imul(T x, T y) {\n"
    "  IRON_ITY(T); return (T)(U)((W)(U)x * (W)(U)y);\n"
    "}\n"
    // Integer negation as `~x + 1` in inline PTX (IRON_NEG_PTX;
    // IRON_CUDA_NEG_PTX=0 leaves it to NVRTC as plain C). ptxas of CUDA
    // 13.0 (sm_90a) miscompiles a plain negation in two ways, both wrong
    // on the GPU only when optimized (-G compiles them right;
    // scripts/debug/ptxas_probe.py): a 16-bit negation whose result is
    // later widened comes out +32768 at -32768 (neg.s16 / sub.s16 from 0:
    // the sign extension is lost), and a negation feeding an unrolled
    // min/max chain is lost (min(-x) over a row gave min(x); by the SASS,
    // it is folded into the middle operand of a three-input VIMNMX3).
    // XLA:GPU has the first fault too. `not` then `add` is not a
    // negation to ptxas's folding; the narrow types go through 32 bits.
    "IRON_D uint32_t iron_neg32(uint32_t x) {\n"
    "#if IRON_NEG_PTX && !defined(IRON_CUDA_EMU)\n"
    "  uint32_t r;\n"
    "  asm(\"{ not.b32 %0, %1; add.u32 %0, %0, 1; }\" : \"=r\"(r) : \"r\"(x));\n"
    "  return r;\n"
    "#else\n"
    "  return 0u - x;\n"
    "#endif\n"
    "}\n"
    "IRON_D uint64_t iron_neg64(uint64_t x) {\n"
    "#if IRON_NEG_PTX && !defined(IRON_CUDA_EMU)\n"
    "  uint64_t r;\n"
    "  asm(\"{ not.b64 %0, %1; add.u64 %0, %0, 1; }\" : \"=l\"(r) : \"l\"(x));\n"
    "  return r;\n"
    "#else\n"
    "  return 0ull - x;\n"
    "#endif\n"
    "}\n"
    "template <class T> IRON_D T iron_ineg(T x) {\n"
    "  IRON_ITY(T);\n"
    "  if (sizeof(T) == 8) return (T)(U)iron_neg64((uint64_t)(U)x);\n"
    "  return (T)(U)iron_neg32((uint32_t)(U)x);\n"
    "}\n"
    "template <class T> IRON_D T iron_inot(T x) { return (T)~x; }\n"
    "template <class T> IRON_D T iron_idiv(T x, T y) {\n"
    "  IRON_ITY(T);\n"
    "  if ((T)-1 > (T)0) return y == 0 ? (T)~(U)0 : (T)(x / y);\n"
    "  if (y == 0) return (T)-1;\n"
    "  if (y == (T)-1) return iron_ineg(x);\n"
    "  return (T)(x / y);\n"
    "}\n"
    "template <class T> IRON_D T iron_irem(T x, T y) {\n"
    "  if (y == 0) return x;\n"
    "  if ((T)-1 < (T)0 && y == (T)-1) return (T)0;\n"
    "  return (T)(x % y);\n"
    "}\n"
    "template <class T> IRON_D T iron_shl(T x, T y) {\n"
    "  IRON_ITY(T);\n"
    "  return (W)(U)y >= (W)B ? (T)0 : (T)(U)((W)(U)x << (W)(U)y);\n"
    "}\n"
    "template <class T> IRON_D T iron_shrl(T x, T y) {\n"
    "  IRON_ITY(T);\n"
    "  return (W)(U)y >= (W)B ? (T)0 : (T)(U)((W)(U)x >> (W)(U)y);\n"
    "}\n"
    "template <class T> IRON_D T iron_shra(T x, T y) {\n"
    "  IRON_ITY(T);\n"
    "  if ((W)(U)y >= (W)B) return (S)x < 0 ? (T)~(U)0 : (T)0;\n"
    "  return (T)(U)(S)((S)x >> (int)(U)y);\n"
    "}\n"
    "template <class T> IRON_D T iron_iabs(T x) {\n"
    "  return x < (T)0 ? iron_ineg(x) : x;\n"
    "}\n"
    "template <class T> IRON_D T iron_isign(T x) {\n"
    "  return (T)((x > (T)0) - (x < (T)0));\n"
    "}\n"
    "template <class T> IRON_D T iron_imax(T x, T y) { return x > y ? x : y; }\n"
    "template <class T> IRON_D T iron_imin(T x, T y) { return x < y ? x : y; }\n"
    "template <class T> IRON_D T iron_popcnt(T x) {\n"
    "  IRON_ITY(T); return (T)__popcll((unsigned long long)(U)x);\n"
    "}\n"
    "template <class T> IRON_D T iron_clz(T x) {\n"
    "  IRON_ITY(T); unsigned long long u = (unsigned long long)(U)x;\n"
    "  return (T)(u == 0 ? (int)B : __clzll((long long)u) - (64 - (int)B));\n"
    "}\n"
    // XLA:CPU squares over the low 6 bits of the exponent only, and treats
    // exponents with the top bit set as negative (even for unsigned types):
    // 0, except bases 1 and -1.
    "template <class T> IRON_D T iron_ipow(T xb, T xe) {\n"
    "  IRON_ITY(T); U base = (U)xb, e = (U)xe;\n"
    "  if ((e >> (B - 1)) & 1) {\n"
    "    if (base == 1) return (T)1;\n"
    "    if (base == (U)~(U)0) return (e & 1) ? (T)base : (T)1;\n"
    "    return (T)0;\n"
    "  }\n"
    "  U r = 1;\n"
    "  for (int bit = 0; bit < 6; ++bit) {\n"
    "    if ((e >> bit) & 1) r = (U)((W)r * (W)base);\n"
    "    base = (U)((W)base * (W)base);\n"
    "  }\n"
    "  return (T)r;\n"
    "}\n"
    // --- complex (XLA:CPU's formulas, as src/device/host/ew_complex.h).
    "#define IRON_CPLX(C, R, F)                                           \\\n"
    "  IRON_D C iron_mk(R re, R im, C *) { C z; z.re = re; z.im = im; return z; } \\\n"
    "  IRON_D C iron_daz(C z) { z.re = iron_daz(z.re); z.im = iron_daz(z.im); return z; } \\\n"
    "  IRON_D C operator+(C a, C b) { C z; z.re = a.re + b.re; z.im = a.im + b.im; return z; } \\\n"
    "  IRON_D C operator-(C a, C b) { C z; z.re = a.re - b.re; z.im = a.im - b.im; return z; } \\\n"
    "  IRON_D C operator-(C a) { C z; z.re = -a.re; z.im = -a.im; return z; } \\\n"
    "  IRON_D bool operator==(C a, C b) { return a.re == b.re && a.im == b.im; } \\\n"
    "  IRON_D bool operator!=(C a, C b) { return !(a == b); }            \\\n"
    "  IRON_D C operator*(C x, C y) {                                     \\\n"
    "    C z; z.re = fma##F(x.re, y.re, -(x.im * y.im));                  \\\n"
    "    z.im = fma##F(x.re, y.im, x.im * y.re); return z;                \\\n"
    "  }                                                                  \\\n"
    "  IRON_D C operator/(C x, C y) {                                     \\\n"
    "    R a = x.re, b = x.im, c = y.re, d = y.im; C z;                   \\\n"
    "    if (c == 0 && d == 0) { z.re = a / (R)0; z.im = b / (R)0; return z; } \\\n"
    "    R re, im;                                                        \\\n"
    "    if (fabs##F(c) >= fabs##F(d)) {                                  \\\n"
    "      R r = d / c, den = c + d * r;                                  \\\n"
    "      re = (a + b * r) / den; im = (b - a * r) / den;                \\\n"
    "    } else {                                                         \\\n"
    "      R r = c / d, den = c * r + d;                                  \\\n"
    "      re = (a * r + b) / den; im = (b * r - a) / den;                \\\n"
    "    }                                                                \\\n"
    "    if (re != re && im != im) {                                      \\\n"
    "      if ((iron_isinf(a) || iron_isinf(b)) && iron_isfinite(c) && iron_isfinite(d)) { \\\n"
    "        a = copysign##F(iron_isinf(a) ? (R)1 : (R)0, a);             \\\n"
    "        b = copysign##F(iron_isinf(b) ? (R)1 : (R)0, b);             \\\n"
    "        re = (R)IRON_INF * (a * c + b * d);                          \\\n"
    "        im = (R)IRON_INF * (b * c - a * d);                          \\\n"
    "      } else if ((iron_isinf(c) || iron_isinf(d)) && iron_isfinite(a) && iron_isfinite(b)) { \\\n"
    "        c = copysign##F(iron_isinf(c) ? (R)1 : (R)0, c);             \\\n"
    "        d = copysign##F(iron_isinf(d) ? (R)1 : (R)0, d);             \\\n"
    "        re = (R)0 * (a * c + b * d);                                 \\\n"
    "        im = (R)0 * (b * c - a * d);                                 \\\n"
    "      }                                                              \\\n"
    "    }                                                                \\\n"
    "    z.re = re; z.im = im; return z;                                  \\\n"
    "  }                                                                  \\\n"
    "  IRON_D R iron_cabs(C x) {                                          \\\n"
    "    R a = fabs##F(x.re), b = fabs##F(x.im);                          \\\n"
    "    R mx = iron_fmax(a, b), mn = iron_fmin(a, b);                    \\\n"
    "    R q = mn / mx; R r = mx * sqrt##F((R)1 + q * q);                 \\\n"
    "    return r != r ? mn : r;                                          \\\n"
    "  }                                                                  \\\n"
    "  IRON_D C iron_csign(C x) {                                         \\\n"
    "    R m = iron_cabs(x); C z;                                         \\\n"
    "    if (m == 0) { z.re = 0; z.im = 0; return z; }                    \\\n"
    "    z.re = x.re / m; z.im = x.im / m; return z;                      \\\n"
    "  }                                                                  \\\n"
    "  IRON_D C iron_cexp(C x) {                                          \\\n"
    "    R e = exp##F(x.re); C z;                                         \\\n"
    "    if (x.im == 0) { z.re = e; z.im = x.im; return z; }              \\\n"
    "    z.re = e * cos##F(x.im); z.im = e * sin##F(x.im); return z;      \\\n"
    "  }                                                                  \\\n"
    "  IRON_D C iron_clog(C x) {                                          \\\n"
    "    C z; z.re = log##F(iron_cabs(x)); z.im = atan2##F(x.im, x.re);   \\\n"
    "    return z;                                                        \\\n"
    "  }                                                                  \\\n"
    "  IRON_D C iron_csin(C x) {                                          \\\n"
    "    C z; z.re = sin##F(x.re) * cosh##F(x.im);                        \\\n"
    "    z.im = cos##F(x.re) * sinh##F(x.im); return z;                   \\\n"
    "  }                                                                  \\\n"
    "  IRON_D C iron_ccos(C x) {                                          \\\n"
    "    C z; z.re = cos##F(x.re) * cosh##F(x.im);                        \\\n"
    "    z.im = -sin##F(x.re) * sinh##F(x.im); return z;                  \\\n"
    "  }                                                                  \\\n"
    "  IRON_D C iron_cexpm1(C x) {                                        \\\n"
    "    R a = x.re, b = x.im, s = sin##F(b * (R)0.5); C z;               \\\n"
    "    if (b == 0) { z.re = expm1##F(a); z.im = b; return z; }          \\\n"
    "    z.re = expm1##F(a) * cos##F(b) - (R)2 * s * s;                   \\\n"
    "    z.im = exp##F(a) * sin##F(b); return z;                          \\\n"
    "  }                                                                  \\\n"
    "  IRON_D C iron_clog1p(C x) {                                        \\\n"
    "    R a = x.re, b = x.im, re; C z;                                   \\\n"
    "    if (fabs##F(a) < (R)0.5 && fabs##F(b) < (R)0.5) {                \\\n"
    "      re = (R)0.5 * log1p##F(a * ((R)2 + a) + b * b);                \\\n"
    "    } else {                                                         \\\n"
    "      C w; w.re = a + (R)1; w.im = b; re = log##F(iron_cabs(w));     \\\n"
    "    }                                                                \\\n"
    "    z.re = re; z.im = atan2##F(b, a + (R)1); return z;               \\\n"
    "  }                                                                  \\\n"
    "  IRON_D C iron_clogistic(C x) {                                     \\\n"
    "    C one; one.re = 1; one.im = 0;                                   \\\n"
    "    return one / (one + iron_cexp(-x));                              \\\n"
    "  }                                                                  \\\n"
    "  IRON_D C iron_csqrt(C x) {                                         \\\n"
    "    R a = x.re, b = x.im; C z;                                       \\\n"
    "    if (a == 0 && b == 0) { z.re = 0; z.im = b; return z; }          \\\n"
    "    if (iron_isinf(b) && a == a) { z.re = (R)IRON_INF; z.im = b; return z; } \\\n"
    "    R t = sqrt##F((fabs##F(a) + iron_cabs(x)) * (R)0.5);             \\\n"
    "    if (a >= 0) { z.re = t; z.im = b / ((R)2 * t); return z; }       \\\n"
    "    z.re = fabs##F(b) / ((R)2 * t); z.im = b < 0 ? -t : t; return z; \\\n"
    "  }                                                                  \\\n"
    "  IRON_D C iron_crsqrt(C x) {                                        \\\n"
    "    C z;                                                             \\\n"
    "    if (x.re == 0 && x.im == 0) { z.re = (R)IRON_INF; z.im = (R)IRON_NAN; return z; } \\\n"
    "    if (iron_isinf(x.re) || iron_isinf(x.im)) { z.re = 0; z.im = 0; return z; } \\\n"
    "    R m = (R)1 / sqrt##F(iron_cabs(x));                              \\\n"
    "    R h = (R)-0.5 * atan2##F(x.im, x.re);                            \\\n"
    "    z.re = m * cos##F(h); z.im = m * sin##F(h); return z;            \\\n"
    "  }                                                                  \\\n"
    "  IRON_D C iron_cpow(C x, C y) {                                     \\\n"
    "    R a = x.re, b = x.im, c = y.re, d = y.im; C z;                   \\\n"
    "    if (a == 0 && b == 0) {                                          \\\n"
    "      if (c == 0 && d == 0) { z.re = 1; z.im = 0; return z; }        \\\n"
    "      if (d == 0 && c > 0) { z.re = 0; z.im = 0; return z; }         \\\n"
    "    }                                                                \\\n"
    "    R lr = log##F(iron_cabs(x)), th = atan2##F(b, a);                \\\n"
    "    R mag = exp##F(c * lr - d * th), ang = d * lr + c * th;          \\\n"
    "    z.re = mag * cos##F(ang); z.im = mag * sin##F(ang); return z;    \\\n"
    "  }                                                                  \\\n"
    /* Kahan's formula; large |re| avoids inf/inf. Infinite/NaN parts */
    /* as the host (glibc's C99 Annex G rules, and NaN + i NaN where an  */
    /* infinite/NaN imaginary part meets a zero real part, as XLA:CPU).  */
    "  IRON_D C iron_ctanh(C x) {                                         \\\n"
    "    R a = x.re, b = x.im; C z;                                       \\\n"
    "    if (!iron_isfinite(a) || !iron_isfinite(b)) {                    \\\n"
    "      if (iron_isinf(a)) {                                           \\\n"
    "        z.re = copysign##F((R)1, a);                                 \\\n"
    "        z.im = iron_isfinite(b) && fabs##F(b) > (R)1                 \\\n"
    "                   ? copysign##F((R)0, sin##F(b) * cos##F(b))        \\\n"
    "                   : copysign##F((R)0, b);                           \\\n"
    "      } else if (b == 0) {                                           \\\n"
    "        z = x;                                                       \\\n"
    "      } else {                                                       \\\n"
    "        z.re = (R)IRON_NAN; z.im = (R)IRON_NAN;                      \\\n"
    "      }                                                              \\\n"
    "      return z;                                                      \\\n"
    "    }                                                                \\\n"
    "    if (fabs##F(a) >= (R)22) {                                       \\\n"
    "      R e = exp##F(-fabs##F(a));                                     \\\n"
    "      z.re = copysign##F((R)1, a);                                   \\\n"
    "      z.im = (R)4 * sin##F(b) * cos##F(b) * e * e; return z;         \\\n"
    "    }                                                                \\\n"
    "    R t = tan##F(b), beta = (R)1 + t * t, s = sinh##F(a);            \\\n"
    "    R rho = sqrt##F((R)1 + s * s), den = (R)1 + beta * s * s;        \\\n"
    "    z.re = beta * rho * s / den; z.im = t / den; return z;           \\\n"
    "  }                                                                  \\\n"
    "  IRON_D C iron_ctan(C x) {                                          \\\n"
    "    C w; w.re = -x.im; w.im = x.re; C t = iron_ctanh(w);             \\\n"
    "    C z; z.re = t.im; z.im = -t.re; return z;                        \\\n"
    "  }                                                                  \\\n"
    /* GT/LT lexicographic; GE/LE on the real parts only (XLA:CPU). */
    "  IRON_D bool iron_cgt(C x, C y) {                                   \\\n"
    "    return x.re > y.re || (x.re == y.re && x.im > y.im);             \\\n"
    "  }                                                                  \\\n"
    "  IRON_D bool iron_clt(C x, C y) {                                   \\\n"
    "    return x.re < y.re || (x.re == y.re && x.im < y.im);             \\\n"
    "  }                                                                  \\\n"
    "  IRON_D bool iron_cge(C x, C y) { return x.re >= y.re; }            \\\n"
    "  IRON_D bool iron_cle(C x, C y) { return x.re <= y.re; }            \\\n"
    "  IRON_D C iron_cmax(C x, C y) { return iron_cge(x, y) ? x : y; }    \\\n"
    "  IRON_D C iron_cmin(C x, C y) { return iron_cle(x, y) ? x : y; }    \\\n"
    /* The host's reduce/scatter loops (reduce_fast.c) multiply with the */
    /* plain formula, no fma: region bodies of reductions use it.        */
    "  IRON_D C iron_cadd(C a, C b) { return a + b; }                     \\\n"
    "  IRON_D C iron_csub(C a, C b) { return a - b; }                     \\\n"
    "  IRON_D C iron_cmul_plain(C a, C b) {                               \\\n"
    "    C r; r.re = a.re * b.re - a.im * b.im;                           \\\n"
    "    r.im = a.re * b.im + a.im * b.re; return r;                      \\\n"
    "  }                                                                  \\\n"
    "  IRON_D C iron_shfl(C v, int d) {                                   \\\n"
    "    v.re = __shfl_down_sync(0xffffffffu, v.re, d);                   \\\n"
    "    v.im = __shfl_down_sync(0xffffffffu, v.im, d); return v;         \\\n"
    "  }\n"
    "IRON_CPLX(iron_c64, float, f)\n"
    "IRON_CPLX(iron_c128, double, )\n"
    // Narrow floats (f8 family, f4E2M1FN): NARROW_FLOAT_HELPERS above.
    NARROW_FLOAT_HELPERS
    // f8E8M0FNU (2^(b - 127), 0xff NaN), computed in f32 as XLA:CPU does;
    // the rules of the host's ew_narrow.c (e8m0_*): f32 bits of a value;
    // from f32 bits (exponent, +1 when the mantissa is >= 1.5; denormals
    // give 2^-126 above 0x400000, else 2^-127); from f64 directly.
    "IRON_D float iron_e8m0_ld(unsigned b) {\n"
    "  b &= 0xffu;\n"
    "  return __uint_as_float(b == 0xffu ? 0x7fc00000u\n"
    "                         : b == 0 ? 0x00400000u : b << 23);\n"
    "}\n"
    "IRON_D uint8_t iron_e8m0_st(float f) {\n"
    "  uint32_t b = __float_as_uint(f), e = (b >> 23) & 0xffu, m = b & 0x7fffffu;\n"
    "  if ((b >> 31) || e == 0xffu || (b & 0x7fffffffu) == 0) return 0xff;\n"
    "  if (e == 0) return m > 0x400000u ? 1 : 0;\n"
    "  uint32_t code = e + (m >= 0x400000u);\n"
    "  return code > 254 ? 0xff : (uint8_t)code;\n"
    "}\n"
    "IRON_D double iron_e8m0_f64(float f) {\n"
    "  uint32_t e = (__float_as_uint(f) >> 23) & 0xffu;\n"
    "  if (f != f || e == 0xffu) return IRON_NAN;\n"
    "  return ldexp(1.0, e == 0 ? -127 : (int)e - 127);\n"
    "}\n"
    "IRON_D uint8_t iron_e8m0_enc64(double x) {\n"
    "  if (!(x > 0) || x == IRON_INF || x < 0x1p-127) return 0xff;\n"
    "  if (x < 0x1p-126) return x > 0x1p-127 ? 1 : 0;\n"
    "  int ex; double m = 2 * frexp(x, &ex);\n"
    "  long long code = (long long)ex - 1 + 127 + (m >= 1.5);\n"
    "  return code > 254 ? 0xff : (uint8_t)code;\n"
    "}\n"
    // 4-bit ints (s4/u4) compute in 8 bits but count leading zeros and
    // shift right in 4 (XLA:CPU; the host's elementwise.c E_n4_*).
    "IRON_D int iron_n4sext(int v) { return ((v & 0xf) ^ 8) - 8; }\n"
    "IRON_D int iron_n4clz(int v) {\n"
    "  v &= 0xf; int n = 4; while (v) { v >>= 1; n--; } return n;\n"
    "}\n"
    "IRON_D int iron_n4shrl(int x, int y) {\n"
    "  return (y & 0xf) >= 4 ? 0 : (x & 0xf) >> (y & 0xf);\n"
    "}\n"
    "IRON_D int iron_n4shra(int x, int y) {\n"
    "  return iron_n4sext(x) >> ((y & 0xf) >= 4 ? 3 : (y & 0xf));\n"
    "}\n"
    // Narrow dtypes (one element per byte) as values of their compute
    // type (iron_cuda_type: s4 -> int8_t, u4 -> uint8_t, narrow floats ->
    // float): loads decode exactly; stores round a wide result (an f16 or
    // f32 value) to the narrow dtype as the host's convert does (floats
    // through f16 first, the value XLA:CPU's f16 op produced).
    "#define IRON_LD_S4(b) ((int8_t)((((int)(b) & 0xf) ^ 8) - 8))\n"
    "#define IRON_LD_U4(b) ((uint8_t)((int)(b) & 0xf))\n"
    "#define IRON_ST_N4(x) ((uint8_t)((int)(x) & 0xf))\n"
    "#define IRON_LD_NF_(b, e, m, bi, k) \\\n"
    "  ((float)iron_nf_decode((unsigned)(b), e, m, bi, k))\n"
    "#define IRON_ST_NF_(x, e, m, bi, k) \\\n"
    "  ((uint8_t)iron_nf_encode((double)iron_ld_f16(iron_st_f16(x)), e, m, bi, k))\n"
    // The f6 types have no f16 step (no arithmetic: their values are exact
    // already or come from a convert, which rounds from the source).
    "#define IRON_ST_NFD_(x, e, m, bi, k) \\\n"
    "  ((uint8_t)iron_nf_encode((double)(x), e, m, bi, k))\n"
    // (the per-dtype IRON_LD_<dtype>/IRON_ST_<dtype> follow the body)
    // Byte copy between objects (bit casts of unequal sizes).
    "IRON_D void iron_bitcopy(void *d, const void *s, int n) {\n"
    "  for (int i = 0; i < n; ++i)\n"
    "    ((unsigned char *)d)[i] = ((const unsigned char *)s)[i];\n"
    "}\n"
    // Warp shuffles of every scalar compute type (complex: with IRON_CPLX).
    "#define IRON_SHFL_(T, U) \\\n"
    "  IRON_D T iron_shfl(T v, int d) { \\\n"
    "    return (T)__shfl_down_sync(0xffffffffu, (U)v, d); }\n"
    "IRON_SHFL_(int8_t, int) IRON_SHFL_(uint8_t, int) IRON_SHFL_(int16_t, int)\n"
    "IRON_SHFL_(uint16_t, int) IRON_SHFL_(int32_t, int)\n"
    "IRON_SHFL_(uint32_t, unsigned) IRON_SHFL_(int64_t, long long)\n"
    "IRON_SHFL_(uint64_t, unsigned long long) IRON_SHFL_(float, float)\n"
    "IRON_SHFL_(double, double)\n"
    // V elements moved by one vector load/store.
    "template <class T, int V> struct alignas(sizeof(T) * V) iron_vec { T v[V]; };\n"
    // Grid-stride loop over [0, n).
    "#define IRON_LOOP(I, IDX, n) \\\n"
    "  for (IDX I = (IDX)blockIdx.x * blockDim.x + threadIdx.x; I < (IDX)(n); \\\n"
    "       I += (IDX)gridDim.x * blockDim.x)\n";


bool iron_cuda_flush_denormals(void) {
  static atomic_int g = -1;
  int f = atomic_load_explicit(&g, memory_order_relaxed);
  if (f < 0) {
    const char *e = getenv("IRON_CUDA_DENORMALS");
    f = !(e && strcmp(e, "keep") == 0);
    atomic_store_explicit(&g, f, memory_order_relaxed);
  }
  return f != 0;
}

bool iron_cuda_vectorize_enabled(void) {
  const char *e = getenv("IRON_CUDA_VECTORIZE");
  return !(e && strcmp(e, "0") == 0);
}

// Switches read once when the prelude is built: on unless set to "0".
static bool env_on(const char *name) {
  const char *e = getenv(name);
  return !(e && strcmp(e, "0") == 0);
}

bool iron_cuda_hw_round_enabled(void) {
  const char *e = getenv("IRON_CUDA_HW_ROUND");
  return !(e && strcmp(e, "0") == 0);
}

bool iron_cuda_ftz_ops_enabled(void) {
  const char *e = getenv("IRON_CUDA_FTZ_OPS");
  return !(e && strcmp(e, "0") == 0);
}

static char *g_prelude[2];
static pthread_once_t g_prelude_once = PTHREAD_ONCE_INIT;

// The head line (the denormal mode, read by cuda_compile.c), the body, then
// the narrow dtypes' load/store macros from the dtype table (types.c).
static void prelude_init(void) {
  for (int ftz = 0; ftz < 2; ++ftz) {
    iron_cuda_text_t t;
    iron_cuda_text_init(&t);
    iron_cuda_text_printf(&t,
                          "// ironjax generated CUDA C (prelude v2, ftz=%d)\n"
                          "#define IRON_FLUSH %d\n"
                          "#define IRON_HW_ROUND %d\n#define IRON_FTZ_OPS %d\n"
                          "#define IRON_SELECT_MINMAX %d\n"
                          "#define IRON_NEG_PTX %d\n%s",
                          ftz, ftz, iron_cuda_hw_round_enabled() ? 1 : 0,
                          iron_cuda_ftz_ops_enabled() ? 1 : 0,
                          env_on("IRON_CUDA_SELECT_MINMAX") ? 1 : 0,
                          env_on("IRON_CUDA_NEG_PTX") ? 1 : 0, kPreludeBody);
    iron_cuda_prelude_narrow_macros(&t);
    char *p = NULL;
    if (iron_cuda_text_finish(&t, &p) == IRON_OK) g_prelude[ftz] = p;
  }
}

const char *iron_cuda_prelude(void) {
  // The first line names the denormal mode, which also picks NVRTC's -ftz:
  // sources (and so cache keys) differ between the modes.
  pthread_once(&g_prelude_once, prelude_init);
  int ftz = iron_cuda_flush_denormals() ? 1 : 0;
  // Allocation failure (never in practice) leaves no prelude: generated
  // sources then fail to compile, naming an undefined helper.
  return g_prelude[ftz] ? g_prelude[ftz] : "";
}
