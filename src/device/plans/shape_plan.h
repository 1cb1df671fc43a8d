// The data-movement ops (iota, broadcast_in_dim, broadcast, reshape,
// transpose, slice, reverse, concatenate, pad, dynamic_slice,
// dynamic_update_slice): operands, results and attributes read and
// validated once for every device (host shape.c, CUDA cuda_shape.c), so
// that the devices accept and refuse the same programs with the same
// statuses and messages. Each device turns the decoded attributes into its
// own copies (host strided copy plans, CUDA index maps).
//
// Every op moves elements of one dtype (iota computes them): tensors are
// static and of a dtype with a size (UNIMPLEMENTED "for a non-static or
// non-tensor <what>" / "for dtype X" through iron_ir_op_unimplemented) of
// at most INT64_MAX elements; operand 0 and result 0 share the dtype.
// Malformed attributes and shapes are INVALID_ARGUMENT naming the op.
#ifndef IRON_DEVICE_PLANS_SHAPE_PLAN_H_
#define IRON_DEVICE_PLANS_SHAPE_PLAN_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/status.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct iron_shape_plan {
  // Operand 0 (NULL for iota) and result 0, borrowed from the op.
  const iron_ir_type_t *in, *out;
  // iota: iota_dimension; concatenate: dimension.
  int64_t dim;
  // broadcast_in_dim, broadcast: result dim of operand dim k (in->rank).
  int64_t bdims[IRON_MAX_RANK];
  // transpose: result dim d is operand dim perm[d].
  int64_t perm[IRON_MAX_RANK];
  // slice: start and stride per dim (result dims are the counts).
  int64_t start[IRON_MAX_RANK], stride[IRON_MAX_RANK];
  // reverse: the dims reversed.
  bool reversed[IRON_MAX_RANK];
  // pad: edge padding (may be negative) and interior padding (>= 0).
  int64_t lo[IRON_MAX_RANK], hi[IRON_MAX_RANK], interior[IRON_MAX_RANK];
  // dynamic_slice: the slice sizes; dynamic_update_slice: the update's
  // dims. Start index d is the scalar operand first_index + d (of an
  // integer dtype but index), clamped to [0, in dim - part dim].
  int64_t part[IRON_MAX_RANK];
  uint32_t first_index;
  const iron_ir_type_t *update;  // dynamic_update_slice: operand 1
} iron_shape_plan_t;

// Validates one of the ops above (by op->kind) and fills *out (zeroed
// first). INVALID_ARGUMENT for another op kind.
iron_status_t iron_shape_plan_read(const iron_ir_op_t *op,
                                   iron_shape_plan_t *out);

// The iota dtypes: integers, pred, f16/bf16/f32/f64, c64/c128 and the f8/f4
// floats (XLA:CPU's iota runs in f16 for them and converts).
bool iron_shape_plan_iota_dtype_ok(iron_dtype_t dt);

// The start index dtypes of dynamic_slice / dynamic_update_slice: every
// integer dtype but index.
bool iron_shape_plan_index_dtype_ok(iron_dtype_t dt);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_PLANS_SHAPE_PLAN_H_
