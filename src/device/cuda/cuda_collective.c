// Collectives on the CUDA device, for programs of one replica and one
// partition (src/device/plans/collective_plan.h, shared with the host): each
// result is its operand, copied on the device's stream unless the plan
// gave the result the operand's storage, or zeros (a collective_permute
// without a 0 -> 0 pair). Copies and memsets are stream work only, so a
// counted loop body holding a collective is still recorded as a graph.
#include <stdlib.h>

#include "device/plans/collective_plan.h"
#include "device/cuda/cuda_ops_internal.h"

static iron_status_t collective_prepare_on(iron_device_t *dev,
                                           const iron_ir_op_t *op,
                                           iron_region_t *const *regions,
                                           void **out_params) {
  (void)dev;
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
  const iron_collective_plan_t *p = params_v;
  iron_cuda_device_t *dev = iron_cuda_device_cast(ctx->dev);
  const iron_cuda_api_t *api = dev->api;
  const void *in_data[IRON_COLLECTIVE_PLAN_MAX];
  if (p->count > IRON_COLLECTIVE_PLAN_MAX)
    return IRON_ERR(INTERNAL, "collective with %u operands", p->count);
  for (uint32_t i = 0; i < p->count; ++i) in_data[i] = inputs[i]->data;
  bool entered = false;
  // Last to first (collective_plan.h): stream order keeps the host's order.
  for (uint32_t i = p->count; i-- > 0;) {
    const iron_tensor_t *in = inputs[i];
    iron_tensor_t *out = outputs[i];
    if (out->nbytes == 0 || (!p->zeros && out->data == in->data)) continue;
    int32_t j =
        iron_collective_plan_clobbered_input(in_data, p->count, out->data, i);
    if (j >= 0 && !p->zeros)
      return IRON_ERR(INTERNAL,
                      "collective: result %u was given operand %d's storage, "
                      "which result %d still reads",
                      i, (int)j, (int)j);
    if (!entered) {
      IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_device_enter(dev));
      entered = true;
    }
    CUdeviceptr dst = (CUdeviceptr)(uintptr_t)out->data;
    if (p->zeros) {
      IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_status(
          api, api->cuMemsetD8Async(dst, 0, out->nbytes, dev->stream),
          "cuMemsetD8Async (collective_permute without a 0 -> 0 pair)"));
    } else {
      IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_status(
          api,
          api->cuMemcpyDtoDAsync(dst, (CUdeviceptr)(uintptr_t)in->data,
                                 out->nbytes, dev->stream),
          "cuMemcpyDtoDAsync (collective of one participant)"));
    }
  }
  return IRON_OK;
}

// An output may take its operand's storage (then nothing is copied).
static const iron_kernel_t kCollective = {.name = "cuda_collective",
                                          .run = collective_run,
                                          .inplace_ok = true,
                                          .prepare_on = collective_prepare_on,
                                          .graph_capturable = true};

void iron_cuda_register_collective(iron_cuda_kernel_table_t table) {
  table[IRON_OP_ALL_REDUCE] = &kCollective;
  table[IRON_OP_CROSS_REPLICA_SUM] = &kCollective;
  table[IRON_OP_ALL_GATHER] = &kCollective;
  table[IRON_OP_REDUCE_SCATTER] = &kCollective;
  table[IRON_OP_ALL_TO_ALL] = &kCollective;
  table[IRON_OP_COLLECTIVE_BROADCAST] = &kCollective;
  table[IRON_OP_COLLECTIVE_PERMUTE] = &kCollective;
}
