// stablehlo.dot_general / stablehlo.dot validation shared by the devices
// (dot_plan.h).
#include "device/plans/dot_plan.h"

#include <string.h>

#include "base/narrow_float.h"

iron_dtype_t iron_dot_plan_compute_dtype(iron_dtype_t out) {
  switch (out) {
    case IRON_DTYPE_F16:
    case IRON_DTYPE_BF16:
    case IRON_DTYPE_F32:
      return IRON_DTYPE_F32;
    case IRON_DTYPE_F64:
      return IRON_DTYPE_F64;
    case IRON_DTYPE_C64:
      return IRON_DTYPE_C64;
    case IRON_DTYPE_C128:
      return IRON_DTYPE_C128;
    case IRON_DTYPE_PRED:
    case IRON_DTYPE_S8:
    case IRON_DTYPE_S16:
    case IRON_DTYPE_S32:
    case IRON_DTYPE_S64:
    case IRON_DTYPE_U8:
    case IRON_DTYPE_U16:
    case IRON_DTYPE_U32:
    case IRON_DTYPE_U64:
    case IRON_DTYPE_S4:
    case IRON_DTYPE_U4:  // wrap in 4 bits, as s8 would
      return IRON_DTYPE_S64;
    default:
      // f8/f4 results: XLA:CPU dots in f32 and rounds through f16
      // (f8E8M0FNU: from the f32 bits).
      return iron_dot_plan_narrow_is(out) ? IRON_DTYPE_F32 : IRON_DTYPE_INVALID;
  }
}

bool iron_dot_plan_operand_ok(iron_dtype_t op, iron_dtype_t comp) {
  // Sub-byte ints (s2/s4/u2/u4) are stored one per byte: fine as operands.
  bool intlike = op == IRON_DTYPE_PRED ||
                 (iron_dtype_is_int(op) && op != IRON_DTYPE_INDEX);
  // f8/f4 operands (XLA:CPU converts them to the f32 of the dot; their
  // products are exact there).
  bool realf = op == IRON_DTYPE_F16 || op == IRON_DTYPE_BF16 ||
               op == IRON_DTYPE_F32 || op == IRON_DTYPE_F64 ||
               iron_dot_plan_narrow_is(op);
  bool cplx = op == IRON_DTYPE_C64 || op == IRON_DTYPE_C128;
  switch (comp) {
    case IRON_DTYPE_S64:
      return intlike;
    case IRON_DTYPE_F32:
    case IRON_DTYPE_F64:
      return intlike || realf;
    case IRON_DTYPE_C64:
    case IRON_DTYPE_C128:
      return intlike || realf || cplx;
    default:
      return false;
  }
}

bool iron_dot_plan_narrow_is(iron_dtype_t dt) {
  return dt == IRON_DTYPE_F8E8M0FNU || iron_narrow_float_is(dt);
}

bool iron_dot_plan_narrow_mix_ok(iron_dtype_t lhs, iron_dtype_t rhs,
                                 iron_dtype_t out) {
  if (lhs != IRON_DTYPE_F8E8M0FNU && rhs != IRON_DTYPE_F8E8M0FNU &&
      out != IRON_DTYPE_F8E8M0FNU)
    return true;
  return !iron_dot_plan_narrow_is(out) || (lhs == out && rhs == out);
}

// Operand counts, static tensor types and the dtype combination.
static iron_status_t check_types(const iron_ir_op_t *op, iron_dot_plan_t *p) {
  if (op->num_operands != 2 || op->num_results != 1)
    return IRON_ERR(INVALID_ARGUMENT, "%s: expected 2 operands, 1 result",
                    op->name);
  const iron_ir_type_t *lt = op->operands[0]->type;
  const iron_ir_type_t *rt = op->operands[1]->type;
  const iron_ir_type_t *ot = op->results[0].type;
  const iron_ir_type_t *ts[3] = {lt, rt, ot};
  for (int i = 0; i < 3; ++i)
    if (!ts[i] || ts[i]->kind != IRON_TYPE_TENSOR ||
        !iron_ir_type_is_static(ts[i]) || iron_ir_type_num_elements(ts[i]) < 0)
      return iron_ir_op_unimplemented(op, "for non-static tensor types");
  iron_dtype_t comp = iron_dot_plan_compute_dtype(ot->dtype);
  if (comp == IRON_DTYPE_INVALID ||
      !iron_dot_plan_operand_ok(lt->dtype, comp) ||
      !iron_dot_plan_operand_ok(rt->dtype, comp) ||
      !iron_dot_plan_narrow_mix_ok(lt->dtype, rt->dtype, ot->dtype))
    return iron_ir_op_unimplemented(
        op, "for %s x %s -> %s", iron_dtype_name(lt->dtype),
        iron_dtype_name(rt->dtype), iron_dtype_name(ot->dtype));
  p->lhs = lt;
  p->rhs = rt;
  p->out = ot;
  p->comp_dtype = comp;
  return IRON_OK;
}

