// stablehlo.gather / stablehlo.scatter validation and planning shared by
// the devices (gather_plan.h).
#include "device/plans/gather_plan.h"

#include <string.h>

#define GATHER_BAD(...) \
  IRON_ERR(INVALID_ARGUMENT, "stablehlo.gather: " __VA_ARGS__)
#define SCATTER_BAD(...) \
  IRON_ERR(INVALID_ARGUMENT, "stablehlo.scatter: " __VA_ARGS__)

bool iron_gather_plan_index_dtype_ok(iron_dtype_t dt) {
  switch (dt) {
    case IRON_DTYPE_S2:
    case IRON_DTYPE_S4:
    case IRON_DTYPE_U2:
    case IRON_DTYPE_U4:
    case IRON_DTYPE_S8:
    case IRON_DTYPE_S16:
    case IRON_DTYPE_S32:
    case IRON_DTYPE_S64:
    case IRON_DTYPE_U8:
    case IRON_DTYPE_U16:
    case IRON_DTYPE_U32:
    case IRON_DTYPE_U64:
      return true;
    default:
      return false;
  }
}

void iron_gather_box_simplify(iron_gather_box_t *box) {
  iron_gather_box_t o;
  memset(&o, 0, sizeof(o));
  o.count = 1;
  for (int32_t i = 0; i < box->rank; ++i) o.count *= box->size[i];
  for (int32_t i = 0; i < box->rank; ++i) {
    if (box->size[i] == 1) continue;
    o.size[o.rank] = box->size[i];
    o.a_stride[o.rank] = box->a_stride[i];
    o.b_stride[o.rank] = box->b_stride[i];
    ++o.rank;
  }
  // Merge from the inside out.
  for (int32_t i = o.rank - 2; i >= 0; --i) {
    int32_t j = i + 1;
    if (o.a_stride[i] == o.a_stride[j] * o.size[j] &&
        o.b_stride[i] == o.b_stride[j] * o.size[j]) {
      o.size[i] *= o.size[j];
      o.a_stride[i] = o.a_stride[j];
      o.b_stride[i] = o.b_stride[j];
      for (int32_t k = j; k + 1 < o.rank; ++k) {
        o.size[k] = o.size[k + 1];
        o.a_stride[k] = o.a_stride[k + 1];
        o.b_stride[k] = o.b_stride[k + 1];
      }
      --o.rank;
    }
  }
  *box = o;
}

static bool list_has(const int64_t *v, uint32_t n, int64_t x) {
  for (uint32_t i = 0; i < n; ++i)
    if (v[i] == x) return true;
  return false;
}

static int32_t list_pos(const int64_t *v, uint32_t n, int64_t x) {
  for (uint32_t i = 0; i < n; ++i)
    if (v[i] == x) return (int32_t)i;
  return -1;
}

static void strides_of(const iron_ir_type_t *t, int64_t *out) {
  int64_t s = 1;
  for (int32_t i = t->rank - 1; i >= 0; --i) {
    out[i] = s;
    s *= t->dims[i];
  }
}

