// stablehlo.convolution validation shared by the devices (conv_plan.h).
// Semantics of the attributes: host conv.c's header comment.
#include "device/plans/conv_plan.h"

#include <string.h>

#include "device/plans/dot_plan.h"

iron_dtype_t iron_conv_plan_compute_dtype(iron_dtype_t out) {
  switch (out) {
    case IRON_DTYPE_F16:
    case IRON_DTYPE_BF16:
    case IRON_DTYPE_F32:
      return IRON_DTYPE_F32;
    case IRON_DTYPE_F64:
      return IRON_DTYPE_F64;
    case IRON_DTYPE_C64:
      return IRON_DTYPE_C64;
    case IRON_DTYPE_C128:
      return IRON_DTYPE_C128;
    case IRON_DTYPE_PRED:
    case IRON_DTYPE_S2:
    case IRON_DTYPE_S4:
    case IRON_DTYPE_S8:
    case IRON_DTYPE_S16:
    case IRON_DTYPE_S32:
    case IRON_DTYPE_S64:
    case IRON_DTYPE_U2:
    case IRON_DTYPE_U4:
    case IRON_DTYPE_U8:
    case IRON_DTYPE_U16:
    case IRON_DTYPE_U32:
    case IRON_DTYPE_U64:
      return IRON_DTYPE_S64;
    default:
      // f8/f4 results: XLA:CPU convolves in f32 and rounds through f16
      // (f8E8M0FNU: from the f32 bits, iron_ew_narrow_dot_store).
      return iron_dot_plan_narrow_is(out) ? IRON_DTYPE_F32 : IRON_DTYPE_INVALID;
  }
}

bool iron_conv_plan_operand_ok(iron_dtype_t operand, iron_dtype_t comp) {
  const iron_dtype_t op = operand;
  bool intlike = op == IRON_DTYPE_PRED ||
                 (iron_dtype_is_int(op) && op != IRON_DTYPE_INDEX);
  bool realf = op == IRON_DTYPE_F16 || op == IRON_DTYPE_BF16 ||
               op == IRON_DTYPE_F32 || op == IRON_DTYPE_F64 ||
               iron_dot_plan_narrow_is(op);
  bool cplx = op == IRON_DTYPE_C64 || op == IRON_DTYPE_C128;
  switch (comp) {
    case IRON_DTYPE_S64:
      return intlike;
    case IRON_DTYPE_F32:
    case IRON_DTYPE_F64:
      return intlike || realf;
    case IRON_DTYPE_C64:
    case IRON_DTYPE_C128:
      return intlike || realf || cplx;
    default:
      return false;
  }
}

static iron_status_t read_dim(const iron_ir_op_t *op, const char *name,
                              int32_t rank, int64_t *out) {
  const iron_ir_attr_t *a = iron_ir_op_attr(op, name);
  if (!a || !iron_ir_attr_as_i64(a, out) || *out < 0 || *out >= rank)
    return IRON_ERR(INVALID_ARGUMENT, "%s: missing or bad %s", op->name, name);
  return IRON_OK;
}

// A list of n entries, or (absent / empty) n copies of dflt.
static iron_status_t read_list(const iron_ir_op_t *op, const char *name,
                               int32_t n, int64_t dflt, int64_t *out) {
  uint32_t got = 0;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_ir_op_i64_list(op, name, out, 2 * IRON_MAX_RANK, &got));
  if (got == 0) {
    for (int32_t d = 0; d < n; ++d) out[d] = dflt;
    return IRON_OK;
  }
  if ((int32_t)got != n)
    return IRON_ERR(INVALID_ARGUMENT, "%s: %s has %u entries, expected %d",
                    op->name, name, got, n);
  return IRON_OK;
}

static iron_status_t read_count(const iron_ir_op_t *op, const char *name,
                                int64_t *out) {
  const iron_ir_attr_t *a = iron_ir_op_attr(op, name);
  *out = 1;
  if (a && (!iron_ir_attr_as_i64(a, out) || *out < 1))
    return IRON_ERR(INVALID_ARGUMENT, "%s: bad %s", op->name, name);
  return IRON_OK;
}

// Marks dims as used; false when one is used twice.
static bool claim(bool *used, int64_t d) {
  if (used[d]) return false;
  used[d] = true;
  return true;
}

