// dot_general / dot on the CUDA device. Floating-point products go through
// cuBLASLt: each operand is viewed as [B, rows, cols] (lhs [B, M, K], rhs
// [B, K, N]); when a view is one cuBLASLt layout (a unit stride on one side,
// ld >= rows, batch stride uniform) the data is used in place, else a
// generated pack kernel gathers it into a dense temporary first (also used
// for dtype conversions cuBLASLt cannot do). Row-major C = A x B is computed
// as column-major C^T = B^T A^T, so cuBLASLt's "A" is our rhs.
//
// Precision: f32 GEMMs use CUBLAS_COMPUTE_32F_FAST_TF32 (TF32 tensor cores)
// when every precision_config entry is DEFAULT and IRON_CUDA_TF32 is not
// "0", as XLA:GPU does for DEFAULT; HIGH/HIGHEST are exact f32. bf16/f16
// operands accumulate in f32. Integer dots run a generated tiled kernel in
// wrapping 64-bit arithmetic (the host's semantics).
//
// Descriptors, layouts and the algorithm are chosen at prepare time; run
// only packs (when needed) and calls cublasLtMatmul on the device stream.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cuda/gen/prelude.h"
#include "device/cuda/gen/source.h"
#include "device/cuda/gen/types.h"
#include "device/cuda/cuda_compile.h"
#include "device/cuda/gen/ops.h"
#include "device/cuda/cuda_ops_internal.h"
#include "device/plans/dot_plan.h"

#define LT_WORKSPACE_BYTES ((size_t)32 << 20)

enum { DOT_EMPTY, DOT_ZERO, DOT_LT, DOT_INT };

typedef struct dot_operand {
  bool pack;
  iron_cuda_function_t *pack_fn;
  size_t pack_bytes;
  unsigned pack_grid;
  int64_t bs, rs, cs;  // view strides (elements) of the data the GEMM reads
} dot_operand_t;

typedef struct dot_params {
  const iron_cuda_api_t *api;
  int mode;
  size_t out_bytes;
  dot_operand_t lhs, rhs;
  // DOT_LT
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, ld;
  cublasLtMatmulAlgo_t algo;
  size_t ws_size;
  double alpha[2], beta[2];  // scale-type values (float or double, complex)
  iron_cuda_function_t *out_fn;  // D (compute dtype) -> result dtype
  size_t d_bytes;
  unsigned out_grid;
  // DOT_INT
  iron_cuda_function_t *int_fn;
  unsigned grid[3];
} dot_params_t;

static void dot_destroy(void *params) {
  dot_params_t *p = params;
  if (!p) return;
  if (p->api && p->api->has_cublaslt) {
    if (p->la) p->api->cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb) p->api->cublasLtMatrixLayoutDestroy(p->lb);
    if (p->ld) p->api->cublasLtMatrixLayoutDestroy(p->ld);
    if (p->desc) p->api->cublasLtMatmulDescDestroy(p->desc);
  }
  free(p);
}

static pthread_mutex_t g_lt_mu = PTHREAD_MUTEX_INITIALIZER;

iron_status_t iron_cuda_lt_status(cublasStatus_t s, const char *what) {
  if (s == 0) return IRON_OK;
  return IRON_ERR(INTERNAL, "%s failed: cublasStatus %d", what, (int)s);
}

// Creates the device's cuBLASLt handle and workspace on first use. The
// device (cuda_device.c) destroys them with the device.
static iron_status_t lt_ensure(iron_cuda_device_t *dev) {
  pthread_mutex_lock(&g_lt_mu);
  iron_status_t st = IRON_OK;
  if (!dev->lt) {
    st = iron_cuda_device_enter(dev);
    cublasLtHandle_t h = NULL;
    if (!st) st = iron_cuda_lt_status(dev->api->cublasLtCreate(&h),
                                      "cublasLtCreate");
    CUdeviceptr ws = 0;
    if (!st)
      st = iron_cuda_status(dev->api,
                            dev->api->cuMemAlloc(&ws, LT_WORKSPACE_BYTES),
                            "cuMemAlloc (cuBLASLt workspace)");
    if (!st) {
      dev->lt_workspace = ws;
      dev->lt_workspace_size = LT_WORKSPACE_BYTES;
      dev->lt = h;
    } else if (h) {
      dev->api->cublasLtDestroy(h);
    }
  }
  pthread_mutex_unlock(&g_lt_mu);
  return st;
}

