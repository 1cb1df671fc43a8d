// stablehlo.fft validation shared by the devices (fft_plan.h).
#include "device/plans/fft_plan.h"

#include <string.h>

iron_status_t iron_fft_plan_read(const iron_ir_op_t *op,
                                 iron_fft_plan_t *out) {
  memset(out, 0, sizeof(*out));
  if (op->num_operands != 1 || op->num_results != 1)
    return IRON_ERR(INVALID_ARGUMENT, "%s: expected 1 operand and 1 result",
                    op->name);
  const iron_ir_type_t *it = op->operands[0]->type, *ot = op->results[0].type;
  if (it->kind != IRON_TYPE_TENSOR || ot->kind != IRON_TYPE_TENSOR ||
      !iron_ir_type_is_static(it) || !iron_ir_type_is_static(ot))
    return iron_ir_op_unimplemented(op, "for dynamic shapes");
  int32_t type = iron_ir_op_enum(op, "fft_type", -1);
  if (type < IRON_FFT_PLAN_FFT || type > IRON_FFT_PLAN_IRFFT)
    return IRON_ERR(INVALID_ARGUMENT, "%s: missing or bad fft_type", op->name);
  int64_t *len = out->len;
  uint32_t d = 0;
  IRON_RETURN_IF_ERROR_PLAIN(iron_ir_op_i64_list(op, "fft_length", len, 4, &d));
  if (d < 1 || d > 3)
    return iron_ir_op_unimplemented(op,
                                    "with %u fft_length entries "
                                    "(1 to 3 are supported)",
                                    d);
  if (it->rank < (int32_t)d || ot->rank != it->rank)
    return IRON_ERR(INVALID_ARGUMENT, "%s: rank %d for %u fft dimensions",
                    op->name, it->rank, d);
  const iron_dtype_t idt = it->dtype, odt = ot->dtype;
  bool ok;
  switch (type) {
    case IRON_FFT_PLAN_FFT:
    case IRON_FFT_PLAN_IFFT:
      ok = (idt == IRON_DTYPE_C64 || idt == IRON_DTYPE_C128) && odt == idt;
      break;
    case IRON_FFT_PLAN_RFFT:
      ok = (idt == IRON_DTYPE_F32 && odt == IRON_DTYPE_C64) ||
           (idt == IRON_DTYPE_F64 && odt == IRON_DTYPE_C128);
      break;
    default:
      ok = (idt == IRON_DTYPE_C64 && odt == IRON_DTYPE_F32) ||
           (idt == IRON_DTYPE_C128 && odt == IRON_DTYPE_F64);
      break;
  }
  if (!ok)
    return iron_ir_op_unimplemented(op, "from %s to %s", iron_dtype_name(idt),
                                    iron_dtype_name(odt));
  const int32_t rank = it->rank;
  double total = 1;
  for (uint32_t i = 0; i < d; ++i) {
    const int32_t ax = rank - (int32_t)d + (int32_t)i;
    const bool last = i + 1 == d;
    int64_t want_in = len[i], want_out = len[i];
    if (last && type == IRON_FFT_PLAN_RFFT) want_out = len[i] / 2 + 1;
    if (last && type == IRON_FFT_PLAN_IRFFT) want_in = len[i] / 2 + 1;
    // 2^40 bounds every plan size (Bluestein doubles it) far from overflow.
    if (len[i] > ((int64_t)1 << 40))
      return iron_ir_op_unimplemented(op, "with fft_length[%u] = %lld", i,
                                      (long long)len[i]);
    if (len[i] < 0 || it->dims[ax] != want_in || ot->dims[ax] != want_out)
      return IRON_ERR(INVALID_ARGUMENT,
                      "%s: fft_length[%u] = %lld does not fit dimension %d "
                      "(%lld -> %lld)",
                      op->name, i, (long long)len[i], ax,
                      (long long)it->dims[ax], (long long)ot->dims[ax]);
    total *= (double)len[i];
  }
  for (int32_t ax = 0; ax < rank - (int32_t)d; ++ax)
    if (it->dims[ax] != ot->dims[ax])
      return IRON_ERR(INVALID_ARGUMENT, "%s: batch dimension %d differs",
                      op->name, ax);
  out->in = it;
  out->out = ot;
  out->type = type;
  out->d = (int32_t)d;
  out->rank = rank;
  out->total = total;
  return IRON_OK;
}
