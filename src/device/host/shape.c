// Data-movement kernels: iota, broadcast_in_dim, broadcast, reshape,
// transpose, slice, dynamic_slice, dynamic_update_slice, concatenate, pad,
// reverse. Every one is dtype-agnostic (bytes per element only, so f8/i4
// work too) and reduces to strided copies planned at prepare time.
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "base/narrow_float.h"
#include "device/host/host_kernel.h"
#include "device/host/shape_copy.h"
#include "device/plans/shape_plan.h"

// ---------------------------------------------------------------------------
// Helpers (validation: src/device/plans/shape_plan.c)

static void *alloc_params(size_t size, iron_status_t *out_status) {
  void *p = calloc(1, size);
  *out_status =
      p ? IRON_OK : IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for params");
  return p;
}

// A copy plan over `rank` dims with given source strides and a row-major
// destination of the same dims.
static void plan_init(iron_host_copy_plan_t *p, const iron_ir_type_t *t) {
  memset(p, 0, sizeof(*p));
  p->rank = t->rank;
  memcpy(p->dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
  p->elem_size = iron_dtype_size(t->dtype);
}

// Reads a scalar start index of any integer dtype.
static int64_t read_index(const iron_tensor_t *t) {
  const void *d = t->data;
  switch (t->dtype) {
    case IRON_DTYPE_S8:
      return *(const int8_t *)d;
    case IRON_DTYPE_S16:
      return *(const int16_t *)d;
    case IRON_DTYPE_S32:
      return *(const int32_t *)d;
    case IRON_DTYPE_S64:
      return *(const int64_t *)d;
    case IRON_DTYPE_U8:
    case IRON_DTYPE_PRED:
      return *(const uint8_t *)d;
    case IRON_DTYPE_U16:
      return *(const uint16_t *)d;
    case IRON_DTYPE_U32:
      return *(const uint32_t *)d;
    case IRON_DTYPE_U64: {
      uint64_t v = *(const uint64_t *)d;
      return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
    }
    // Sub-byte integers are one per byte, in the low bits (as numpy and
    // ml_dtypes store them): sign-extend or mask.
    case IRON_DTYPE_S2:
      return (int8_t)(uint8_t)(*(const uint8_t *)d << 6) >> 6;
    case IRON_DTYPE_S4:
      return (int8_t)(uint8_t)(*(const uint8_t *)d << 4) >> 4;
    case IRON_DTYPE_U2:
      return *(const uint8_t *)d & 3;
    case IRON_DTYPE_U4:
      return *(const uint8_t *)d & 15;
    default:
      return 0;  // refused at prepare
  }
}
static int64_t clamp_i64(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

// ---------------------------------------------------------------------------
// iota

typedef struct iota_params {
  iron_dtype_t dtype;
  size_t elem_size;
  int64_t outer, n, inner;
} iota_params_t;
static iron_status_t iota_prepare(const iron_ir_op_t *op,
                                  iron_region_t *const *regions,
                                  void **out_params) {
  iron_shape_plan_t sp;
  IRON_RETURN_IF_ERROR_PLAIN(iron_shape_plan_read(op, &sp));
  const iron_ir_type_t *t = sp.out;
  iron_status_t st;
  iota_params_t *p = alloc_params(sizeof(*p), &st);
  if (!p) return st;
  p->dtype = t->dtype;
  p->elem_size = iron_dtype_size(t->dtype);
  p->outer = 1;
  p->inner = 1;
  for (int32_t i = 0; i < sp.dim; ++i) p->outer *= t->dims[i];
  for (int32_t i = (int32_t)sp.dim + 1; i < t->rank; ++i)
    p->inner *= t->dims[i];
  p->n = t->dims[sp.dim];
  *out_params = p;
  return IRON_OK;
}

// Encodes integer j as one element of dt (little-endian hosts).
static void encode_index(iron_dtype_t dt, int64_t j, unsigned char *out) {
  memset(out, 0, 16);
  switch (dt) {
    case IRON_DTYPE_PRED:
      out[0] = j != 0;
      break;
    case IRON_DTYPE_F16: {
      uint16_t h = iron_f32_to_f16((float)j);
      memcpy(out, &h, 2);
      break;
    }
    case IRON_DTYPE_BF16: {
      uint16_t h = iron_f32_to_bf16((float)j);
      memcpy(out, &h, 2);
      break;
    }
    case IRON_DTYPE_F32:
    case IRON_DTYPE_C64: {
      float f = (float)j;
      memcpy(out, &f, 4);
      break;
    }
    case IRON_DTYPE_F64:
    case IRON_DTYPE_C128: {
      double f = (double)j;
      memcpy(out, &f, 8);
      break;
    }
    default:
      if (iron_dtype_is_float(dt)) {
        // f8/f4: XLA:CPU's iota runs in f16 and converts.
        out[0] = iron_narrow_float_encode(
            dt, (double)iron_f16_to_f32(iron_f32_to_f16((float)j)));
      } else {  // integers: two's complement truncation
        memcpy(out, &j, 8);
        int bits = iron_dtype_bits(dt);
        if (bits < 8) out[0] &= (unsigned char)((1u << bits) - 1);
      }
      break;
  }
}

static iron_status_t iota_run(const iron_kernel_ctx_t *ctx, const void *params,
                              const iron_tensor_t *const *inputs,
                              iron_tensor_t *const *outputs) {
  const iota_params_t *p = params;
  char *d = outputs[0]->data;
  size_t es = p->elem_size;
  unsigned char v[16];
  if (p->outer == 0 || p->n == 0 || p->inner == 0) return IRON_OK;
  if (p->inner == 1) {
    // One row 0..n-1, then replicate it.
    for (int64_t j = 0; j < p->n; ++j) {
      encode_index(p->dtype, j, v);
      memcpy(d + (size_t)j * es, v, es);
    }
    for (int64_t o = 1; o < p->outer; ++o)
      memcpy(d + (size_t)(o * p->n) * es, d, (size_t)p->n * es);
    return IRON_OK;
  }
  for (int64_t o = 0; o < p->outer; ++o) {
    for (int64_t j = 0; j < p->n; ++j) {
      encode_index(p->dtype, j, v);
      iron_host_fill(o == 0 ? ctx->pool : NULL,
                     d + (size_t)((o * p->n + j) * p->inner) * es, p->inner, v,
                     es);
    }
  }
  return IRON_OK;
}

// ---------------------------------------------------------------------------
// Single-plan kernels: broadcast_in_dim, broadcast, transpose, slice, reverse

typedef struct plan_params {
  iron_host_copy_plan_t plan;
} plan_params_t;

static iron_status_t plan_params_new(const iron_host_copy_plan_t *plan,
                                     void **out_params) {
  iron_status_t st;
  plan_params_t *p = alloc_params(sizeof(*p), &st);
  if (!p) return st;
  p->plan = *plan;
  iron_host_copy_plan_finalize(&p->plan);
  *out_params = p;
  return IRON_OK;
}

static iron_status_t plan_run(const iron_kernel_ctx_t *ctx, const void *params,
                              const iron_tensor_t *const *inputs,
                              iron_tensor_t *const *outputs) {
  const plan_params_t *p = params;
  iron_host_copy_run(ctx->pool, &p->plan, inputs[0]->data, outputs[0]->data, 0,
                     0);
  return IRON_OK;
}
// broadcast_in_dim and broadcast: operand dim k goes to result dim
// bdims[k].
static iron_status_t broadcast_prepare(const iron_ir_op_t *op,
                                       iron_region_t *const *regions,
                                       void **out_params) {
  iron_shape_plan_t sp;
  IRON_RETURN_IF_ERROR_PLAIN(iron_shape_plan_read(op, &sp));
  const iron_ir_type_t *in = sp.in, *out = sp.out;
  iron_host_copy_plan_t plan;
  plan_init(&plan, out);
  int64_t in_strides[IRON_MAX_RANK];
  iron_host_row_major_strides(in->rank, in->dims, in_strides);
  iron_host_row_major_strides(out->rank, out->dims, plan.dst_strides);
  for (int32_t k = 0; k < in->rank; ++k)
    if (in->dims[k] != 1) plan.src_strides[sp.bdims[k]] = in_strides[k];
  return plan_params_new(&plan, out_params);
}

static iron_status_t transpose_prepare(const iron_ir_op_t *op,
                                       iron_region_t *const *regions,
                                       void **out_params) {
  iron_shape_plan_t sp;
  IRON_RETURN_IF_ERROR_PLAIN(iron_shape_plan_read(op, &sp));
  const iron_ir_type_t *in = sp.in, *out = sp.out;
  iron_host_copy_plan_t plan;
  plan_init(&plan, out);
  int64_t in_strides[IRON_MAX_RANK];
  iron_host_row_major_strides(in->rank, in->dims, in_strides);
  iron_host_row_major_strides(out->rank, out->dims, plan.dst_strides);
  for (int32_t i = 0; i < out->rank; ++i)
    plan.src_strides[i] = in_strides[sp.perm[i]];
  return plan_params_new(&plan, out_params);
}
static iron_status_t slice_prepare(const iron_ir_op_t *op,
                                   iron_region_t *const *regions,
                                   void **out_params) {
  iron_shape_plan_t sp;
  IRON_RETURN_IF_ERROR_PLAIN(iron_shape_plan_read(op, &sp));
  const iron_ir_type_t *in = sp.in, *out = sp.out;
  iron_host_copy_plan_t plan;
  plan_init(&plan, out);
  int64_t in_strides[IRON_MAX_RANK];
  iron_host_row_major_strides(in->rank, in->dims, in_strides);
  iron_host_row_major_strides(out->rank, out->dims, plan.dst_strides);
  for (int32_t i = 0; i < in->rank; ++i) {
    plan.src_offset += sp.start[i] * in_strides[i];
    // A stride only matters (and is < the dim) when two elements are taken.
    plan.src_strides[i] =
        out->dims[i] > 1 ? in_strides[i] * sp.stride[i] : in_strides[i];
  }
  return plan_params_new(&plan, out_params);
}
static iron_status_t reverse_prepare(const iron_ir_op_t *op,
                                     iron_region_t *const *regions,
                                     void **out_params) {
  iron_shape_plan_t sp;
  IRON_RETURN_IF_ERROR_PLAIN(iron_shape_plan_read(op, &sp));
  const iron_ir_type_t *in = sp.in, *out = sp.out;
  iron_host_copy_plan_t plan;
  plan_init(&plan, out);
  iron_host_row_major_strides(in->rank, in->dims, plan.src_strides);
  iron_host_row_major_strides(out->rank, out->dims, plan.dst_strides);
  for (int32_t d = 0; d < in->rank; ++d) {
    if (!sp.reversed[d]) continue;
    if (in->dims[d] > 0)
      plan.src_offset += (in->dims[d] - 1) * plan.src_strides[d];
    plan.src_strides[d] = -plan.src_strides[d];
  }
  return plan_params_new(&plan, out_params);
}

// ---------------------------------------------------------------------------
// reshape

typedef struct bytes_params {
  size_t nbytes;
} bytes_params_t;
static iron_status_t reshape_prepare(const iron_ir_op_t *op,
                                     iron_region_t *const *regions,
                                     void **out_params) {
  iron_shape_plan_t sp;
  IRON_RETURN_IF_ERROR_PLAIN(iron_shape_plan_read(op, &sp));
  iron_status_t st;
  bytes_params_t *p = alloc_params(sizeof(*p), &st);
  if (!p) return st;
  iron_ir_type_byte_size(sp.out, &p->nbytes);  // checked by the plan
  *out_params = p;
  return IRON_OK;
}

static iron_status_t reshape_run(const iron_kernel_ctx_t *ctx,
                                 const void *params,
                                 const iron_tensor_t *const *inputs,
                                 iron_tensor_t *const *outputs) {
  const bytes_params_t *p = params;
  if (outputs[0]->data != inputs[0]->data && p->nbytes)
    memcpy(outputs[0]->data, inputs[0]->data, p->nbytes);
  return IRON_OK;
}

// ---------------------------------------------------------------------------
// dynamic_slice / dynamic_update_slice

typedef struct dyn_params {
  iron_host_copy_plan_t plan;
  int32_t rank;
  int64_t full_dims[IRON_MAX_RANK];  // operand (slice) / result (update)
  int64_t part_dims[IRON_MAX_RANK];  // slice sizes / update dims
  int64_t full_strides[IRON_MAX_RANK];
  uint32_t first_index;  // operand number of the first start index
  size_t full_bytes;     // dynamic_update_slice: bytes of operand 0
} dyn_params_t;
// Sum of clamped start * stride.
static int64_t dyn_offset(const dyn_params_t *p,
                          const iron_tensor_t *const *inputs) {
  int64_t off = 0;
  for (int32_t i = 0; i < p->rank; ++i) {
    int64_t s = read_index(inputs[p->first_index + (uint32_t)i]);
    s = clamp_i64(s, 0, p->full_dims[i] - p->part_dims[i]);
    off += s * p->full_strides[i];
  }
  return off;
}
static iron_status_t dynamic_slice_prepare(const iron_ir_op_t *op,
                                           iron_region_t *const *regions,
                                           void **out_params) {
  iron_shape_plan_t sp;
  IRON_RETURN_IF_ERROR_PLAIN(iron_shape_plan_read(op, &sp));
  const iron_ir_type_t *in = sp.in, *out = sp.out;
  iron_status_t st;
  dyn_params_t *p = alloc_params(sizeof(*p), &st);
  if (!p) return st;
  p->rank = in->rank;
  p->first_index = sp.first_index;
  memcpy(p->full_dims, in->dims, sizeof(int64_t) * (size_t)in->rank);
  memcpy(p->part_dims, sp.part, sizeof(int64_t) * (size_t)in->rank);
  iron_host_row_major_strides(in->rank, in->dims, p->full_strides);
  plan_init(&p->plan, out);
  memcpy(p->plan.src_strides, p->full_strides,
         sizeof(int64_t) * (size_t)in->rank);
  iron_host_row_major_strides(out->rank, out->dims, p->plan.dst_strides);
  iron_host_copy_plan_finalize(&p->plan);
  *out_params = p;
  return IRON_OK;
}

static iron_status_t dynamic_slice_run(const iron_kernel_ctx_t *ctx,
                                       const void *params,
                                       const iron_tensor_t *const *inputs,
                                       iron_tensor_t *const *outputs) {
  const dyn_params_t *p = params;
  iron_host_copy_run(ctx->pool, &p->plan, inputs[0]->data, outputs[0]->data,
                     dyn_offset(p, inputs), 0);
  return IRON_OK;
}
static iron_status_t dynamic_update_slice_prepare(const iron_ir_op_t *op,
                                                  iron_region_t *const *regions,
                                                  void **out_params) {
  iron_shape_plan_t sp;
  IRON_RETURN_IF_ERROR_PLAIN(iron_shape_plan_read(op, &sp));
  const iron_ir_type_t *in = sp.in, *upd = sp.update;
  iron_status_t st;
  dyn_params_t *p = alloc_params(sizeof(*p), &st);
  if (!p) return st;
  p->rank = in->rank;
  p->first_index = sp.first_index;
  memcpy(p->full_dims, in->dims, sizeof(int64_t) * (size_t)in->rank);
  memcpy(p->part_dims, upd->dims, sizeof(int64_t) * (size_t)in->rank);
  iron_host_row_major_strides(in->rank, in->dims, p->full_strides);
  iron_ir_type_byte_size(in, &p->full_bytes);  // checked by the plan
  plan_init(&p->plan, upd);
  iron_host_row_major_strides(upd->rank, upd->dims, p->plan.src_strides);
  memcpy(p->plan.dst_strides, p->full_strides,
         sizeof(int64_t) * (size_t)in->rank);
  iron_host_copy_plan_finalize(&p->plan);
  *out_params = p;
  return IRON_OK;
}

static iron_status_t dynamic_update_slice_run(
    const iron_kernel_ctx_t *ctx, const void *params,
    const iron_tensor_t *const *inputs, iron_tensor_t *const *outputs) {
  const dyn_params_t *p = params;
  if (outputs[0]->data != inputs[0]->data && p->full_bytes)
    memcpy(outputs[0]->data, inputs[0]->data, p->full_bytes);
  iron_host_copy_run(ctx->pool, &p->plan, inputs[1]->data, outputs[0]->data, 0,
                     dyn_offset(p, inputs));
  return IRON_OK;
}

// ---------------------------------------------------------------------------
// concatenate

typedef struct concat_params {
  uint32_t num_inputs;
  iron_host_copy_plan_t plans[];  // one per input
} concat_params_t;
static iron_status_t concatenate_prepare(const iron_ir_op_t *op,
                                         iron_region_t *const *regions,
                                         void **out_params) {
  iron_shape_plan_t sp;
  IRON_RETURN_IF_ERROR_PLAIN(iron_shape_plan_read(op, &sp));
  const iron_ir_type_t *out = sp.out;
  int64_t out_strides[IRON_MAX_RANK];
  iron_host_row_major_strides(out->rank, out->dims, out_strides);
  iron_status_t st;
  concat_params_t *p = alloc_params(
      sizeof(*p) + sizeof(iron_host_copy_plan_t) * op->num_operands, &st);
  if (!p) return st;
  p->num_inputs = op->num_operands;
  int64_t at = 0;
  for (uint32_t k = 0; k < op->num_operands; ++k) {
    const iron_ir_type_t *in = op->operands[k]->type;
    iron_host_copy_plan_t *pl = &p->plans[k];
    plan_init(pl, in);
    iron_host_row_major_strides(in->rank, in->dims, pl->src_strides);
    memcpy(pl->dst_strides, out_strides, sizeof(int64_t) * (size_t)in->rank);
    pl->dst_offset = at * out_strides[sp.dim];
    at += in->dims[sp.dim];
    iron_host_copy_plan_finalize(pl);
  }
  *out_params = p;
  return IRON_OK;
}

static iron_status_t concatenate_run(const iron_kernel_ctx_t *ctx,
                                     const void *params,
                                     const iron_tensor_t *const *inputs,
                                     iron_tensor_t *const *outputs) {
  const concat_params_t *p = params;
  for (uint32_t k = 0; k < p->num_inputs; ++k)
    iron_host_copy_run(ctx->pool, &p->plans[k], inputs[k]->data,
                       outputs[0]->data, 0, 0);
  return IRON_OK;
}

// ---------------------------------------------------------------------------
// pad

typedef struct pad_params {
  iron_host_copy_plan_t plan;  // operand elements that land in the result
  int64_t out_count;
  size_t elem_size;
} pad_params_t;
static iron_status_t pad_prepare(const iron_ir_op_t *op,
                                 iron_region_t *const *regions,
                                 void **out_params) {
  iron_shape_plan_t sp;
  IRON_RETURN_IF_ERROR_PLAIN(iron_shape_plan_read(op, &sp));
  const iron_ir_type_t *in = sp.in, *out = sp.out;
  const int64_t *lo = sp.lo, *ip = sp.interior;
  iron_status_t st;
  pad_params_t *p = alloc_params(sizeof(*p), &st);
  if (!p) return st;
  p->elem_size = iron_dtype_size(in->dtype);
  p->out_count = iron_ir_type_num_elements(out);
  iron_host_copy_plan_t *pl = &p->plan;
  plan_init(pl, in);
  int64_t in_strides[IRON_MAX_RANK], out_strides[IRON_MAX_RANK];
  iron_host_row_major_strides(in->rank, in->dims, in_strides);
  iron_host_row_major_strides(out->rank, out->dims, out_strides);
  for (int32_t i = 0; i < in->rank; ++i) {
    int64_t n = in->dims[i], step = ip[i] + 1,
            od = out->dims[i];  // step <= 2^40 + 1: shape_plan
    // Operand element j lands at lo + j*step; keep those inside [0, od).
    int64_t jmin = lo[i] >= 0 ? 0 : (-lo[i] + step - 1) / step;
    int64_t jmax = n - 1;  // last j with lo + j*step < od
    if (od <= lo[i]) {
      jmax = -1;
    } else if (lo[i] + jmax * step >= od) {
      jmax = (od - 1 - lo[i]) / step;
    }
    int64_t cnt = jmax >= jmin ? jmax - jmin + 1 : 0;
    pl->dims[i] = cnt;
    pl->src_strides[i] = in_strides[i];
    // (step < od when two elements land; a lone one needs no stride)
    pl->dst_strides[i] = cnt > 1 ? out_strides[i] * step : out_strides[i];
    if (cnt > 0) {
      pl->src_offset += jmin * in_strides[i];
      pl->dst_offset += (lo[i] + jmin * step) * out_strides[i];
    }
  }
  iron_host_copy_plan_finalize(pl);
  *out_params = p;
  return IRON_OK;
}

static iron_status_t pad_run(const iron_kernel_ctx_t *ctx, const void *params,
                             const iron_tensor_t *const *inputs,
                             iron_tensor_t *const *outputs) {
  const pad_params_t *p = params;
  iron_host_fill(ctx->pool, outputs[0]->data, p->out_count, inputs[1]->data,
                 p->elem_size);
  iron_host_copy_run(ctx->pool, &p->plan, inputs[0]->data, outputs[0]->data, 0,
                     0);
  return IRON_OK;
}

// ---------------------------------------------------------------------------

static const iron_kernel_t kIota = {
    .name = "iota", .prepare = iota_prepare, .run = iota_run};
static const iron_kernel_t kBroadcastInDim = {
    .name = "broadcast_in_dim", .prepare = broadcast_prepare, .run = plan_run};
static const iron_kernel_t kBroadcast = {
    .name = "broadcast", .prepare = broadcast_prepare, .run = plan_run};
static const iron_kernel_t kReshape = {.name = "reshape",
                                       .prepare = reshape_prepare,
                                       .run = reshape_run,
                                       .inplace_ok = true};
static const iron_kernel_t kTranspose = {
    .name = "transpose", .prepare = transpose_prepare, .run = plan_run};
static const iron_kernel_t kSlice = {
    .name = "slice", .prepare = slice_prepare, .run = plan_run};
static const iron_kernel_t kReverse = {
    .name = "reverse", .prepare = reverse_prepare, .run = plan_run};
static const iron_kernel_t kDynamicSlice = {.name = "dynamic_slice",
                                            .prepare = dynamic_slice_prepare,
                                            .run = dynamic_slice_run};
static const iron_kernel_t kDynamicUpdateSlice = {
    .name = "dynamic_update_slice",
    .prepare = dynamic_update_slice_prepare,
    .run = dynamic_update_slice_run,
    .inplace_ok = true};
static const iron_kernel_t kConcatenate = {.name = "concatenate",
                                           .prepare = concatenate_prepare,
                                           .run = concatenate_run};
static const iron_kernel_t kPad = {
    .name = "pad", .prepare = pad_prepare, .run = pad_run};

void iron_host_register_shape(iron_kernel_table_t table) {
  table[IRON_OP_IOTA] = &kIota;
  table[IRON_OP_BROADCAST_IN_DIM] = &kBroadcastInDim;
  table[IRON_OP_BROADCAST] = &kBroadcast;
  table[IRON_OP_RESHAPE] = &kReshape;
  table[IRON_OP_TRANSPOSE] = &kTranspose;
  table[IRON_OP_SLICE] = &kSlice;
  table[IRON_OP_REVERSE] = &kReverse;
  table[IRON_OP_DYNAMIC_SLICE] = &kDynamicSlice;
  table[IRON_OP_DYNAMIC_UPDATE_SLICE] = &kDynamicUpdateSlice;
  table[IRON_OP_CONCATENATE] = &kConcatenate;
  table[IRON_OP_PAD] = &kPad;
}
