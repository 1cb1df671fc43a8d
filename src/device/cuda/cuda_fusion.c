// The CUDA fusion kernels (cuda_fusion.h): the iron.fusion op (a group
// fuse.c formed) and single element-wise ops become one generated kernel
// (gen/fusion.c) launched by cuda_launch.c; a fusion ending in a reduce
// becomes the reduce kernel (gen/reduce.c) reading its operands through
// the fused producers.
#include "device/cuda/cuda_fusion.h"

#include <stdlib.h>

#include "device/cuda/cuda_ops_internal.h"
#include "device/cuda/cuda_row_fusion.h"
#include "device/cuda/gen/fusion.h"
#include "device/cuda/gen/ops.h"
#include "device/cuda/gen/types.h"
#include "device/plans/reduce_plan.h"

iron_status_t iron_cuda_fusion_prepare(iron_device_t *dev,
                                       const iron_cuda_fusion_t *fusion,
                                       void **out_params) {
  if (fusion->num_inputs + fusion->num_outputs > IRON_CUDA_MAX_KERNEL_PARAMS) {
    const iron_ir_op_t *o = fusion->owner ? fusion->owner : fusion->ops[0];
    return iron_ir_op_unimplemented(o,
                                    "with more than %d operands and "
                                    "results on the CUDA device",
                                    IRON_CUDA_MAX_KERNEL_PARAMS);
  }
  char *src = NULL, *name = NULL;
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_codegen_fusion(fusion, &src, &name));
  iron_cuda_ew_params_t *p = calloc(1, sizeof(*p));
  if (!p) {
    free(src);
    free(name);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (params)");
  }
  iron_status_t st =
      iron_cuda_function_request((iron_cuda_device_t *)dev, src, name, &p->fn);
  free(src);
  free(name);
  if (st) {
    free(p);
    return st;
  }
  p->num_inputs = fusion->num_inputs;
  p->num_outputs = fusion->num_outputs;
  p->count = iron_ir_type_num_elements(iron_cuda_fusion_space(fusion));
  for (uint32_t j = 0; j < fusion->num_outputs; ++j) {
    const iron_ir_op_t *d = iron_cuda_fusion_dus_root(fusion, j);
    if (!d) continue;
    uint32_t k = fusion->num_inputs;
    for (uint32_t i = 0; i < fusion->num_inputs; ++i)
      if (fusion->inputs[i] == d->operands[0]) k = i;
    size_t bytes = 0;
    if (k == fusion->num_inputs || p->num_dus == 16 ||
        !iron_ir_type_byte_size(d->operands[0]->type, &bytes)) {
      free(p);
      return iron_ir_op_unimplemented(d, "in this CUDA fusion");
    }
    p->dus_out[p->num_dus] = j;
    p->dus_in[p->num_dus] = k;
    p->dus_bytes[p->num_dus] = bytes;
    p->num_dus++;
  }
  iron_cuda_launch_dims(dev, p->count, &p->grid, &p->block);
  // A tiled pivot kernel (gen/fusion.c) runs one block per tile.
  iron_cuda_fusion_pivots_t pv;
  st = iron_cuda_fusion_pivots_plan(fusion, &pv);
  if (st) {
    free(p);
    return st;
  }
  if (pv.num) {
    iron_cuda_fusion_tile_t tp;
    iron_cuda_fusion_tile_plan(&pv, &tp);
    if (tp.k >= 0) {
      p->grid = (unsigned)tp.blocks;
      p->block = 256;
    }
  }
  iron_cuda_fusion_pivots_free(&pv);
  *out_params = p;
  return IRON_OK;
}

// ---------------------------------------------------------------------------
// The fusion op kernel (region IR).

