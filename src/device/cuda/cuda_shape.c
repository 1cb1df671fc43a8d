// CUDA kernels: data movement (broadcast_in_dim, broadcast, iota,
// transpose, slice, reverse, concatenate, pad, dynamic_slice,
// dynamic_update_slice, reshape). Generated per shape: one thread per
// output element computes its source index from constants baked into the
// code. Everything but iota is dtype-agnostic (moves elements as unsigned
// words of the element's size, so f8 and one-byte sub-byte storage work).
//
// Transposes whose input-contiguous dim is not the output's innermost go
// through a 32x32 shared-memory tile so that reads and writes are both
// coalesced (IRON_CUDA_TILED_TRANSPOSE=0 turns this off); those of 1- and
// 2-byte elements through the transpose fusion's 64x64 pair tiles
// (gen/fusion.c; IRON_CUDA_TRANSPOSE_PAIRS=0: the 32x32 tile).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cuda/gen/prelude.h"
#include "device/cuda/gen/scalar.h"
#include "device/cuda/gen/source.h"
#include "device/cuda/gen/types.h"
#include "device/cuda/cuda_device.h"
#include "device/cuda/cuda_fusion.h"
#include "device/cuda/cuda_fusion_plan.h"
#include "device/plans/shape_plan.h"

// The shared plan (src/device/plans/shape_plan.c) validates the op; CUDA
// moves elements as unsigned words of their size.
static iron_status_t read_plan(const iron_ir_op_t *op, iron_shape_plan_t *sp) {
  IRON_RETURN_IF_ERROR_PLAIN(iron_shape_plan_read(op, sp));
  if (!iron_cuda_bits_ctype(iron_dtype_size(sp->out->dtype))) {
    return iron_ir_op_unimplemented(op, "on the CUDA device for dtype %s",
                                    iron_dtype_name(sp->out->dtype));
  }
  return IRON_OK;
}
static void row_major(int32_t rank, const int64_t *dims, int64_t *strides) {
  int64_t s = 1;
  for (int32_t i = rank - 1; i >= 0; --i) {
    strides[i] = s;
    s *= dims[i];
  }
}

static const char *elem_t(const iron_ir_type_t *t) {
  return iron_cuda_bits_ctype(iron_dtype_size(t->dtype));
}

static const char *idx_type(int64_t a, int64_t b) {
  int64_t m = a > b ? a : b;
  return m <= ((int64_t)1 << 30) ? "int" : "long long";
}

// The storage type used to read a start index of dtype dt.
static const char *index_ctype(iron_dtype_t dt) {
  switch (dt) {
    case IRON_DTYPE_S2:
    case IRON_DTYPE_S4:
      return "int8_t";
    case IRON_DTYPE_U2:
    case IRON_DTYPE_U4:
      return "uint8_t";
    default:
      return iron_dtype_is_int(dt) ? iron_cuda_ctype(dt) : NULL;
  }
}

// Requests `body` and fills ew params for `num_inputs` inputs and the
// op's results.
static iron_status_t finish_n(iron_device_t *dev, const iron_ir_op_t *op,
                              iron_cuda_text_t *body, const char *prefix,
                              int64_t count, unsigned grid_override,
                              uint32_t num_inputs, void **out_params) {
  char *src = NULL, *name = NULL;
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_source_make(body, prefix, &src, &name));
  iron_cuda_ew_params_t *p = calloc(1, sizeof(*p));
  if (!p) {
    free(src);
    free(name);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (params)");
  }
  iron_status_t st =
      iron_cuda_function_request((iron_cuda_device_t *)dev, src, name, &p->fn);
  free(src);
  free(name);
  if (st) {
    free(p);
    return st;
  }
  if (num_inputs + op->num_results > IRON_CUDA_MAX_KERNEL_PARAMS) {
    free(p);
    return iron_ir_op_unimplemented(op,
                                    "with more than %d operands on the "
                                    "CUDA device",
                                    IRON_CUDA_MAX_KERNEL_PARAMS);
  }
  p->num_inputs = num_inputs;
  p->num_outputs = op->num_results;
  p->count = count;
  iron_cuda_launch_dims(dev, count, &p->grid, &p->block);
  if (grid_override) p->grid = grid_override;
  *out_params = p;
  return IRON_OK;
}

// Inputs = every operand.
static iron_status_t finish(iron_device_t *dev, const iron_ir_op_t *op,
                            iron_cuda_text_t *body, const char *prefix,
                            int64_t count, unsigned grid_override,
                            void **out_params) {
  return finish_n(dev, op, body, prefix, count, grid_override, op->num_operands,
                  out_params);
}

// ---------------------------------------------------------------------------
// Affine gather: out[i] = in0[base + sum_d c_d * s_d] over the output's
// coordinates c (strides may be 0 or negative).

typedef struct affine {
  int32_t rank;
  int64_t dims[IRON_MAX_RANK];
  int64_t strides[IRON_MAX_RANK];
  int64_t base;
} affine_t;

