// The one dtype table of the CUDA generators: how generated code stores,
// loads, computes and stores back every dtype it handles.
#ifndef IRON_DEVICE_CUDA_GEN_TYPES_H_
#define IRON_DEVICE_CUDA_GEN_TYPES_H_

#include <stdbool.h>
#include <stddef.h>

#include "base/dtype.h"
#include "device/cuda/gen/text.h"

#ifdef __cplusplus
extern "C" {
#endif

// A dtype in generated code. Values are held in `comp` between ops:
//   pred             uint8_t, 0 or 1
//   f16, bf16        float, holding a value exact in the dtype (element-wise
//                    ops round after every op, as XLA:CPU's kernels)
//   narrow dtypes    one element per byte in memory; computed in the type of
//                    the dtype XLA:CPU computes them in (`wide`: s4 -> s8,
//                    u4 -> u8, f8 family and f4E2M1FN -> f16, f8E8M0FNU ->
//                    f32), holding a value exact in the narrow dtype; the
//                    f6 types are held as a float too but have no `wide`
//                    (`no_arith`)
//   others           their storage type
typedef struct iron_cuda_type {
  iron_dtype_t dtype;
  // Element type in memory; NULL: generated code does not handle the dtype.
  const char *store;
  const char *comp;
  // Storage -> compute and compute -> storage (a prelude function or macro
  // name; "" when the types are the same). `st` of a narrow dtype rounds a
  // value of its `wide` dtype, as the host's convert.
  const char *ld, *st;
  // The element-wise kernels' load: iron_ld_f16_hw for f16 (one PTX
  // conversion; `ld` is bit-exact with the host's, NaN payloads included),
  // else `ld`.
  const char *ld_fast;
  // The dtype values are computed as (see above); IRON_DTYPE_INVALID for
  // the f6 types.
  iron_dtype_t wide;
  bool is_float;    // f16, bf16, f32, f64 and the narrow floats
  bool is_complex;  // c64, c128
  bool is_signed;   // signed integers (s4 too)
  bool is_int;      // integers of any width (not pred)
  bool is_narrow;   // stored one per byte, computed as `wide`
  // f6E2M3FN, f6E3M2FN: values are loaded, stored, moved (select, reshape,
  // constants) and converted, nothing else: the host has no arithmetic,
  // compare, clamp or iota for them (XLA:CPU cannot compile any), so
  // generators refuse those by name (scalar.c, fusion.c).
  bool no_arith;
  // Narrow floats but f8E8M0FNU (iron_nf_decode/iron_nf_encode): exponent
  // and mantissa bits, bias, kind (0 IEEE-like, 1 FN, 2 FNUZ, 3 SAT); -1
  // kind for every other dtype.
  int nf_ebits, nf_mbits, nf_bias, nf_kind;
} iron_cuda_type_t;

// The row of `dt` (store NULL for dtypes generated code cannot hold: s2/u2,
// tokens...). Pure; thread-safe.
iron_cuda_type_t iron_cuda_type(iron_dtype_t dt);

// iron_cuda_type for generators that do not compute narrow dtypes (they
// would have to round every result): store NULL for those.
static inline iron_cuda_type_t iron_cuda_type_plain(iron_dtype_t dt) {
  iron_cuda_type_t t = iron_cuda_type(dt);
  if (t.is_narrow) t.store = NULL;
  return t;
}

// The storage type of a dtype held as itself (not narrow), else NULL.
const char *iron_cuda_ctype(iron_dtype_t dt);

// An unsigned storage type of `elem_size` bytes for dtype-agnostic copies
// ("uint8_t" .. "uint64_t", "iron_b16"); NULL for other sizes.
const char *iron_cuda_bits_ctype(size_t elem_size);

// The format of a narrow float dtype for iron_nf_decode/encode (f8 family
// but f8E8M0FNU, f4E2M1FN, the f6 types); false for other dtypes.
bool iron_cuda_nf_format(iron_dtype_t dt, int *out_ebits, int *out_mbits,
                         int *out_bias, int *out_kind);

// Appends the narrow dtypes' IRON_LD_<dtype>/IRON_ST_<dtype> macros (the
// table's ld/st names) to the prelude text (prelude.c).
void iron_cuda_prelude_narrow_macros(iron_cuda_text_t *t);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_GEN_TYPES_H_