// A fusion that ends in stablehlo.reduce (src/compiler/fuse.c): the other
// ops become a __device__ function that computes the reduce's operands
// element by element, and the reduce kernel calls it instead of loading
// them, so the producers' values never go through memory.
static iron_status_t fused_reduce_prepare(iron_device_t *dev,
                                          const iron_ir_op_t *op,
                                          iron_region_t *const *regions,
                                          const iron_ir_block_t *b,
                                          const iron_ir_value_t **inputs,
                                          void **out_params) {
  const iron_ir_op_t *red = b->ops[b->num_ops - 2];
  const iron_ir_op_t *term = b->ops[b->num_ops - 1];
  uint32_t num = red->num_results;
  iron_dtype_t dts[IRON_REDUCE_PLAN_MAX_INPUTS];
  bool reduced[IRON_MAX_RANK];
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_reduce_check(red, dts, reduced));
  if (term->num_operands != num)
    return iron_ir_op_unimplemented(op, "as a fused reduce of this form");
  for (uint32_t i = 0; i < num; ++i)
    if (term->operands[i] != &red->results[i])
      return iron_ir_op_unimplemented(op,
                                      "as a fused reduce that does not "
                                      "return the reduce's results");
  const iron_ir_type_t *in0 = red->operands[0]->type;
  const char *vct[IRON_REDUCE_PLAN_MAX_INPUTS];
  uint32_t init_in[IRON_REDUCE_PLAN_MAX_INPUTS];
  if (b->num_args + num > IRON_CUDA_MAX_KERNEL_PARAMS)
    return iron_ir_op_unimplemented(op,
                                    "with more than %d operands and "
                                    "results on the CUDA device",
                                    IRON_CUDA_MAX_KERNEL_PARAMS);
  for (uint32_t k = 0; k < b->num_args; ++k) {
    if (!iron_cuda_ctype(b->args[k].type->dtype))
      return iron_ir_op_unimplemented(op,
                                      "on the CUDA device for input "
                                      "dtype %s",
                                      iron_dtype_name(b->args[k].type->dtype));
  }
  for (uint32_t i = 0; i < num; ++i) {
    vct[i] = iron_cuda_type(dts[i]).comp;
    const iron_ir_value_t *init = red->operands[num + i];
    if (init->def_block != b || init->def_op)  // fuse.c keeps inits outside
      return iron_ir_op_unimplemented(red, "as a fused reduce with this init");
    init_in[i] = init->index;
  }
  iron_cuda_fusion_t f = {
      .num_ops = b->num_ops - 2,
      .ops = (const iron_ir_op_t *const *)b->ops,
      .num_inputs = b->num_args,
      .inputs = inputs,
      .num_outputs = num,
      .outputs = (const iron_ir_value_t *const *)red->operands,
      .owner = op,
      .device_fn = "iron_fz",
  };
  char *fn_text = NULL, *fn_name = NULL;
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_codegen_fusion(&f, &fn_text, &fn_name));
  const char **ict = calloc(b->num_args + 1, sizeof(*ict));
  iron_cuda_ew_params_t *p = calloc(1, sizeof(*p));
  if (!ict || !p) {
    free(ict);
    free(p);
    free(fn_text);
    free(fn_name);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (params)");
  }
  for (uint32_t k = 0; k < b->num_args; ++k)
    ict[k] = iron_cuda_ctype(b->args[k].type->dtype);
  iron_cuda_reduce_fused_t fz = {
      .fn_text = fn_text,
      .fn_name = fn_name,
      .num_inputs = b->num_args,
      .input_ctypes = ict,
      .value_ctypes = vct,
      .init_inputs = init_in,
  };
  char *src = NULL;
  // The reduce's body with the module of the fusion's region (func.call).
  const iron_region_t body = {
      .ir = &red->regions[0],
      .module = regions && regions[0] ? regions[0]->module : NULL};
  iron_status_t st = iron_cuda_gen_reduce_fused(
      "iron_reduce", in0->rank, in0->dims, reduced, num, dts, &body, &fz, &src,
      &p->grid, &p->block);
  free(fn_text);
  free(fn_name);
  free(ict);
  if (st) {
    free(p);
    return iron_cuda_ops_refused(red, st);
  }
  st = iron_cuda_ops_request((iron_cuda_device_t *)dev, src, "iron_reduce",
                             &p->fn);
  free(src);
  if (st) {
    free(p);
    return st;
  }
  p->num_inputs = b->num_args;
  p->num_outputs = num;
  p->count = iron_ir_type_num_elements(red->results[0].type);
  *out_params = p;
  return IRON_OK;
}

static iron_status_t fusion_op_prepare(iron_device_t *dev,
                                       const iron_ir_op_t *op,
                                       iron_region_t *const *regions,
                                       void **out_params) {
  if (op->num_regions < 1 || op->regions[0].num_blocks != 1) {
    return iron_ir_op_unimplemented(op, "as a CUDA fusion without one block");
  }
  const iron_ir_block_t *b = &op->regions[0].blocks[0];
  if (b->num_args != op->num_operands || b->num_ops == 0) {
    return IRON_ERR(INVALID_ARGUMENT,
                    "%s: fusion block has %u arguments for %u operands",
                    op->name, b->num_args, op->num_operands);
  }
  const iron_ir_op_t *term = b->ops[b->num_ops - 1];
  if ((term->kind != IRON_OP_RETURN && term->kind != IRON_OP_FUNC_RETURN) ||
      term->num_operands != op->num_results) {
    return IRON_ERR(INVALID_ARGUMENT,
                    "%s: fusion block must return the op's %u results",
                    op->name, op->num_results);
  }
  // Row fusions (src/compiler/fuse_rows.h) have their own kernel.
  if (iron_cuda_fusion_is_row(op))
    return iron_cuda_row_fusion_prepare(dev, op, out_params);
  const iron_ir_value_t **inputs =
      calloc(b->num_args ? b->num_args : 1, sizeof(*inputs));
  if (!inputs) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  for (uint32_t i = 0; i < b->num_args; ++i) inputs[i] = &b->args[i];
  if (b->num_ops >= 2 && b->ops[b->num_ops - 2]->kind == IRON_OP_REDUCE) {
    iron_status_t st =
        fused_reduce_prepare(dev, op, regions, b, inputs, out_params);
    free(inputs);
    return st;
  }
  iron_cuda_fusion_t f = {
      .num_ops = b->num_ops - 1,
      .ops = (const iron_ir_op_t *const *)b->ops,
      .num_inputs = b->num_args,
      .inputs = inputs,
      .num_outputs = term->num_operands,
      .outputs = (const iron_ir_value_t *const *)term->operands,
      .owner = op,
  };
  iron_status_t st = iron_cuda_fusion_prepare(dev, &f, out_params);
  free(inputs);
  return st;
}

const iron_kernel_t iron_cuda_fusion_kernel = {
    .name = "cuda_fusion",
    .prepare = NULL,
    .run = iron_cuda_ew_run,
    .destroy = NULL,
    .inplace_ok = false,
    .elementwise = false,
    .prepare_on = fusion_op_prepare,
    .graph_capturable = true,
};

bool iron_cuda_fusion_dtype_ok(iron_dtype_t dt) {
  return iron_cuda_type(dt).store != NULL;
}
