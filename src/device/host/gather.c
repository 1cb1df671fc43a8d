// stablehlo.gather on the host (scatter lives in scatter_kernel.c; both are
// registered here).
//
// Gather is pure data movement, so it works for every dtype by copying
// element bytes. Prepare splits the output into "batch points" (the index
// tensor's dims other than index_vector_dim, which are also the output dims
// not in offset_dims) and a window box (the operand dims that are neither
// collapsed nor batching, mapped to offset_dims in order). Per batch point
// run reads the start indices, clamps each to [0, dim - slice_size] as XLA
// does, adds the batching coordinates, and copies the box; adjacent box dims
// are merged so an embedding lookup copies one row with one memcpy.
#include <stdlib.h>
#include <string.h>

#include "device/host/gather_index.h"
#include "device/host/host_kernel.h"

typedef struct gather_params {
  size_t es;
  iron_dtype_t idx_dtype;
  int64_t op_strides[IRON_MAX_RANK];
  // Batch points: the index tensor's dims without index_vector_dim.
  int32_t nbatch;
  int64_t bdims[IRON_MAX_RANK];
  int64_t b_idx_stride[IRON_MAX_RANK];
  int64_t b_out_stride[IRON_MAX_RANK];
  int64_t b_op_stride[IRON_MAX_RANK];  // non-zero for batching dims
  int64_t num_points;
  // Start indices.
  int32_t nstart;
  int64_t idx_vec_stride;
  int64_t start_op_stride[IRON_MAX_RANK];
  int64_t start_max[IRON_MAX_RANK];
  iron_gather_box_t box;
  int64_t out_count;
} gather_params_t;

#define GATHER_BAD(...) IRON_ERR(INVALID_ARGUMENT, "stablehlo.gather: " __VA_ARGS__)