// Drops size-1 dims and merges dims that are contiguous in the source.
static void affine_coalesce(affine_t *a) {
  affine_t o;
  memset(&o, 0, sizeof(o));
  o.base = a->base;
  for (int32_t d = 0; d < a->rank; ++d) {
    if (a->dims[d] == 1) continue;
    if (o.rank > 0 && o.strides[o.rank - 1] == a->strides[d] * a->dims[d]) {
      o.dims[o.rank - 1] *= a->dims[d];
      o.strides[o.rank - 1] = a->strides[d];
      continue;
    }
    o.dims[o.rank] = a->dims[d];
    o.strides[o.rank] = a->strides[d];
    o.rank++;
  }
  *a = o;
}

// Emits "s" = the source index of output index "i" (declares r_ and s).
static void emit_affine_index(iron_cuda_text_t *s, const affine_t *a,
                              const char *idx) {
  iron_cuda_text_printf(s, "    %s s = (%s)%lldLL;\n", idx, idx,
                       (long long)a->base);
  if (a->rank == 0) return;
  iron_cuda_text_printf(s, "    %s r_ = i;\n", idx);
  for (int32_t d = a->rank - 1; d >= 1; --d) {
    iron_cuda_text_printf(s,
                         "    s += (r_ %% (%s)%lldLL) * (%s)%lldLL; "
                         "r_ /= (%s)%lldLL;\n",
                         idx, (long long)a->dims[d], idx,
                         (long long)a->strides[d], idx, (long long)a->dims[d]);
  }
  iron_cuda_text_printf(s, "    s += r_ * (%s)%lldLL;\n", idx,
                       (long long)a->strides[0]);
}

static bool tiled_transpose_enabled(void) {
  const char *e = getenv("IRON_CUDA_TILED_TRANSPOSE");
  return !(e && strcmp(e, "0") == 0);
}

// A 32x32-tiled transpose of the coalesced map when the source-contiguous
// dim (k, stride 1) is not the output's innermost (L) and both are large
// enough: blocks walk (batch, tile of k, tile of L).
static iron_status_t prepare_tiled(iron_device_t *dev, const iron_ir_op_t *op,
                                   const affine_t *a, int32_t k,
                                   void **out_params) {
  const iron_ir_type_t *rt = op->results[0].type;
  const char *T = elem_t(rt);
  int32_t L = a->rank - 1;
  int64_t ostr[IRON_MAX_RANK];
  row_major(a->rank, a->dims, ostr);
  int64_t tk = (a->dims[k] + 31) / 32, tl = (a->dims[L] + 31) / 32;
  int64_t batch = 1;
  for (int32_t d = 0; d < a->rank; ++d) {
    if (d != k && d != L) batch *= a->dims[d];
  }
  int64_t blocks = batch * tk * tl;
  int64_t count = iron_ir_type_num_elements(rt);
  if (blocks <= 0 || blocks > 0x7fffffffLL) {
    return IRON_ERR(INTERNAL, "tiled transpose: bad block count");
  }
  const char *idx = idx_type(count, count);
  iron_cuda_text_t s;
  iron_cuda_text_init(&s);
  iron_cuda_text_printf(&s,
                       "extern \"C\" __global__ void __launch_bounds__(256) "
                       "%s(const %s *in0, %s *out0) {\n"
                       "  __shared__ %s tile[32][33];\n"
                       "  %s b = blockIdx.x;\n"
                       "  const %s tl = b %% %lldLL; b /= %lldLL;\n"
                       "  const %s tk = b %% %lldLL; b /= %lldLL;\n"
                       "  %s sb = 0, ob = 0;\n",
                       IRON_CUDA_KERNEL_PLACEHOLDER, T, T, T, idx, idx,
                       (long long)tl, (long long)tl, idx, (long long)tk,
                       (long long)tk, idx);
  for (int32_t d = a->rank - 1; d >= 0; --d) {
    if (d == k || d == L) continue;
    iron_cuda_text_printf(&s,
                         "  { %s c = b %% %lldLL; b /= %lldLL; "
                         "sb += c * %lldLL; ob += c * %lldLL; }\n",
                         idx, (long long)a->dims[d], (long long)a->dims[d],
                         (long long)a->strides[d], (long long)ostr[d]);
  }
  iron_cuda_text_printf(
      &s,
      "  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;\n"
      "  for (int j = 0; j < 32; j += 8) {\n"
      "    %s kk = tk * 32 + tx, ll = tl * 32 + ty + j;\n"
      "    if (kk < %lldLL && ll < %lldLL)\n"
      "      tile[ty + j][tx] = in0[%lldLL + sb + kk + ll * %lldLL];\n"
      "  }\n"
      "  __syncthreads();\n"
      "  for (int j = 0; j < 32; j += 8) {\n"
      "    %s ll = tl * 32 + tx, kk = tk * 32 + ty + j;\n"
      "    if (kk < %lldLL && ll < %lldLL)\n"
      "      out0[ob + kk * %lldLL + ll] = tile[tx][ty + j];\n"
      "  }\n"
      "}\n",
      idx, (long long)a->dims[k], (long long)a->dims[L], (long long)a->base,
      (long long)a->strides[L], idx, (long long)a->dims[k],
      (long long)a->dims[L], (long long)ostr[k]);
  IRON_RETURN_IF_ERROR_PLAIN(
      finish(dev, op, &s, "iron_transpose", count, 0, out_params));
  iron_cuda_ew_params_t *p = *out_params;
  p->grid = (unsigned)blocks;
  p->block = 256;
  return IRON_OK;
}

