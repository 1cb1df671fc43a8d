// stablehlo.dot_general and stablehlo.dot: operands, dtypes and dimension
// numbers read and validated once for every device (host dot.c, CUDA
// cuda_dot.c), so that the devices accept and refuse the same programs
// with the same statuses and messages. GEMM planning (views, packs,
// cuBLASLt layouts) stays with each device; a device that computes fewer
// dtype combinations refuses them after iron_dot_plan_read, naming itself.
#ifndef IRON_DEVICE_PLANS_DOT_PLAN_H_
#define IRON_DEVICE_PLANS_DOT_PLAN_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/status.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct iron_dot_plan {
  const iron_ir_type_t *lhs, *rhs, *out;  // borrowed from the op
  iron_dtype_t comp_dtype;  // iron_dot_plan_compute_dtype(out->dtype)
  // Batch dims (lb[i] of lhs pairs with rb[i] of rhs), contracting dims
  // (lc[i] with rc[i]) and the free dims of each side in increasing order;
  // the result is [batch dims, lhs free dims, rhs free dims].
  int64_t lb[IRON_MAX_RANK], rb[IRON_MAX_RANK], lc[IRON_MAX_RANK],
      rc[IRON_MAX_RANK], lf[IRON_MAX_RANK], rf[IRON_MAX_RANK];
  uint32_t nb, nc, nlf, nrf;
  // Products of the batch, lhs free (m), rhs free (n) and contracting (k)
  // sizes.
  int64_t batch, m, n, k;
} iron_dot_plan_t;

// Accumulation dtype for a result dtype (f32 for f16/bf16/f32 and f8/f4
// results, f64, c64, c128, s64 for integers and pred; s2/u2 results are
// not taken), IRON_DTYPE_INVALID when no device dots into it.
iron_dtype_t iron_dot_plan_compute_dtype(iron_dtype_t out);

// Whether an operand dtype converts into accumulation dtype `comp`
// (integers and pred into any; real floats into f32/f64/complex; complex
// into complex).
bool iron_dot_plan_operand_ok(iron_dtype_t operand, iron_dtype_t comp);

// The narrow float dtypes dot and convolution take: f8/f4
// (iron_narrow_float_is) plus f8E8M0FNU, which XLA:CPU converts to f32 by
// its bits (an operand) and from the f32 result by its bits (a result: no
// f16 step). Not the f6 types (XLA:CPU has no dot for them).
bool iron_dot_plan_narrow_is(iron_dtype_t dt);
// False for the dtype mixes with f8E8M0FNU that dot/convolution do not
// take: a narrow result with an operand of another dtype (XLA:CPU converts
// such operands to the result's dtype first, measured: f8E4M3FN x
// f8E8M0FNU -> f8E8M0FNU is NaN wherever the f8E4M3FN operand is <= 0).
bool iron_dot_plan_narrow_mix_ok(iron_dtype_t lhs, iron_dtype_t rhs,
                                 iron_dtype_t out);

// Validates a stablehlo.dot_general (its four dimension lists) or a
// stablehlo.dot (lhs rank 1 or 2 contracting its last dim with rhs dim 0)
// and fills *out (zeroed first). In this order: the dimension lists
// (dot_general), the operand count and ranks (dot), 2 operands and 1
// result of static tensor types, the dtype combination (UNIMPLEMENTED
// through iron_ir_op_unimplemented: "for lhs x rhs -> out"), list lengths,
// batch/contracting dims (in range, each dim once, equal sizes), the
// result rank and shape (INVALID_ARGUMENT naming the op).
iron_status_t iron_dot_plan_read(const iron_ir_op_t *op, iron_dot_plan_t *out);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_PLANS_DOT_PLAN_H_
