// Narrow float values (narrow_float.h).
//
// Semantics measured on jax 0.10.2's CPU backend (tests/gen_ew_vectors.py
// --narrow): floats round to nearest even directly from the source (f64
// too, no double rounding); overflow gives inf (IEEE-like formats), NaN
// (FN: S.1111.111; FNUZ: 0x80) or saturates (f4E2M1FN, which turns NaN into
// 0x8); FNUZ has no -0. f6E2M3FN and f6E3M2FN (no inf, no NaN) convert like
// f4E2M1FN: round to nearest even, overflow saturates, NaN -> the sign bit
// alone (ml_dtypes' rounding; see src/device/host/ew_narrow.c for what
// XLA:CPU does with them).
#include "base/narrow_float.h"

#include <math.h>
#include <string.h>

#include "base/half.h"

static const iron_narrow_format_t kFormats[] = {
    {IRON_DTYPE_F8E5M2, 5, 2, 15, IRON_NARROW_IEEE},
    {IRON_DTYPE_F8E4M3, 4, 3, 7, IRON_NARROW_IEEE},
    {IRON_DTYPE_F8E3M4, 3, 4, 3, IRON_NARROW_IEEE},
    {IRON_DTYPE_F8E4M3FN, 4, 3, 7, IRON_NARROW_FN},
    {IRON_DTYPE_F8E4M3FNUZ, 4, 3, 8, IRON_NARROW_FNUZ},
    {IRON_DTYPE_F8E5M2FNUZ, 5, 2, 16, IRON_NARROW_FNUZ},
    {IRON_DTYPE_F8E4M3B11FNUZ, 4, 3, 11, IRON_NARROW_FNUZ},
    {IRON_DTYPE_F4E2M1FN, 2, 1, 1, IRON_NARROW_SAT},
    {IRON_DTYPE_F6E2M3FN, 2, 3, 1, IRON_NARROW_SAT},
    {IRON_DTYPE_F6E3M2FN, 3, 2, 3, IRON_NARROW_SAT},
};

bool iron_narrow_is_f6(iron_dtype_t dt) {
  return dt == IRON_DTYPE_F6E2M3FN || dt == IRON_DTYPE_F6E3M2FN;
}
#define NUM_FORMATS (sizeof(kFormats) / sizeof(kFormats[0]))

const iron_narrow_format_t *iron_narrow_format(iron_dtype_t dt) {
  for (size_t i = 0; i < NUM_FORMATS; ++i) {
    if (kFormats[i].dtype == dt) return &kFormats[i];
  }
  return NULL;
}

double iron_narrow_format_decode(const iron_narrow_format_t *f, unsigned bits) {
  int nbits = 1 + f->ebits + f->mbits;
  unsigned emask = (1u << f->ebits) - 1, mmask = (1u << f->mbits) - 1;
  bits &= (1u << nbits) - 1;
  unsigned sign = bits >> (nbits - 1);
  unsigned e = (bits >> f->mbits) & emask, m = bits & mmask;
  if (f->kind == IRON_NARROW_FNUZ && bits == 1u << (nbits - 1)) return NAN;
  // NaNs keep their sign (XLA:CPU: f8E5M2 0xff -> f32 0xffc00000); FNUZ's
  // NaN (the sign bit alone) reads as +NaN.
  if (f->kind == IRON_NARROW_IEEE && e == emask) {
    return m ? (sign ? -NAN : NAN) : sign ? -INFINITY : INFINITY;
  }
  if (f->kind == IRON_NARROW_FN && e == emask && m == mmask)
    return sign ? -NAN : NAN;
  double v = e == 0 ? ldexp((double)m, 1 - f->bias - f->mbits)
                    : ldexp((double)((1u << f->mbits) + m),
                            (int)e - f->bias - f->mbits);
  return sign ? -v : v;
}

