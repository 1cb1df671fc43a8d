// stablehlo.convolution's operands, attributes and shapes, read and
// validated once for every device (host conv.c, CUDA cuda_gen_conv.c), so
// that the devices accept and refuse the same programs with the same
// statuses and messages. Device-specific planning (strides of the device's
// layouts, kernels, GEMM paths) stays with each device.
//
// Validation runs in three steps, in this order (a device may add its own
// refusals between them, as the CUDA device does, keeping the order of
// checks and so the status a program with several faults gets):
//   1. iron_conv_plan_check_types: operand/result counts, static tensors,
//      the dtype combination (UNIMPLEMENTED through iron_ir_op_unimplemented
//      for what no device computes);
//   2. iron_conv_plan_read_attrs: ranks, dimension numbers, window
//      attributes, group counts (INVALID_ARGUMENT naming the op and the
//      attribute; both group counts > 1 is UNIMPLEMENTED);
//   3. iron_conv_plan_check_sizes: feature/batch sizes against the group
//      counts and every result spatial size (INVALID_ARGUMENT).
// iron_conv_plan_read runs all three.
#ifndef IRON_DEVICE_PLANS_CONV_PLAN_H_
#define IRON_DEVICE_PLANS_CONV_PLAN_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/status.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct iron_conv_plan {
  // Borrowed from the op (set by step 1).
  const iron_ir_type_t *lhs, *rhs, *out;
  // Accumulation dtype of the result dtype (iron_conv_plan_compute_dtype).
  iron_dtype_t comp_dtype;
  // Step 2: the common rank and nsp = rank - 2 spatial dims.
  int32_t rank, nsp;
  // Dimension numbers (each a dim of its tensor, each dim used once).
  int64_t in_batch_dim, in_feature_dim;
  int64_t k_in_feature_dim, k_out_feature_dim;
  int64_t out_batch_dim, out_feature_dim;
  int64_t in_sp_dim[2 * IRON_MAX_RANK], k_sp_dim[2 * IRON_MAX_RANK],
      out_sp_dim[2 * IRON_MAX_RANK];
  // Window attributes per spatial dim d (defaults filled in): strides and
  // dilations >= 1; padding as (lo, hi) pairs: pad[2 d], pad[2 d + 1];
  // reversal nonzero where the window is reversed.
  int64_t stride[2 * IRON_MAX_RANK], pad[2 * IRON_MAX_RANK],
      lhs_dil[2 * IRON_MAX_RANK], rhs_dil[2 * IRON_MAX_RANK],
      reversal[2 * IRON_MAX_RANK];
  int64_t feature_group_count, batch_group_count;  // >= 1, not both > 1
  // Step 3: sizes.
  int64_t groups;   // feature_group_count * batch_group_count
  int64_t n_out;    // result batch (lhs batch / batch_group_count)
  int64_t c_in_g;   // kernel input features (per group)
  int64_t c_out;    // kernel output features
  int64_t c_out_g;  // output features per group
} iron_conv_plan_t;

// Accumulation dtype for a result dtype (f32 for f16/bf16/f32 and f8/f4
// results, f64, c64, c128, s64 for integers and pred), IRON_DTYPE_INVALID
// when no device convolves into it.
iron_dtype_t iron_conv_plan_compute_dtype(iron_dtype_t out);

// Whether an operand dtype converts into accumulation dtype `comp`.
bool iron_conv_plan_operand_ok(iron_dtype_t operand, iron_dtype_t comp);

// Step 1. Fills out->lhs/rhs/out/comp_dtype.
iron_status_t iron_conv_plan_check_types(const iron_ir_op_t *op,
                                         iron_conv_plan_t *out);
// Step 2 (after step 1 on the same *out).
iron_status_t iron_conv_plan_read_attrs(const iron_ir_op_t *op,
                                        iron_conv_plan_t *out);
// Step 3 (after step 2 on the same *out).
iron_status_t iron_conv_plan_check_sizes(const iron_ir_op_t *op,
                                         iron_conv_plan_t *out);

// Steps 1-3. *out is zeroed first.
iron_status_t iron_conv_plan_read(const iron_ir_op_t *op,
                                  iron_conv_plan_t *out);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_PLANS_CONV_PLAN_H_
