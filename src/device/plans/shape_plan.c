// Data-movement op validation shared by the devices (shape_plan.h).
#include "device/plans/shape_plan.h"

#include <string.h>

#include "base/narrow_float.h"

bool iron_shape_plan_iota_dtype_ok(iron_dtype_t dt) {
  return iron_dtype_is_int(dt) || dt == IRON_DTYPE_PRED ||
         dt == IRON_DTYPE_F16 || dt == IRON_DTYPE_BF16 ||
         dt == IRON_DTYPE_F32 || dt == IRON_DTYPE_F64 || dt == IRON_DTYPE_C64 ||
         dt == IRON_DTYPE_C128 || iron_narrow_float_is(dt);
}

bool iron_shape_plan_index_dtype_ok(iron_dtype_t dt) {
  // Index-typed tensors have no storage layout kernels read.
  return iron_dtype_is_int(dt) && dt != IRON_DTYPE_INDEX;
}

static iron_status_t check_tensor(const iron_ir_op_t *op,
                                  const iron_ir_type_t *t, const char *what) {
  if (!t || t->kind != IRON_TYPE_TENSOR || !iron_ir_type_is_static(t))
    return iron_ir_op_unimplemented(op, "for a non-static or non-tensor %s",
                                    what);
  if (iron_dtype_size(t->dtype) == 0)
    return iron_ir_op_unimplemented(op, "for dtype %s",
                                    iron_dtype_name(t->dtype));
  if (iron_ir_type_num_elements(t) < 0)
    return IRON_ERR(INVALID_ARGUMENT, "%s: %s is too large", op->name, what);
  return IRON_OK;
}

static iron_status_t check_arity(const iron_ir_op_t *op, uint32_t min_operands,
                                 uint32_t results) {
  if (op->num_operands < min_operands || op->num_results != results)
    return IRON_ERR(INVALID_ARGUMENT, "%s: expected %u operands and %u results",
                    op->name, min_operands, results);
  return IRON_OK;
}

// Operand 0 and result 0 are static tensors of one dtype.
static iron_status_t check_unary_move(const iron_ir_op_t *op,
                                      iron_shape_plan_t *p) {
  IRON_RETURN_IF_ERROR_PLAIN(check_arity(op, 1, 1));
  IRON_RETURN_IF_ERROR_PLAIN(
      check_tensor(op, op->operands[0]->type, "operand"));
  IRON_RETURN_IF_ERROR_PLAIN(check_tensor(op, op->results[0].type, "result"));
  if (op->operands[0]->type->dtype != op->results[0].type->dtype)
    return IRON_ERR(INVALID_ARGUMENT, "%s: operand and result dtypes differ",
                    op->name);
  p->in = op->operands[0]->type;
  p->out = op->results[0].type;
  return IRON_OK;
}

static iron_status_t read_iota(const iron_ir_op_t *op, iron_shape_plan_t *p) {
  IRON_RETURN_IF_ERROR_PLAIN(check_arity(op, 0, 1));
  const iron_ir_type_t *t = op->results[0].type;
  IRON_RETURN_IF_ERROR_PLAIN(check_tensor(op, t, "result"));
  if (!iron_shape_plan_iota_dtype_ok(t->dtype))
    return iron_ir_op_unimplemented(op, "for dtype %s",
                                    iron_dtype_name(t->dtype));
  uint32_t n = 0;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_ir_op_i64_list(op, "iota_dimension", &p->dim, 1, &n));
  if (t->rank == 0 || n != 1 || p->dim < 0 || p->dim >= t->rank)
    return IRON_ERR(INVALID_ARGUMENT, "%s: bad iota_dimension", op->name);
  p->out = t;
  return IRON_OK;
}

// Operand dim k goes to result dim bdims[k] (broadcast_in_dim and
// broadcast).
static iron_status_t check_broadcast_dims(const iron_ir_op_t *op,
                                          const iron_shape_plan_t *p,
                                          uint32_t nb) {
  const iron_ir_type_t *in = p->in, *out = p->out;
  if ((int32_t)nb != in->rank)
    return IRON_ERR(INVALID_ARGUMENT,
                    "%s: broadcast_dimensions has %u entries for rank %d",
                    op->name, nb, in->rank);
  bool used[IRON_MAX_RANK] = {false};
  for (uint32_t k = 0; k < nb; ++k) {
    int64_t d = p->bdims[k];
    if (d < 0 || d >= out->rank || used[d] ||
        (in->dims[k] != 1 && in->dims[k] != out->dims[d]))
      return IRON_ERR(INVALID_ARGUMENT,
                      "%s: bad broadcast dimension %lld for operand dim %u",
                      op->name, (long long)d, k);
    used[d] = true;
  }
  return IRON_OK;
}

