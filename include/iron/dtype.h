// ironjax public API: element types. One X-macro table drives the enum, names, sizes and the
// PJRT_Buffer_Type numbering (which is fixed by the PJRT ABI).
#ifndef IRON_DTYPE_H_
#define IRON_DTYPE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// X(ENUM, text name as StableHLO prints it, bytes per element in host storage,
//   class, PJRT_Buffer_Type value)
// Sub-byte types (s2/u2/s4/u4, f4, f6) are stored one element per byte on the
// host, which is also how numpy/ml_dtypes hand them to us.
#define IRON_DTYPE_LIST(X)                                  \
  X(PRED, "i1", 1, BOOL, 1)                                 \
  X(S2, "i2", 1, SINT, 24)                                  \
  X(S4, "i4", 1, SINT, 21)                                  \
  X(S8, "i8", 1, SINT, 2)                                   \
  X(S16, "i16", 2, SINT, 3)                                 \
  X(S32, "i32", 4, SINT, 4)                                 \
  X(S64, "i64", 8, SINT, 5)                                 \
  X(U2, "ui2", 1, UINT, 25)                                 \
  X(U4, "ui4", 1, UINT, 22)                                 \
  X(U8, "ui8", 1, UINT, 6)                                  \
  X(U16, "ui16", 2, UINT, 7)                                \
  X(U32, "ui32", 4, UINT, 8)                                \
  X(U64, "ui64", 8, UINT, 9)                                \
  X(F16, "f16", 2, FLOAT, 10)                               \
  X(BF16, "bf16", 2, FLOAT, 13)                             \
  X(F32, "f32", 4, FLOAT, 11)                               \
  X(F64, "f64", 8, FLOAT, 12)                               \
  X(C64, "complex<f32>", 8, COMPLEX, 14)                    \
  X(C128, "complex<f64>", 16, COMPLEX, 15)                  \
  X(F8E5M2, "f8E5M2", 1, FLOAT, 16)                         \
  X(F8E4M3FN, "f8E4M3FN", 1, FLOAT, 17)                     \
  X(F8E4M3B11FNUZ, "f8E4M3B11FNUZ", 1, FLOAT, 18)           \
  X(F8E5M2FNUZ, "f8E5M2FNUZ", 1, FLOAT, 19)                 \
  X(F8E4M3FNUZ, "f8E4M3FNUZ", 1, FLOAT, 20)                 \
  X(F8E4M3, "f8E4M3", 1, FLOAT, 26)                         \
  X(F8E3M4, "f8E3M4", 1, FLOAT, 27)                         \
  X(F8E8M0FNU, "f8E8M0FNU", 1, FLOAT, 28)                   \
  X(F4E2M1FN, "f4E2M1FN", 1, FLOAT, 29)                     \
  X(F6E2M3FN, "f6E2M3FN", 1, FLOAT, 32)                     \
  X(F6E3M2FN, "f6E3M2FN", 1, FLOAT, 33)                     \
  X(TF32, "tf32", 4, FLOAT, 0)                              \
  X(INDEX, "index", 8, SINT, 0)                             \
  X(TOKEN, "!stablehlo.token", 0, TOKEN, 23)

#ifdef __cplusplus
extern "C" {
#endif

typedef enum iron_dtype {
  IRON_DTYPE_INVALID = 0,
#define IRON_DTYPE_ENUM_(e, n, b, c, p) IRON_DTYPE_##e,
  IRON_DTYPE_LIST(IRON_DTYPE_ENUM_)
#undef IRON_DTYPE_ENUM_
  IRON_DTYPE_COUNT
} iron_dtype_t;

typedef enum iron_dtype_class {
  IRON_DTYPE_CLASS_INVALID = 0,
  IRON_DTYPE_CLASS_BOOL,
  IRON_DTYPE_CLASS_SINT,
  IRON_DTYPE_CLASS_UINT,
  IRON_DTYPE_CLASS_FLOAT,
  IRON_DTYPE_CLASS_COMPLEX,
  IRON_DTYPE_CLASS_TOKEN,
} iron_dtype_class_t;

// "f32", "i1", "complex<f32>", ... ("invalid" for out-of-range values).
const char *iron_dtype_name(iron_dtype_t dt);
// Bytes per element in host storage (0 for token/invalid).
size_t iron_dtype_size(iron_dtype_t dt);
iron_dtype_class_t iron_dtype_class(iron_dtype_t dt);
// Bit width of the logical type (1 for pred, 4 for s4, 16 for bf16, 64 for
// c64 = 2 x f32 ...).
int iron_dtype_bits(iron_dtype_t dt);
// PJRT_Buffer_Type numbering; 0 (INVALID) where PJRT has no value.
int iron_dtype_to_pjrt(iron_dtype_t dt);
iron_dtype_t iron_dtype_from_pjrt(int pjrt_type);
// The element type of a complex type's parts (C64 -> F32), else INVALID.
iron_dtype_t iron_dtype_complex_part(iron_dtype_t dt);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DTYPE_H_