static iron_status_t prepare_affine(iron_device_t *dev, const iron_ir_op_t *op,
                                    affine_t a, const char *prefix,
                                    void **out_params) {
  const iron_ir_type_t *rt = op->results[0].type;
  const iron_ir_type_t *it = op->operands[0]->type;
  int64_t count = iron_ir_type_num_elements(rt);
  affine_coalesce(&a);
  // (An empty result has no tile: the plain kernel launches nothing.)
  if (count > 0 && a.rank >= 2 && tiled_transpose_enabled() &&
      a.strides[a.rank - 1] != 1) {
    for (int32_t k = 0; k < a.rank - 1; ++k) {
      if (a.strides[k] == 1 && a.dims[k] >= 16 && a.dims[a.rank - 1] >= 16) {
        return prepare_tiled(dev, op, &a, k, out_params);
      }
    }
  }
  const char *T = elem_t(rt);
  const char *idx = idx_type(count, iron_ir_type_num_elements(it));
  iron_cuda_text_t s;
  iron_cuda_text_init(&s);
  iron_cuda_text_printf(&s,
                       "extern \"C\" __global__ void __launch_bounds__(256) "
                       "%s(const %s *in0, %s *out0) {\n"
                       "  IRON_LOOP(i, %s, %lldLL) {\n",
                       IRON_CUDA_KERNEL_PLACEHOLDER, T, T, idx,
                       (long long)count);
  emit_affine_index(&s, &a, idx);
  iron_cuda_text_printf(&s, "    out0[i] = in0[s];\n  }\n}\n");
  return finish(dev, op, &s, prefix, count, 0, out_params);
}

// broadcast_in_dim and broadcast: operand dim k goes to result dim
// bdims[k].
static iron_status_t broadcast_prepare(iron_device_t *dev,
                                       const iron_ir_op_t *op,
                                       iron_region_t *const *regions,
                                       void **out_params) {
  (void)regions;
  iron_shape_plan_t sp;
  IRON_RETURN_IF_ERROR_PLAIN(read_plan(op, &sp));
  const iron_ir_type_t *in = sp.in, *out = sp.out;
  affine_t a;
  memset(&a, 0, sizeof(a));
  a.rank = out->rank;
  memcpy(a.dims, out->dims, sizeof(int64_t) * (size_t)out->rank);
  int64_t istr[IRON_MAX_RANK];
  row_major(in->rank, in->dims, istr);
  for (int32_t k = 0; k < in->rank; ++k) {
    if (in->dims[k] != 1) a.strides[sp.bdims[k]] = istr[k];
  }
  return prepare_affine(dev, op, a, "iron_bcast", out_params);
}
// A transpose of 1- or 2-byte elements that the transpose fusion's pair
// tiles take (cuda_fusion_plan.h): generated as a fusion of itself, so
// that each thread loads and stores two elements at once (the 32x32 tile
// below moves 64 bytes per warp access).
static bool transpose_as_pairs(const iron_ir_op_t *op,
                               iron_cuda_fusion_t *f) {
  if (iron_dtype_size(op->results[0].type->dtype) > 2 ||
      !iron_cuda_fusion_dtype_ok(op->results[0].type->dtype) ||
      !tiled_transpose_enabled())
    return false;
  iron_cuda_fusion_pivots_t pv;
  iron_status_t st = iron_cuda_fusion_pivots_plan(f, &pv);
  if (st) {
    iron_status_free(st);
    return false;
  }
  bool pairs = false;
  if (pv.num == 1) {
    iron_cuda_fusion_tile_t tp;
    iron_cuda_fusion_tile_plan(&pv, &tp);
    pairs = tp.k >= 0 && tp.pairs;
  }
  iron_cuda_fusion_pivots_free(&pv);
  return pairs;
}

