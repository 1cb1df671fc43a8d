// CUDA kernels: element-wise ops (unary, binary, compare, select, clamp,
// convert) as one-op fusions (cuda_fusion.h), and bitcast_convert (a device
// copy when the runtime did not alias it).
#include <stdlib.h>

#include "device/cuda/gen/prelude.h"
#include "device/cuda/gen/source.h"
#include "device/cuda/gen/types.h"
#include "device/cuda/cuda_device.h"
#include "device/cuda/cuda_fusion.h"
#include "device/cuda/gen/ops.h"
#include "device/plans/bitcast_plan.h"

// convert from/to a narrow dtype: its own kernel (gen/convert_narrow.c).
static iron_status_t convert_narrow_prepare(iron_device_t *dev,
                                           const iron_ir_op_t *op,
                                           void **out_params) {
  int64_t n = iron_ir_type_num_elements(op->results[0].type);
  char *src = NULL, *name = NULL;
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_gen_convert_narrow(op, &src, &name));
  iron_cuda_ew_params_t *p = calloc(1, sizeof(*p));
  if (!p) {
    free(src);
    free(name);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (params)");
  }
  iron_status_t st = iron_cuda_function_request((iron_cuda_device_t *)dev, src,
                                                name, &p->fn);
  free(src);
  free(name);
  if (st) {
    free(p);
    return st;
  }
  p->num_inputs = 1;
  p->num_outputs = 1;
  p->count = n;
  iron_cuda_launch_dims(dev, n, &p->grid, &p->block);
  *out_params = p;
  return IRON_OK;
}

static iron_status_t ew_prepare_on(iron_device_t *dev, const iron_ir_op_t *op,
                                   iron_region_t *const *regions,
                                   void **out_params) {
  (void)regions;
  if (op->num_results != 1) {
    return IRON_ERR(INVALID_ARGUMENT, "%s: expected one result", op->name);
  }
  const iron_ir_type_t *rt = op->results[0].type;
  if (!rt || rt->kind != IRON_TYPE_TENSOR || !iron_ir_type_is_static(rt)) {
    return iron_ir_op_unimplemented(op, "on the CUDA device for this type");
  }
  int64_t n = iron_ir_type_num_elements(rt);
  for (uint32_t i = 0; i < op->num_operands; ++i) {
    const iron_ir_type_t *t = op->operands[i]->type;
    if (!t || t->kind != IRON_TYPE_TENSOR || !iron_ir_type_is_static(t)) {
      return iron_ir_op_unimplemented(op, "on the CUDA device for this type");
    }
    int64_t c = iron_ir_type_num_elements(t);
    if (c != n && c != 1) {
      return IRON_ERR(INVALID_ARGUMENT,
                      "%s: operand %u has %lld elements, result %lld",
                      op->name, i, (long long)c, (long long)n);
    }
  }
  // Narrow converts have their own kernel, except f8E8M0FNU's (generated
  // by the fusion generator, as every other narrow op).
  if (op->kind == IRON_OP_CONVERT && op->num_operands == 1 &&
      (iron_cuda_dtype_is_narrow(op->operands[0]->type->dtype) ||
       iron_cuda_dtype_is_narrow(rt->dtype)) &&
      op->operands[0]->type->dtype != IRON_DTYPE_F8E8M0FNU &&
      rt->dtype != IRON_DTYPE_F8E8M0FNU) {
    return convert_narrow_prepare(dev, op, out_params);
  }
  const iron_ir_op_t *ops[1] = {op};
  const iron_ir_value_t *outs[1] = {&op->results[0]};
  iron_cuda_fusion_t f = {
      .num_ops = 1,
      .ops = ops,
      .num_inputs = op->num_operands,
      .inputs = (const iron_ir_value_t *const *)op->operands,
      .num_outputs = 1,
      .outputs = outs,
      .owner = op,
  };
  return iron_cuda_fusion_prepare(dev, &f, out_params);
}

static const iron_kernel_t kElementwise = {
    .name = "cuda_elementwise",
    .run = iron_cuda_ew_run,
    .inplace_ok = true,
    .elementwise = true,
    .prepare_on = ew_prepare_on,
    .graph_capturable = true
};

// ---------------------------------------------------------------------------
// bitcast_convert (src/device/plans/bitcast_plan.h): a byte copy, or, with a
// sub-byte side, a generated kernel that repacks the bit stream as the
// host's convert.c does.

