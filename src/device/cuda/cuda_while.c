// stablehlo.while as one CUDA kernel: a loop whose carried values are all
// scalars and whose condition and body the region generator translates
// (gen/region.c: every op the scalar emitter takes, and func.calls) runs
// in one GPU thread, condition and body alternating with no host round
// trip per iteration (a scalar while_loop of 10,000 iterations costs one
// launch).
// Loops over arrays keep running step by step (the planner's WHILE step).
#include <stdlib.h>
#include <string.h>

#include "device/cuda/cuda_compile.h"
#include "device/cuda/gen/ops.h"
#include "device/cuda/cuda_ops_internal.h"

bool iron_cuda_device_loops_enabled(void) {
  const char *e = getenv("IRON_CUDA_DEVICE_LOOPS");  // compile time only
  return !(e && strcmp(e, "0") == 0);
}

typedef struct while_params {
  uint32_t n;
  iron_cuda_function_t *fn;
} while_params_t;

static iron_status_t while_prepare_on(iron_device_t *base,
                                      const iron_ir_op_t *op,
                                      iron_region_t *const *regions,
                                      void **out_params) {
  iron_cuda_device_t *dev = iron_cuda_device_cast(base);
  char *src = NULL;
  iron_status_t st = iron_cuda_gen_while(
      "iron_while", op, regions && regions[0] ? regions[0]->module : NULL,
      &src);
  if (st) return iron_cuda_ops_refused(op, st);
  while_params_t *p = calloc(1, sizeof(*p));
  if (!p) {
    free(src);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for params");
  }
  p->n = op->num_operands;
  st = iron_cuda_ops_request(dev, src, "iron_while", &p->fn);
  free(src);
  if (st) {
    free(p);
    return st;
  }
  *out_params = p;
  return IRON_OK;
}

static iron_status_t while_run(const iron_kernel_ctx_t *ctx,
                               const void *params,
                               const iron_tensor_t *const *inputs,
                               iron_tensor_t *const *outputs) {
  const while_params_t *p = params;
  iron_cuda_device_t *dev = iron_cuda_device_cast(ctx->dev);
  void *ptrs[128];
  void *args[128];
  for (uint32_t i = 0; i < p->n; ++i) {
    ptrs[i] = inputs[i]->data;
    ptrs[p->n + i] = outputs[i]->data;
  }
  for (uint32_t i = 0; i < 2 * p->n; ++i) args[i] = &ptrs[i];
  return iron_cuda_launch(dev, p->fn, 1, 1, 1, 1, 0, args);
}

// Each thread reads its carried values before the loop and writes them
// after it: in place is fine.
static const iron_kernel_t kWhile = {.name = "cuda_while",
                                     .run = while_run,
                                     .inplace_ok = true,
                                     .prepare_on = while_prepare_on,
                                     .graph_capturable = true};

const iron_kernel_t *iron_cuda_while_kernel(const iron_ir_op_t *op) {
  if (!iron_cuda_device_loops_enabled()) return NULL;
  // Accept exactly what the generator translates (without the module: a
  // loop calling functions keeps running step by step).
  char *src = NULL;
  iron_status_t st = iron_cuda_gen_while("iron_while", op, NULL, &src);
  free(src);
  if (st) {
    iron_status_free(st);
    return NULL;
  }
  return &kWhile;
}