uint8_t iron_narrow_format_encode(const iron_narrow_format_t *f, double x) {
  int nbits = 1 + f->ebits + f->mbits;
  unsigned emask = (1u << f->ebits) - 1, mmask = (1u << f->mbits) - 1;
  unsigned sbit = 1u << (nbits - 1);
  unsigned sign = signbit(x) ? sbit : 0;
  // Largest finite encoding (without sign).
  unsigned maxbits;
  switch (f->kind) {
    case IRON_NARROW_IEEE:
      maxbits = ((emask - 1) << f->mbits) | mmask;
      break;
    case IRON_NARROW_FN:
      maxbits = (emask << f->mbits) | (mmask - 1);
      break;
    default:
      maxbits = (emask << f->mbits) | mmask;
      break;
  }
  unsigned nan_bits = f->kind == IRON_NARROW_IEEE
                          ? (emask << f->mbits) | (1u << (f->mbits - 1))
                      : f->kind == IRON_NARROW_FN ? (emask << f->mbits) | mmask
                                                  : 0;
  if (isnan(x)) {
    if (f->kind == IRON_NARROW_FNUZ || f->kind == IRON_NARROW_SAT)
      return (uint8_t)sbit;
    return (uint8_t)(sign | nan_bits);
  }
  unsigned overflow = f->kind == IRON_NARROW_IEEE   ? sign | (emask << f->mbits)
                      : f->kind == IRON_NARROW_FN   ? sign | nan_bits
                      : f->kind == IRON_NARROW_FNUZ ? sbit
                                                    : sign | maxbits;
  double a = fabs(x);
  if (isinf(a)) return (uint8_t)overflow;
  if (a == 0) return (uint8_t)(f->kind == IRON_NARROW_FNUZ ? 0 : sign);
  int ex;
  frexp(a, &ex);
  int e = ex - 1, emin = 1 - f->bias;
  int qexp = (e < emin ? emin : e) - f->mbits;
  double q = nearbyint(ldexp(a, -qexp));  // round to nearest even
  if (q == 0) return (uint8_t)(f->kind == IRON_NARROW_FNUZ ? 0 : sign);
  if (q >= (double)(2u << f->mbits)) {  // rounding carried into the exponent
    q /= 2;
    qexp++;
  }
  unsigned qi = (unsigned)q, enc;
  if (qi >= (1u << f->mbits)) {
    long biased = (long)qexp + f->mbits + f->bias;
    if (biased > (long)emask) return (uint8_t)overflow;
    enc = ((unsigned)biased << f->mbits) | (qi - (1u << f->mbits));
  } else {
    enc = qi;  // subnormal
  }
  if (enc > maxbits) return (uint8_t)overflow;
  return (uint8_t)(sign | enc);
}

// f8E8M0FNU: an unsigned power of two, 2^(bits - 127); 0xff is NaN (there
// is no zero). Converting to it, as measured on XLA:CPU (and ml_dtypes):
// NaN, infinities, zeros and negative values give NaN. From f32 bits (and
// bf16, which are f32 bits): a normal value takes its exponent, plus one
// when the mantissa is >= 1.5 (halfway up), NaN past 2^127; a denormal gives
// 2^-126 when its mantissa field is above 0x400000, else 2^-127. From f64
// (and, through f64, every other dtype), not through f32, which would round
// twice: the same rule on the f64 value, and below 2^-126: 2^-126 above
// 2^-127, 2^-127 at it, NaN below it.
uint8_t iron_e8m0_from_f32_bits(uint32_t b) {
  uint32_t e = (b >> 23) & 0xffu, m = b & 0x7fffffu;
  if ((b >> 31) || e == 0xffu || (b & 0x7fffffffu) == 0) return 0xff;
  if (e == 0) return m > 0x400000u ? 1 : 0;
  uint32_t code = e + (m >= 0x400000u);
  return code > 254 ? 0xff : (uint8_t)code;
}

uint8_t iron_e8m0_from_f64(double x) {
  if (!(x > 0) || isinf(x) || x < 0x1p-127) return 0xff;
  if (x < 0x1p-126) return x > 0x1p-127 ? 1 : 0;
  int ex;
  double m = 2 * frexp(x, &ex);  // x = m * 2^(ex - 1), 1 <= m < 2
  long code = (long)ex - 1 + 127 + (m >= 1.5);
  return code > 254 ? 0xff : (uint8_t)code;
}

// The f32 bits of an f8E8M0FNU value (2^-127 is an f32 denormal, which a
// double -> float conversion would flush under the kernels' FTZ mode).
uint32_t iron_e8m0_to_f32_bits(unsigned bits) {
  bits &= 0xffu;
  if (bits == 0xffu) return 0x7fc00000u;
  return bits == 0 ? 0x00400000u : (uint32_t)bits << 23;
}

double iron_e8m0_decode(unsigned bits) {
  bits &= 0xffu;
  return bits == 0xffu ? NAN : ldexp(1.0, (int)bits - 127);
}

bool iron_narrow_float_is(iron_dtype_t dt) {
  return iron_narrow_format(dt) != NULL && !iron_narrow_is_f6(dt);
}

double iron_narrow_float_decode(iron_dtype_t dt, unsigned bits) {
  const iron_narrow_format_t *f = iron_narrow_format(dt);
  return f ? iron_narrow_format_decode(f, bits) : NAN;
}

uint8_t iron_narrow_float_encode(iron_dtype_t dt, double v) {
  const iron_narrow_format_t *f = iron_narrow_format(dt);
  return f ? iron_narrow_format_encode(f, v) : 0;
}

uint8_t iron_narrow_float_store_f32(iron_dtype_t dt, float v) {
  const iron_narrow_format_t *f = iron_narrow_format(dt);
  if (!f) return 0;
  double h = iron_f16_to_f32(iron_f32_to_f16(v));
  // f16 NaN -> f8E5M2 is 0x7f whatever the sign (XLA:CPU; the host's
  // convert does the same, ew_narrow.c nan_all_ones).
  if (isnan(h) && dt == IRON_DTYPE_F8E5M2) return 0x7f;
  return iron_narrow_format_encode(f, h);
}