static iron_status_t read_broadcast_in_dim(const iron_ir_op_t *op,
                                           iron_shape_plan_t *p) {
  IRON_RETURN_IF_ERROR_PLAIN(check_unary_move(op, p));
  uint32_t nb = 0;
  IRON_RETURN_IF_ERROR_PLAIN(iron_ir_op_i64_list(op, "broadcast_dimensions",
                                                 p->bdims, IRON_MAX_RANK, &nb));
  return check_broadcast_dims(op, p, nb);
}

static iron_status_t read_broadcast(const iron_ir_op_t *op,
                                    iron_shape_plan_t *p) {
  IRON_RETURN_IF_ERROR_PLAIN(check_unary_move(op, p));
  const iron_ir_type_t *in = p->in, *out = p->out;
  int64_t sizes[IRON_MAX_RANK];
  uint32_t ns = 0;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_ir_op_i64_list(op, "broadcast_sizes", sizes, IRON_MAX_RANK, &ns));
  if ((int64_t)ns + in->rank != out->rank)
    return IRON_ERR(INVALID_ARGUMENT, "%s: result rank mismatch", op->name);
  for (uint32_t i = 0; i < ns; ++i)
    if (sizes[i] != out->dims[i])
      return IRON_ERR(INVALID_ARGUMENT, "%s: broadcast_sizes mismatch",
                      op->name);
  for (int32_t k = 0; k < in->rank; ++k) p->bdims[k] = (int64_t)ns + k;
  return check_broadcast_dims(op, p, (uint32_t)in->rank);
}

static iron_status_t read_reshape(const iron_ir_op_t *op,
                                  iron_shape_plan_t *p) {
  IRON_RETURN_IF_ERROR_PLAIN(check_unary_move(op, p));
  if (iron_ir_type_num_elements(p->in) != iron_ir_type_num_elements(p->out))
    return IRON_ERR(INVALID_ARGUMENT, "%s: element counts differ", op->name);
  size_t nbytes = 0;
  if (!iron_ir_type_byte_size(p->out, &nbytes))
    return IRON_ERR(INVALID_ARGUMENT, "%s: result too large", op->name);
  return IRON_OK;
}

static iron_status_t read_transpose(const iron_ir_op_t *op,
                                    iron_shape_plan_t *p) {
  IRON_RETURN_IF_ERROR_PLAIN(check_unary_move(op, p));
  const iron_ir_type_t *in = p->in, *out = p->out;
  uint32_t np = 0;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_ir_op_i64_list(op, "permutation", p->perm, IRON_MAX_RANK, &np));
  if ((int32_t)np != in->rank || out->rank != in->rank)
    return IRON_ERR(INVALID_ARGUMENT, "%s: bad permutation length", op->name);
  bool used[IRON_MAX_RANK] = {false};
  for (uint32_t i = 0; i < np; ++i) {
    int64_t d = p->perm[i];
    if (d < 0 || d >= in->rank || used[d] || in->dims[d] != out->dims[i])
      return IRON_ERR(INVALID_ARGUMENT, "%s: bad permutation", op->name);
    used[d] = true;
  }
  return IRON_OK;
}

static iron_status_t read_slice(const iron_ir_op_t *op, iron_shape_plan_t *p) {
  IRON_RETURN_IF_ERROR_PLAIN(check_unary_move(op, p));
  const iron_ir_type_t *in = p->in, *out = p->out;
  int64_t limit[IRON_MAX_RANK];
  uint32_t n0 = 0, n1 = 0, n2 = 0;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_ir_op_i64_list(op, "start_indices", p->start, IRON_MAX_RANK, &n0));
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_ir_op_i64_list(op, "limit_indices", limit, IRON_MAX_RANK, &n1));
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_ir_op_i64_list(op, "strides", p->stride, IRON_MAX_RANK, &n2));
  if (n2 == 0 && in->rank > 0) {  // strides are optional in the old form
    for (int32_t i = 0; i < in->rank; ++i) p->stride[i] = 1;
    n2 = (uint32_t)in->rank;
  }
  if ((int32_t)n0 != in->rank || n1 != n0 || n2 != n0 || out->rank != in->rank)
    return IRON_ERR(INVALID_ARGUMENT, "%s: attribute lengths", op->name);
  for (int32_t i = 0; i < in->rank; ++i) {
    int64_t s = p->start[i], l = limit[i], st = p->stride[i];
    // (The count without stride - 1 added: a huge stride must not wrap.)
    if (s < 0 || l < s || l > in->dims[i] || st < 1 ||
        out->dims[i] != (l == s ? 0 : (l - s - 1) / st + 1))
      return IRON_ERR(INVALID_ARGUMENT, "%s: bad slice in dim %d", op->name, i);
  }
  return IRON_OK;
}

