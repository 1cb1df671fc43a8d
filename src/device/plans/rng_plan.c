// stablehlo.rng_bit_generator validation shared by the devices
// (rng_plan.h).
#include "device/plans/rng_plan.h"

#include <string.h>

iron_status_t iron_rng_plan_read(const iron_ir_op_t *op, iron_rng_plan_t *p) {
  memset(p, 0, sizeof(*p));
  if (op->num_operands != 1 || op->num_results != 2)
    return IRON_ERR(INVALID_ARGUMENT,
                    "stablehlo.rng_bit_generator: expected 1 operand and 2 "
                    "results, got %u and %u",
                    op->num_operands, op->num_results);
  const iron_ir_type_t *st = op->operands[0]->type;
  const iron_ir_type_t *ot = op->results[1].type;
  if (st->kind != IRON_TYPE_TENSOR || ot->kind != IRON_TYPE_TENSOR ||
      !iron_ir_type_is_static(ot) || !iron_ir_type_is_static(st))
    return iron_ir_op_unimplemented(op, "for non-static tensor types");

  int32_t alg = iron_ir_op_enum(op, "rng_algorithm", IRON_RNG_DEFAULT);
  if (alg == IRON_RNG_DEFAULT) alg = IRON_RNG_PHILOX;  // as XLA:CPU does
  if (alg != IRON_RNG_THREE_FRY && alg != IRON_RNG_PHILOX)
    return iron_ir_op_unimplemented(op, "for rng_algorithm %d", alg);

  // jax always hands a u64[2] state (u32[4] keys are bitcast first). XLA
  // also accepts u64[3] for PHILOX (a full 128-bit counter); other state
  // shapes do not produce a state of the same shape there.
  if (st->dtype != IRON_DTYPE_U64 || st->rank != 1 ||
      !(st->dims[0] == 2 || (st->dims[0] == 3 && alg == IRON_RNG_PHILOX)))
    return iron_ir_op_unimplemented(
        op, "for a state other than u64[2] (or u64[3] with PHILOX)");
  if (!iron_ir_type_equal(st, op->results[0].type))
    return IRON_ERR(INVALID_ARGUMENT,
                    "stablehlo.rng_bit_generator: output state type differs "
                    "from the input state type");

  iron_dtype_class_t cls = iron_dtype_class(ot->dtype);
  int bits = iron_dtype_bits(ot->dtype);
  // Floats take the bits of the unsigned type of their width (as in XLA;
  // jax itself only asks for unsigned outputs).
  if ((cls != IRON_DTYPE_CLASS_SINT && cls != IRON_DTYPE_CLASS_UINT &&
       cls != IRON_DTYPE_CLASS_FLOAT) ||
      (bits != 8 && bits != 16 && bits != 32 && bits != 64) ||
      iron_dtype_size(ot->dtype) * 8 != (size_t)bits)
    return iron_ir_op_unimplemented(op, "for output dtype %s",
                                    iron_dtype_name(ot->dtype));
  int64_t count = iron_ir_type_num_elements(ot);
  if (count < 0)
    return IRON_ERR(INVALID_ARGUMENT,
                    "stablehlo.rng_bit_generator: output too large");
  p->out = ot;
  p->algorithm = alg;
  p->state_words = (int32_t)st->dims[0];
  p->out_bytes = bits / 8;
  p->count = count;
  return IRON_OK;
}

void iron_rng_plan_threefry_split(int32_t rank, const int64_t *dims,
                                  int64_t *out_outer, int64_t *out_split,
                                  int64_t *out_inner) {
  int32_t s = -1;
  for (int32_t i = 0; i < rank && s < 0; ++i)
    if (dims[i] % 2 == 0) s = i;
  if (s < 0)
    for (int32_t i = 0; i < rank; ++i)
      if (s < 0 || dims[i] > dims[s]) s = i;
  *out_outer = 1;
  *out_inner = 1;
  *out_split = 1;
  if (s >= 0) {
    for (int32_t i = 0; i < s; ++i) *out_outer *= dims[i];
    for (int32_t i = s + 1; i < rank; ++i) *out_inner *= dims[i];
    *out_split = dims[s];
  }
}
