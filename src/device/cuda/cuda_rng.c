// stablehlo.rng_bit_generator on the CUDA device (cuda_gen_rng.c).
#include <stdlib.h>

#include "device/cuda/cuda_compile.h"
#include "device/cuda/cuda_ops_gen.h"
#include "device/cuda/cuda_ops_internal.h"

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
  if (op->num_operands != 1 || op->num_results != 2)
    return IRON_ERR(INVALID_ARGUMENT, "%s: expected 1 operand and 2 results",
                    op->name);
  const iron_ir_type_t *st = op->operands[0]->type;
  const iron_ir_type_t *ot = op->results[1].type;
  if (st->kind != IRON_TYPE_TENSOR || ot->kind != IRON_TYPE_TENSOR ||
      !iron_ir_type_is_static(ot) || !iron_ir_type_is_static(st))
    return iron_ir_op_unimplemented(op, "for non-static tensor types");
  int32_t alg = iron_ir_op_enum(op, "rng_algorithm", IRON_RNG_DEFAULT);
  if (alg == IRON_RNG_DEFAULT) alg = IRON_RNG_PHILOX;  // as XLA:CPU does
  if (alg != IRON_RNG_THREE_FRY && alg != IRON_RNG_PHILOX)
    return iron_ir_op_unimplemented(op, "for rng_algorithm %d", alg);
  if (st->dtype != IRON_DTYPE_U64 || st->rank != 1 ||
      !(st->dims[0] == 2 || (st->dims[0] == 3 && alg == IRON_RNG_PHILOX)))
    return iron_ir_op_unimplemented(
        op, "for a state other than u64[2] (or u64[3] with PHILOX)");
  if (!iron_ir_type_equal(st, op->results[0].type))
    return IRON_ERR(INVALID_ARGUMENT, "%s: state types differ", op->name);
  iron_dtype_class_t cls = iron_dtype_class(ot->dtype);
  int bits = iron_dtype_bits(ot->dtype);
  if ((cls != IRON_DTYPE_CLASS_SINT && cls != IRON_DTYPE_CLASS_UINT &&
       cls != IRON_DTYPE_CLASS_FLOAT) ||
      (bits != 8 && bits != 16 && bits != 32 && bits != 64) ||
      iron_dtype_size(ot->dtype) * 8 != (size_t)bits)
    return iron_ir_op_unimplemented(op, "for output dtype %s",
                                    iron_dtype_name(ot->dtype));
  rng_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for params");
  char *src = NULL;
  iron_status_t s = iron_cuda_gen_rng("iron_rng", alg, (int32_t)st->dims[0],
                                      bits / 8, ot->rank, ot->dims, &src,
                                      &p->grid);
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
