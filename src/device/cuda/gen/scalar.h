// The scalar emitter: one IR op on scalar values in compute types
// (gen/types.h) as CUDA C. Fusions (gen/fusion.c, per element), region
// bodies (gen/region.c: reductions, scatters, windows, sort comparators,
// device loops) and the narrow-convert kernel all translate ops here, so an
// op that works in one works in every generated kernel.
//
// Adding an element-wise op: its expression goes in scalar.c (unary_expr,
// binary_expr, ... by dtype), its helper (if any) in the prelude
// (prelude.c); iron_cuda_scalar_op_supported then says yes and fuse.c
// fuses it on CUDA (docs/ARCHITECTURE.md, "Adding a fusable op").
#ifndef IRON_DEVICE_CUDA_GEN_SCALAR_H_
#define IRON_DEVICE_CUDA_GEN_SCALAR_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/status.h"
#include "device/cuda/gen/text.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

// Whose semantics the emitted code has. Both are XLA:CPU's op by op (the
// host kernels': elementwise.c, convert.c, ew_narrow.c, ew_complex.h) but
// for the float arithmetic of region bodies:
typedef enum iron_cuda_scalar_mode {
  // Element-wise kernels and fusions: f16/bf16 results rounded after every
  // op, float operands and results of float arithmetic flushed (XLA:CPU's
  // DAZ/FTZ), complex products with fma (XLA's formula).
  IRON_CUDA_SCALAR_ELEMENTWISE = 0,
  // Region bodies: add, subtract, multiply, divide, maximum and minimum of
  // real floats run on the compute type as it is (f16/bf16 unrounded until
  // stored or narrowed, no explicit flush) and complex products take the
  // plain formula, as the host's reduce/scatter/window loops
  // (reduce_fast.c) fold them; every other op as ELEMENTWISE.
  IRON_CUDA_SCALAR_BODY = 1,
} iron_cuda_scalar_mode_t;

typedef struct iron_cuda_scalar {
  iron_cuda_text_t *t;  // statements are appended here
  const char *indent;   // prefix of every statement line
  iron_cuda_scalar_mode_t mode;
  bool flush;  // iron_cuda_flush_denormals() of the generation
} iron_cuda_scalar_t;

// True when iron_cuda_scalar_emit translates op kind `kind` (the dtypes may
// still be refused): unary and binary element-wise ops, compare, select,
// clamp, convert, constant and reshape (the same value).
bool iron_cuda_scalar_op_supported(iron_op_kind_t kind);

// Emits `const <comp> <var> = ...;` (with any statements it needs) for
// `op`'s one result, from `args` (one value name per operand, in compute
// types). Constants take their value from the op (args unused); a
// reshape's result is its operand. UNIMPLEMENTED naming the op for an op
// or dtype it does not translate, INVALID_ARGUMENT for a malformed op.
iron_status_t iron_cuda_scalar_emit(const iron_cuda_scalar_t *s,
                                    const iron_ir_op_t *op,
                                    const char *const *args, const char *var);

// Declares `const <comp> <var>` = `expr` (a value computed from integers,
// e.g. an iota's coordinate) rounded to dtype `out` (f16/bf16, narrow
// dtypes), without flushes.
void iron_cuda_emit_rounded(const iron_cuda_scalar_t *s, iron_dtype_t out,
                            const char *var, const char *expr);

// Storage <-> compute. Declares `const <comp> <var>` = the element at
// `lvalue` (fast: the element-wise kernels' load, iron_cuda_type.ld_fast).
void iron_cuda_emit_load(iron_cuda_text_t *t, const char *indent,
                         iron_dtype_t dt, const char *var, const char *lvalue,
                         bool fast);
// The storage value of compute value `v` of dtype dt, into buf.
void iron_cuda_store_expr(iron_dtype_t dt, const char *v, char *buf,
                          size_t cap);

// The same for a value the element-wise mode computed: every f16/bf16
// value there is rounded already (iron_rnd_*, or loaded), so a bf16 store
// is the float's top half (IRON_CUDA_HW_ROUND; else iron_cuda_store_expr).
// Not for values of region bodies or reduce accumulators (unrounded).
void iron_cuda_store_rounded_expr(iron_dtype_t dt, const char *v, char *buf,
                                  size_t cap);

// The expression converting compute value `x` of `from` to `to`, both held
// as themselves (not narrow), into buf; false when refused.
bool iron_cuda_convert_expr(iron_dtype_t from, iron_dtype_t to, const char *x,
                            char *buf, size_t cap);

// The libm function (double spelling; append "f" for float) computing a
// real float unary or binary op kind in one call ("exp", "log1p", "pow",
// ...); NULL for other kinds.
const char *iron_cuda_libm_name(iron_op_kind_t kind);

// Declares `long long <var>` = start index `value` (a scalar of dtype dt)
// clamped to [0, hi], XLA's rule for dynamic_slice/dynamic_update_slice
// starts (u64 values past INT64_MAX read as INT64_MAX). `indent` prefixes
// each line.
void iron_cuda_emit_clamped_start(iron_cuda_text_t *t, const char *indent,
                                  const char *var, const char *value,
                                  iron_dtype_t dt, int64_t hi);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_GEN_SCALAR_H_
