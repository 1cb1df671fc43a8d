// stablehlo.sort on the CUDA device: the program of cuda_sort_program.c
// (one-block bitonic rows, device-wide LSD radix or merge sort) requested at
// prepare and replayed at run. Scratch comes from iron_storage_allocate and
// is released (stream-ordered) before run returns, so a sort records into
// a CUDA graph like any kernel.
#include <stdlib.h>
#include <string.h>

#include "device/cuda/cuda_compile.h"
#include "device/cuda/gen/ops.h"
#include "device/cuda/cuda_ops_internal.h"
#include "device/cuda/cuda_sort_program.h"

typedef struct sort_params {
  iron_cuda_sort_program_t *prog;
  iron_cuda_function_t **fns;  // per program kernel
} sort_params_t;

static void sort_destroy(void *params) {
  sort_params_t *p = params;
  if (!p) return;
  iron_cuda_sort_program_destroy(p->prog);
  free(p->fns);
  free(p);
}

static iron_status_t sort_prepare_on(iron_device_t *base,
                                     const iron_ir_op_t *op,
                                     iron_region_t *const *regions,
                                     void **out_params) {
  iron_cuda_device_t *dev = iron_cuda_device_cast(base);
  if (op->num_regions != 1)
    return IRON_ERR(INVALID_ARGUMENT, "%s: expected one comparator region",
                    op->name);
  const iron_region_t cmp = iron_cuda_op_region(op, regions, 0);
  iron_cuda_sort_options_t opts;
  iron_cuda_sort_options_from_env(&opts);
  sort_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for params");
  iron_status_t st = iron_cuda_sort_program_create(op, &cmp, &opts, &p->prog);
  if (st) {
    free(p);
    iron_status_code_t code = iron_status_code(st);
    if (code == IRON_STATUS_INVALID_ARGUMENT) return st;
    return iron_cuda_ops_refused(op, st);
  }
  if (p->prog->num_kernels) {
    p->fns = calloc(p->prog->num_kernels, sizeof(*p->fns));
    if (!p->fns) st = IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  }
  // One module: every kernel of the program comes from the same source.
  for (uint32_t i = 0; i < p->prog->num_kernels && !st; ++i)
    st = iron_cuda_function_request(dev, p->prog->source, p->prog->kernels[i],
                                    &p->fns[i]);
  if (st) {
    sort_destroy(p);
    return st;
  }
  // The text is the compiler's now (it keeps its own copy).
  free(p->prog->source);
  p->prog->source = NULL;
  *out_params = p;
  return IRON_OK;
}

static iron_status_t sort_run(const iron_kernel_ctx_t *ctx, const void *params,
                              const iron_tensor_t *const *inputs,
                              iron_tensor_t *const *outputs) {
  const sort_params_t *p = params;
  const iron_cuda_sort_program_t *prog = p->prog;
  if (prog->num_launches == 0) return IRON_OK;
  iron_cuda_device_t *dev = iron_cuda_device_cast(ctx->dev);
  iron_storage_t *scratch = NULL;
  iron_status_t st = IRON_OK;
  if (prog->scratch_bytes)
    st = iron_storage_allocate(&dev->base, prog->scratch_bytes, &scratch);
  // Launch arguments: pointers and integers, each in its own slot.
  enum { MAX_ARGS = 2 * IRON_CUDA_SORT_MAX_OPERANDS + 8 };
  union {
    void *ptr;
    long long i64;
  } vals[MAX_ARGS];
  void *args[MAX_ARGS];
  for (uint32_t l = 0; l < prog->num_launches && !st; ++l) {
    const iron_cuda_sort_launch_t *ln = &prog->launches[l];
    if (ln->num_args > MAX_ARGS) {
      st = IRON_ERR(INTERNAL, "cuda sort: %u launch arguments", ln->num_args);
      break;
    }
    for (uint32_t a = 0; a < ln->num_args; ++a) {
      const iron_cuda_sort_arg_t *ar = &prog->args[ln->first_arg + a];
      switch (ar->kind) {
        case IRON_CUDA_SORT_ARG_INPUT:
          vals[a].ptr = inputs[ar->index]->data;
          break;
        case IRON_CUDA_SORT_ARG_OUTPUT:
          vals[a].ptr = outputs[ar->index]->data;
          break;
        case IRON_CUDA_SORT_ARG_SCRATCH:
          vals[a].ptr = (char *)scratch->data + ar->value;
          break;
        default:
          vals[a].i64 = (long long)ar->value;
          break;
      }
      args[a] = &vals[a];
    }
    st = iron_cuda_launch(dev, p->fns[ln->kernel], ln->grid, 1, 1, ln->block,
                          0, args);
  }
  // Stream-ordered free: back to the pool after the kernels that use it.
  iron_storage_release(scratch);
  return st;
}

static const iron_kernel_t kSort = {.name = "cuda_sort",
                                         .run = sort_run,
                                         .destroy = sort_destroy,
                                         .prepare_on = sort_prepare_on,
                                         .graph_capturable = true};

void iron_cuda_register_sort(iron_cuda_kernel_table_t table) {
  table[IRON_OP_SORT] = &kSort;
}
