// stablehlo.gather / stablehlo.scatter on the CUDA device: plans as the
// host's (cuda_gen_gather.c), one generated kernel each. Scatter copies
// each operand into its result first (stream-ordered device copies), then
// combines the updates into them (every operand in one kernel).
#include <stdlib.h>
#include <string.h>

#include "device/cuda/cuda_compile.h"
#include "device/cuda/gen/ops.h"
#include "device/cuda/cuda_ops_internal.h"

typedef struct gs_params {
  iron_cuda_op_launch_t launch;  // first (cuda_ops_internal.h); block 256
  int32_t num;      // scatter: operands (= updates = results)
  // Scatter: each operand's bytes, copied into its result.
  size_t op_bytes[IRON_SCATTER_PLAN_MAX_OPERANDS];
} gs_params_t;

static iron_status_t gather_prepare_on(iron_device_t *base,
                                       const iron_ir_op_t *op,
                                       iron_region_t *const *regions,
                                       void **out_params) {
  (void)regions;
  iron_cuda_device_t *dev = iron_cuda_device_cast(base);
  iron_cuda_gs_plan_t plan;
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_gather_plan(op, &plan));
  gs_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for params");
  p->launch.skip = plan.small_count == 0;
  p->launch.block = 256;
  // An empty operand with a non-empty result cannot happen (slice sizes
  // bound the result), so the kernel always reads in bounds.
  p->launch.grid = iron_cuda_ops_grid(plan.small_count);
  char *src = NULL;
  iron_status_t st = iron_cuda_gen_gather("iron_gather", &plan, &src);
  if (!st) st = iron_cuda_ops_request(dev, src, "iron_gather", &p->launch.fn);
  free(src);
  if (st) {
    free(p);
    return st;
  }
  *out_params = p;
  return IRON_OK;
}

static iron_status_t gather_run(const iron_kernel_ctx_t *ctx, const void *params,
                                const iron_tensor_t *const *inputs,
                                iron_tensor_t *const *outputs) {
  const gs_params_t *p = params;
  if (p->launch.skip) return IRON_OK;
  iron_cuda_device_t *dev = iron_cuda_device_cast(ctx->dev);
  void *ptrs[3] = {inputs[0]->data, inputs[1]->data, outputs[0]->data};
  void *args[3] = {&ptrs[0], &ptrs[1], &ptrs[2]};
  return iron_cuda_launch(dev, p->launch.fn, p->launch.grid, 1, 1,
                          p->launch.block, 0, args);
}

static bool attr_true(const iron_ir_op_t *op, const char *name) {
  const iron_ir_attr_t *a = iron_ir_op_attr(op, name);
  int64_t v = 0;
  return a && iron_ir_attr_as_i64(a, &v) && v != 0;
}

static iron_status_t scatter_prepare_on(iron_device_t *base,
                                        const iron_ir_op_t *op,
                                        iron_region_t *const *regions,
                                        void **out_params) {
  iron_cuda_device_t *dev = iron_cuda_device_cast(base);
  iron_cuda_gs_plan_t plan;
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_scatter_plan(op, &plan));
  const iron_region_t body = iron_cuda_op_region(op, regions, 0);
  gs_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for params");
  p->num = plan.num;
  for (int32_t i = 0; i < plan.num; ++i)
    p->op_bytes[i] = (size_t)plan.op_count * iron_dtype_size(plan.dtypes[i]);
  p->launch.skip =
      plan.op_count == 0 || plan.box_count == 0 || plan.num_points == 0;
  p->launch.block = 256;
  char *src = NULL;
  iron_status_t st = iron_cuda_gen_scatter(
      "iron_scatter", &plan, iron_cuda_scatter_classify(body.ir), &body,
      attr_true(op, "unique_indices"), &src, &p->launch.grid);
  if (st) {
    free(p);
    return iron_cuda_ops_refused(op, st);
  }
  st = iron_cuda_ops_request(dev, src, "iron_scatter", &p->launch.fn);
  free(src);
  if (st) {
    free(p);
    return st;
  }
  *out_params = p;
  return IRON_OK;
}

static iron_status_t scatter_run(const iron_kernel_ctx_t *ctx,
                                 const void *params,
                                 const iron_tensor_t *const *inputs,
                                 iron_tensor_t *const *outputs) {
  const gs_params_t *p = params;
  iron_cuda_device_t *dev = iron_cuda_device_cast(ctx->dev);
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_device_enter(dev));
  int32_t n = p->num;
  for (int32_t i = 0; i < n; ++i)
    if (p->op_bytes[i] && outputs[i]->data != inputs[i]->data)
      IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_status(
          dev->api,
          dev->api->cuMemcpyDtoDAsync(
              (CUdeviceptr)(uintptr_t)outputs[i]->data,
              (CUdeviceptr)(uintptr_t)inputs[i]->data, p->op_bytes[i],
              dev->stream),
          "cuMemcpyDtoDAsync (scatter operand)"));
  if (p->launch.skip) return IRON_OK;
  // Kernel (results..., indices, updates...); inputs are (operands...,
  // indices, updates...).
  void *ptrs[2 * IRON_SCATTER_PLAN_MAX_OPERANDS + 1];
  void *args[2 * IRON_SCATTER_PLAN_MAX_OPERANDS + 1];
  for (int32_t i = 0; i < n; ++i) ptrs[i] = outputs[i]->data;
  for (int32_t i = n; i <= 2 * n; ++i) ptrs[i] = inputs[i]->data;
  for (int32_t i = 0; i <= 2 * n; ++i) args[i] = &ptrs[i];
  return iron_cuda_launch(dev, p->launch.fn, p->launch.grid, 1, 1,
                          p->launch.block, 0, args);
}

static const iron_kernel_t kGather = {.name = "cuda_gather",
                                           .run = gather_run,
                                           .prepare_on = gather_prepare_on,
    .graph_capturable = true};
// The result may share the operand's storage (donated buffers): every
// element is copied before it is combined.
static const iron_kernel_t kScatter = {.name = "cuda_scatter",
                                            .run = scatter_run,
                                            .inplace_ok = true,
                                            .prepare_on = scatter_prepare_on,
    .graph_capturable = true};

void iron_cuda_register_gather(iron_cuda_kernel_table_t table) {
  table[IRON_OP_GATHER] = &kGather;
  table[IRON_OP_SCATTER] = &kScatter;
}