iron_status_t iron_gather_plan_read(const iron_ir_op_t *op,
                                    iron_gather_plan_t *p) {
  memset(p, 0, sizeof(*p));
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
  if (!iron_gather_plan_index_dtype_ok(it->dtype))
    return iron_ir_op_unimplemented(op, "for index dtype %s",
                                    iron_dtype_name(it->dtype));
  if (iron_dtype_size(ot->dtype) == 0)
    return iron_ir_op_unimplemented(op, "for dtype %s",
                                    iron_dtype_name(ot->dtype));
  p->num = 1;
  p->dtype[0] = ot->dtype;
  p->idx_dtype = it->dtype;

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
  IRON_RETURN_IF_ERROR_PLAIN(iron_ir_op_i64_list(
      op, "start_index_map", start_map, IRON_MAX_RANK, &n_sm));
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

  int64_t op_strides[IRON_MAX_RANK], idx_strides[IRON_MAX_RANK],
      out_strides[IRON_MAX_RANK];
  strides_of(ot, op_strides);
  strides_of(it, idx_strides);
  strides_of(rt, out_strides);
  p->op_count = iron_ir_type_num_elements(ot);
  p->small_count = iron_ir_type_num_elements(rt);

  // Points: result dims not in offset_dims, in order <-> index dims
  // without ivd, in order.
  int32_t j = 0, od = 0;
  p->num_points = 1;
  for (int32_t d = 0; d < irank; ++d) {
    if (d == ivd) continue;
    while (od < rrank && list_has(offset_dims, n_off, od)) ++od;
    if (od >= rrank || rt->dims[od] != it->dims[d])
      return GATHER_BAD("batch dim %d size mismatch", d);
    p->bdims[j] = it->dims[d];
    p->b_idx_stride[j] = idx_strides[d];
    p->b_small_stride[j] = out_strides[od];
    int32_t bp = list_pos(idx_batch, n_ib, d);
    if (bp >= 0) {
      int64_t opd = op_batch[bp];
      if (ot->dims[opd] != it->dims[d])
        return GATHER_BAD("batching dim size mismatch");
      p->b_op_stride[j] = op_strides[opd];
      p->b_op_dim[j] = ot->dims[opd];
    }
    p->num_points *= it->dims[d];
    ++j;
    ++od;
  }
  p->nbatch = nbatch;
  p->nstart = (int32_t)n_sm;
  p->idx_vec_stride = ivd < irank ? idx_strides[ivd] : 0;
  for (uint32_t k = 0; k < n_sm; ++k) {
    p->start_op_stride[k] = op_strides[start_map[k]];
    p->start_max[k] = ot->dims[start_map[k]] - slice[start_map[k]];
  }
  // Window box: operand dims not collapsed and not batching <-> offset_dims.
  iron_gather_box_t *box = &p->box;
  uint32_t k = 0;
  for (int32_t d = 0; d < orank; ++d) {
    if (list_has(collapsed, n_col, d) || list_has(op_batch, n_ob, d)) continue;
    if (k >= n_off || rt->dims[offset_dims[k]] != slice[d])
      return GATHER_BAD("offset dim size mismatch");
    box->size[box->rank] = slice[d];
    box->a_stride[box->rank] = op_strides[d];
    box->b_stride[box->rank] = out_strides[offset_dims[k]];
    ++box->rank;
    ++k;
  }
  if (k != n_off) return GATHER_BAD("offset_dims count mismatch");
  iron_gather_box_simplify(box);
  return IRON_OK;
}