// Batch/contracting dims, free dims and the result's shape.
static iron_status_t check_dims(const iron_ir_op_t *op, iron_dot_plan_t *p) {
  const iron_ir_type_t *lt = p->lhs, *rt = p->rhs, *ot = p->out;
  // Classify dims; free dims are the rest, in increasing order.
  int lrole[IRON_MAX_RANK] = {0}, rrole[IRON_MAX_RANK] = {0};
  p->batch = p->k = p->m = p->n = 1;
  for (uint32_t i = 0; i < p->nb + p->nc; ++i) {
    int64_t l = i < p->nb ? p->lb[i] : p->lc[i - p->nb];
    int64_t r = i < p->nb ? p->rb[i] : p->rc[i - p->nb];
    if (l < 0 || l >= lt->rank || r < 0 || r >= rt->rank || lrole[l] ||
        rrole[r] || lt->dims[l] != rt->dims[r])
      return IRON_ERR(INVALID_ARGUMENT, "%s: bad batch/contracting dims",
                      op->name);
    lrole[l] = rrole[r] = i < p->nb ? 1 : 2;
    if (i < p->nb)
      p->batch *= lt->dims[l];
    else
      p->k *= lt->dims[l];
  }
  p->nlf = p->nrf = 0;
  for (int32_t d = 0; d < lt->rank; ++d)
    if (!lrole[d]) p->lf[p->nlf++] = d;
  for (int32_t d = 0; d < rt->rank; ++d)
    if (!rrole[d]) p->rf[p->nrf++] = d;
  if (ot->rank != (int32_t)(p->nb + p->nlf + p->nrf))
    return IRON_ERR(INVALID_ARGUMENT, "%s: result rank mismatch", op->name);
  int32_t r = 0;
  bool bad = false;
  for (uint32_t i = 0; i < p->nb; ++i)
    bad |= ot->dims[r++] != lt->dims[p->lb[i]];
  for (uint32_t i = 0; i < p->nlf; ++i) {
    p->m *= lt->dims[p->lf[i]];
    bad |= ot->dims[r++] != lt->dims[p->lf[i]];
  }
  for (uint32_t i = 0; i < p->nrf; ++i) {
    p->n *= rt->dims[p->rf[i]];
    bad |= ot->dims[r++] != rt->dims[p->rf[i]];
  }
  if (bad)
    return IRON_ERR(INVALID_ARGUMENT, "%s: result shape mismatch", op->name);
  return IRON_OK;
}

iron_status_t iron_dot_plan_read(const iron_ir_op_t *op, iron_dot_plan_t *out) {
  memset(out, 0, sizeof(*out));
  if (op->kind == IRON_OP_DOT) {
    if (op->num_operands != 2)
      return IRON_ERR(INVALID_ARGUMENT, "%s: expected 2 operands", op->name);
    int32_t lr = op->operands[0]->type->rank, rr = op->operands[1]->type->rank;
    if (lr < 1 || lr > 2 || rr < 1 || rr > 2)
      return iron_ir_op_unimplemented(op, "for ranks %d x %d", lr, rr);
    out->nc = 1;
    out->lc[0] = lr - 1;
    out->rc[0] = 0;
    IRON_RETURN_IF_ERROR_PLAIN(check_types(op, out));
    return check_dims(op, out);
  }
  uint32_t nrb = 0, nrc = 0;
  IRON_RETURN_IF_ERROR_PLAIN(iron_ir_op_i64_list(
      op, "lhs_batching_dimensions", out->lb, IRON_MAX_RANK, &out->nb));
  IRON_RETURN_IF_ERROR_PLAIN(iron_ir_op_i64_list(op, "rhs_batching_dimensions",
                                                 out->rb, IRON_MAX_RANK, &nrb));
  IRON_RETURN_IF_ERROR_PLAIN(iron_ir_op_i64_list(
      op, "lhs_contracting_dimensions", out->lc, IRON_MAX_RANK, &out->nc));
  IRON_RETURN_IF_ERROR_PLAIN(iron_ir_op_i64_list(
      op, "rhs_contracting_dimensions", out->rc, IRON_MAX_RANK, &nrc));
  IRON_RETURN_IF_ERROR_PLAIN(check_types(op, out));
  if (nrb != out->nb || nrc != out->nc)
    return IRON_ERR(INVALID_ARGUMENT, "%s: dimension list lengths differ",
                    op->name);
  return check_dims(op, out);
}