static iron_status_t transpose_prepare(iron_device_t *dev,
                                       const iron_ir_op_t *op,
                                       iron_region_t *const *regions,
                                       void **out_params) {
  (void)regions;
  iron_shape_plan_t sp;
  IRON_RETURN_IF_ERROR_PLAIN(read_plan(op, &sp));
  const iron_ir_op_t *ops[1] = {op};
  const iron_ir_value_t *ins[1] = {op->operands[0]};
  const iron_ir_value_t *outs[1] = {&op->results[0]};
  iron_cuda_fusion_t f = {.num_ops = 1, .ops = ops, .num_inputs = 1,
                          .inputs = ins, .num_outputs = 1, .outputs = outs,
                          .owner = op};
  if (op->num_operands == 1 && op->num_results == 1 &&
      transpose_as_pairs(op, &f))
    return iron_cuda_fusion_prepare(dev, &f, out_params);
  const iron_ir_type_t *in = sp.in, *out = sp.out;
  int64_t istr[IRON_MAX_RANK];
  row_major(in->rank, in->dims, istr);
  affine_t a;
  memset(&a, 0, sizeof(a));
  a.rank = out->rank;
  for (int32_t d = 0; d < out->rank; ++d) {
    a.dims[d] = out->dims[d];
    a.strides[d] = istr[sp.perm[d]];
  }
  return prepare_affine(dev, op, a, "iron_transpose", out_params);
}
static iron_status_t slice_prepare(iron_device_t *dev, const iron_ir_op_t *op,
                                   iron_region_t *const *regions,
                                   void **out_params) {
  (void)regions;
  iron_shape_plan_t sp;
  IRON_RETURN_IF_ERROR_PLAIN(read_plan(op, &sp));
  const iron_ir_type_t *in = sp.in, *out = sp.out;
  int64_t istr[IRON_MAX_RANK];
  row_major(in->rank, in->dims, istr);
  affine_t a;
  memset(&a, 0, sizeof(a));
  a.rank = out->rank;
  for (int32_t i = 0; i < in->rank; ++i) {
    a.dims[i] = out->dims[i];
    // A stride only matters (and is < the dim) when two elements are taken.
    a.strides[i] = out->dims[i] > 1 ? istr[i] * sp.stride[i] : istr[i];
    a.base += sp.start[i] * istr[i];
  }
  return prepare_affine(dev, op, a, "iron_slice", out_params);
}
static iron_status_t reverse_prepare(iron_device_t *dev, const iron_ir_op_t *op,
                                     iron_region_t *const *regions,
                                     void **out_params) {
  (void)regions;
  iron_shape_plan_t sp;
  IRON_RETURN_IF_ERROR_PLAIN(read_plan(op, &sp));
  const iron_ir_type_t *in = sp.in;
  affine_t a;
  memset(&a, 0, sizeof(a));
  a.rank = in->rank;
  memcpy(a.dims, in->dims, sizeof(int64_t) * (size_t)in->rank);
  row_major(in->rank, in->dims, a.strides);
  for (int32_t d = 0; d < in->rank; ++d) {
    if (!sp.reversed[d] || in->dims[d] <= 1) continue;
    a.base += (in->dims[d] - 1) * a.strides[d];
    a.strides[d] = -a.strides[d];
  }
  return prepare_affine(dev, op, a, "iron_reverse", out_params);
}

static iron_status_t iota_prepare(iron_device_t *dev, const iron_ir_op_t *op,
                                  iron_region_t *const *regions,
                                  void **out_params) {
  (void)regions;
  iron_shape_plan_t sp;
  IRON_RETURN_IF_ERROR_PLAIN(iron_shape_plan_read(op, &sp));
  if (!iron_cuda_fusion_dtype_ok(sp.out->dtype)) {
    return iron_ir_op_unimplemented(op, "on the CUDA device for dtype %s",
                                    iron_dtype_name(sp.out->dtype));
  }
  const iron_ir_op_t *ops[1] = {op};
  const iron_ir_value_t *outs[1] = {&op->results[0]};
  iron_cuda_fusion_t f = {
      .num_ops = 1, .ops = ops, .num_outputs = 1, .outputs = outs, .owner = op};
  return iron_cuda_fusion_prepare(dev, &f, out_params);
}

// ---------------------------------------------------------------------------
// concatenate: out[outer, mid, inner] from the input whose range holds mid.

// Operands of one concatenate kernel: its parameters, and the chain of
// range tests each element walks.
enum { kConcatPerKernel = 64 };

