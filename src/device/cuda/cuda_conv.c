// stablehlo.convolution on the CUDA device: the generated direct kernel
// (cuda_gen_conv.c), planned and requested at prepare time, launched at run
// time. Every attribute the host handles is handled (dimension numbers,
// strides, padding, lhs/rhs dilation, window reversal, feature and batch
// groups; every dtype the CUDA generators hold, accumulated as the host
// does).
#include <stdlib.h>

#include "device/cuda/cuda_compile.h"
#include "device/cuda/cuda_gen_conv.h"
#include "device/cuda/cuda_ops_internal.h"

typedef struct conv_params {
  iron_cuda_function_t *fn;
  unsigned grid;
  bool empty;
} conv_params_t;

static iron_status_t conv_prepare_on(iron_device_t *base,
                                     const iron_ir_op_t *op,
                                     iron_host_region_t *const *regions,
                                     void **out_params) {
  (void)regions;
  iron_cuda_device_t *dev = iron_cuda_device_cast(base);
  iron_cuda_conv_t c;
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_conv_plan(op, &c));
  conv_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for params");
  p->empty = c.out_count == 0;
  if (p->empty) {
    *out_params = p;
    return IRON_OK;
  }
  char *src = NULL;
  iron_status_t st = iron_cuda_gen_conv("iron_conv", &c, &src, &p->grid);
  if (st) {
    free(p);
    return iron_cuda_ops_refused(op, st);
  }
  st = iron_cuda_ops_request(dev, src, "iron_conv", &p->fn);
  free(src);
  if (st) {
    free(p);
    return st;
  }
  *out_params = p;
  return IRON_OK;
}

static iron_status_t conv_run(const iron_host_ctx_t *ctx, const void *params,
                              const iron_tensor_t *const *inputs,
                              iron_tensor_t *const *outputs) {
  const conv_params_t *p = params;
  if (p->empty) return IRON_OK;
  iron_cuda_device_t *dev = iron_cuda_device_cast(ctx->dev);
  void *ptrs[3] = {inputs[0]->data, inputs[1]->data, outputs[0]->data};
  void *args[3] = {&ptrs[0], &ptrs[1], &ptrs[2]};
  return iron_cuda_launch(dev, p->fn, p->grid, 1, 1, 256, 0, args);
}

static const iron_host_kernel_t kConv = {.name = "cuda_convolution",
                                         .run = conv_run,
                                         .prepare_on = conv_prepare_on};

void iron_cuda_register_conv(iron_cuda_kernel_table_t table) {
  table[IRON_OP_CONVOLUTION] = &kConv;
}