iron_status_t iron_conv_plan_check_types(const iron_ir_op_t *op,
                                         iron_conv_plan_t *out) {
  if (op->num_operands != 2 || op->num_results != 1)
    return IRON_ERR(INVALID_ARGUMENT, "%s: expected 2 operands, 1 result",
                    op->name);
  const iron_ir_type_t *lt = op->operands[0]->type;
  const iron_ir_type_t *rt = op->operands[1]->type;
  const iron_ir_type_t *ot = op->results[0].type;
  const iron_ir_type_t *ts[3] = {lt, rt, ot};
  for (int i = 0; i < 3; ++i)
    if (!ts[i] || ts[i]->kind != IRON_TYPE_TENSOR ||
        !iron_ir_type_is_static(ts[i]) || iron_ir_type_num_elements(ts[i]) < 0)
      return iron_ir_op_unimplemented(op, "for non-static tensor types");
  iron_dtype_t comp = iron_conv_plan_compute_dtype(ot->dtype);
  if (comp == IRON_DTYPE_INVALID ||
      !iron_conv_plan_operand_ok(lt->dtype, comp) ||
      !iron_conv_plan_operand_ok(rt->dtype, comp) ||
      !iron_dot_plan_narrow_mix_ok(lt->dtype, rt->dtype, ot->dtype))
    return iron_ir_op_unimplemented(
        op, "for %s x %s -> %s", iron_dtype_name(lt->dtype),
        iron_dtype_name(rt->dtype), iron_dtype_name(ot->dtype));
  out->lhs = lt;
  out->rhs = rt;
  out->out = ot;
  out->comp_dtype = comp;
  return IRON_OK;
}

iron_status_t iron_conv_plan_read_attrs(const iron_ir_op_t *op,
                                        iron_conv_plan_t *out) {
  const iron_ir_type_t *lt = out->lhs, *rt = out->rhs, *ot = out->out;
  int32_t rank = lt->rank;
  if (rank < 2 || rt->rank != rank || ot->rank != rank)
    return IRON_ERR(INVALID_ARGUMENT, "%s: operand/result ranks %d, %d, %d",
                    op->name, lt->rank, rt->rank, ot->rank);
  int32_t nsp = rank - 2;
  out->rank = rank;
  out->nsp = nsp;

  // Dimension numbers.
  IRON_RETURN_IF_ERROR_PLAIN(
      read_dim(op, "input_batch_dimension", rank, &out->in_batch_dim));
  IRON_RETURN_IF_ERROR_PLAIN(
      read_dim(op, "input_feature_dimension", rank, &out->in_feature_dim));
  IRON_RETURN_IF_ERROR_PLAIN(read_dim(op, "kernel_input_feature_dimension",
                                      rank, &out->k_in_feature_dim));
  IRON_RETURN_IF_ERROR_PLAIN(read_dim(op, "kernel_output_feature_dimension",
                                      rank, &out->k_out_feature_dim));
  IRON_RETURN_IF_ERROR_PLAIN(
      read_dim(op, "output_batch_dimension", rank, &out->out_batch_dim));
  IRON_RETURN_IF_ERROR_PLAIN(
      read_dim(op, "output_feature_dimension", rank, &out->out_feature_dim));
  int64_t *isp = out->in_sp_dim, *ksp = out->k_sp_dim, *osp = out->out_sp_dim;
  uint32_t n1 = 0, n2 = 0, n3 = 0;
  IRON_RETURN_IF_ERROR_PLAIN(iron_ir_op_i64_list(op, "input_spatial_dimensions",
                                                 isp, IRON_MAX_RANK, &n1));
  IRON_RETURN_IF_ERROR_PLAIN(iron_ir_op_i64_list(
      op, "kernel_spatial_dimensions", ksp, IRON_MAX_RANK, &n2));
  IRON_RETURN_IF_ERROR_PLAIN(iron_ir_op_i64_list(
      op, "output_spatial_dimensions", osp, IRON_MAX_RANK, &n3));
  if ((int32_t)n1 != nsp || (int32_t)n2 != nsp || (int32_t)n3 != nsp)
    return IRON_ERR(INVALID_ARGUMENT, "%s: %d spatial dims expected", op->name,
                    nsp);
  bool lu[IRON_MAX_RANK] = {0}, ku[IRON_MAX_RANK] = {0},
       ou[IRON_MAX_RANK] = {0};
  bool ok = claim(lu, out->in_batch_dim) && claim(lu, out->in_feature_dim) &&
            claim(ku, out->k_in_feature_dim) &&
            claim(ku, out->k_out_feature_dim) &&
            claim(ou, out->out_batch_dim) && claim(ou, out->out_feature_dim);
  for (int32_t d = 0; ok && d < nsp; ++d)
    ok = isp[d] >= 0 && isp[d] < rank && ksp[d] >= 0 && ksp[d] < rank &&
         osp[d] >= 0 && osp[d] < rank && claim(lu, isp[d]) &&
         claim(ku, ksp[d]) && claim(ou, osp[d]);
  if (!ok)
    return IRON_ERR(INVALID_ARGUMENT, "%s: bad dimension numbers", op->name);

  // Window attributes.
  IRON_RETURN_IF_ERROR_PLAIN(
      read_list(op, "window_strides", nsp, 1, out->stride));
  IRON_RETURN_IF_ERROR_PLAIN(read_list(op, "padding", 2 * nsp, 0, out->pad));
  IRON_RETURN_IF_ERROR_PLAIN(
      read_list(op, "lhs_dilation", nsp, 1, out->lhs_dil));
  IRON_RETURN_IF_ERROR_PLAIN(
      read_list(op, "rhs_dilation", nsp, 1, out->rhs_dil));
  IRON_RETURN_IF_ERROR_PLAIN(
      read_list(op, "window_reversal", nsp, 0, out->reversal));
  IRON_RETURN_IF_ERROR_PLAIN(
      read_count(op, "feature_group_count", &out->feature_group_count));
  IRON_RETURN_IF_ERROR_PLAIN(
      read_count(op, "batch_group_count", &out->batch_group_count));
  if (out->feature_group_count > 1 && out->batch_group_count > 1)
    return iron_ir_op_unimplemented(
        op, "with both feature_group_count and batch_group_count > 1");
  for (int32_t d = 0; d < nsp; ++d)
    if (out->stride[d] < 1 || out->lhs_dil[d] < 1 || out->rhs_dil[d] < 1)
      return IRON_ERR(INVALID_ARGUMENT,
                      "%s: strides and dilations must be positive", op->name);
  return IRON_OK;
}

