// stablehlo.reduce_precision: dtype and bit counts read and validated once
// for every device (host reduce_precision.c, CUDA cuda_precision.c and its
// generator), so that the devices accept and refuse the same programs with
// the same statuses and messages, and round with the same bit recipe.
#ifndef IRON_DEVICE_PLANS_PRECISION_PLAN_H_
#define IRON_DEVICE_PLANS_PRECISION_PLAN_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/status.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct iron_precision_plan {
  iron_dtype_t dtype;
  int src_mant, src_exp, nbits;  // iron_precision_plan_format(dtype)
  int64_t exponent_bits;         // >= 1
  int64_t mantissa_bits;         // >= 0
} iron_precision_plan_t;

// The mantissa and exponent bits and the width of a float dtype the op
// rounds (f16, bf16, f32, f64); false for any other dtype.
bool iron_precision_plan_format(iron_dtype_t dt, int *out_mant, int *out_exp,
                                int *out_nbits);

// Validates a stablehlo.reduce_precision and fills *out (zeroed first): 1
// operand and 1 result of one type (INVALID_ARGUMENT), a dtype of
// iron_precision_plan_format (UNIMPLEMENTED), exponent_bits >= 1 and
// mantissa_bits >= 0 (INVALID_ARGUMENT).
iron_status_t iron_precision_plan_read(const iron_ir_op_t *op,
                                       iron_precision_plan_t *out);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_PLANS_PRECISION_PLAN_H_
