// stablehlo.reduce: operands, init values, dimensions and results read and
// validated once for every device (host reduce.c, CUDA cuda_reduce.c and
// the fused reduces of cuda_fusion.c), so that the devices accept and
// refuse the same programs with the same statuses and messages; and the
// single-op bodies (`return op(a0, a1)`) that devices run without the
// region (also for reduce_window).
#ifndef IRON_DEVICE_PLANS_REDUCE_PLAN_H_
#define IRON_DEVICE_PLANS_REDUCE_PLAN_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/status.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

// Most inputs (= init values = results) of one reduce.
#define IRON_REDUCE_PLAN_MAX_INPUTS 32

typedef struct iron_reduce_plan {
  uint32_t num;  // inputs
  iron_dtype_t dtype[IRON_REDUCE_PLAN_MAX_INPUTS];
  const iron_ir_type_t *in;     // input 0 (every input has its dims)
  bool reduced[IRON_MAX_RANK];  // over in's dims
  int64_t kept, red;            // products of the kept / reduced dims
} iron_reduce_plan_t;

// Validates a stablehlo.reduce and fills *out (zeroed first): 2N operands
// and N results with one body (INVALID_ARGUMENT), N <=
// IRON_REDUCE_PLAN_MAX_INPUTS (UNIMPLEMENTED), static tensors of sized
// dtypes (UNIMPLEMENTED "for operand i's type"), inputs of one shape, init
// values rank-0 of their input's dtype, dimensions in range and each once,
// results of the input dtypes and the kept dims (INVALID_ARGUMENT).
iron_status_t iron_reduce_plan_read(const iron_ir_op_t *op,
                                    iron_reduce_plan_t *out);

// The "dimensions" of a reduce as flags over `rank` dims (all false first);
// INVALID_ARGUMENT "bad dimension" naming the op when one is out of range
// or repeated.
iron_status_t iron_reduce_plan_dims(const iron_ir_op_t *op, int32_t rank,
                                    bool *out_reduced);

// The op kind when region `r` is `return op(arg0, arg1)` (either order,
// stablehlo.return or func.return) with arguments and result rank-0 of
// `dtype`; IRON_OP_UNKNOWN otherwise.
iron_op_kind_t iron_reduce_plan_body_op(const iron_ir_region_t *r,
                                        iron_dtype_t dtype);

// add, multiply, maximum, minimum, and, or, xor: the body ops a device may
// apply in any order and grouping (commutative and associative).
bool iron_reduce_plan_op_is_monoid(iron_op_kind_t kind);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_PLANS_REDUCE_PLAN_H_