iron_status_t iron_scatter_plan_read(const iron_ir_op_t *op,
                                     iron_gather_plan_t *p) {
  memset(p, 0, sizeof(*p));
  if (op->num_operands < 3 || op->num_operands % 2 != 1)
    return SCATTER_BAD("expects 2N+1 operands");
  int32_t n = (int32_t)(op->num_operands - 1) / 2;
  if (n > IRON_SCATTER_PLAN_MAX_OPERANDS)
    return iron_ir_op_unimplemented(op, "with %d operands", n);
  if ((int32_t)op->num_results != n) return SCATTER_BAD("expects N results");
  p->num = n;
  const iron_ir_type_t *ot = op->operands[0]->type;
  const iron_ir_type_t *it = op->operands[n]->type;
  const iron_ir_type_t *ut = op->operands[n + 1]->type;
  for (uint32_t i = 0; i < op->num_operands; ++i) {
    const iron_ir_type_t *t = op->operands[i]->type;
    if (t->kind != IRON_TYPE_TENSOR || !iron_ir_type_is_static(t))
      return iron_ir_op_unimplemented(op, "for dynamic or non-tensor types");
  }
  for (int32_t i = 0; i < n; ++i) {
    const iron_ir_type_t *a = op->operands[i]->type;
    const iron_ir_type_t *u = op->operands[n + 1 + i]->type;
    const iron_ir_type_t *r = op->results[i].type;
    if (a->rank != ot->rank ||
        memcmp(a->dims, ot->dims, sizeof(int64_t) * (size_t)a->rank))
      return SCATTER_BAD("operand shapes differ");
    if (u->rank != ut->rank ||
        memcmp(u->dims, ut->dims, sizeof(int64_t) * (size_t)u->rank))
      return SCATTER_BAD("update shapes differ");
    if (!iron_ir_type_equal(a, r) || u->dtype != a->dtype)
      return SCATTER_BAD("result/update type differs from operand");
    p->dtype[i] = a->dtype;
    size_t es = iron_dtype_size(a->dtype);
    if (es == 0 || es > 16)
      return iron_ir_op_unimplemented(op, "for dtype %s",
                                      iron_dtype_name(a->dtype));
  }
  if (!iron_gather_plan_index_dtype_ok(it->dtype))
    return iron_ir_op_unimplemented(op, "for index dtype %s",
                                    iron_dtype_name(it->dtype));
  p->idx_dtype = it->dtype;

  int64_t uwd[IRON_MAX_RANK], iwd[IRON_MAX_RANK], ib[IRON_MAX_RANK],
      sib[IRON_MAX_RANK], sdod[IRON_MAX_RANK], ivd_list[1];
  uint32_t n_uwd, n_iwd, n_ib, n_sib, n_sdod, n_ivd;
  IRON_RETURN_IF_ERROR_PLAIN(iron_ir_op_i64_list(op, "update_window_dims", uwd,
                                                 IRON_MAX_RANK, &n_uwd));
  IRON_RETURN_IF_ERROR_PLAIN(iron_ir_op_i64_list(op, "inserted_window_dims",
                                                 iwd, IRON_MAX_RANK, &n_iwd));
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_ir_op_i64_list(op, "input_batching_dims", ib, IRON_MAX_RANK, &n_ib));
  IRON_RETURN_IF_ERROR_PLAIN(iron_ir_op_i64_list(
      op, "scatter_indices_batching_dims", sib, IRON_MAX_RANK, &n_sib));
  IRON_RETURN_IF_ERROR_PLAIN(iron_ir_op_i64_list(
      op, "scatter_dims_to_operand_dims", sdod, IRON_MAX_RANK, &n_sdod));
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_ir_op_i64_list(op, "index_vector_dim", ivd_list, 1, &n_ivd));
  if (n_ivd != 1) return SCATTER_BAD("missing index_vector_dim");
  int64_t ivd = ivd_list[0];
  int32_t orank = ot->rank, irank = it->rank, urank = ut->rank;
  if (ivd < 0 || ivd > irank) return SCATTER_BAD("bad index_vector_dim");
  if (n_ib != n_sib) return SCATTER_BAD("batching dims count mismatch");
  int64_t vec_len = ivd < irank ? it->dims[ivd] : 1;
  if ((int64_t)n_sdod != vec_len)
    return SCATTER_BAD("scatter_dims_to_operand_dims length mismatch");
  for (uint32_t i = 0; i < n_sdod; ++i)
    if (sdod[i] < 0 || sdod[i] >= orank)
      return SCATTER_BAD("bad scatter_dims_to_operand_dims");
  for (uint32_t i = 0; i < n_iwd; ++i)
    if (iwd[i] < 0 || iwd[i] >= orank)
      return SCATTER_BAD("bad inserted_window_dims");
  for (uint32_t i = 0; i < n_ib; ++i)
    if (ib[i] < 0 || ib[i] >= orank || sib[i] < 0 || sib[i] >= irank ||
        sib[i] == ivd)
      return SCATTER_BAD("bad batching dims");
  for (uint32_t i = 0; i < n_uwd; ++i)
    if (uwd[i] < 0 || uwd[i] >= urank)
      return SCATTER_BAD("bad update_window_dims");
  int32_t nbatch = irank - (ivd < irank ? 1 : 0);
  if (urank != nbatch + (int32_t)n_uwd) return SCATTER_BAD("updates rank");

  int64_t op_strides[IRON_MAX_RANK], idx_strides[IRON_MAX_RANK],
      upd_strides[IRON_MAX_RANK];
  strides_of(ot, op_strides);
  strides_of(it, idx_strides);
  strides_of(ut, upd_strides);
  p->op_count = iron_ir_type_num_elements(ot);
  p->small_count = iron_ir_type_num_elements(ut);

  int32_t j = 0, ud = 0;
  p->num_points = 1;
  for (int32_t d = 0; d < irank; ++d) {
    if (d == ivd) continue;
    while (ud < urank && list_has(uwd, n_uwd, ud)) ++ud;
    if (ud >= urank || ut->dims[ud] != it->dims[d])
      return SCATTER_BAD("update scatter dim %d size mismatch", d);
    p->bdims[j] = it->dims[d];
    p->b_idx_stride[j] = idx_strides[d];
    p->b_small_stride[j] = upd_strides[ud];
    int32_t bp = list_pos(sib, n_sib, d);
    if (bp >= 0) {
      p->b_op_stride[j] = op_strides[ib[bp]];
      p->b_op_dim[j] = ot->dims[ib[bp]];
    }
    p->num_points *= it->dims[d];
    ++j;
    ++ud;
  }
  p->nbatch = nbatch;

  int64_t window[IRON_MAX_RANK];
  iron_gather_box_t *box = &p->box;
  uint32_t k = 0;
  for (int32_t d = 0; d < orank; ++d) {
    window[d] = 1;
    if (list_has(iwd, n_iwd, d) || list_has(ib, n_ib, d)) continue;
    if (k >= n_uwd) return SCATTER_BAD("update_window_dims count mismatch");
    int64_t sz = ut->dims[uwd[k]];
    if (sz > ot->dims[d]) return SCATTER_BAD("window larger than operand");
    window[d] = sz;
    box->size[box->rank] = sz;
    box->a_stride[box->rank] = op_strides[d];
    box->b_stride[box->rank] = upd_strides[uwd[k]];
    ++box->rank;
    ++k;
  }
  if (k != n_uwd) return SCATTER_BAD("update_window_dims count mismatch");
  iron_gather_box_simplify(box);

  p->nstart = (int32_t)n_sdod;
  p->idx_vec_stride = ivd < irank ? idx_strides[ivd] : 0;
  for (uint32_t s = 0; s < n_sdod; ++s) {
    p->start_op_stride[s] = op_strides[sdod[s]];
    p->start_max[s] = ot->dims[sdod[s]] - window[sdod[s]];
    if (window[sdod[s]] > 1) p->overlap = true;
  }
  if (op->num_regions != 1)
    return iron_ir_op_unimplemented(op, "without a compiled update body");
  return IRON_OK;
}