static iron_status_t gather_prepare(const iron_ir_op_t *op,
                                    iron_region_t *const *regions,
                                    void **out_params) {
  (void)regions;
  *out_params = NULL;
  if (op->num_operands != 2 || op->num_results != 1)
    return GATHER_BAD("expects 2 operands and 1 result");
  const iron_ir_type_t *ot = op->operands[0]->type;
  const iron_ir_type_t *it = op->operands[1]->type;
  const iron_ir_type_t *rt = op->results[0].type;
  if (ot->kind != IRON_TYPE_TENSOR || it->kind != IRON_TYPE_TENSOR ||
      rt->kind != IRON_TYPE_TENSOR || !iron_ir_type_is_static(ot) ||
      !iron_ir_type_is_static(it) || !iron_ir_type_is_static(rt))
    return iron_ir_op_unimplemented(op, "for dynamic or non-tensor types");
  if (rt->dtype != ot->dtype) return GATHER_BAD("result dtype differs");
  if (!iron_gather_index_dtype_ok(it->dtype))
    return iron_ir_op_unimplemented(op, "for index dtype %s",
                                    iron_dtype_name(it->dtype));
  size_t es = iron_dtype_size(ot->dtype);
  if (es == 0)
    return iron_ir_op_unimplemented(op, "for dtype %s",
                                    iron_dtype_name(ot->dtype));

  int64_t offset_dims[IRON_MAX_RANK], collapsed[IRON_MAX_RANK],
      op_batch[IRON_MAX_RANK], idx_batch[IRON_MAX_RANK],
      start_map[IRON_MAX_RANK], slice[IRON_MAX_RANK], ivd_list[1];
  uint32_t n_off, n_col, n_ob, n_ib, n_sm, n_sl, n_ivd;
  IRON_RETURN_IF_ERROR_PLAIN(iron_ir_op_i64_list(op, "offset_dims", offset_dims,
                                                 IRON_MAX_RANK, &n_off));
  IRON_RETURN_IF_ERROR_PLAIN(iron_ir_op_i64_list(
      op, "collapsed_slice_dims", collapsed, IRON_MAX_RANK, &n_col));
  IRON_RETURN_IF_ERROR_PLAIN(iron_ir_op_i64_list(
      op, "operand_batching_dims", op_batch, IRON_MAX_RANK, &n_ob));
  IRON_RETURN_IF_ERROR_PLAIN(iron_ir_op_i64_list(
      op, "start_indices_batching_dims", idx_batch, IRON_MAX_RANK, &n_ib));
  IRON_RETURN_IF_ERROR_PLAIN(iron_ir_op_i64_list(op, "start_index_map",
                                                 start_map, IRON_MAX_RANK,
                                                 &n_sm));
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_ir_op_i64_list(op, "slice_sizes", slice, IRON_MAX_RANK, &n_sl));
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_ir_op_i64_list(op, "index_vector_dim", ivd_list, 1, &n_ivd));
  if (n_ivd != 1) return GATHER_BAD("missing index_vector_dim");
  int64_t ivd = ivd_list[0];
  int32_t orank = ot->rank, irank = it->rank, rrank = rt->rank;
  if (ivd < 0 || ivd > irank) return GATHER_BAD("bad index_vector_dim");
  if ((int32_t)n_sl != orank) return GATHER_BAD("slice_sizes rank mismatch");
  if (n_ob != n_ib) return GATHER_BAD("batching dims count mismatch");
  int64_t vec_len = ivd < irank ? it->dims[ivd] : 1;
  if ((int64_t)n_sm != vec_len)
    return GATHER_BAD("start_index_map length %u != index vector length %lld",
                      n_sm, (long long)vec_len);
  for (int32_t d = 0; d < orank; ++d)
    if (slice[d] < 0 || slice[d] > ot->dims[d])
      return GATHER_BAD("slice size out of range");
  for (uint32_t i = 0; i < n_col; ++i)
    if (collapsed[i] < 0 || collapsed[i] >= orank || slice[collapsed[i]] > 1)
      return GATHER_BAD("bad collapsed_slice_dims");
  for (uint32_t i = 0; i < n_ob; ++i)
    if (op_batch[i] < 0 || op_batch[i] >= orank || slice[op_batch[i]] > 1 ||
        idx_batch[i] < 0 || idx_batch[i] >= irank || idx_batch[i] == ivd)
      return GATHER_BAD("bad batching dims");
  for (uint32_t i = 0; i < n_sm; ++i)
    if (start_map[i] < 0 || start_map[i] >= orank)
      return GATHER_BAD("bad start_index_map");
  int32_t nbatch = irank - (ivd < irank ? 1 : 0);
  if (rrank != nbatch + (int32_t)n_off) return GATHER_BAD("result rank");
  for (uint32_t i = 0; i < n_off; ++i)
    if (offset_dims[i] < 0 || offset_dims[i] >= rrank)
      return GATHER_BAD("bad offset_dims");

  gather_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "gather params");
  p->es = es;
  p->idx_dtype = it->dtype;
  strides_of(ot, p->op_strides);
  int64_t idx_strides[IRON_MAX_RANK], out_strides[IRON_MAX_RANK];
  strides_of(it, idx_strides);
  strides_of(rt, out_strides);
  p->out_count = iron_ir_type_num_elements(rt);

  // Batch dims: output dims not in offset_dims, in order <-> index dims
  // without ivd, in order.
  int32_t j = 0, od = 0;
  p->num_points = 1;
  for (int32_t d = 0; d < irank; ++d) {
    if (d == ivd) continue;
    while (od < rrank && list_has(offset_dims, n_off, od)) ++od;
    if (od >= rrank || rt->dims[od] != it->dims[d]) {
      free(p);
      return GATHER_BAD("batch dim %d size mismatch", d);
    }
    p->bdims[j] = it->dims[d];
    p->b_idx_stride[j] = idx_strides[d];
    p->b_out_stride[j] = out_strides[od];
    int32_t bp = list_pos(idx_batch, n_ib, d);
    if (bp >= 0) {
      int64_t opd = op_batch[bp];
      if (ot->dims[opd] != it->dims[d]) {
        free(p);
        return GATHER_BAD("batching dim size mismatch");
      }
      p->b_op_stride[j] = p->op_strides[opd];
    }
    p->num_points *= it->dims[d];
    ++j;
    ++od;
  }
  p->nbatch = nbatch;
  p->nstart = (int32_t)n_sm;
  p->idx_vec_stride = ivd < irank ? idx_strides[ivd] : 0;
  for (uint32_t k = 0; k < n_sm; ++k) {
    p->start_op_stride[k] = p->op_strides[start_map[k]];
    p->start_max[k] = ot->dims[start_map[k]] - slice[start_map[k]];
  }
  // Window box: operand dims not collapsed and not batching <-> offset_dims.
  uint32_t k = 0;
  for (int32_t d = 0; d < orank; ++d) {
    if (list_has(collapsed, n_col, d) || list_has(op_batch, n_ob, d))
      continue;
    if (k >= n_off || rt->dims[offset_dims[k]] != slice[d]) {
      free(p);
      return GATHER_BAD("offset dim size mismatch");
    }
    p->box.size[p->box.rank] = slice[d];
    p->box.a_stride[p->box.rank] = p->op_strides[d];
    p->box.b_stride[p->box.rank] = out_strides[offset_dims[k]];
    ++p->box.rank;
    ++k;
  }
  if (k != n_off) {
    free(p);
    return GATHER_BAD("offset_dims count mismatch");
  }
  iron_gather_box_simplify(&p->box);
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
  const gather_params_t *p = j->p;
  const iron_gather_box_t *box = &p->box;
  size_t es = p->es;
  for (int64_t b = begin; b < end; ++b) {
    int64_t rem = b, idx_off = 0, out_off = 0, op_off = 0;
    for (int32_t d = p->nbatch - 1; d >= 0; --d) {
      int64_t c = rem % p->bdims[d];
      rem /= p->bdims[d];
      idx_off += c * p->b_idx_stride[d];
      out_off += c * p->b_out_stride[d];
      op_off += c * p->b_op_stride[d];
    }
    for (int32_t k = 0; k < p->nstart; ++k) {
      int64_t s = iron_gather_index_read(j->idx, p->idx_dtype,
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
  if (p->out_count == 0) return NULL;
  gather_job_t job = {p, inputs[0]->data, inputs[1]->data, outputs[0]->data};
  // About 64 KiB of output per chunk keeps thread overhead small.
  int64_t per_point = p->box.count * (int64_t)p->es;
  if (per_point < 1) per_point = 1;
  int64_t grain = (64 * 1024) / per_point;
  if (grain < 1) grain = 1;
  iron_threadpool_parallel_for(ctx ? ctx->pool : NULL, p->num_points, grain,
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