iron_status_t iron_cuda_lt_ensure(iron_cuda_device_t *dev) {
  return lt_ensure(dev);
}

static bool tf32_enabled(void) {
  const char *e = getenv("IRON_CUDA_TF32");
  return !(e && e[0] == '0');
}

// One stride for a group of dims (see host dot.c).
static bool group_stride(const int64_t *dims, const int64_t *strides,
                         const int64_t *sel, uint32_t n, int64_t *out_stride) {
  int64_t stride = 0, expect = -1;
  for (int64_t i = (int64_t)n - 1; i >= 0; --i) {
    int64_t d = sel[i];
    if (dims[d] == 1) continue;
    if (expect < 0)
      stride = strides[d];
    else if (strides[d] != expect)
      return false;
    expect = strides[d] * dims[d];
  }
  *out_stride = stride;
  return true;
}

static int lt_type(iron_dtype_t dt) {
  switch (dt) {
    case IRON_DTYPE_F32: return IRON_CUDA_R_32F;
    case IRON_DTYPE_F64: return IRON_CUDA_R_64F;
    case IRON_DTYPE_F16: return IRON_CUDA_R_16F;
    case IRON_DTYPE_BF16: return IRON_CUDA_R_16BF;
    case IRON_DTYPE_C64: return IRON_CUDA_C_32F;
    case IRON_DTYPE_C128: return IRON_CUDA_C_64F;
    default: return -1;
  }
}

#define grid_for iron_cuda_ops_grid

// Plans one operand: in place when its groups collapse and `force_pack` is
// false, else a pack kernel into dense [B, rows, cols] of `to` dtype.
static iron_status_t plan_operand(iron_cuda_device_t *dev, const char *tag,
                                  const iron_ir_type_t *t, iron_dtype_t to,
                                  const int64_t *bsel, uint32_t nb,
                                  const int64_t *rsel, uint32_t nr,
                                  const int64_t *csel, uint32_t nc,
                                  bool force_pack, dot_operand_t *out) {
  memset(out, 0, sizeof(*out));
  int64_t strides[IRON_MAX_RANK];
  int64_t s = 1;
  for (int32_t i = t->rank - 1; i >= 0; --i) {
    strides[i] = s;
    s *= t->dims[i];
  }
  if (!force_pack && t->dtype == to &&
      group_stride(t->dims, strides, bsel, nb, &out->bs) &&
      group_stride(t->dims, strides, rsel, nr, &out->rs) &&
      group_stride(t->dims, strides, csel, nc, &out->cs))
    return IRON_OK;
  int64_t dims[IRON_MAX_RANK], src_strides[IRON_MAX_RANK];
  int32_t r = 0;
  int64_t rows = 1, cols = 1;
  for (uint32_t i = 0; i < nb; ++i, ++r) {
    dims[r] = t->dims[bsel[i]];
    src_strides[r] = strides[bsel[i]];
  }
  for (uint32_t i = 0; i < nr; ++i, ++r) {
    dims[r] = t->dims[rsel[i]];
    src_strides[r] = strides[rsel[i]];
    rows *= dims[r];
  }
  for (uint32_t i = 0; i < nc; ++i, ++r) {
    dims[r] = t->dims[csel[i]];
    src_strides[r] = strides[csel[i]];
    cols *= dims[r];
  }
  int64_t count = iron_ir_type_num_elements(t);
  char name[64];
  snprintf(name, sizeof(name), "iron_dot_pack_%s", tag);
  char *src = NULL;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_cuda_gen_pack(name, t->dtype, to, r, dims, src_strides, &src));
  iron_status_t st = iron_cuda_ops_request(dev, src, name, &out->pack_fn);
  free(src);
  IRON_RETURN_IF_ERROR_PLAIN(st);
  out->pack = true;
  out->pack_bytes = (size_t)count * iron_dtype_size(to);
  out->pack_grid = grid_for(count);
  out->bs = rows * cols;
  out->rs = cols;
  out->cs = 1;
  return IRON_OK;
}