iron_scatter_body_t iron_scatter_plan_body(const iron_ir_region_t *r) {
  if (!r || r->num_blocks != 1) return IRON_SCATTER_BODY_GENERIC;
  const iron_ir_block_t *blk = &r->blocks[0];
  if (blk->num_args != 2 || blk->num_ops == 0) return IRON_SCATTER_BODY_GENERIC;
  const iron_ir_op_t *ret = blk->ops[blk->num_ops - 1];
  if (ret->kind != IRON_OP_RETURN || ret->num_operands != 1)
    return IRON_SCATTER_BODY_GENERIC;
  const iron_ir_value_t *v = ret->operands[0];
  const iron_ir_value_t *a0 = &blk->args[0], *a1 = &blk->args[1];
  if (v == a1) return IRON_SCATTER_BODY_SET;
  const iron_ir_op_t *d = v->def_op;
  if (!d || d->num_operands != 2) return IRON_SCATTER_BODY_GENERIC;
  bool args = (d->operands[0] == a0 && d->operands[1] == a1) ||
              (d->operands[0] == a1 && d->operands[1] == a0);
  if (!args) return IRON_SCATTER_BODY_GENERIC;
  switch (d->kind) {
    case IRON_OP_ADD:
      return IRON_SCATTER_BODY_ADD;
    case IRON_OP_MULTIPLY:
      return IRON_SCATTER_BODY_MUL;
    case IRON_OP_MAXIMUM:
      return IRON_SCATTER_BODY_MAX;
    case IRON_OP_MINIMUM:
      return IRON_SCATTER_BODY_MIN;
    case IRON_OP_OR:
      return IRON_SCATTER_BODY_OR;
    case IRON_OP_AND:
      return IRON_SCATTER_BODY_AND;
    default:
      return IRON_SCATTER_BODY_GENERIC;
  }
}
