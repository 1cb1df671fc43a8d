// stablehlo.sort on the CUDA device (cuda_gen_sort.c): rows up to
// IRON_CUDA_SORT_MAX_ROW elements; longer rows are refused at prepare.
#include <stdlib.h>
#include <string.h>

#include "device/cuda/cuda_compile.h"
#include "device/cuda/cuda_ops_gen.h"
#include "device/cuda/cuda_ops_internal.h"

typedef struct sort_params {
  uint32_t num;
  iron_cuda_function_t *fn;
  unsigned grid, block;
  bool empty;
} sort_params_t;

static iron_status_t sort_prepare_on(iron_device_t *base,
                                     const iron_ir_op_t *op,
                                     iron_region_t *const *regions,
                                     void **out_params) {
  iron_cuda_device_t *dev = iron_cuda_device_cast(base);
  uint32_t num = op->num_operands;
  if (num == 0 || op->num_results != num || op->num_regions != 1)
    return IRON_ERR(INVALID_ARGUMENT, "%s: bad operand/result counts",
                    op->name);
  if (num > 16)
    return iron_ir_op_unimplemented(op, "on cuda for %u operands", num);
  const iron_ir_type_t *t0 = op->operands[0]->type;
  iron_dtype_t dts[16];
  for (uint32_t i = 0; i < num; ++i) {
    const iron_ir_type_t *t = op->operands[i]->type;
    if (t->kind != IRON_TYPE_TENSOR || !iron_ir_type_is_static(t) ||
        t->rank != t0->rank ||
        memcmp(t->dims, t0->dims, sizeof(int64_t) * (size_t)t->rank))
      return iron_ir_op_unimplemented(op, "on cuda for these operand types");
    dts[i] = t->dtype;
  }
  int64_t dim = 0;
  const iron_ir_attr_t *da = iron_ir_op_attr(op, "dimension");
  if (da && !iron_ir_attr_as_i64(da, &dim))
    return IRON_ERR(INVALID_ARGUMENT, "%s: bad dimension", op->name);
  if (dim < 0) dim += t0->rank;
  const iron_ir_region_t *cmp =
      regions && regions[0] ? regions[0]->ir : &op->regions[0];
  sort_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for params");
  p->num = num;
  p->empty = iron_ir_type_num_elements(t0) == 0;
  char *src = NULL;
  iron_status_t st = IRON_OK;
  {
    // A rank-0 sort is a row of one element (a copy).
    int64_t one = 1;
    bool r0 = t0->rank == 0;
    iron_cuda_ops_region_module(regions);
    st = iron_cuda_gen_sort("iron_sort", r0 ? 1 : t0->rank,
                            r0 ? &one : t0->dims, r0 ? 0 : (int32_t)dim, num,
                            dts, cmp, &src, &p->grid, &p->block);
    iron_cuda_ops_region_module(NULL);
    if (st) st = iron_cuda_ops_refused(op, st);
  }
  if (!st) st = iron_cuda_ops_request(dev, src, "iron_sort", &p->fn);
  free(src);
  if (st) {
    free(p);
    return st;
  }
  *out_params = p;
  return IRON_OK;
}

static iron_status_t sort_run(const iron_kernel_ctx_t *ctx, const void *params,
                              const iron_tensor_t *const *inputs,
                              iron_tensor_t *const *outputs) {
  const sort_params_t *p = params;
  if (p->empty) return IRON_OK;
  iron_cuda_device_t *dev = iron_cuda_device_cast(ctx->dev);
  void *ptrs[32];
  void *args[32];
  for (uint32_t i = 0; i < p->num; ++i) {
    ptrs[i] = inputs[i]->data;
    ptrs[p->num + i] = outputs[i]->data;
  }
  for (uint32_t i = 0; i < 2 * p->num; ++i) args[i] = &ptrs[i];
  return iron_cuda_launch(dev, p->fn, p->grid, 1, 1, p->block, 0, args);
}

static const iron_kernel_t kSort = {.name = "cuda_sort",
                                         .run = sort_run,
                                         .prepare_on = sort_prepare_on,
    .graph_capturable = true};

void iron_cuda_register_sort(iron_cuda_kernel_table_t table) {
  table[IRON_OP_SORT] = &kSort;
}