// cuBLASLt layout of a matrix op(X) of rows x cols whose element (i, j) is at
// i * sr + j * sc: column-major storage of X (no transpose) or of X^T.
static bool choose_layout(int64_t rows, int64_t cols, int64_t sr, int64_t sc,
                          int32_t *out_op, int64_t *out_srows,
                          int64_t *out_scols, int64_t *out_ld) {
  if (rows == 1 || sr == 1) {
    int64_t ld = cols == 1 ? rows : sc;
    if (ld >= rows && ld >= 1) {
      *out_op = IRON_CUBLAS_OP_N;
      *out_srows = rows;
      *out_scols = cols;
      *out_ld = ld;
      return true;
    }
  }
  if (cols == 1 || sc == 1) {
    int64_t ld = rows == 1 ? cols : sr;
    if (ld >= cols && ld >= 1) {
      *out_op = IRON_CUBLAS_OP_T;
      *out_srows = cols;
      *out_scols = rows;
      *out_ld = ld;
      return true;
    }
  }
  return false;
}

static iron_status_t make_layout(const iron_cuda_api_t *api, int type,
                                 int64_t rows, int64_t cols, int64_t ld,
                                 int64_t batch, int64_t bstride,
                                 cublasLtMatrixLayout_t *out) {
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_lt_status(
      api->cublasLtMatrixLayoutCreate(out, type, (uint64_t)rows,
                                      (uint64_t)cols, ld),
      "cublasLtMatrixLayoutCreate"));
  if (batch > 1) {
    int32_t bc = (int32_t)batch;
    IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_lt_status(
        api->cublasLtMatrixLayoutSetAttribute(
            *out, IRON_CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof(bc)),
        "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)"));
    IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_lt_status(
        api->cublasLtMatrixLayoutSetAttribute(
            *out, IRON_CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &bstride,
            sizeof(bstride)),
        "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)"));
  }
  return IRON_OK;
}

typedef iron_dot_plan_t dot_dims_t;

