// stablehlo.reduce on the CUDA device: one generated kernel per op
// (cuda_gen_reduce.c), body translated from the region IR.
#include <stdlib.h>
#include <string.h>

#include "device/cuda/cuda_compile.h"
#include "device/cuda/gen/ops.h"
#include "device/cuda/cuda_ops_internal.h"
#include "device/plans/reduce_plan.h"

typedef struct reduce_params {
  iron_cuda_op_launch_t launch;  // first (cuda_ops_internal.h)
  uint32_t num;
} reduce_params_t;

static iron_status_t reduce_prepare_on(iron_device_t *base,
                                       const iron_ir_op_t *op,
                                       iron_region_t *const *regions,
                                       void **out_params) {
  iron_cuda_device_t *dev = iron_cuda_device_cast(base);
  iron_dtype_t dts[IRON_REDUCE_PLAN_MAX_INPUTS];
  bool reduced[IRON_MAX_RANK];
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_reduce_check(op, dts, reduced));
  uint32_t num = op->num_results;
  const iron_ir_type_t *in0 = op->operands[0]->type;
  const iron_region_t body = iron_cuda_op_region(op, regions, 0);
  reduce_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for params");
  p->num = num;
  p->launch.skip = iron_ir_type_num_elements(op->results[0].type) == 0;
  char *src = NULL;
  iron_status_t st = iron_cuda_gen_reduce("iron_reduce", in0->rank, in0->dims,
                                          reduced, num, dts, &body, &src,
                                          &p->launch.grid, &p->launch.block);
  if (st) {
    free(p);
    // Name the op: the generator's message says which part is missing.
    return iron_cuda_ops_refused(op, st);
  }
  st = iron_cuda_ops_request(dev, src, "iron_reduce", &p->launch.fn);
  free(src);
  if (st) {
    free(p);
    return st;
  }
  *out_params = p;
  return IRON_OK;
}

static iron_status_t reduce_run(const iron_kernel_ctx_t *ctx, const void *params,
                                const iron_tensor_t *const *inputs,
                                iron_tensor_t *const *outputs) {
  const reduce_params_t *p = params;
  if (p->launch.skip) return IRON_OK;
  iron_cuda_device_t *dev = iron_cuda_device_cast(ctx->dev);
  void *ptrs[3 * IRON_REDUCE_PLAN_MAX_INPUTS];
  void *args[3 * IRON_REDUCE_PLAN_MAX_INPUTS];
  for (uint32_t i = 0; i < 2 * p->num; ++i) ptrs[i] = inputs[i]->data;
  for (uint32_t i = 0; i < p->num; ++i) ptrs[2 * p->num + i] = outputs[i]->data;
  for (uint32_t i = 0; i < 3 * p->num; ++i) args[i] = &ptrs[i];
  return iron_cuda_launch(dev, p->launch.fn, p->launch.grid, 1, 1,
                          p->launch.block, 0, args);
}

static const iron_kernel_t kReduce = {.name = "cuda_reduce",
                                           .run = reduce_run,
                                           .prepare_on = reduce_prepare_on,
    .graph_capturable = true};

void iron_cuda_register_reduce(iron_cuda_kernel_table_t table) {
  table[IRON_OP_REDUCE] = &kReduce;
}