static iron_status_t read_reverse(const iron_ir_op_t *op,
                                  iron_shape_plan_t *p) {
  IRON_RETURN_IF_ERROR_PLAIN(check_unary_move(op, p));
  if (!iron_ir_type_equal(p->in, p->out))
    return IRON_ERR(INVALID_ARGUMENT, "%s: shape mismatch", op->name);
  int64_t dims[IRON_MAX_RANK];
  uint32_t nd = 0;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_ir_op_i64_list(op, "dimensions", dims, IRON_MAX_RANK, &nd));
  for (uint32_t k = 0; k < nd; ++k) {
    int64_t d = dims[k];
    // StableHLO lists each dim once (C2: is_unique(dimensions)).
    if (d < 0 || d >= p->in->rank || p->reversed[d])
      return IRON_ERR(INVALID_ARGUMENT, "%s: bad dimension %lld", op->name,
                      (long long)d);
    p->reversed[d] = true;
  }
  return IRON_OK;
}

static iron_status_t read_concatenate(const iron_ir_op_t *op,
                                      iron_shape_plan_t *p) {
  if (op->num_operands < 1 || op->num_results != 1)
    return IRON_ERR(INVALID_ARGUMENT, "%s: bad arity", op->name);
  const iron_ir_type_t *out = op->results[0].type;
  IRON_RETURN_IF_ERROR_PLAIN(check_tensor(op, out, "result"));
  uint32_t n = 0;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_ir_op_i64_list(op, "dimension", &p->dim, 1, &n));
  int64_t dim = p->dim;
  if (n != 1 || dim < 0 || dim >= out->rank)
    return IRON_ERR(INVALID_ARGUMENT, "%s: bad dimension", op->name);
  int64_t at = 0;
  for (uint32_t k = 0; k < op->num_operands; ++k) {
    const iron_ir_type_t *in = op->operands[k]->type;
    IRON_RETURN_IF_ERROR_PLAIN(check_tensor(op, in, "operand"));
    if (in->dtype != out->dtype || in->rank != out->rank)
      return IRON_ERR(INVALID_ARGUMENT, "%s: operand %u type mismatch",
                      op->name, k);
    for (int32_t i = 0; i < in->rank; ++i)
      if (i != dim && in->dims[i] != out->dims[i])
        return IRON_ERR(INVALID_ARGUMENT, "%s: operand %u shape mismatch",
                        op->name, k);
    at += in->dims[dim];
  }
  if (at != out->dims[dim])
    return IRON_ERR(INVALID_ARGUMENT, "%s: result size mismatch", op->name);
  p->in = op->operands[0]->type;
  p->out = out;
  return IRON_OK;
}

static iron_status_t read_pad(const iron_ir_op_t *op, iron_shape_plan_t *p) {
  IRON_RETURN_IF_ERROR_PLAIN(check_unary_move(op, p));
  if (op->num_operands != 2)
    return IRON_ERR(INVALID_ARGUMENT, "%s: expected 2 operands", op->name);
  const iron_ir_type_t *in = p->in, *out = p->out;
  const iron_ir_type_t *pv = op->operands[1]->type;
  IRON_RETURN_IF_ERROR_PLAIN(check_tensor(op, pv, "padding value"));
  if (pv->rank != 0 || pv->dtype != in->dtype || out->rank != in->rank)
    return IRON_ERR(INVALID_ARGUMENT, "%s: type mismatch", op->name);
  uint32_t n0 = 0, n1 = 0, n2 = 0;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_ir_op_i64_list(op, "edge_padding_low", p->lo, IRON_MAX_RANK, &n0));
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_ir_op_i64_list(op, "edge_padding_high", p->hi, IRON_MAX_RANK, &n1));
  IRON_RETURN_IF_ERROR_PLAIN(iron_ir_op_i64_list(
      op, "interior_padding", p->interior, IRON_MAX_RANK, &n2));
  if ((int32_t)n0 != in->rank || n1 != n0 || n2 != n0)
    return IRON_ERR(INVALID_ARGUMENT, "%s: attribute lengths", op->name);
  for (int32_t i = 0; i < in->rank; ++i) {
    // Bounded so that the kernels' index arithmetic cannot wrap (ir.h).
    if (!iron_ir_pad_dim_is_valid(in->dims[i], p->lo[i], p->hi[i],
                                  p->interior[i], out->dims[i]))
      return IRON_ERR(INVALID_ARGUMENT, "%s: bad padding in dim %d", op->name,
                      i);
  }
  return IRON_OK;
}