// Tries the cuBLASLt plan with the operands' current views; false in
// *out_ok when cuBLASLt has no algorithm (the caller packs and retries).
static iron_status_t lt_plan(iron_cuda_device_t *dev, dot_params_t *p,
                             const dot_dims_t *d, int ab_type, int d_type,
                             int compute, int scale, bool *out_ok) {
  const iron_cuda_api_t *api = dev->api;
  *out_ok = false;
  int32_t opa, opb;
  int64_t ar, ac, ald, br, bc, bld;
  // A = rhs: op(A) is N x K, (n, k) at n * rhs.cs + k * rhs.rs.
  // B = lhs: op(B) is K x M, (k, m) at k * lhs.cs + m * lhs.rs.
  if (!choose_layout(d->n, d->k, p->rhs.cs, p->rhs.rs, &opa, &ar, &ac, &ald) ||
      !choose_layout(d->k, d->m, p->lhs.cs, p->lhs.rs, &opb, &br, &bc, &bld))
    return IRON_OK;
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_lt_status(
      api->cublasLtMatmulDescCreate(&p->desc, compute, scale),
      "cublasLtMatmulDescCreate"));
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_lt_status(
      api->cublasLtMatmulDescSetAttribute(
          p->desc, IRON_CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)),
      "cublasLtMatmulDescSetAttribute(TRANSA)"));
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_lt_status(
      api->cublasLtMatmulDescSetAttribute(
          p->desc, IRON_CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)),
      "cublasLtMatmulDescSetAttribute(TRANSB)"));
  IRON_RETURN_IF_ERROR_PLAIN(make_layout(api, ab_type, ar, ac, ald, d->batch,
                                         p->rhs.bs, &p->la));
  IRON_RETURN_IF_ERROR_PLAIN(make_layout(api, ab_type, br, bc, bld, d->batch,
                                         p->lhs.bs, &p->lb));
  IRON_RETURN_IF_ERROR_PLAIN(make_layout(api, d_type, d->n, d->m, d->n,
                                         d->batch, d->m * d->n, &p->ld));
  cublasLtMatmulPreference_t pref = NULL;
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_lt_status(
      api->cublasLtMatmulPreferenceCreate(&pref),
      "cublasLtMatmulPreferenceCreate"));
  uint64_t ws = dev->lt_workspace_size;
  iron_status_t st = iron_cuda_lt_status(
      api->cublasLtMatmulPreferenceSetAttribute(
          pref, IRON_CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
      "cublasLtMatmulPreferenceSetAttribute");
  cublasLtMatmulHeuristicResult_t res;
  memset(&res, 0, sizeof(res));
  int returned = 0;
  if (!st) {
    cublasStatus_t s = api->cublasLtMatmulAlgoGetHeuristic(
        dev->lt, p->desc, p->la, p->lb, p->ld, p->ld, pref, 1, &res,
        &returned);
    // NOT_SUPPORTED (15) means no algorithm for this layout: pack instead.
    if (s != 0 && s != 15)
      st = iron_cuda_lt_status(s, "cublasLtMatmulAlgoGetHeuristic");
  }
  api->cublasLtMatmulPreferenceDestroy(pref);
  IRON_RETURN_IF_ERROR_PLAIN(st);
  if (returned > 0 && res.state == 0) {
    p->algo = res.algo;
    p->ws_size = res.workspaceSize;
    *out_ok = true;
    return IRON_OK;
  }
  api->cublasLtMatrixLayoutDestroy(p->la);
  api->cublasLtMatrixLayoutDestroy(p->lb);
  api->cublasLtMatrixLayoutDestroy(p->ld);
  api->cublasLtMatmulDescDestroy(p->desc);
  p->la = p->lb = p->ld = NULL;
  p->desc = NULL;
  return IRON_OK;
}

static bool precision_default(const iron_ir_op_t *op) {
  const iron_ir_attr_t *a = iron_ir_op_attr(op, "precision_config");
  if (!a || a->kind != IRON_ATTR_ARRAY) return true;
  for (uint32_t i = 0; i < a->array.count; ++i) {
    const iron_ir_attr_t *e = a->array.items[i];
    if (e && e->kind == IRON_ATTR_ENUM && e->enumv.value != 0) return false;
  }
  return true;
}

// s4/u4 and s2/u2 (one per byte, low bits): read as s8/u8 by the pack
// kernels.
static bool is_n4(iron_dtype_t dt) {
  return dt == IRON_DTYPE_S4 || dt == IRON_DTYPE_U4 || dt == IRON_DTYPE_S2 ||
         dt == IRON_DTYPE_U2;
}
static iron_dtype_t n4_wide(iron_dtype_t dt) {
  return dt == IRON_DTYPE_S4 || dt == IRON_DTYPE_S2   ? IRON_DTYPE_S8
         : dt == IRON_DTYPE_U4 || dt == IRON_DTYPE_U2 ? IRON_DTYPE_U8
                                                      : dt;
}

static bool is_intlike(iron_dtype_t dt) {
  return dt == IRON_DTYPE_PRED || is_n4(dt) ||
         (iron_dtype_is_int(dt) && iron_cuda_type_plain(dt).store);
}