iron_status_t iron_conv_plan_check_sizes(const iron_ir_op_t *op,
                                         iron_conv_plan_t *out) {
  const iron_ir_type_t *lt = out->lhs, *rt = out->rhs, *ot = out->out;
  const int64_t fgc = out->feature_group_count, bgc = out->batch_group_count;
  int64_t n_in = lt->dims[out->in_batch_dim];
  int64_t c_in = lt->dims[out->in_feature_dim];
  int64_t c_in_g = rt->dims[out->k_in_feature_dim];
  int64_t c_out = rt->dims[out->k_out_feature_dim];
  int64_t groups = fgc * bgc;  // one of them is 1 (read_attrs)
  if (c_in != (__int128)c_in_g * fgc || n_in % bgc != 0 ||
      c_out % groups != 0 ||
      ot->dims[out->out_batch_dim] != n_in / bgc ||
      ot->dims[out->out_feature_dim] != c_out)
    return IRON_ERR(INVALID_ARGUMENT,
                    "%s: feature/batch sizes do not match the group counts",
                    op->name);
  out->groups = groups;
  out->n_out = n_in / bgc;
  out->c_in_g = c_in_g;
  out->c_out = c_out;
  out->c_out_g = c_out / groups;
  for (int32_t d = 0; d < out->nsp; ++d) {
    int64_t in = lt->dims[out->in_sp_dim[d]], k = rt->dims[out->k_sp_dim[d]];
    int64_t o = ot->dims[out->out_sp_dim[d]];
    // Output size: (padded dilated input - dilated window) / stride + 1.
    // In 128 bits: the attributes come from the program. Kernels index the
    // padded dilated input in int64, so it must stay far below 2^63.
    const __int128 kMax = (__int128)1 << 60;
    __int128 din = in == 0 ? 0 : (__int128)(in - 1) * out->lhs_dil[d] + 1;
    __int128 dk = k == 0 ? 0 : (__int128)(k - 1) * out->rhs_dil[d] + 1;
    __int128 lo = out->pad[2 * d], hi = out->pad[2 * d + 1];
    __int128 span = din + lo + hi - dk;
    if (din > kMax || dk > kMax || lo > kMax || lo < -kMax || hi > kMax ||
        hi < -kMax || out->stride[d] > kMax)
      return IRON_ERR(INVALID_ARGUMENT,
                      "%s: spatial dim %d: padding, dilation or stride "
                      "beyond 2^60",
                      op->name, d);
    __int128 expect = span < 0 ? 0 : span / out->stride[d] + 1;
    if (expect != o)
      return IRON_ERR(INVALID_ARGUMENT,
                      "%s: spatial dim %d of the result is %lld, expected "
                      "%lld",
                      op->name, d, (long long)o, (long long)expect);
  }
  return IRON_OK;
}

iron_status_t iron_conv_plan_read(const iron_ir_op_t *op,
                                  iron_conv_plan_t *out) {
  memset(out, 0, sizeof(*out));
  IRON_RETURN_IF_ERROR_PLAIN(iron_conv_plan_check_types(op, out));
  IRON_RETURN_IF_ERROR_PLAIN(iron_conv_plan_read_attrs(op, out));
  return iron_conv_plan_check_sizes(op, out);
}
