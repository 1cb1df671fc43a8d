// stablehlo.reduce_precision on the CUDA device (cuda_gen_precision.c); the
// shared plan (src/device/plans/precision_plan.c) validates.
#include <stdlib.h>

#include "device/cuda/cuda_compile.h"
#include "device/cuda/gen/ops.h"
#include "device/cuda/cuda_ops_internal.h"
#include "device/plans/precision_plan.h"

typedef struct rp_params {
  iron_cuda_function_t *fn;
  unsigned grid;
  bool empty;
} rp_params_t;

static iron_status_t rp_prepare_on(iron_device_t *base, const iron_ir_op_t *op,
                                   iron_region_t *const *regions,
                                   void **out_params) {
  (void)regions;
  iron_cuda_device_t *dev = iron_cuda_device_cast(base);
  iron_precision_plan_t plan;
  IRON_RETURN_IF_ERROR_PLAIN(iron_precision_plan_read(op, &plan));
  const iron_ir_type_t *t = op->results[0].type;
  if (!iron_ir_type_is_static(t))
    return iron_ir_op_unimplemented(op, "on cuda for these types");
  int64_t eb = plan.exponent_bits, mb = plan.mantissa_bits;
  int64_t count = iron_ir_type_num_elements(t);
  char *src = NULL;
  iron_status_t st = iron_cuda_gen_reduce_precision("iron_reduce_precision",
                                                    t->dtype, eb, mb, count,
                                                    &src);
  if (st) {
    return iron_cuda_ops_refused(op, st);
  }
  rp_params_t *p = calloc(1, sizeof(*p));
  if (!p) {
    free(src);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for params");
  }
  p->grid = iron_cuda_ops_grid(count);
  p->empty = count == 0;
  st = iron_cuda_ops_request(dev, src, "iron_reduce_precision", &p->fn);
  free(src);
  if (st) {
    free(p);
    return st;
  }
  *out_params = p;
  return IRON_OK;
}

static iron_status_t rp_run(const iron_kernel_ctx_t *ctx, const void *params,
                            const iron_tensor_t *const *inputs,
                            iron_tensor_t *const *outputs) {
  const rp_params_t *p = params;
  if (p->empty) return IRON_OK;
  iron_cuda_device_t *dev = iron_cuda_device_cast(ctx->dev);
  void *ptrs[2] = {inputs[0]->data, outputs[0]->data};
  void *args[2] = {&ptrs[0], &ptrs[1]};
  return iron_cuda_launch(dev, p->fn, p->grid, 1, 1, 256, 0, args);
}

// Element i is read before it is written by the same thread: in place is
// fine.
static const iron_kernel_t kReducePrecision = {
    .name = "cuda_reduce_precision",
    .run = rp_run,
    .inplace_ok = true,
    .prepare_on = rp_prepare_on,
    .graph_capturable = true};

void iron_cuda_register_reduce_precision(iron_cuda_kernel_table_t table) {
  table[IRON_OP_REDUCE_PRECISION] = &kReducePrecision;
}
