// Host-staged steps on the CUDA device (cuda_host_staged.h): the host kernel
// runs on host copies of the operands; results are copied back.
#include "device/cuda/cuda_host_staged.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>


bool iron_cuda_host_staged_enabled(void) {
  const char *e = getenv("IRON_CUDA_HOST_STAGED");  // compile time only
  return !(e && strcmp(e, "0") == 0);
}

const iron_kernel_t *iron_cuda_custom_call_host_kernel(
    const char *target) {
  return iron_reference_custom_call_kernel(target);
}

typedef struct {
  const iron_kernel_t *host;  // NULL: nothing to run (dce_sink)
  void *host_params;
  uint32_t num_inputs, num_outputs;
} staged_params_t;

static void staged_destroy(void *params) {
  staged_params_t *p = params;
  if (!p) return;
  if (p->host_params) {
    if (p->host->destroy)
      p->host->destroy(p->host_params);
    else
      free(p->host_params);
  }
  free(p);
}

const iron_kernel_t *iron_cuda_host_staged_inner(const void *params) {
  return params ? ((const staged_params_t *)params)->host : NULL;
}

iron_status_t iron_cuda_host_staged_prepare(const iron_kernel_t *host,
                                            const iron_ir_op_t *op,
                                            iron_region_t *const *regions,
                                            void **out_params) {
  void *hp = NULL;
  if (host && host->prepare)
    IRON_RETURN_IF_ERROR_PLAIN(host->prepare(op, regions, &hp));
  staged_params_t *p = calloc(1, sizeof(*p));
  if (!p) {
    if (hp) {
      if (host->destroy)
        host->destroy(hp);
      else
        free(hp);
    }
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  }
  p->host = host;
  p->host_params = hp;
  p->num_inputs = op->num_operands;
  p->num_outputs = op->num_results;
  *out_params = p;
  return IRON_OK;
}

static iron_status_t staged_prepare_on(iron_device_t *dev,
                                       const iron_ir_op_t *op,
                                       iron_region_t *const *regions,
                                       void **out_params) {
  (void)dev;  // the host kernel needs no device; run copies through ctx->dev
  const iron_kernel_t *host;
  if (op->kind == IRON_OP_CUSTOM_CALL) {
    const char *target = iron_ir_op_string(op, "call_target_name");
    if (target && strcmp(target, "dce_sink") == 0) {
      // lax.dce_sink keeps a value alive: nothing to compute or copy.
      if (op->num_results != 0)
        return iron_ir_op_unimplemented(op, "dce_sink with %u results",
                                        op->num_results);
      return iron_cuda_host_staged_prepare(NULL, op, regions, out_params);
    }
    host = iron_cuda_custom_call_host_kernel(target);
    if (!host)
      return iron_ir_op_unimplemented(op, "for target \"%s\" on the cuda "
                                      "device", target ? target : "");
    if (!iron_cuda_host_staged_enabled())
      return iron_ir_op_unimplemented(
          op, "for target \"%s\" on the cuda device (host-staged steps are "
          "off: IRON_CUDA_HOST_STAGED=0)", target);
  } else {
    host = iron_reference_kernel_lookup(op->kind);
    if (!host) return iron_ir_op_unimplemented(op, "on the cuda device");
    if (!iron_cuda_host_staged_enabled())
      return iron_ir_op_unimplemented(
          op, "on the cuda device (host-staged steps are off: "
          "IRON_CUDA_HOST_STAGED=0)");
  }
  return iron_cuda_host_staged_prepare(host, op, regions, out_params);
}

// Host memory for zero-byte tensors (tokens, empty arrays): never read.
static alignas(64) char g_empty[64];

enum { kAlign = 64, kSmall = 16 };

// Adds `n` bytes rounded up to kAlign to *total; false on overflow.
static bool add_bytes(size_t *total, size_t n) {
  size_t r = (n + (kAlign - 1)) & ~(size_t)(kAlign - 1);
  if (r < n || *total > SIZE_MAX - r) return false;
  *total += r;
  return true;
}