// The kernel writing operands [first, last) of a concatenate, whose range
// of the dimension starts at `off` and is `width` wide (of D): one thread
// per element of that range. Params have the part's operands as inputs.
static iron_status_t concatenate_part(iron_device_t *dev,
                                      const iron_ir_op_t *op, uint32_t first,
                                      uint32_t last, int64_t dim, int64_t inner,
                                      int64_t outer, int64_t off, int64_t width,
                                      int64_t D, void **out_params) {
  const iron_ir_type_t *out = op->results[0].type;
  int64_t count = outer * width * inner;
  const char *T = elem_t(out);
  int64_t total = iron_ir_type_num_elements(out);
  const char *idx = idx_type(total, total);
  iron_cuda_text_t s;
  iron_cuda_text_init(&s);
  iron_cuda_text_printf(
      &s, "extern \"C\" __global__ void __launch_bounds__(256) %s(",
      IRON_CUDA_KERNEL_PLACEHOLDER);
  for (uint32_t i = first; i < last; ++i)
    iron_cuda_text_printf(&s, "const %s *in%u, ", T, i - first);
  iron_cuda_text_printf(&s,
                       "%s *out0) {\n"
                       "  IRON_LOOP(i, %s, %lldLL) {\n"
                       "    const %s inn = i %% (%s)%lldLL;\n"
                       "    const %s mid = (i / (%s)%lldLL) %% (%s)%lldLL;\n"
                       "    const %s out = i / ((%s)%lldLL * (%s)%lldLL);\n",
                       T, idx, (long long)count, idx, idx, (long long)inner,
                       idx, idx, (long long)inner, idx, (long long)width, idx,
                       idx, (long long)inner, idx, (long long)width);
  // The whole dimension in one part writes element i itself (the kernel
  // of every concatenate of up to kConcatPerKernel operands).
  char dst[256];
  if (width == D)
    snprintf(dst, sizeof(dst), "out0[i]");
  else
    snprintf(dst, sizeof(dst),
             "out0[(out * (%s)%lldLL + (%s)%lldLL + mid) * (%s)%lldLL + inn]",
             idx, (long long)D, idx, (long long)off, idx, (long long)inner);
  int64_t o = 0;
  bool first_if = true;
  for (uint32_t i = first; i < last; ++i) {
    int64_t di = op->operands[i]->type->dims[dim];
    if (di == 0) continue;
    iron_cuda_text_printf(&s,
                         "    %sif (mid < (%s)%lldLL) "
                         "%s = in%u[(out * (%s)%lldLL + (mid - "
                         "(%s)%lldLL)) * (%s)%lldLL + inn];\n",
                         first_if ? "" : "else ", idx, (long long)(o + di), dst,
                         i - first, idx, (long long)di, idx, (long long)o, idx,
                         (long long)inner);
    first_if = false;
    o += di;
  }
  iron_cuda_text_printf(&s, "  }\n}\n");
  return finish_n(dev, op, &s, "iron_concat", count, 0, last - first,
                  out_params);
}

static iron_status_t concatenate_prepare(iron_device_t *dev,
                                         const iron_ir_op_t *op,
                                         iron_region_t *const *regions,
                                         void **out_params) {
  (void)regions;
  iron_shape_plan_t sp;
  IRON_RETURN_IF_ERROR_PLAIN(read_plan(op, &sp));
  const iron_ir_type_t *out = sp.out;
  const int64_t dim = sp.dim;
  int64_t inner = 1;
  for (int32_t d = (int32_t)dim + 1; d < out->rank; ++d) inner *= out->dims[d];
  int64_t outer = 1;
  for (int32_t d = 0; d < dim; ++d) outer *= out->dims[d];
  int64_t D = out->dims[dim];
  uint32_t nparts =
      (op->num_operands + kConcatPerKernel - 1) / kConcatPerKernel;
  iron_cuda_ew_multi_params_t *p = calloc(1, sizeof(*p));
  if (p) {
    p->parts = calloc(nparts, sizeof(*p->parts));
    p->first_input = calloc(nparts, sizeof(*p->first_input));
  }
  if (!p || !p->parts || !p->first_input) {
    iron_cuda_ew_multi_destroy(p);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (params)");
  }
  int64_t off = 0;
  for (uint32_t k = 0; k < nparts; ++k) {
    uint32_t first = k * kConcatPerKernel;
    uint32_t last = first + kConcatPerKernel < op->num_operands
                        ? first + kConcatPerKernel
                        : op->num_operands;
    int64_t width = 0;  // of this part's range of the dimension
    for (uint32_t i = first; i < last; ++i)
      width += op->operands[i]->type->dims[dim];
    void *ew = NULL;
    iron_status_t st = concatenate_part(dev, op, first, last, dim, inner, outer,
                                        off, width, D, &ew);
    if (st) {
      iron_cuda_ew_multi_destroy(p);
      return st;
    }
    p->parts[k] = *(iron_cuda_ew_params_t *)ew;
    free(ew);
    p->first_input[k] = first;
    p->num_parts++;
    off += width;
  }
  *out_params = p;
  return IRON_OK;
}

// ---------------------------------------------------------------------------
// pad (edge padding may be negative; interior padding between elements).

