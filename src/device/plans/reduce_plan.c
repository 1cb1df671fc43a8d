// stablehlo.reduce validation shared by the devices (reduce_plan.h).
#include "device/plans/reduce_plan.h"

#include <string.h>

iron_status_t iron_reduce_plan_dims(const iron_ir_op_t *op, int32_t rank,
                                    bool *out_reduced) {
  for (int32_t d = 0; d < IRON_MAX_RANK; ++d) out_reduced[d] = false;
  int64_t dims[IRON_MAX_RANK];
  uint32_t nd = 0;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_ir_op_i64_list(op, "dimensions", dims, IRON_MAX_RANK, &nd));
  for (uint32_t k = 0; k < nd; ++k) {
    if (dims[k] < 0 || dims[k] >= rank || out_reduced[dims[k]])
      return IRON_ERR(INVALID_ARGUMENT, "%s: bad dimension %lld", op->name,
                      (long long)dims[k]);
    out_reduced[dims[k]] = true;
  }
  return IRON_OK;
}

iron_status_t iron_reduce_plan_read(const iron_ir_op_t *op,
                                    iron_reduce_plan_t *p) {
  memset(p, 0, sizeof(*p));
  uint32_t n = op->num_operands / 2;
  if (op->num_operands % 2 || n == 0 || op->num_results != n ||
      op->num_regions != 1)
    return IRON_ERR(INVALID_ARGUMENT, "%s: bad operand/result counts",
                    op->name);
  if (n > IRON_REDUCE_PLAN_MAX_INPUTS)
    return iron_ir_op_unimplemented(op, "with %u inputs", n);
  const iron_ir_type_t *t0 = op->operands[0]->type;
  for (uint32_t i = 0; i < 2 * n; ++i) {
    const iron_ir_type_t *t = op->operands[i]->type;
    if (!t || t->kind != IRON_TYPE_TENSOR || !iron_ir_type_is_static(t) ||
        iron_ir_type_num_elements(t) < 0 || iron_dtype_size(t->dtype) == 0)
      return iron_ir_op_unimplemented(op, "for operand %u's type", i);
    if (i < n &&
        (t->rank != t0->rank ||
         memcmp(t->dims, t0->dims, sizeof(int64_t) * (size_t)t0->rank) != 0))
      return IRON_ERR(INVALID_ARGUMENT, "%s: input shapes differ", op->name);
    if (i >= n &&
        (t->rank != 0 || t->dtype != op->operands[i - n]->type->dtype))
      return IRON_ERR(INVALID_ARGUMENT, "%s: bad init value %u", op->name,
                      i - n);
  }
  IRON_RETURN_IF_ERROR_PLAIN(iron_reduce_plan_dims(op, t0->rank, p->reduced));
  int32_t nd = 0;
  for (int32_t d = 0; d < t0->rank; ++d) nd += p->reduced[d];
  for (uint32_t i = 0; i < n; ++i) {
    const iron_ir_type_t *rt = op->results[i].type;
    bool ok = rt && rt->kind == IRON_TYPE_TENSOR &&
              rt->dtype == op->operands[i]->type->dtype &&
              rt->rank == t0->rank - nd;
    for (int32_t d = 0, r = 0; ok && d < t0->rank; ++d)
      if (!p->reduced[d] && rt->dims[r++] != t0->dims[d]) ok = false;
    if (!ok)
      return IRON_ERR(INVALID_ARGUMENT, "%s: result %u type mismatch", op->name,
                      i);
  }
  p->num = n;
  for (uint32_t i = 0; i < n; ++i) p->dtype[i] = op->operands[i]->type->dtype;
  p->in = t0;
  p->red = 1;
  p->kept = 1;
  for (int32_t d = 0; d < t0->rank; ++d) {
    if (p->reduced[d])
      p->red *= t0->dims[d];
    else
      p->kept *= t0->dims[d];
  }
  return IRON_OK;
}

iron_op_kind_t iron_reduce_plan_body_op(const iron_ir_region_t *r,
                                        iron_dtype_t dtype) {
  if (!r || r->num_blocks != 1) return IRON_OP_UNKNOWN;
  const iron_ir_block_t *b = &r->blocks[0];
  if (b->num_args != 2 || b->num_ops != 2) return IRON_OP_UNKNOWN;
  const iron_ir_op_t *op = b->ops[0], *ret = b->ops[1];
  if ((ret->kind != IRON_OP_RETURN && ret->kind != IRON_OP_FUNC_RETURN) ||
      ret->num_operands != 1 || op->num_results != 1 ||
      ret->operands[0] != &op->results[0] || op->num_operands != 2)
    return IRON_OP_UNKNOWN;
  const iron_ir_value_t *a0 = &b->args[0], *a1 = &b->args[1];
  if (!((op->operands[0] == a0 && op->operands[1] == a1) ||
        (op->operands[0] == a1 && op->operands[1] == a0)))
    return IRON_OP_UNKNOWN;
  const iron_ir_type_t *t = op->results[0].type;
  if (!t || t->kind != IRON_TYPE_TENSOR || t->rank != 0 || t->dtype != dtype)
    return IRON_OP_UNKNOWN;
  for (int i = 0; i < 2; ++i) {
    const iron_ir_type_t *at = b->args[i].type;
    if (!at || at->kind != IRON_TYPE_TENSOR || at->rank != 0 ||
        at->dtype != dtype)
      return IRON_OP_UNKNOWN;
  }
  return op->kind;
}

bool iron_reduce_plan_op_is_monoid(iron_op_kind_t kind) {
  switch (kind) {
    case IRON_OP_ADD:
    case IRON_OP_MULTIPLY:
    case IRON_OP_MAXIMUM:
    case IRON_OP_MINIMUM:
    case IRON_OP_AND:
    case IRON_OP_OR:
    case IRON_OP_XOR:
      return true;
    default:
      return false;
  }
}