typedef struct bc_params {
  iron_cuda_ew_params_t ew;  // first: the sub-byte kernel (when `sub`)
  bool sub;
  size_t nbytes;
} bc_params_t;
static iron_status_t bc_sub_prepare(iron_device_t *dev, const iron_ir_op_t *op,
                                    const iron_bitcast_plan_t *plan,
                                    size_t n_in, size_t n_out,
                                    void **out_params) {
  int bi = plan->in_unit, bo = plan->out_unit;
  (void)n_in;  // n_in * bi == n_out * bo (the plan)
  // 64-bit indices past 2^30 bytes; k * 8 + 7 stays in range below 2^60
  // bytes, more than any machine holds (so the host never runs it either).
  if (n_out > ((size_t)1 << 60)) {
    return iron_ir_op_unimplemented(op, "on cuda for more than 2^60 bytes");
  }
  unsigned mi = (1u << bi) - 1, mo = (1u << bo) - 1;
  const char *idx = n_out <= ((size_t)1 << 30) ? "int" : "long long";
  iron_cuda_text_t s;
  iron_cuda_text_init(&s);
  iron_cuda_text_printf(&s,
                       "extern \"C\" __global__ void __launch_bounds__(256) "
                       "%s(const uint8_t *in0, uint8_t *out0) {\n"
                       "  IRON_LOOP(k, %s, %lluLL) {\n",
                       IRON_CUDA_KERNEL_PLACEHOLDER, idx,
                       (unsigned long long)n_out);
  if (bo >= bi) {
    int r = bo / bi;
    iron_cuda_text_printf(&s, "    unsigned v = 0;\n");
    for (int t = 0; t < r; ++t) {
      iron_cuda_text_printf(&s,
                           "    v |= (unsigned)(in0[k * %d + %d] & %uu) << %d;\n",
                           r, t, mi, t * bi);
    }
    iron_cuda_text_printf(&s, "    out0[k] = (uint8_t)(v & %uu);\n", mo);
  } else {
    int r = bi / bo;
    iron_cuda_text_printf(&s,
                         "    out0[k] = (uint8_t)(((in0[k / %d] & %uu) >> "
                         "((k %% %d) * %d)) & %uu);\n",
                         r, mi, r, bo, mo);
  }
  iron_cuda_text_printf(&s, "  }\n}\n");
  char *src = NULL, *name = NULL;
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_source_make(&s, "iron_bcs", &src, &name));
  bc_params_t *p = calloc(1, sizeof(*p));
  if (!p) {
    free(src);
    free(name);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (params)");
  }
  iron_status_t st = iron_cuda_function_request((iron_cuda_device_t *)dev, src,
                                                name, &p->ew.fn);
  free(src);
  free(name);
  if (st) {
    free(p);
    return st;
  }
  p->sub = true;
  p->ew.num_inputs = 1;
  p->ew.num_outputs = 1;
  p->ew.count = (int64_t)n_out;
  iron_cuda_launch_dims(dev, p->ew.count, &p->ew.grid, &p->ew.block);
  *out_params = p;
  return IRON_OK;
}
static iron_status_t bc_prepare_on(iron_device_t *dev, const iron_ir_op_t *op,
                                   iron_region_t *const *regions,
                                   void **out_params) {
  (void)regions;
  iron_bitcast_plan_t plan;
  IRON_RETURN_IF_ERROR_PLAIN(iron_bitcast_plan_read(op, &plan));
  size_t ib, ob;
  if (!iron_ir_type_is_static(plan.in) || !iron_ir_type_is_static(plan.out) ||
      !iron_ir_type_byte_size(plan.in, &ib) ||
      !iron_ir_type_byte_size(plan.out, &ob)) {
    return iron_ir_op_unimplemented(op, "on the CUDA device for this type");
  }
  if (plan.sub) return bc_sub_prepare(dev, op, &plan, ib, ob, out_params);
  bc_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (params)");
  p->nbytes = ib;
  *out_params = p;
  return IRON_OK;
}

static iron_status_t bc_run(const iron_kernel_ctx_t *ctx, const void *params,
                            const iron_tensor_t *const *inputs,
                            iron_tensor_t *const *outputs) {
  const bc_params_t *p = params;
  if (p->sub) return iron_cuda_ew_run(ctx, &p->ew, inputs, outputs);
  if (p->nbytes == 0 || outputs[0]->data == inputs[0]->data) return IRON_OK;
  iron_cuda_device_t *d = (iron_cuda_device_t *)ctx->dev;
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_device_enter(d));
  CUresult r = d->api->cuMemcpyDtoDAsync((CUdeviceptr)outputs[0]->data,
                                         (CUdeviceptr)inputs[0]->data,
                                         p->nbytes, d->stream);
  if (r != IRON_CU_SUCCESS) {
    return IRON_ERR(INTERNAL, "bitcast_convert: cuMemcpyDtoDAsync failed (%d)",
                    (int)r);
  }
  return IRON_OK;
}

static const iron_kernel_t kBitcast = {
    .name = "cuda_bitcast_convert",
    .run = bc_run,
    .inplace_ok = true,
    .prepare_on = bc_prepare_on,
    .graph_capturable = true
};

void iron_cuda_register_elementwise(iron_cuda_kernel_table_t table) {
  for (int k = 0; k < IRON_OP_COUNT; ++k) {
    iron_op_class_t c = iron_op_kind_class((iron_op_kind_t)k);
    if (c == IRON_OP_CLASS_UNARY || c == IRON_OP_CLASS_BINARY) {
      table[k] = &kElementwise;
    }
  }
  table[IRON_OP_COMPARE] = &kElementwise;
  table[IRON_OP_SELECT] = &kElementwise;
  table[IRON_OP_CLAMP] = &kElementwise;
  table[IRON_OP_CONVERT] = &kElementwise;
  table[IRON_OP_BITCAST_CONVERT] = &kBitcast;
}
