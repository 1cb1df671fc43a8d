// stablehlo.reduce_precision validation shared by the devices
// (precision_plan.h).
#include "device/plans/precision_plan.h"

#include <string.h>

bool iron_precision_plan_format(iron_dtype_t dt, int *out_mant, int *out_exp,
                                int *out_nbits) {
  switch (dt) {
    case IRON_DTYPE_F16:
      *out_mant = 10;
      *out_exp = 5;
      *out_nbits = 16;
      break;
    case IRON_DTYPE_BF16:
      *out_mant = 7;
      *out_exp = 8;
      *out_nbits = 16;
      break;
    case IRON_DTYPE_F32:
      *out_mant = 23;
      *out_exp = 8;
      *out_nbits = 32;
      break;
    case IRON_DTYPE_F64:
      *out_mant = 52;
      *out_exp = 11;
      *out_nbits = 64;
      break;
    default:
      return false;
  }
  return true;
}

iron_status_t iron_precision_plan_read(const iron_ir_op_t *op,
                                       iron_precision_plan_t *p) {
  memset(p, 0, sizeof(*p));
  if (op->num_operands != 1 || op->num_results != 1)
    return IRON_ERR(INVALID_ARGUMENT, "%s: expected 1 operand and 1 result",
                    op->name);
  iron_dtype_t dt = op->results[0].type->dtype;
  if (op->operands[0]->type->dtype != dt)
    return IRON_ERR(INVALID_ARGUMENT, "%s: operand and result dtypes differ",
                    op->name);
  // (Kernels read one operand element per result element.)
  if (!iron_ir_type_equal(op->operands[0]->type, op->results[0].type))
    return IRON_ERR(INVALID_ARGUMENT, "%s: operand and result shapes differ",
                    op->name);
  if (!iron_precision_plan_format(dt, &p->src_mant, &p->src_exp, &p->nbits))
    return iron_ir_op_unimplemented(op, "for dtype %s", iron_dtype_name(dt));
  int64_t eb = 0, mb = 0;
  if (!iron_ir_attr_as_i64(iron_ir_op_attr(op, "exponent_bits"), &eb) ||
      !iron_ir_attr_as_i64(iron_ir_op_attr(op, "mantissa_bits"), &mb))
    return IRON_ERR(INVALID_ARGUMENT, "%s: missing exponent_bits/mantissa_bits",
                    op->name);
  if (eb < 1 || mb < 0)
    return IRON_ERR(INVALID_ARGUMENT,
                    "%s: exponent_bits must be >= 1 and mantissa_bits >= 0",
                    op->name);
  p->dtype = dt;
  p->exponent_bits = eb;
  p->mantissa_bits = mb;
  return IRON_OK;
}
