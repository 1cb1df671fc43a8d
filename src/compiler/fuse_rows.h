// Row fusion (issue 14): a reduce over the trailing (minor) dims of an
// array S = [batch..., row...], the element-wise work that feeds it, the
// work on its per-row results and the element-wise work that broadcasts
// those results back over the rows (softmax: max, then the sum of
// exp(x - max), then the division; layer norm: mean, then variance, then
// the normalization; their gradients) become ONE iron.fusion op, which a
// device that generates code (CUDA, src/device/cuda/cuda_row_fusion.c)
// runs as one kernel that reads each row once and writes only the
// fusion's results. It runs before the element-wise fusion pass (fuse.h),
// on devices whose vtable has `row_fusable`.
//
// The helpers below classify values against a row shape; the pass and the
// device's kernel generator use the same ones, so that they agree on which
// fusions exist.
#ifndef IRON_COMPILER_FUSE_ROWS_H_
#define IRON_COMPILER_FUSE_ROWS_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "compiler/fuse.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

// The row shape of a row reduce: S (its operand's dims) with the reduced
// dims flagged. Every non-unit reduced dim comes after every non-unit kept
// dim, so element e of row r is S's element r * n + e (row-major).
typedef struct iron_row_shape {
  int32_t rank;
  int64_t dims[IRON_MAX_RANK];
  bool reduced[IRON_MAX_RANK];
  int64_t rows;  // product of the kept dims (>= 1)
  int64_t n;     // product of the reduced dims (>= 2, < 2^31)
} iron_row_shape_t;

// What a value of type t is against row shape rs:
// FULL: t's dims are S's (one value per element of S);
// ROW: one value per row: t has `rows` elements and its non-unit dims are
//   S's non-unit kept dims, in order (its linear index is the row index);
// ONE: a single element (the same for every row), when not ROW;
// OTHER: none of these.
typedef enum iron_row_role {
  IRON_ROW_OTHER = 0,
  IRON_ROW_FULL,
  IRON_ROW_ROW,
  IRON_ROW_ONE,
} iron_row_role_t;

// True when `op` is a stablehlo.reduce of one operand (static, no zero
// dims) over dims that are all after its kept non-unit dims, with at least
// 2 elements per row and fewer than 2^31; fills *out. Body and dtype are
// the device predicate's business.
bool iron_row_shape_of_reduce(const iron_ir_op_t *op, iron_row_shape_t *out);

// True when `op` is a stablehlo.reduce of one operand whose reduced dims
// all have size 1 (jax reduces a [B, 1] value over its unit dim): per
// element, the result is body(init, x).
bool iron_row_reduce_is_trivial(const iron_ir_op_t *op);

bool iron_row_shape_equal(const iron_row_shape_t *a, const iron_row_shape_t *b);

iron_row_role_t iron_row_role(const iron_row_shape_t *rs,
                              const iron_ir_type_t *t);

// The dtypes row fusions compute: pred, 8- to 64-bit integers, f16, bf16,
// f32, f64 (no narrow or complex types).
bool iron_row_dtype_ok(iron_dtype_t dt);

// For a stablehlo.broadcast_in_dim `op` whose operand is a ROW value of
// rs and whose result is FULL: whether it copies each row's value along
// the row (its operand's non-unit dims map, in order, onto S's non-unit
// kept dims).
bool iron_row_bcast_row_to_full(const iron_row_shape_t *rs,
                                const iron_ir_op_t *op);

// Whether the device generates a row fusion with this reduce
// (iron_row_shape_of_reduce true) as a member, or with this trivial reduce
// (iron_row_reduce_is_trivial) as a per-row op: its body, dtypes and the
// device's size heuristics. Called at compile time.
typedef bool (*iron_row_fuse_predicate_t)(const iron_ir_op_t *reduce);

// Rewrites every function of `m` in place: in each block (function bodies
// and the regions of while/if/case that `can_fuse` does not generate
// whole), every group of ops that forms a row computation over one row
// shape becomes one iron.fusion op (see the top of this file). Members are
// row reduces that `row_fusable` accepts, the ops that `can_fuse` accepts
// (element-wise, broadcast_in_dim, reshape, splat constants, iotas along
// the reduced dims) whose results are FULL or ROW values of the row shape,
// and trivial reduces of ROW values; a group is kept only when some member
// depends on a reduce of the group (a lone reduce is fuse.h's fused
// reduce). Ops that use a group's values from outside are moved after
// the fusion when they are pure (a gradient's column reduces); any other
// op that uses them ends the group's growth. A member that spreads a
// smaller member value (a broadcast_in_dim) and is used outside is copied
// after the fusion for those uses, so the fusion writes the smaller value
// (a softmax's row sums for its gradient), not the spread array. No fusion has more than
// IRON_FUSE_MAX_OPERANDS operands plus results. *out_num_fusions (may be
// NULL) counts the fusions made.
iron_status_t iron_compiler_fuse_rows(iron_ir_module_t *m,
                                      iron_fuse_predicate_t can_fuse,
                                      iron_row_fuse_predicate_t row_fusable,
                                      int *out_num_fusions);

#ifdef __cplusplus
}
#endif

#endif  // IRON_COMPILER_FUSE_ROWS_H_