static iron_status_t pad_prepare(iron_device_t *dev, const iron_ir_op_t *op,
                                 iron_region_t *const *regions,
                                 void **out_params) {
  (void)regions;
  iron_shape_plan_t sp;
  IRON_RETURN_IF_ERROR_PLAIN(read_plan(op, &sp));
  const iron_ir_type_t *in = sp.in, *out = sp.out;
  const int64_t *lo = sp.lo, *ip = sp.interior;
  // The generated code holds lo and ip + 1 in the index type too: a large
  // padding needs 64-bit indices even for small tensors.
  int64_t widest = iron_ir_type_num_elements(in);
  for (int32_t i = 0; i < in->rank; ++i) {
    int64_t m = lo[i] < 0 ? -lo[i] : lo[i];
    if (m > widest) widest = m;
    if (ip[i] + 1 > widest) widest = ip[i] + 1;
  }
  int64_t count = iron_ir_type_num_elements(out);
  const char *T = elem_t(out);
  const char *idx = idx_type(count, widest);
  int64_t istr[IRON_MAX_RANK];
  row_major(in->rank, in->dims, istr);
  iron_cuda_text_t s;
  iron_cuda_text_init(&s);
  iron_cuda_text_printf(&s,
                       "extern \"C\" __global__ void __launch_bounds__(256) "
                       "%s(const %s *in0, const %s *in1, %s *out0) {\n"
                       "  const %s pv = in1[0];\n"
                       "  IRON_LOOP(i, %s, %lldLL) {\n"
                       "    %s r_ = i, s = 0;\n    bool inside = true;\n",
                       IRON_CUDA_KERNEL_PLACEHOLDER, T, T, T, T, idx,
                       (long long)count, idx);
  for (int32_t d = out->rank - 1; d >= 0; --d) {
    // t = c - lo; inside when t >= 0, t % (ip + 1) == 0, t / (ip+1) < n.
    iron_cuda_text_printf(&s,
                         "    { %s t = r_ %% (%s)%lldLL - (%s)%lldLL; "
                         "r_ /= (%s)%lldLL;\n",
                         idx, idx, (long long)out->dims[d], idx,
                         (long long)lo[d], idx, (long long)out->dims[d]);
    if (ip[d] > 0) {
      iron_cuda_text_printf(&s,
                           "      if (t < 0 || t %% (%s)%lldLL != 0) inside = "
                           "false; t /= (%s)%lldLL;\n",
                           idx, (long long)(ip[d] + 1), idx,
                           (long long)(ip[d] + 1));
    }
    iron_cuda_text_printf(&s,
                         "      if (t < 0 || t >= (%s)%lldLL) inside = false;\n"
                         "      s += t * (%s)%lldLL; }\n",
                         idx, (long long)in->dims[d], idx, (long long)istr[d]);
  }
  iron_cuda_text_printf(&s, "    out0[i] = inside ? in0[s] : pv;\n  }\n}\n");
  return finish(dev, op, &s, "iron_pad", count, 0, out_params);
}

// Declares st<d> = clamped start of dim d (as long long).
static void emit_starts(iron_cuda_text_t *s, const iron_ir_op_t *op,
                        uint32_t first, int32_t rank, const int64_t *full,
                        const int64_t *part) {
  for (int32_t d = 0; d < rank; ++d) {
    char var[16], val[96];
    uint32_t k = first + (uint32_t)d;
    iron_dtype_t dt = op->operands[k]->type->dtype;
    snprintf(var, sizeof(var), "st%d", d);
    // Sub-byte integers are stored one per byte, in the low bits (as
    // numpy/ml_dtypes hand them over): sign-extend or mask them.
    int bits = dt == IRON_DTYPE_S4 || dt == IRON_DTYPE_U4   ? 4
               : dt == IRON_DTYPE_S2 || dt == IRON_DTYPE_U2 ? 2
                                                            : 0;
    if (bits && iron_dtype_is_signed_int(dt))
      snprintf(val, sizeof(val),
               "((int)(int8_t)((uint8_t)in%u[0] << %d) >> %d)", k, 8 - bits,
               8 - bits);
    else if (bits)
      snprintf(val, sizeof(val), "((int)in%u[0] & %d)", k, (1 << bits) - 1);
    else
      snprintf(val, sizeof(val), "in%u[0]", k);
    iron_cuda_emit_clamped_start(s, "  ", var, val, dt, full[d] - part[d]);
  }
}

static void emit_start_params(iron_cuda_text_t *s, const iron_ir_op_t *op,
                              uint32_t first, int32_t rank) {
  for (int32_t d = 0; d < rank; ++d) {
    iron_cuda_text_printf(
        s, ", const %s *in%u",
        index_ctype(op->operands[first + (uint32_t)d]->type->dtype),
        first + (uint32_t)d);
  }
}

