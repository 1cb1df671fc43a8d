// f16 / bf16 <-> f32 conversions (round to nearest even, NaN kept quiet).
// Header-only so kernels can inline them.
#ifndef IRON_BASE_HALF_H_
#define IRON_BASE_HALF_H_

#include <stdint.h>
#include <string.h>

static inline uint32_t iron_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float iron_f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline float iron_bf16_to_f32(uint16_t h) {
  return iron_f32_from_bits((uint32_t)h << 16);
}

static inline uint16_t iron_f32_to_bf16(float f) {
  uint32_t u = iron_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return (uint16_t)(u >> 16);
}

static inline float iron_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {
      // Subnormal: normalize.
      int e = -1;
      do {
        e++;
        man <<= 1;
      } while ((man & 0x400u) == 0);
      man &= 0x3ffu;
      u = sign | ((uint32_t)(127 - 15 - e) << 23) | (man << 13);
    }
  } else if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  return iron_f32_from_bits(u);
}

static inline uint16_t iron_f32_to_f16(float f) {
  uint32_t u = iron_f32_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) {  // NaN: keep top mantissa bits, force quiet.
    return (uint16_t)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  }
  if (abs >= 0x477ff000u) {  // rounds to >= 65520 -> inf
    return (uint16_t)(sign | 0x7c00u);
  }
  if (abs < 0x38800000u) {  // below the smallest normal: subnormal or zero
    if (abs < 0x33000000u) return sign;  // < 2^-25 rounds to zero
    uint32_t exp = abs >> 23;
    uint32_t man = (abs & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exp;  // 14 - (exp - 127) + 13 - 1 ... see below
    // value = man * 2^(exp-150); f16 subnormal unit = 2^-24
    // result = man * 2^(exp-150+24) = man >> (126 - exp)
    uint32_t q = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    return (uint16_t)(sign | q);
  }
  uint32_t r = abs + 0xfffu + ((abs >> 13) & 1u);
  return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

#endif  // IRON_BASE_HALF_H_
