// iron.fusion on the host: runs the fused region through call_region in
// element-wise mode. The host does not fuse by itself (its vtable has no
// `fusable`); with IRON_HOST_TEST_FUSION=1 it fuses pure element-wise
// chains, so the CPU-only test suites exercise the fusion pass
// (src/compiler/fuse.c) on every program of the corpus.
#include <stdlib.h>

#include "device/host/host_kernel.h"

typedef struct {
  const iron_region_t *region;
} fusion_params_t;

static iron_status_t fusion_prepare(const iron_ir_op_t *op,
                                    iron_region_t *const *regions,
                                    void **out_params) {
  if (op->num_regions != 1 || !regions ||
      !regions[0]->elementwise)
    return iron_ir_op_unimplemented(op, "with a region that is not "
                                        "element-wise");
  fusion_params_t *p = malloc(sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  p->region = regions[0];
  *out_params = p;
  return IRON_OK;
}

static iron_status_t fusion_run(const iron_kernel_ctx_t *ctx, const void *params,
                                const iron_tensor_t *const *inputs,
                                iron_tensor_t *const *outputs) {
  const fusion_params_t *p = params;
  return ctx->call_region(ctx, p->region, inputs, outputs);
}

static const iron_kernel_t kFusion = {
    .name = "fusion",
    .prepare = fusion_prepare,
    .run = fusion_run,
};

void iron_host_register_fusion(iron_kernel_table_t table) {
  table[IRON_OP_FUSION] = &kFusion;
}

bool iron_host_fusable_for_testing(const iron_ir_op_t *op) {
  const iron_kernel_t *k = iron_host_kernel_lookup(op->kind);
  if (!k || !k->elementwise || op->num_results != 1) return false;
  // Same shape in and out: no implicit broadcasting inside the region.
  for (uint32_t i = 0; i < op->num_operands; ++i)
    if (iron_ir_type_num_elements(op->operands[i]->type) !=
        iron_ir_type_num_elements(op->results[0].type))
      return false;
  return true;
}