static iron_status_t check_start_operands(const iron_ir_op_t *op,
                                          uint32_t first, int32_t rank) {
  if (op->num_operands != first + (uint32_t)rank)
    return IRON_ERR(INVALID_ARGUMENT, "%s: expected %d start indices", op->name,
                    rank);
  for (int32_t i = 0; i < rank; ++i) {
    const iron_ir_type_t *t = op->operands[first + (uint32_t)i]->type;
    if (!t || t->kind != IRON_TYPE_TENSOR || t->rank != 0 ||
        !iron_shape_plan_index_dtype_ok(t->dtype))
      return iron_ir_op_unimplemented(op, "for start index %d of type %s", i,
                                      t ? iron_dtype_name(t->dtype) : "?");
  }
  return IRON_OK;
}

static iron_status_t read_dynamic_slice(const iron_ir_op_t *op,
                                        iron_shape_plan_t *p) {
  IRON_RETURN_IF_ERROR_PLAIN(check_unary_move(op, p));
  const iron_ir_type_t *in = p->in, *out = p->out;
  IRON_RETURN_IF_ERROR_PLAIN(check_start_operands(op, 1, in->rank));
  uint32_t ns = 0;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_ir_op_i64_list(op, "slice_sizes", p->part, IRON_MAX_RANK, &ns));
  if ((int32_t)ns != in->rank || out->rank != in->rank)
    return IRON_ERR(INVALID_ARGUMENT, "%s: slice_sizes length", op->name);
  for (int32_t i = 0; i < in->rank; ++i)
    if (p->part[i] < 0 || p->part[i] > in->dims[i] ||
        p->part[i] != out->dims[i])
      return IRON_ERR(INVALID_ARGUMENT, "%s: bad slice size in dim %d",
                      op->name, i);
  p->first_index = 1;
  return IRON_OK;
}

static iron_status_t read_dynamic_update_slice(const iron_ir_op_t *op,
                                               iron_shape_plan_t *p) {
  IRON_RETURN_IF_ERROR_PLAIN(check_unary_move(op, p));
  if (op->num_operands < 2)
    return IRON_ERR(INVALID_ARGUMENT, "%s: missing update", op->name);
  const iron_ir_type_t *in = p->in, *out = p->out;
  const iron_ir_type_t *upd = op->operands[1]->type;
  IRON_RETURN_IF_ERROR_PLAIN(check_tensor(op, upd, "update"));
  if (!iron_ir_type_equal(in, out) || upd->dtype != in->dtype ||
      upd->rank != in->rank)
    return IRON_ERR(INVALID_ARGUMENT, "%s: type mismatch", op->name);
  IRON_RETURN_IF_ERROR_PLAIN(check_start_operands(op, 2, in->rank));
  for (int32_t i = 0; i < in->rank; ++i)
    if (upd->dims[i] > in->dims[i])
      return IRON_ERR(INVALID_ARGUMENT, "%s: update larger than operand",
                      op->name);
  size_t nbytes = 0;
  if (!iron_ir_type_byte_size(in, &nbytes))
    return IRON_ERR(INVALID_ARGUMENT, "%s: operand too large", op->name);
  memcpy(p->part, upd->dims, sizeof(int64_t) * (size_t)upd->rank);
  p->update = upd;
  p->first_index = 2;
  return IRON_OK;
}

iron_status_t iron_shape_plan_read(const iron_ir_op_t *op,
                                   iron_shape_plan_t *out) {
  memset(out, 0, sizeof(*out));
  switch (op->kind) {
    case IRON_OP_IOTA:
      return read_iota(op, out);
    case IRON_OP_BROADCAST_IN_DIM:
      return read_broadcast_in_dim(op, out);
    case IRON_OP_BROADCAST:
      return read_broadcast(op, out);
    case IRON_OP_RESHAPE:
      return read_reshape(op, out);
    case IRON_OP_TRANSPOSE:
      return read_transpose(op, out);
    case IRON_OP_SLICE:
      return read_slice(op, out);
    case IRON_OP_REVERSE:
      return read_reverse(op, out);
    case IRON_OP_CONCATENATE:
      return read_concatenate(op, out);
    case IRON_OP_PAD:
      return read_pad(op, out);
    case IRON_OP_DYNAMIC_SLICE:
      return read_dynamic_slice(op, out);
    case IRON_OP_DYNAMIC_UPDATE_SLICE:
      return read_dynamic_update_slice(op, out);
    default:
      return IRON_ERR(INVALID_ARGUMENT, "%s: not a data-movement op", op->name);
  }
}
