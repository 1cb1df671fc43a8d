// The CUDA device's acceptance of stablehlo.reduce_window and
// stablehlo.select_and_scatter, GPU-free (tests/c/test_device_plans.c
// checks it against the host's): the shared window plan
// (src/device/plans/window_plan.h) with CUDA's own operand limit between its
// steps, and the plan as the generators' iron_cuda_window_t.
#ifndef IRON_DEVICE_CUDA_CUDA_WINDOW_H_
#define IRON_DEVICE_CUDA_CUDA_WINDOW_H_

#include "base/status.h"
#include "device/cuda/gen/ops.h"
#include "device/plans/window_plan.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

// Reads and validates op (either kind) into *out_plan and *out_w. Refuses
// with the plan's statuses, and UNIMPLEMENTED for more than
// IRON_CUDA_WINDOW_MAX_OPERANDS (170; the host takes 16) operands of a
// reduce_window (after the plan's step 1). Dtypes the generators cannot
// handle are refused when the kernel is generated.
iron_status_t iron_cuda_window_plan(const iron_ir_op_t *op,
                                    iron_window_plan_t *out_plan,
                                    iron_cuda_window_t *out_w);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_CUDA_WINDOW_H_