static iron_status_t dynamic_slice_prepare(iron_device_t *dev,
                                           const iron_ir_op_t *op,
                                           iron_region_t *const *regions,
                                           void **out_params) {
  (void)regions;
  iron_shape_plan_t sp;
  IRON_RETURN_IF_ERROR_PLAIN(read_plan(op, &sp));
  const iron_ir_type_t *in = sp.in, *out = sp.out;
  const int64_t *sizes = sp.part;
  int64_t count = iron_ir_type_num_elements(out);
  const char *T = elem_t(out);
  const char *idx = idx_type(count, iron_ir_type_num_elements(in));
  int64_t istr[IRON_MAX_RANK];
  row_major(in->rank, in->dims, istr);
  iron_cuda_text_t s;
  iron_cuda_text_init(&s);
  iron_cuda_text_printf(&s,
                       "extern \"C\" __global__ void __launch_bounds__(256) "
                       "%s(const %s *in0",
                       IRON_CUDA_KERNEL_PLACEHOLDER, T);
  emit_start_params(&s, op, 1, in->rank);
  iron_cuda_text_printf(&s, ", %s *out0) {\n", T);
  emit_starts(&s, op, 1, in->rank, in->dims, sizes);
  iron_cuda_text_printf(&s, "  const %s base = (%s)(0", idx, idx);
  for (int32_t d = 0; d < in->rank; ++d) {
    iron_cuda_text_printf(&s, " + st%d * %lldLL", d, (long long)istr[d]);
  }
  iron_cuda_text_printf(&s, ");\n  IRON_LOOP(i, %s, %lldLL) {\n", idx,
                       (long long)count);
  affine_t a;
  memset(&a, 0, sizeof(a));
  a.rank = out->rank;
  memcpy(a.dims, out->dims, sizeof(int64_t) * (size_t)out->rank);
  memcpy(a.strides, istr, sizeof(int64_t) * (size_t)out->rank);
  affine_coalesce(&a);
  emit_affine_index(&s, &a, idx);
  iron_cuda_text_printf(&s, "    out0[i] = in0[base + s];\n  }\n}\n");
  return finish(dev, op, &s, "iron_dslice", count, 0, out_params);
}

typedef struct dus_params {
  iron_cuda_ew_params_t ew;  // first: the update kernel
  size_t full_bytes;
  bool full_update;  // the update covers the operand: the result is it
} dus_params_t;

static iron_status_t device_copy(const iron_kernel_ctx_t *ctx, void *dst,
                                 const void *src, size_t n) {
  if (n == 0 || dst == src) return IRON_OK;
  iron_cuda_device_t *d = (iron_cuda_device_t *)ctx->dev;
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_device_enter(d));
  CUresult r = d->api->cuMemcpyDtoDAsync((CUdeviceptr)dst, (CUdeviceptr)src, n,
                                         d->stream);
  if (r != IRON_CU_SUCCESS) {
    return IRON_ERR(INTERNAL, "cuMemcpyDtoDAsync of %zu bytes failed (%d)", n,
                    (int)r);
  }
  return IRON_OK;
}

static iron_status_t dynamic_update_slice_prepare(iron_device_t *dev,
                                                  const iron_ir_op_t *op,
                                                  iron_region_t *const *regions,
                                                  void **out_params) {
  (void)regions;
  iron_shape_plan_t sp;
  IRON_RETURN_IF_ERROR_PLAIN(read_plan(op, &sp));
  const iron_ir_type_t *in = sp.in, *upd = sp.update, *out = sp.out;
  size_t full_bytes = 0;
  iron_ir_type_byte_size(in, &full_bytes);  // checked by the plan
  int64_t count = iron_ir_type_num_elements(upd);
  const char *T = elem_t(out);
  const char *idx = idx_type(count, iron_ir_type_num_elements(in));
  int64_t istr[IRON_MAX_RANK];
  row_major(in->rank, in->dims, istr);
  iron_cuda_text_t s;
  iron_cuda_text_init(&s);
  iron_cuda_text_printf(&s,
                       "extern \"C\" __global__ void __launch_bounds__(256) "
                       "%s(const %s *in0, const %s *in1",
                       IRON_CUDA_KERNEL_PLACEHOLDER, T, T);
  emit_start_params(&s, op, 2, in->rank);
  iron_cuda_text_printf(&s, ", %s *out0) {\n  (void)in0;\n", T);
  emit_starts(&s, op, 2, in->rank, in->dims, upd->dims);
  iron_cuda_text_printf(&s, "  const %s base = (%s)(0", idx, idx);
  for (int32_t d = 0; d < in->rank; ++d) {
    iron_cuda_text_printf(&s, " + st%d * %lldLL", d, (long long)istr[d]);
  }
  iron_cuda_text_printf(&s, ");\n  IRON_LOOP(i, %s, %lldLL) {\n", idx,
                       (long long)count);
  affine_t a;
  memset(&a, 0, sizeof(a));
  a.rank = upd->rank;
  memcpy(a.dims, upd->dims, sizeof(int64_t) * (size_t)upd->rank);
  memcpy(a.strides, istr, sizeof(int64_t) * (size_t)upd->rank);
  affine_coalesce(&a);
  emit_affine_index(&s, &a, idx);
  iron_cuda_text_printf(&s, "    out0[base + s] = in1[i];\n  }\n}\n");
  void *ew = NULL;
  IRON_RETURN_IF_ERROR_PLAIN(finish(dev, op, &s, "iron_dus", count, 0, &ew));
  dus_params_t *p = calloc(1, sizeof(*p));
  if (!p) {
    free(ew);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (params)");
  }
  p->ew = *(iron_cuda_ew_params_t *)ew;
  free(ew);
  p->full_bytes = full_bytes;
  p->full_update = count == iron_ir_type_num_elements(in);
  *out_params = p;
  return IRON_OK;
}

