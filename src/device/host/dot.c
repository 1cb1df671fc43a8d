// dot_general (and the old 1-D/2-D dot) on the host. Each operand is viewed
// as [batch, rows, cols] (lhs [B, M, K], rhs [B, K, N]); when its batch,
// free and contracting dims each collapse to one stride the data is used in
// place, else it is gathered. Operands whose dtype differs from the
// accumulation type (bf16/f16 -> f32, ints -> i64, ...) are converted first;
// the product is computed in that type and rounded to the result dtype.
// precision_config / algorithm are ignored: f32 is computed in f32.
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "device/host/dot_gemm.h"
#include "device/host/ew_narrow.h"
#include "device/host/host_kernel.h"
#include "device/host/shape_copy.h"
#include "device/plans/dot_plan.h"

typedef struct operand_plan {
  iron_dtype_t dtype;  // operand dtype
  int64_t count;       // operand elements
  bool convert;        // dtype differs from the compute dtype
  bool gather;         // layout needs a gather into [B, rows, cols]
  iron_host_copy_plan_t plan;  // gather (compute-dtype elements)
  iron_host_gemm_view_t view;  // strides (data filled at run time)
} operand_plan_t;

typedef struct dot_params {
  iron_dtype_t out_dtype, comp_dtype;
  iron_host_gemm_type_t gemm_type;
  int64_t batch, m, n, k;
  int64_t out_count;
  operand_plan_t lhs, rhs;
  bool fast;
} dot_params_t;

static bool fast_enabled(void) {
  const char *e = getenv("IRON_HOST_DOT_FAST");
  return !(e && e[0] == '0');
}

// Loads element i of any supported dtype as (re, im) doubles or an integer.
static void load_elem(const void *p, iron_dtype_t dt, int64_t i, double *re,
                      double *im, int64_t *iv) {
  *im = 0;
  switch (dt) {
    case IRON_DTYPE_PRED:
    case IRON_DTYPE_U8: *iv = ((const uint8_t *)p)[i]; break;
    case IRON_DTYPE_S8: *iv = ((const int8_t *)p)[i]; break;
    // Sub-byte ints: the low bits of a byte (ml_dtypes' layout); the upper
    // bits are ignored.
    case IRON_DTYPE_S4:
      *iv = (int8_t)(uint8_t)(((const uint8_t *)p)[i] << 4) >> 4;
      break;
    case IRON_DTYPE_S2:
      *iv = (int8_t)(uint8_t)(((const uint8_t *)p)[i] << 6) >> 6;
      break;
    case IRON_DTYPE_U4: *iv = ((const uint8_t *)p)[i] & 0xf; break;
    case IRON_DTYPE_U2: *iv = ((const uint8_t *)p)[i] & 0x3; break;
    case IRON_DTYPE_S16: *iv = ((const int16_t *)p)[i]; break;
    case IRON_DTYPE_U16: *iv = ((const uint16_t *)p)[i]; break;
    case IRON_DTYPE_S32: *iv = ((const int32_t *)p)[i]; break;
    case IRON_DTYPE_U32: *iv = ((const uint32_t *)p)[i]; break;
    case IRON_DTYPE_S64:
    case IRON_DTYPE_U64: *iv = ((const int64_t *)p)[i]; break;
    case IRON_DTYPE_F16:
      *re = iron_f16_to_f32(((const uint16_t *)p)[i]);
      return;
    case IRON_DTYPE_BF16:
      *re = iron_bf16_to_f32(((const uint16_t *)p)[i]);
      return;
    case IRON_DTYPE_F32: *re = ((const float *)p)[i]; return;
    case IRON_DTYPE_F64: *re = ((const double *)p)[i]; return;
    case IRON_DTYPE_C64:
      *re = ((const float *)p)[2 * i];
      *im = ((const float *)p)[2 * i + 1];
      return;
    case IRON_DTYPE_C128:
      *re = ((const double *)p)[2 * i];
      *im = ((const double *)p)[2 * i + 1];
      return;
    default:
      if (iron_dot_plan_narrow_is(dt)) {  // f8/f4 (operand_ok)
        *re = iron_ew_narrow_dot_load(dt, ((const uint8_t *)p)[i]);
        return;
      }
      *iv = 0;
      break;
  }
  // Integers: u64 values above INT64_MAX only matter modulo 2^64 for
  // integer products; as floats they are converted from the unsigned value.
  *re = dt == IRON_DTYPE_U64 ? (double)(uint64_t)*iv : (double)*iv;
}

