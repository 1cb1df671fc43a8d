// stablehlo.rng_bit_generator on the CUDA device (cuda_gen_rng.c); the
// shared plan (src/device/plans/rng_plan.c) validates.
#include <stdlib.h>

#include "device/cuda/cuda_compile.h"
#include "device/cuda/gen/ops.h"
#include "device/cuda/cuda_ops_internal.h"
#include "device/plans/rng_plan.h"

typedef struct rng_params {
  iron_cuda_function_t *fn;
  unsigned grid;
} rng_params_t;

static iron_status_t rng_prepare_on(iron_device_t *base,
                                    const iron_ir_op_t *op,
                                    iron_region_t *const *regions,
                                    void **out_params) {
  (void)regions;
  iron_cuda_device_t *dev = iron_cuda_device_cast(base);
  iron_rng_plan_t plan;
  IRON_RETURN_IF_ERROR_PLAIN(iron_rng_plan_read(op, &plan));
  rng_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for params");
  char *src = NULL;
  iron_status_t s = iron_cuda_gen_rng(
      "iron_rng", plan.algorithm, plan.state_words, plan.out_bytes,
      plan.out->rank, plan.out->dims, &src, &p->grid);
  if (!s) s = iron_cuda_ops_request(dev, src, "iron_rng", &p->fn);
  free(src);
  if (s) {
    free(p);
    return s;
  }
  *out_params = p;
  return IRON_OK;
}

static iron_status_t rng_run(const iron_kernel_ctx_t *ctx, const void *params,
                             const iron_tensor_t *const *inputs,
                             iron_tensor_t *const *outputs) {
  const rng_params_t *p = params;
  iron_cuda_device_t *dev = iron_cuda_device_cast(ctx->dev);
  void *ptrs[3] = {inputs[0]->data, outputs[0]->data, outputs[1]->data};
  void *args[3] = {&ptrs[0], &ptrs[1], &ptrs[2]};
  return iron_cuda_launch(dev, p->fn, p->grid, 1, 1, 256, 0, args);
}

// Not in place: every thread reads the state, one writes the new one.
static const iron_kernel_t kRng = {.name = "cuda_rng_bit_generator",
                                        .run = rng_run,
                                        .prepare_on = rng_prepare_on,
    .graph_capturable = true};

void iron_cuda_register_rng(iron_cuda_kernel_table_t table) {
  table[IRON_OP_RNG_BIT_GENERATOR] = &kRng;
}