static iron_status_t staged_run(const iron_kernel_ctx_t *ctx, const void *params,
                                const iron_tensor_t *const *inputs,
                                iron_tensor_t *const *outputs) {
  const staged_params_t *p = params;
  if (!p->host) return IRON_OK;
  iron_device_t *dev = ctx->dev;
  const iron_device_vtable_t *vt = dev->vtable;
  const uint32_t ni = p->num_inputs, no = p->num_outputs;
  if (!vt->memcpy)  // a device of host memory: nothing to stage
    return p->host->run(ctx, p->host_params, inputs, outputs);
  // The operands are results of kernels still queued on the device: wait
  // for them (and surface an earlier asynchronous fault before running
  // host code). The copies below are ordered after the queued work as well;
  // this also orders a callback without operands after the work before it.
  if (vt->job_sync) IRON_RETURN_IF_ERROR_PLAIN(vt->job_sync(dev));

  iron_tensor_t t_small[2 * kSmall];
  const iron_tensor_t *in_small[kSmall];
  iron_tensor_t *out_small[kSmall];
  iron_tensor_t *t = t_small;
  const iron_tensor_t **hin = in_small;
  iron_tensor_t **hout = out_small;
  char *mem = NULL;
  iron_status_t st = IRON_OK;
  if (ni > kSmall || no > kSmall) {
    t = calloc((size_t)ni + no, sizeof(*t));
    hin = calloc(ni ? ni : 1, sizeof(*hin));
    hout = calloc(no ? no : 1, sizeof(*hout));
    if (!t || !hin || !hout) {
      st = IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for a host-staged step");
      goto done;
    }
  }
  // One host allocation holds every operand and result.
  size_t total = 0;
  for (uint32_t i = 0; i < ni + no; ++i) {
    size_t n = i < ni ? inputs[i]->nbytes : outputs[i - ni]->nbytes;
    if (!add_bytes(&total, n)) {
      st = IRON_ERR(RESOURCE_EXHAUSTED,
                    "host-staged step: operand sizes overflow");
      goto done;
    }
  }
  if (total) {
    mem = aligned_alloc(kAlign, total);
    if (!mem) {
      st = IRON_ERR(RESOURCE_EXHAUSTED,
                    "out of host memory staging %zu bytes for %s", total,
                    p->host->name);
      goto done;
    }
  }
  size_t off = 0;
  for (uint32_t i = 0; i < ni + no; ++i) {
    const iron_tensor_t *src = i < ni ? inputs[i] : outputs[i - ni];
    t[i] = *src;
    t[i].data = g_empty;
    if (src->nbytes) {
      t[i].data = mem + off;
      add_bytes(&off, src->nbytes);
    }
    if (i < ni) {
      hin[i] = &t[i];
      if (src->nbytes && !st)
        st = vt->memcpy(dev, t[i].data, src->data, src->nbytes,
                        IRON_COPY_DEVICE_TO_HOST);
    } else {
      hout[i - ni] = &t[i];
    }
  }
  if (st) goto done;
  st = p->host->run(ctx, p->host_params, hin, hout);
  // Results go back in the device's order: kernels enqueued after this step
  // read them after the copies (a copy may return before it ran; the host
  // memory may still be freed then: memcpy's contract).
  for (uint32_t o = 0; o < no && !st; ++o)
    if (outputs[o]->nbytes)
      st = vt->memcpy(dev, outputs[o]->data, hout[o]->data,
                      outputs[o]->nbytes, IRON_COPY_HOST_TO_DEVICE);
done:
  free(mem);
  if (t != t_small) free(t);
  if (hin != in_small) free(hin);
  if (hout != out_small) free(hout);
  return st;
}

const iron_kernel_t iron_cuda_host_staged_kernel = {
    .name = "host_staged",
    .prepare = NULL,
    .run = staged_run,
    .destroy = staged_destroy,
    .inplace_ok = false,
    .elementwise = false,
    .prepare_on = staged_prepare_on,
    // Reads device memory back and waits for the device.
    .graph_capturable = false,
};

void iron_cuda_register_host_staged(iron_cuda_kernel_table_t table) {
  table[IRON_OP_CUSTOM_CALL] = &iron_cuda_host_staged_kernel;
  table[IRON_OP_CHOLESKY] = &iron_cuda_host_staged_kernel;
  table[IRON_OP_TRIANGULAR_SOLVE] = &iron_cuda_host_staged_kernel;
}
