// stablehlo.bitcast_convert validation shared by the devices
// (bitcast_plan.h).
#include "device/plans/bitcast_plan.h"

#include <string.h>

// Dtypes whose storage is their logical bits (so a byte copy is the
// bitcast). Sub-byte types are stored one per byte and pred as 0/1 bytes.
static bool dense(iron_dtype_t dt) {
  int bits = iron_dtype_bits(dt);
  return bits >= 8 && (size_t)bits == 8 * iron_dtype_size(dt);
}

// Sub-byte ints and floats (one element per byte, in the low bits), next
// to dense dtypes. Pred is not bitcast.
static bool sub_ok(iron_dtype_t dt) {
  return dt != IRON_DTYPE_PRED && iron_dtype_bits(dt) > 0 &&
         (dense(dt) || (iron_dtype_bits(dt) < 8 && iron_dtype_size(dt) == 1));
}

iron_status_t iron_bitcast_plan_read(const iron_ir_op_t *op,
                                     iron_bitcast_plan_t *p) {
  memset(p, 0, sizeof(*p));
  if (op->num_operands != 1 || op->num_results != 1)
    return IRON_ERR(INVALID_ARGUMENT, "%s: expected 1 operand and 1 result",
                    op->name);
  const iron_ir_type_t *it = op->operands[0]->type;
  const iron_ir_type_t *rt = op->results[0].type;
  if (!it || !rt || it->kind != IRON_TYPE_TENSOR ||
      rt->kind != IRON_TYPE_TENSOR)
    return IRON_ERR(INVALID_ARGUMENT, "%s: operands must be tensors", op->name);
  p->in = it;
  p->out = rt;
  if (it->dtype != rt->dtype && !(dense(it->dtype) && dense(rt->dtype))) {
    if (!sub_ok(it->dtype) || !sub_ok(rt->dtype))
      return iron_ir_op_unimplemented(op, "for dtype %s -> %s",
                                      iron_dtype_name(it->dtype),
                                      iron_dtype_name(rt->dtype));
    int64_t ni = iron_ir_type_num_elements(it);
    int64_t no = iron_ir_type_num_elements(rt);
    int bi = iron_dtype_bits(it->dtype), bo = iron_dtype_bits(rt->dtype);
    if (ni < 0 || no < 0)
      return iron_ir_op_unimplemented(op, "for dynamic shapes");
    if ((__int128)ni * bi != (__int128)no * bo)
      return IRON_ERR(INVALID_ARGUMENT, "%s: %lld bits in, %lld bits out",
                      op->name, (long long)(ni * bi), (long long)(no * bo));
    p->sub = true;
    p->in_unit = bi < 8 ? bi : 8;
    p->out_unit = bo < 8 ? bo : 8;
    return IRON_OK;
  }
  size_t ib, ob;
  if (iron_ir_type_byte_size(it, &ib) && iron_ir_type_byte_size(rt, &ob) &&
      ib != ob)
    return IRON_ERR(INVALID_ARGUMENT, "%s: %zu bytes in, %zu bytes out",
                    op->name, ib, ob);
  return IRON_OK;
}
