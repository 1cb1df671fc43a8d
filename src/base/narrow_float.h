// Values of the narrow float dtypes (f8 family, f4E2M1FN, f6E2M3FN,
// f6E3M2FN, f8E8M0FNU), one element per byte in the low bits as ml_dtypes
// stores them: their formats, decoding to double and encoding (round to
// nearest even, with each format's overflow and NaN rules), as measured on
// XLA:CPU (narrow_float.c says what was measured). Used by the host's
// convert, iota and dot/convolution kernels and by tests; the devices'
// dtype rules that build on these live with their op plans.
#ifndef IRON_BASE_NARROW_FLOAT_H_
#define IRON_BASE_NARROW_FLOAT_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

// How a format spends its all-ones exponent (the CUDA generator's narrow
// float table uses the same numbers).
typedef enum iron_narrow_kind {
  IRON_NARROW_IEEE = 0,  // inf and NaNs as in IEEE (all-ones exponent)
  IRON_NARROW_FN = 1,    // no inf; NaN = all ones (exponent and mantissa)
  IRON_NARROW_FNUZ = 2,  // no inf, no -0; NaN = sign bit alone
  IRON_NARROW_SAT = 3,   // no inf, no NaN: overflow saturates
} iron_narrow_kind_t;

typedef struct iron_narrow_format {
  iron_dtype_t dtype;
  int ebits, mbits, bias;
  iron_narrow_kind_t kind;
} iron_narrow_format_t;

// The format of a sign/exponent/mantissa narrow float (f8 family but
// f8E8M0FNU, f4E2M1FN, the f6 types); NULL for any other dtype. Static
// storage.
const iron_narrow_format_t *iron_narrow_format(iron_dtype_t dt);

// The value of encoding `bits` (low 1 + ebits + mbits bits are read).
double iron_narrow_format_decode(const iron_narrow_format_t *f, unsigned bits);
// The encoding of x, rounded to nearest even directly from the double.
uint8_t iron_narrow_format_encode(const iron_narrow_format_t *f, double x);

// The f6 types: only converts take them (XLA:CPU has no arithmetic, dot or
// convolution for them).
bool iron_narrow_is_f6(iron_dtype_t dt);

// f8/f4 (not f6, not f8E8M0FNU): the narrow floats that element-wise ops,
// dot and convolution take through f16/f32.
bool iron_narrow_float_is(iron_dtype_t dt);
// By dtype: NaN / 0 for a dtype without a format.
double iron_narrow_float_decode(iron_dtype_t dt, unsigned bits);
uint8_t iron_narrow_float_encode(iron_dtype_t dt, double v);
// An f32 result (dot, convolution) stored as narrow float dt the way
// XLA:CPU does: rounded to f16, then to dt.
uint8_t iron_narrow_float_store_f32(iron_dtype_t dt, float v);

// f8E8M0FNU: an unsigned power of two, 2^(bits - 127); 0xff is NaN (there
// is no zero).
uint8_t iron_e8m0_from_f32_bits(uint32_t b);
uint8_t iron_e8m0_from_f64(double x);
// The f32 bits of a value (2^-127 is an f32 denormal).
uint32_t iron_e8m0_to_f32_bits(unsigned bits);
double iron_e8m0_decode(unsigned bits);

#ifdef __cplusplus
}
#endif

#endif  // IRON_BASE_NARROW_FLOAT_H_
