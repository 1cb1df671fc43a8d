// stablehlo.reduce_precision on the host: rounds each float to a format
// with `mantissa_bits` and `exponent_bits`, working on the storage bits as
// XLA's elemental emitter does (round half to even on the mantissa, then
// overflow to signed inf and underflow to signed zero; NaN inputs are
// returned unchanged, even with zero mantissa bits, as on XLA:CPU).
#include <stdlib.h>
#include <string.h>

#include "device/host/ew_common.h"
#include "device/host/host_kernel.h"

typedef struct {
  iron_dtype_t dtype;
  int nbits, src_mant, src_exp;
  int64_t exponent_bits, mantissa_bits;
} rp_params_t;

static uint64_t rp_apply(const rp_params_t *p, uint64_t x) {
  const int nbits = p->nbits, sm = p->src_mant, se = p->src_exp;
  const uint64_t all = nbits == 64 ? ~0ull : ((1ull << nbits) - 1);
  const uint64_t sign_mask = 1ull << (nbits - 1);
  const uint64_t exp_mask = ((1ull << se) - 1) << sm;
  const uint64_t man_mask = (1ull << sm) - 1;
  const bool is_nan = (x & exp_mask) == exp_mask && (x & man_mask) != 0;
  uint64_t r = x;
  if (p->mantissa_bits < sm) {
    const int shift = sm - (int)p->mantissa_bits;
    const uint64_t last_bit = 1ull << shift;
    const uint64_t base_bias = (last_bit >> 1) - 1;
    const uint64_t bias = ((r & last_bit) >> shift) + base_bias;
    r = ((r + bias) & ~(last_bit - 1)) & all;
  }
  if (p->exponent_bits < se) {
    const uint64_t exponent_bias = (1ull << (se - 1)) - 1;
    const uint64_t reduced_bias = (1ull << (p->exponent_bits - 1)) - 1;
    const uint64_t max_exp = exponent_bias + reduced_bias;
    const uint64_t min_exp = exponent_bias - reduced_bias;
    const uint64_t e = r & exp_mask;
    const uint64_t signed_zero = r & sign_mask;
    if (e > (max_exp << sm))
      r = signed_zero | exp_mask;
    else if (e <= (min_exp << sm))
      r = signed_zero;
  }
  if (is_nan) r = x;  // XLA keeps NaN even with 0 mantissa bits
  return r;
}

#define RP_LOOP(T)                                                      \
  static void rp_loop_##T(const rp_params_t *p, T *out, const T *in,    \
                          int64_t in_stride, int64_t b, int64_t e) {    \
    for (int64_t i = b; i < e; ++i)                                     \
      out[i] = (T)rp_apply(p, (uint64_t)in[i * in_stride]);             \
  }
RP_LOOP(uint16_t)
RP_LOOP(uint32_t)
RP_LOOP(uint64_t)

typedef struct {
  const rp_params_t *p;
  void *out;
  const void *in;
  int64_t in_stride;
} rp_job_t;

static void rp_chunk(void *arg, int64_t b, int64_t e) {
  const rp_job_t *j = arg;
  switch (j->p->nbits) {
    case 16: rp_loop_uint16_t(j->p, j->out, j->in, j->in_stride, b, e); break;
    case 32: rp_loop_uint32_t(j->p, j->out, j->in, j->in_stride, b, e); break;
    default: rp_loop_uint64_t(j->p, j->out, j->in, j->in_stride, b, e); break;
  }
}

static iron_status_t rp_prepare(const iron_ir_op_t *op,
                                iron_region_t *const *regions,
                                void **out_params) {
  (void)regions;
  if (op->num_operands != 1 || op->num_results != 1)
    return IRON_ERR(INVALID_ARGUMENT, "%s: expected 1 operand and 1 result",
                    op->name);
  iron_dtype_t dt = op->results[0].type->dtype;
  if (op->operands[0]->type->dtype != dt)
    return IRON_ERR(INVALID_ARGUMENT, "%s: operand and result dtypes differ",
                    op->name);
  int sm, se, nbits;
  switch (dt) {
    case IRON_DTYPE_F16: sm = 10; se = 5; nbits = 16; break;
    case IRON_DTYPE_BF16: sm = 7; se = 8; nbits = 16; break;
    case IRON_DTYPE_F32: sm = 23; se = 8; nbits = 32; break;
    case IRON_DTYPE_F64: sm = 52; se = 11; nbits = 64; break;
    default:
      return iron_ir_op_unimplemented(op, "for dtype %s", iron_dtype_name(dt));
  }
  int64_t eb = 0, mb = 0;
  if (!iron_ir_attr_as_i64(iron_ir_op_attr(op, "exponent_bits"), &eb) ||
      !iron_ir_attr_as_i64(iron_ir_op_attr(op, "mantissa_bits"), &mb))
    return IRON_ERR(INVALID_ARGUMENT,
                    "%s: missing exponent_bits/mantissa_bits", op->name);
  if (eb < 1 || mb < 0)
    return IRON_ERR(INVALID_ARGUMENT,
                    "%s: exponent_bits must be >= 1 and mantissa_bits >= 0",
                    op->name);
  rp_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  p->dtype = dt;
  p->nbits = nbits;
  p->src_mant = sm;
  p->src_exp = se;
  p->exponent_bits = eb;
  p->mantissa_bits = mb;
  *out_params = p;
  return IRON_OK;
}

static iron_status_t rp_run(const iron_kernel_ctx_t *ctx, const void *params,
                            const iron_tensor_t *const *inputs,
                            iron_tensor_t *const *outputs) {
  rp_job_t job = {params, outputs[0]->data, inputs[0]->data,
                  inputs[0]->count == 1 ? 0 : 1};
  iron_threadpool_parallel_for(ctx ? ctx->pool : NULL, outputs[0]->count,
                               1 << 15, rp_chunk, &job);
  return IRON_OK;
}

static const iron_kernel_t kReducePrecisionKernel = {
    .name = "reduce_precision",
    .prepare = rp_prepare,
    .run = rp_run,
    .destroy = NULL,
    .inplace_ok = true,
    .elementwise = true,
};

void iron_host_register_reduce_precision(iron_kernel_table_t table) {
  table[IRON_OP_REDUCE_PRECISION] = &kReducePrecisionKernel;
}