static void convert_to_compute(const void *src, iron_dtype_t sdt, void *dst,
                               iron_dtype_t cdt, int64_t n) {
  if (sdt == IRON_DTYPE_F16 && cdt == IRON_DTYPE_F32) {
    for (int64_t i = 0; i < n; ++i)
      ((float *)dst)[i] = iron_f16_to_f32(((const uint16_t *)src)[i]);
    return;
  }
  if (sdt == IRON_DTYPE_BF16 && cdt == IRON_DTYPE_F32) {
    for (int64_t i = 0; i < n; ++i)
      ((float *)dst)[i] = iron_bf16_to_f32(((const uint16_t *)src)[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    double re = 0, im = 0;
    int64_t iv = 0;
    load_elem(src, sdt, i, &re, &im, &iv);
    switch (cdt) {
      case IRON_DTYPE_F32: ((float *)dst)[i] = (float)re; break;
      case IRON_DTYPE_F64: ((double *)dst)[i] = re; break;
      case IRON_DTYPE_C64:
        ((float *)dst)[2 * i] = (float)re;
        ((float *)dst)[2 * i + 1] = (float)im;
        break;
      case IRON_DTYPE_C128:
        ((double *)dst)[2 * i] = re;
        ((double *)dst)[2 * i + 1] = im;
        break;
      default: ((int64_t *)dst)[i] = iv; break;
    }
  }
}

static void convert_from_compute(const void *src, iron_dtype_t cdt, void *dst,
                                 iron_dtype_t odt, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    switch (odt) {
      case IRON_DTYPE_F16:
        ((uint16_t *)dst)[i] = iron_f32_to_f16(((const float *)src)[i]);
        break;
      case IRON_DTYPE_BF16:
        ((uint16_t *)dst)[i] = iron_f32_to_bf16(((const float *)src)[i]);
        break;
      case IRON_DTYPE_PRED:
        ((uint8_t *)dst)[i] = ((const int64_t *)src)[i] != 0;
        break;
      default: {
        if (iron_dot_plan_narrow_is(odt)) {
          ((uint8_t *)dst)[i] =
              iron_ew_narrow_dot_store(odt, ((const float *)src)[i]);
          break;
        }
        // integers: keep the low bytes (wrap around); s4/u4 the low bits.
        int64_t v = ((const int64_t *)src)[i];
        size_t es = iron_dtype_size(odt);
        int bits = iron_dtype_bits(odt);
        if (bits < 8) v &= ((int64_t)1 << bits) - 1;
        memcpy((char *)dst + (size_t)i * es, &v, es);  // little-endian
        break;
      }
    }
  }
  (void)cdt;
}

// Builds the [B, rows, cols] view of an operand whose dims are listed as
// three groups (batch, row dims, col dims). A group collapses when its dims
// step through memory as one stride.
static bool group_stride(const int64_t *dims, const int64_t *strides,
                         const int64_t *sel, uint32_t n, int64_t *out_stride) {
  int64_t stride = 0;
  int64_t expect = -1;  // stride the next outer non-unit dim must have
  for (int64_t i = (int64_t)n - 1; i >= 0; --i) {
    int64_t d = sel[i];
    if (dims[d] == 1) continue;
    if (expect < 0) {
      stride = strides[d];
    } else if (strides[d] != expect) {
      return false;
    }
    expect = strides[d] * dims[d];
  }
  *out_stride = stride;
  return true;
}

static iron_status_t plan_operand(const iron_ir_type_t *t, iron_dtype_t comp,
                                  const int64_t *bsel, uint32_t nb,
                                  const int64_t *rsel, uint32_t nr,
                                  const int64_t *csel, uint32_t nc,
                                  operand_plan_t *out) {
  memset(out, 0, sizeof(*out));
  out->dtype = t->dtype;
  out->count = iron_ir_type_num_elements(t);
  out->convert = t->dtype != comp;
  int64_t strides[IRON_MAX_RANK];
  iron_host_row_major_strides(t->rank, t->dims, strides);
  int64_t bs = 0, rs = 0, cs = 0;
  if (group_stride(t->dims, strides, bsel, nb, &bs) &&
      group_stride(t->dims, strides, rsel, nr, &rs) &&
      group_stride(t->dims, strides, csel, nc, &cs)) {
    out->view.bs = bs;
    out->view.rs = rs;
    out->view.cs = cs;
    return IRON_OK;
  }
  // Gather into row-major [batch dims, row dims, col dims].
  out->gather = true;
  iron_host_copy_plan_t *p = &out->plan;
  memset(p, 0, sizeof(*p));
  p->elem_size = iron_dtype_size(comp);
  int32_t r = 0;
  int64_t rows = 1, cols = 1;
  for (uint32_t i = 0; i < nb; ++i, ++r) {
    p->dims[r] = t->dims[bsel[i]];
    p->src_strides[r] = strides[bsel[i]];
  }
  for (uint32_t i = 0; i < nr; ++i, ++r) {
    p->dims[r] = t->dims[rsel[i]];
    p->src_strides[r] = strides[rsel[i]];
    rows *= t->dims[rsel[i]];
  }
  for (uint32_t i = 0; i < nc; ++i, ++r) {
    p->dims[r] = t->dims[csel[i]];
    p->src_strides[r] = strides[csel[i]];
    cols *= t->dims[csel[i]];
  }
  p->rank = r;
  iron_host_row_major_strides(r, p->dims, p->dst_strides);
  iron_host_copy_plan_finalize(p);
  out->view.bs = rows * cols;
  out->view.rs = cols;
  out->view.cs = 1;
  return IRON_OK;
}

// dot_general and dot: the shared plan (src/device/plans/dot_plan.c)
// validates; here the operands' GEMM views.
static iron_status_t dot_prepare(const iron_ir_op_t *op,
                                 iron_region_t *const *regions,
                                 void **out_params) {
  (void)regions;
  iron_dot_plan_t d;
  IRON_RETURN_IF_ERROR_PLAIN(iron_dot_plan_read(op, &d));
  iron_dtype_t comp = d.comp_dtype;
  dot_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for params");
  p->out_dtype = d.out->dtype;
  p->comp_dtype = comp;
  switch (comp) {
    case IRON_DTYPE_F32: p->gemm_type = IRON_HOST_GEMM_F32; break;
    case IRON_DTYPE_F64: p->gemm_type = IRON_HOST_GEMM_F64; break;
    case IRON_DTYPE_C64: p->gemm_type = IRON_HOST_GEMM_C64; break;
    case IRON_DTYPE_C128: p->gemm_type = IRON_HOST_GEMM_C128; break;
    default: p->gemm_type = IRON_HOST_GEMM_S64; break;
  }
  p->batch = d.batch;
  p->m = d.m;
  p->n = d.n;
  p->k = d.k;
  p->out_count = iron_ir_type_num_elements(d.out);
  p->fast = fast_enabled();
  plan_operand(d.lhs, comp, d.lb, d.nb, d.lf, d.nlf, d.lc, d.nc, &p->lhs);
  plan_operand(d.rhs, comp, d.rb, d.nb, d.rc, d.nc, d.rf, d.nrf, &p->rhs);
  *out_params = p;
  return IRON_OK;
}

// Produces the compute-dtype [B, rows, cols] view of one operand, using
// `scratch` (2 slots) for conversions/gathers.
static iron_status_t materialize(const dot_params_t *p, const operand_plan_t *o,
                                 const iron_tensor_t *t, iron_threadpool_t *pool,
                                 void **scratch, iron_host_gemm_view_t *out) {
  size_t ces = iron_dtype_size(p->comp_dtype);
  const void *data = t->data;
  *out = o->view;
  if (o->convert) {
    scratch[0] = malloc((size_t)o->count * ces + 1);
    if (!scratch[0]) return IRON_ERR(RESOURCE_EXHAUSTED, "dot: out of memory");
    convert_to_compute(data, o->dtype, scratch[0], p->comp_dtype, o->count);
    data = scratch[0];
  }
  if (o->gather) {
    scratch[1] = malloc((size_t)o->plan.count * ces + 1);
    if (!scratch[1]) return IRON_ERR(RESOURCE_EXHAUSTED, "dot: out of memory");
    iron_host_copy_run(pool, &o->plan, data, scratch[1], 0, 0);
    data = scratch[1];
  }
  out->data = data;
  return IRON_OK;
}

static iron_status_t dot_run(const iron_kernel_ctx_t *ctx, const void *params,
                             const iron_tensor_t *const *inputs,
                             iron_tensor_t *const *outputs) {
  const dot_params_t *p = params;
  if (p->out_count == 0) return IRON_OK;
  size_t ces = iron_dtype_size(p->comp_dtype);
  if (p->k == 0) {  // empty sum: zeros in every dtype
    memset(outputs[0]->data, 0,
           (size_t)p->out_count * iron_dtype_size(p->out_dtype));
    return IRON_OK;
  }
  void *scratch[5] = {NULL, NULL, NULL, NULL, NULL};
  iron_host_gemm_view_t a, b;
  iron_status_t st =
      materialize(p, &p->lhs, inputs[0], ctx->pool, &scratch[0], &a);
  if (!st) st = materialize(p, &p->rhs, inputs[1], ctx->pool, &scratch[2], &b);
  void *c = outputs[0]->data;
  bool out_convert = p->out_dtype != p->comp_dtype;
  if (!st && out_convert) {
    scratch[4] = malloc((size_t)p->out_count * ces);
    if (!scratch[4]) st = IRON_ERR(RESOURCE_EXHAUSTED, "dot: out of memory");
    c = scratch[4];
  }
  if (!st)
    st = iron_host_gemm(ctx->pool, p->gemm_type, p->fast, p->batch, p->m,
                        p->n, p->k, &a, &b, c);
  if (!st && out_convert)
    convert_from_compute(c, p->comp_dtype, outputs[0]->data, p->out_dtype,
                         p->out_count);
  for (int i = 0; i < 5; ++i) free(scratch[i]);
  return st;
}

static const iron_kernel_t kDotGeneral = {
    .name = "dot_general", .prepare = dot_prepare, .run = dot_run};
static const iron_kernel_t kDot = {
    .name = "dot", .prepare = dot_prepare, .run = dot_run};

void iron_host_register_dot(iron_kernel_table_t table) {
  table[IRON_OP_DOT_GENERAL] = &kDotGeneral;
  table[IRON_OP_DOT] = &kDot;
}