static iron_status_t dynamic_update_slice_run(
    const iron_kernel_ctx_t *ctx, const void *params,
    const iron_tensor_t *const *inputs, iron_tensor_t *const *outputs) {
  const dus_params_t *p = params;
  // An update as large as the operand starts at 0 (clamped): the result is
  // the update (whichever input the runtime let the result share).
  if (p->full_update) {
    return device_copy(ctx, outputs[0]->data, inputs[1]->data, p->full_bytes);
  }
  // The runtime may give the result the storage of any dying input of the
  // same size; only the operand's works (the copy below would clobber the
  // others before the kernel reads them).
  for (uint32_t k = 1; k < p->ew.num_inputs; ++k) {
    if (p->full_bytes && outputs[0]->data == inputs[k]->data) {
      return IRON_ERR(INTERNAL,
                      "dynamic_update_slice: result shares input %u's "
                      "storage (only the operand's is supported)",
                      k);
    }
  }
  // In place when the runtime gave the operand's storage to the result.
  IRON_RETURN_IF_ERROR_PLAIN(
      device_copy(ctx, outputs[0]->data, inputs[0]->data, p->full_bytes));
  return iron_cuda_ew_run(ctx, &p->ew, inputs, outputs);
}

// ---------------------------------------------------------------------------
// reshape (when the plan does not alias it: IRON_NO_ALIAS=1): a copy.

typedef struct copy_params {
  size_t nbytes;
} copy_params_t;

static iron_status_t reshape_prepare(iron_device_t *dev, const iron_ir_op_t *op,
                                     iron_region_t *const *regions,
                                     void **out_params) {
  (void)dev;
  (void)regions;
  iron_shape_plan_t sp;
  IRON_RETURN_IF_ERROR_PLAIN(read_plan(op, &sp));
  size_t ib = 0;
  iron_ir_type_byte_size(sp.out, &ib);  // checked by the plan
  copy_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (params)");
  p->nbytes = ib;
  *out_params = p;
  return IRON_OK;
}

static iron_status_t reshape_run(const iron_kernel_ctx_t *ctx,
                                 const void *params,
                                 const iron_tensor_t *const *inputs,
                                 iron_tensor_t *const *outputs) {
  const copy_params_t *p = params;
  return device_copy(ctx, outputs[0]->data, inputs[0]->data, p->nbytes);
}

// ---------------------------------------------------------------------------

#define SHAPE_KERNEL(var, nm, prep, rn, inplace) \
  static const iron_kernel_t var = {             \
      .name = nm,                                \
      .run = rn,                                 \
      .inplace_ok = inplace,                     \
      .prepare_on = prep,                        \
      .graph_capturable = true,                  \
  };

SHAPE_KERNEL(kIota, "cuda_iota", iota_prepare, iron_cuda_ew_run, false)
SHAPE_KERNEL(kBroadcastInDim, "cuda_broadcast_in_dim", broadcast_prepare,
             iron_cuda_ew_run, false)
SHAPE_KERNEL(kBroadcast, "cuda_broadcast", broadcast_prepare, iron_cuda_ew_run,
             false)
SHAPE_KERNEL(kTranspose, "cuda_transpose", transpose_prepare, iron_cuda_ew_run,
             false)
SHAPE_KERNEL(kSlice, "cuda_slice", slice_prepare, iron_cuda_ew_run, false)
SHAPE_KERNEL(kReverse, "cuda_reverse", reverse_prepare, iron_cuda_ew_run, false)
static const iron_kernel_t kConcatenate = {
    .name = "cuda_concatenate",
    .run = iron_cuda_ew_multi_run,
    .destroy = iron_cuda_ew_multi_destroy,
    .prepare_on = concatenate_prepare,
    .graph_capturable = true,
};
SHAPE_KERNEL(kPad, "cuda_pad", pad_prepare, iron_cuda_ew_run, false)
SHAPE_KERNEL(kDynamicSlice, "cuda_dynamic_slice", dynamic_slice_prepare,
             iron_cuda_ew_run, false)
SHAPE_KERNEL(kDynamicUpdateSlice, "cuda_dynamic_update_slice",
             dynamic_update_slice_prepare, dynamic_update_slice_run, true)
SHAPE_KERNEL(kReshape, "cuda_reshape", reshape_prepare, reshape_run, true)

void iron_cuda_register_shape(iron_cuda_kernel_table_t table) {
  table[IRON_OP_IOTA] = &kIota;
  table[IRON_OP_BROADCAST_IN_DIM] = &kBroadcastInDim;
  table[IRON_OP_BROADCAST] = &kBroadcast;
  table[IRON_OP_TRANSPOSE] = &kTranspose;
  table[IRON_OP_SLICE] = &kSlice;
  table[IRON_OP_REVERSE] = &kReverse;
  table[IRON_OP_CONCATENATE] = &kConcatenate;
  table[IRON_OP_PAD] = &kPad;
  table[IRON_OP_DYNAMIC_SLICE] = &kDynamicSlice;
  table[IRON_OP_DYNAMIC_UPDATE_SLICE] = &kDynamicUpdateSlice;
  table[IRON_OP_RESHAPE] = &kReshape;
}
