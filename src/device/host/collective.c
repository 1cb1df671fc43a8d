// Collectives on the host, for programs of one replica and one partition:
// identities, or zeros for a collective_permute without a 0 -> 0 pair. The
// attributes are read and validated by src/device/plans/collective_plan.c, shared
// with the CUDA device (cuda_collective.c).
#include <stdlib.h>
#include <string.h>

#include "device/plans/collective_plan.h"
#include "device/host/host_kernel.h"

static iron_status_t collective_prepare(const iron_ir_op_t *op,
                                        iron_region_t *const *regions,
                                        void **out_params) {
  (void)regions;
  iron_collective_plan_t plan;
  IRON_RETURN_IF_ERROR_PLAIN(iron_collective_plan_read(op, &plan));
  iron_collective_plan_t *params = malloc(sizeof(*params));
  if (params == NULL) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  *params = plan;
  *out_params = params;
  return IRON_OK;
}

static iron_status_t collective_run(const iron_kernel_ctx_t *ctx,
                                    const void *params_v,
                                    const iron_tensor_t *const *inputs,
                                    iron_tensor_t *const *outputs) {
  (void)ctx;
  const iron_collective_plan_t *params = params_v;
  const void *in_data[IRON_COLLECTIVE_PLAN_MAX];
  if (params->count > IRON_COLLECTIVE_PLAN_MAX)
    return IRON_ERR(INTERNAL, "collective with %u operands", params->count);
  for (uint32_t i = 0; i < params->count; ++i) in_data[i] = inputs[i]->data;
  // Last to first (collective_plan.h).
  for (uint32_t i = params->count; i-- > 0;) {
    iron_tensor_t *out = outputs[i];
    if (out->nbytes == 0 || (!params->zeros && out->data == in_data[i]))
      continue;
    int32_t j = iron_collective_plan_clobbered_input(in_data, params->count,
                                                     out->data, i);
    if (j >= 0 && !params->zeros)
      return IRON_ERR(INTERNAL,
                      "collective: result %u was given operand %d's storage, "
                      "which result %d still reads",
                      i, (int)j, (int)j);
    if (params->zeros)
      memset(out->data, 0, out->nbytes);
    else
      memcpy(out->data, in_data[i], out->nbytes);
  }
  return IRON_OK;
}

static const iron_kernel_t kCollectiveKernel = {
    .name = "collective",
    .prepare = collective_prepare,
    .run = collective_run,
    .destroy = NULL,
    .inplace_ok = true,
    .elementwise = false,
};

void iron_host_register_collective(iron_kernel_table_t table) {
  table[IRON_OP_ALL_REDUCE] = &kCollectiveKernel;
  table[IRON_OP_CROSS_REPLICA_SUM] = &kCollectiveKernel;
  table[IRON_OP_ALL_GATHER] = &kCollectiveKernel;
  table[IRON_OP_REDUCE_SCATTER] = &kCollectiveKernel;
  table[IRON_OP_ALL_TO_ALL] = &kCollectiveKernel;
  table[IRON_OP_COLLECTIVE_BROADCAST] = &kCollectiveKernel;
  table[IRON_OP_COLLECTIVE_PERMUTE] = &kCollectiveKernel;
}