// f8/f4: read as f32 (exact), results stored from f32 through f16
// (XLA:CPU; the host's dot.c); f8E8M0FNU by its f32 bits both ways (the
// pack kernels, iron_cuda_gen_pack).
static bool is_narrowf(iron_dtype_t dt) {
  int eb, mb, bias, kind;
  return dt == IRON_DTYPE_F8E8M0FNU ||
         iron_cuda_nf_format(dt, &eb, &mb, &bias, &kind);
}

// dot_general and dot: the shared plan (src/device/plans/dot_plan.c)
// validates; CUDA then refuses the dtype combinations it has no kernel
// for, naming itself.
static iron_status_t dot_prepare_on(iron_device_t *base,
                                    const iron_ir_op_t *op,
                                    iron_region_t *const *regions,
                                    void **out_params) {
  (void)regions;
  iron_cuda_device_t *dev = iron_cuda_device_cast(base);
  iron_dot_plan_t plan;
  IRON_RETURN_IF_ERROR_PLAIN(iron_dot_plan_read(op, &plan));
  const dot_dims_t *d = &plan;
  const iron_ir_type_t *lt = plan.lhs, *rt = plan.rhs, *ot = plan.out;
  iron_dtype_t ldt = lt->dtype, rdt = rt->dtype, odt = ot->dtype;
  bool out_int = is_intlike(odt);
  bool out_real = odt == IRON_DTYPE_F16 || odt == IRON_DTYPE_BF16 ||
                  odt == IRON_DTYPE_F32 || odt == IRON_DTYPE_F64 ||
                  is_narrowf(odt);
  bool out_cplx = odt == IRON_DTYPE_C64 || odt == IRON_DTYPE_C128;
  bool ops_int = is_intlike(ldt) && is_intlike(rdt);
  bool ops_real = (is_intlike(ldt) || lt_type(ldt) >= 0 || is_narrowf(ldt)) &&
                  (is_intlike(rdt) || lt_type(rdt) >= 0 || is_narrowf(rdt)) &&
                  ldt != IRON_DTYPE_C64 && ldt != IRON_DTYPE_C128 &&
                  rdt != IRON_DTYPE_C64 && rdt != IRON_DTYPE_C128;
  // Complex results take every operand dtype the plan does: the pack
  // kernels convert f8/f4 (through f32) and sub-byte integers first.
  bool ops_any = (is_intlike(ldt) || lt_type(ldt) >= 0 || is_narrowf(ldt)) &&
                 (is_intlike(rdt) || lt_type(rdt) >= 0 || is_narrowf(rdt));
  if (!((out_int && ops_int) || (out_real && ops_real) ||
        (out_cplx && ops_any)))
    return iron_ir_op_unimplemented(op, "on cuda for %s x %s -> %s",
                                    iron_dtype_name(ldt), iron_dtype_name(rdt),
                                    iron_dtype_name(odt));

  dot_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for params");
  p->api = dev->api;
  p->out_bytes = (size_t)iron_ir_type_num_elements(ot) * iron_dtype_size(odt);
  iron_status_t st = IRON_OK;
  if (p->out_bytes == 0) {
    p->mode = DOT_EMPTY;
  } else if (d->k == 0) {
    p->mode = DOT_ZERO;
  } else if (out_int) {
    p->mode = DOT_INT;
    st = plan_operand(dev, "l", lt, n4_wide(ldt), d->lb, d->nb, d->lf, d->nlf,
                      d->lc, d->nc, false, &p->lhs);
    if (!st)
      st = plan_operand(dev, "r", rt, n4_wide(rdt), d->rb, d->nb, d->rc, d->nc,
                        d->rf, d->nrf, false, &p->rhs);
    char *src = NULL;
    int64_t ls[3] = {p->lhs.bs, p->lhs.rs, p->lhs.cs};
    int64_t rs[3] = {p->rhs.bs, p->rhs.rs, p->rhs.cs};
    if (!st)
      st = iron_cuda_gen_dot_int("iron_dot_int", n4_wide(ldt), n4_wide(rdt),
                                 odt, d->batch,
                                 d->m, d->n, d->k, ls, rs, &src);
    if (!st) st = iron_cuda_ops_request(dev, src, "iron_dot_int",
                                             &p->int_fn);
    free(src);
    static const unsigned kLimit[3] = {0x7fffffffu, 65535u, 65535u};
    iron_cuda_dot_int_grid(d->batch, d->m, d->n, kLimit, p->grid);
  } else {
    p->mode = DOT_LT;
    st = lt_ensure(dev);
    // Compute dtype and the dtype cuBLASLt reads operands in.
    iron_dtype_t ct, ab, dt;
    if (odt == IRON_DTYPE_F64 || odt == IRON_DTYPE_C64 ||
        odt == IRON_DTYPE_C128) {
      ct = ab = dt = odt;
    } else {
      ct = IRON_DTYPE_F32;
      // bf16 x bf16 -> bf16/f32 and f16 likewise run natively.
      if (ldt == rdt && (ldt == IRON_DTYPE_BF16 || ldt == IRON_DTYPE_F16) &&
          (odt == ldt || odt == IRON_DTYPE_F32)) {
        ab = ldt;
        dt = odt;
      } else {
        ab = IRON_DTYPE_F32;
        dt = IRON_DTYPE_F32;
      }
    }
    int compute, scale;
    if (ct == IRON_DTYPE_F32) {
      compute = (ab == IRON_DTYPE_F32 && precision_default(op) &&
                 tf32_enabled())
                    ? IRON_CUBLAS_COMPUTE_32F_FAST_TF32
                    : IRON_CUBLAS_COMPUTE_32F;
      scale = IRON_CUDA_R_32F;
      float one = 1.0f, zero = 0.0f;
      memcpy(p->alpha, &one, sizeof(one));
      memcpy(p->beta, &zero, sizeof(zero));
    } else if (ct == IRON_DTYPE_C64) {
      compute = IRON_CUBLAS_COMPUTE_32F;
      scale = IRON_CUDA_C_32F;
      float one[2] = {1.0f, 0.0f}, zero[2] = {0.0f, 0.0f};
      memcpy(p->alpha, one, sizeof(one));
      memcpy(p->beta, zero, sizeof(zero));
    } else {
      compute = IRON_CUBLAS_COMPUTE_64F;
      scale = ct == IRON_DTYPE_F64 ? IRON_CUDA_R_64F : IRON_CUDA_C_64F;
      p->alpha[0] = 1.0;
    }
    bool ok = false;
    for (int attempt = 0; attempt < 2 && !st && !ok; ++attempt) {
      bool force = attempt == 1;
      st = plan_operand(dev, "l", lt, ab, d->lb, d->nb, d->lf, d->nlf, d->lc,
                        d->nc, force, &p->lhs);
      if (!st)
        st = plan_operand(dev, "r", rt, ab, d->rb, d->nb, d->rc, d->nc, d->rf,
                          d->nrf, force, &p->rhs);
      if (!st)
        st = lt_plan(dev, p, d, lt_type(ab), lt_type(dt), compute, scale, &ok);
    }
    if (!st && !ok)
      st = iron_ir_op_unimplemented(
          op, "on cuda: cuBLASLt has no algorithm for %s x %s -> %s",
          iron_dtype_name(ldt), iron_dtype_name(rdt), iron_dtype_name(odt));
    if (!st && dt != odt) {
      int64_t count = iron_ir_type_num_elements(ot);
      int64_t one = 1;
      char *src = NULL;
      st = iron_cuda_gen_pack("iron_dot_out", dt, odt, 1, &count, &one, &src);
      if (!st)
        st = iron_cuda_ops_request(dev, src, "iron_dot_out", &p->out_fn);
      free(src);
      p->d_bytes = (size_t)count * iron_dtype_size(dt);
      p->out_grid = grid_for(count);
    }
  }
  if (st) {
    dot_destroy(p);
    return st;
  }
  *out_params = p;
  return IRON_OK;
}

