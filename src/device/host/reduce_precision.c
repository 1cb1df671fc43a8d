// stablehlo.reduce_precision on the host: rounds each float to a format
// with `mantissa_bits` and `exponent_bits`, working on the storage bits as
// XLA's elemental emitter does (round half to even on the mantissa, then
// overflow to signed inf and underflow to signed zero; NaN inputs are
// returned unchanged, even with zero mantissa bits, as on XLA:CPU).
#include <stdlib.h>
#include <string.h>

#include "device/host/ew_common.h"
#include "device/host/host_kernel.h"
#include "device/plans/precision_plan.h"

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
  iron_precision_plan_t plan;
  IRON_RETURN_IF_ERROR_PLAIN(iron_precision_plan_read(op, &plan));
  rp_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  p->dtype = plan.dtype;
  p->nbits = plan.nbits;
  p->src_mant = plan.src_mant;
  p->src_exp = plan.src_exp;
  p->exponent_bits = plan.exponent_bits;
  p->mantissa_bits = plan.mantissa_bits;
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
