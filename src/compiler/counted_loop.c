#include "compiler/counted_loop.h"

#include <string.h>

bool iron_ir_const_int(const iron_ir_value_t *v, int64_t *out) {
  if (!v || !v->def_op || v->def_op->kind != IRON_OP_CONSTANT) return false;
  const iron_ir_type_t *t = v->type;
  if (t->kind != IRON_TYPE_TENSOR || iron_ir_type_num_elements(t) != 1)
    return false;
  const iron_ir_attr_t *a = iron_ir_op_attr(v->def_op, "value");
  if (!a || a->kind != IRON_ATTR_DENSE) return false;
  if (t->dtype == IRON_DTYPE_S32 && a->dense.size >= 4) {
    int32_t x;
    memcpy(&x, a->dense.data, 4);
    *out = x;
    return true;
  }
  if (t->dtype == IRON_DTYPE_S64 && a->dense.size >= 8) {
    memcpy(out, a->dense.data, 8);
    return true;
  }
  return false;
}

static const iron_ir_op_t *block_terminator(const iron_ir_block_t *b) {
  return b->num_ops ? b->ops[b->num_ops - 1] : NULL;
}

bool iron_counted_loop(const iron_ir_op_t *op, iron_counted_loop_t *out) {
  if (op->kind != IRON_OP_WHILE || op->num_regions != 2 ||
      op->regions[0].num_blocks != 1 || op->regions[1].num_blocks != 1)
    return false;
  const iron_ir_block_t *cond = &op->regions[0].blocks[0];
  const iron_ir_block_t *body = &op->regions[1].blocks[0];
  const iron_ir_op_t *cret = block_terminator(cond);
  const iron_ir_op_t *bret = block_terminator(body);
  if (!cret || cret->num_operands != 1 || !bret) return false;
  // The condition must be free of effects (it is skipped): constants and
  // the one compare.
  for (uint32_t i = 0; i + 1 < cond->num_ops; ++i)
    if (cond->ops[i]->kind != IRON_OP_CONSTANT &&
        cond->ops[i]->kind != IRON_OP_COMPARE)
      return false;
  const iron_ir_op_t *cmp = cret->operands[0]->def_op;
  if (!cmp || cmp->kind != IRON_OP_COMPARE || cmp->num_operands != 2)
    return false;
  if (iron_ir_op_enum(cmp, "comparison_direction", -1) != IRON_CMP_LT)
    return false;
  const iron_ir_value_t *iv = cmp->operands[0];
  if (iv->def_op || iv->def_block != cond) return false;  // a block argument
  iron_dtype_t dt = iv->type->dtype;
  if (dt != IRON_DTYPE_S32 && dt != IRON_DTYPE_S64) return false;
  iron_counted_loop_t c = {.limit_index = -1};
  const iron_ir_value_t *lv = cmp->operands[1];
  if (!iron_ir_const_int(lv, &c.limit)) {
    // A carried value the body returns unchanged.
    if (lv->def_op || lv->def_block != cond || lv->index >= bret->num_operands ||
        bret->operands[lv->index] != &body->args[lv->index] ||
        lv->type->dtype != dt)
      return false;
    c.limit_index = (int32_t)lv->index;
  }
  uint32_t k = iv->index;
  if (k >= bret->num_operands || k >= op->num_operands) return false;
  const iron_ir_op_t *add = bret->operands[k]->def_op;
  if (!add || add->kind != IRON_OP_ADD || add->num_operands != 2) return false;
  const iron_ir_value_t *a0 = add->operands[0], *a1 = add->operands[1];
  const iron_ir_value_t *barg = &body->args[k];
  if (a0 == barg && iron_ir_const_int(a1, &c.step)) {
  } else if (a1 == barg && iron_ir_const_int(a0, &c.step)) {
  } else {
    return false;
  }
  if (c.step <= 0) return false;
  c.counter = k;
  c.init_known = iron_ir_const_int(op->operands[k], &c.init);
  *out = c;
  return true;
}