// Launches a pack kernel into fresh temporary storage (*out_tmp).
static iron_status_t run_pack(iron_cuda_device_t *dev, const dot_operand_t *o,
                              const void *src, iron_storage_t **out_tmp,
                              const void **out_data) {
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_storage_allocate(&dev->base, o->pack_bytes, out_tmp));
  void *dst = (*out_tmp)->data;
  void *args[2] = {&src, &dst};
  *out_data = dst;
  return iron_cuda_launch(dev, o->pack_fn, o->pack_grid, 1, 1, 256, 0, args);
}

static iron_status_t dot_run(const iron_kernel_ctx_t *ctx, const void *params,
                             const iron_tensor_t *const *inputs,
                             iron_tensor_t *const *outputs) {
  const dot_params_t *p = params;
  iron_cuda_device_t *dev = iron_cuda_device_cast(ctx->dev);
  const iron_cuda_api_t *api = dev->api;
  void *out = outputs[0]->data;
  if (p->mode == DOT_EMPTY) return IRON_OK;
  // cuBLASLt and the memset below run on the calling thread's context.
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_device_enter(dev));
  if (p->mode == DOT_ZERO)
    return iron_cuda_status(
        api,
        api->cuMemsetD8Async((CUdeviceptr)(uintptr_t)out, 0, p->out_bytes,
                             dev->stream),
        "cuMemsetD8Async (dot with an empty contraction)");
  iron_storage_t *tmp[3] = {NULL, NULL, NULL};
  const void *a = inputs[0]->data, *b = inputs[1]->data;
  iron_status_t st = IRON_OK;
  if (p->lhs.pack) st = run_pack(dev, &p->lhs, inputs[0]->data, &tmp[0], &a);
  if (!st && p->rhs.pack)
    st = run_pack(dev, &p->rhs, inputs[1]->data, &tmp[1], &b);
  if (!st && p->mode == DOT_INT) {
    void *args[3] = {&a, &b, &out};
    st = iron_cuda_launch(dev, p->int_fn, p->grid[0], p->grid[1], p->grid[2],
                          256, 0, args);
  } else if (!st) {
    void *d = out;
    if (p->out_fn) {
      st = iron_storage_allocate(&dev->base, p->d_bytes, &tmp[2]);
      if (!st) d = tmp[2]->data;
    }
    if (!st)
      st = iron_cuda_lt_status(
          api->cublasLtMatmul(dev->lt, p->desc, p->alpha, b, p->la, a, p->lb,
                              p->beta, d, p->ld, d, p->ld, &p->algo,
                              (void *)(uintptr_t)dev->lt_workspace, p->ws_size,
                              dev->stream),
          "cublasLtMatmul");
    if (!st && p->out_fn) {
      const void *dsrc = d;
      void *args[2] = {&dsrc, &out};
      st = iron_cuda_launch(dev, p->out_fn, p->out_grid, 1, 1, 256, 0, args);
    }
  }
  // Stream-ordered frees: the memory returns to the pool after the kernels
  // that read it.
  for (int i = 0; i < 3; ++i) iron_storage_release(tmp[i]);
  return st;
}

static const iron_kernel_t kDotGeneral = {
    .name = "cuda_dot_general",
    .run = dot_run,
    .destroy = dot_destroy,
    .prepare_on = dot_prepare_on,
    .graph_capturable = true};
static const iron_kernel_t kDot = {.name = "cuda_dot",
                                        .run = dot_run,
                                        .destroy = dot_destroy,
                                        .prepare_on = dot_prepare_on,
                                        .graph_capturable = true};

void iron_cuda_register_dot(iron_cuda_kernel_table_t table) {
  table[IRON_OP_DOT_GENERAL] = &kDotGeneral;
  table[IRON_OP_DOT] = &kDot;
}
