// stablehlo.gather on the host (scatter lives in scatter_kernel.c; both are
// registered here).
//
// Gather is pure data movement, so it works for every dtype by copying
// element bytes. The shared plan (src/device/plans/gather_plan.h) splits
// the output into points and a window box; per point run reads the start
// indices, clamps each to [0, dim - slice_size] as XLA
// does, adds the batching coordinates, and copies the box; adjacent box dims
// are merged so an embedding lookup copies one row with one memcpy.
#include <stdlib.h>
#include <string.h>

#include "device/host/gather_copy.h"
#include "device/host/host_kernel.h"

typedef struct gather_params {
  iron_gather_plan_t plan;  // src/device/plans/gather_plan.c
  size_t es;
} gather_params_t;

static iron_status_t gather_prepare(const iron_ir_op_t *op,
                                    iron_region_t *const *regions,
                                    void **out_params) {
  (void)regions;
  *out_params = NULL;
  gather_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "gather params");
  iron_status_t st = iron_gather_plan_read(op, &p->plan);
  if (st) {
    free(p);
    return st;
  }
  p->es = iron_dtype_size(p->plan.dtype[0]);
  *out_params = p;
  return NULL;
}

typedef struct gather_job {
  const gather_params_t *p;
  const char *op;
  const void *idx;
  char *out;
} gather_job_t;

static void gather_points(void *arg, int64_t begin, int64_t end) {
  const gather_job_t *j = arg;
  const iron_gather_plan_t *p = &j->p->plan;
  const iron_gather_box_t *box = &p->box;
  size_t es = j->p->es;
  for (int64_t b = begin; b < end; ++b) {
    int64_t rem = b, idx_off = 0, out_off = 0, op_off = 0;
    for (int32_t d = p->nbatch - 1; d >= 0; --d) {
      int64_t c = rem % p->bdims[d];
      rem /= p->bdims[d];
      idx_off += c * p->b_idx_stride[d];
      out_off += c * p->b_small_stride[d];
      op_off += c * p->b_op_stride[d];
    }
    for (int32_t k = 0; k < p->nstart; ++k) {
      int64_t s = iron_gather_plan_index_read(j->idx, p->idx_dtype,
                                         idx_off + k * p->idx_vec_stride);
      if (s < 0) s = 0;
      if (s > p->start_max[k]) s = p->start_max[k];
      op_off += s * p->start_op_stride[k];
    }
    if (box->rank == 0) {
      memcpy(j->out + (size_t)out_off * es, j->op + (size_t)op_off * es, es);
      continue;
    }
    int32_t inner = box->rank - 1;
    int64_t ctr[IRON_MAX_RANK] = {0};
    int64_t a = op_off, o = out_off;
    for (;;) {
      iron_gather_copy_strided(j->out + (size_t)o * es, box->b_stride[inner],
                               j->op + (size_t)a * es, box->a_stride[inner],
                               box->size[inner], es);
      int32_t d = inner - 1;
      for (; d >= 0; --d) {
        a += box->a_stride[d];
        o += box->b_stride[d];
        if (++ctr[d] < box->size[d]) break;
        a -= box->a_stride[d] * box->size[d];
        o -= box->b_stride[d] * box->size[d];
        ctr[d] = 0;
      }
      if (d < 0) break;
    }
  }
}

static iron_status_t gather_run(const iron_kernel_ctx_t *ctx, const void *params,
                                const iron_tensor_t *const *inputs,
                                iron_tensor_t *const *outputs) {
  const gather_params_t *p = params;
  if (p->plan.small_count == 0) return NULL;
  gather_job_t job = {p, inputs[0]->data, inputs[1]->data, outputs[0]->data};
  // About 64 KiB of output per chunk keeps thread overhead small.
  int64_t per_point = p->plan.box.count * (int64_t)p->es;
  if (per_point < 1) per_point = 1;
  int64_t grain = (64 * 1024) / per_point;
  if (grain < 1) grain = 1;
  iron_threadpool_parallel_for(ctx ? ctx->pool : NULL, p->plan.num_points,
                               grain,
                               gather_points, &job);
  return NULL;
}

static const iron_kernel_t kGatherKernel = {
    .name = "gather",
    .prepare = gather_prepare,
    .run = gather_run,
    .destroy = NULL,
    .inplace_ok = false,
    .elementwise = false,
};

void iron_host_register_gather(iron_kernel_table_t table) {
  table[IRON_OP_GATHER] = &kGatherKernel;
  table[IRON_OP_SCATTER] = &iron_host_scatter_kernel;
}
