// The launcher of generated pointer-parameter kernels (cuda_launch.h).
#include "device/cuda/cuda_launch.h"

#include <stdlib.h>

#include "device/cuda/cuda_device.h"

void iron_cuda_launch_dims(const iron_device_t *dev, int64_t count,
                           unsigned *out_grid, unsigned *out_block) {
  const iron_cuda_device_t *d = (const iron_cuda_device_t *)dev;
  unsigned block = 256;
  int64_t blocks = (count + block - 1) / block;
  int64_t cap = (d && d->num_sms > 0) ? (int64_t)d->num_sms * 32 : 4096;
  if (blocks > cap) blocks = cap;
  if (blocks < 1) blocks = 1;
  *out_grid = (unsigned)blocks;
  *out_block = block;
}

iron_status_t iron_cuda_ew_run(const iron_kernel_ctx_t *ctx, const void *params,
                               const iron_tensor_t *const *inputs,
                               iron_tensor_t *const *outputs) {
  const iron_cuda_ew_params_t *p = params;
  iron_cuda_device_t *dev = (iron_cuda_device_t *)ctx->dev;
  for (uint32_t k = 0; k < p->num_dus; ++k) {
    // A dynamic_update_slice root's output starts as its operand: shared
    // storage when the plan let it take the operand's, else a copy.
    void *dst = outputs[p->dus_out[k]]->data;
    const void *src = inputs[p->dus_in[k]]->data;
    if (dst == src || p->dus_bytes[k] == 0) continue;
    for (uint32_t i = 0; i < p->num_inputs; ++i)
      if (inputs[i]->data == dst)
        return IRON_ERR(INTERNAL,
                        "CUDA fusion: output %u shares input %u's "
                        "storage",
                        p->dus_out[k], i);
    IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_device_enter(dev));
    CUresult r = dev->api->cuMemcpyDtoDAsync((CUdeviceptr)dst, (CUdeviceptr)src,
                                             p->dus_bytes[k], dev->stream);
    if (r != IRON_CU_SUCCESS)
      return IRON_ERR(INTERNAL, "cuMemcpyDtoDAsync of %zu bytes failed (%d)",
                      p->dus_bytes[k], (int)r);
  }
  if (p->count == 0) return IRON_OK;
  if (p->num_inputs + p->num_outputs > IRON_CUDA_MAX_KERNEL_PARAMS)
    return IRON_ERR(INTERNAL, "CUDA kernel with %u parameters",
                    p->num_inputs + p->num_outputs);
  void *ptrs[IRON_CUDA_MAX_KERNEL_PARAMS];
  void *args[IRON_CUDA_MAX_KERNEL_PARAMS];
  uint32_t n = 0;
  for (uint32_t i = 0; i < p->num_inputs; ++i) {
    ptrs[n] = inputs[i]->data;
    args[n] = &ptrs[n];
    n++;
  }
  for (uint32_t j = 0; j < p->num_outputs; ++j) {
    ptrs[n] = outputs[j]->data;
    args[n] = &ptrs[n];
    n++;
  }
  return iron_cuda_launch((iron_cuda_device_t *)ctx->dev, p->fn, p->grid, 1, 1,
                          p->block, 0, args);
}

iron_status_t iron_cuda_ew_multi_run(const iron_kernel_ctx_t *ctx,
                                     const void *params,
                                     const iron_tensor_t *const *inputs,
                                     iron_tensor_t *const *outputs) {
  const iron_cuda_ew_multi_params_t *p = params;
  for (uint32_t k = 0; k < p->num_parts; ++k)
    IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_ew_run(
        ctx, &p->parts[k], inputs + p->first_input[k], outputs));
  return IRON_OK;
}

void iron_cuda_ew_multi_destroy(void *params) {
  iron_cuda_ew_multi_params_t *p = params;
  if (!p) return;
  free(p->parts);
  free(p->first_input);
  free(p);
}
