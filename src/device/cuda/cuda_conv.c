// stablehlo.convolution on the CUDA device. cuDNN first where it is there
// and takes the op (cuda_cudnn.h; IRON_CUDA_CUDNN=0 turns it off), else
// two paths of our own, both planned at prepare time (cuda_gen_conv.c
// generates the kernels):
// - direct: one thread per result element, the host's loops and
//   accumulation (every attribute and dtype the host handles, bit-exact
//   with the host's direct loops for integers, f16/bf16 and f32 sums in the
//   same order);
// - im2col + cuBLASLt (f32, f16 and bf16 operands and result of one dtype,
//   or f16/bf16 operands with an f32 result; large enough convolutions):
//   patches [G, M, K] and the packed kernel [G, K, N] go through one
//   strided-batched GEMM (f32 accumulation; f32 uses TF32 tensor cores when
//   every precision_config entry is DEFAULT and IRON_CUDA_TF32 is not "0", as
//   dot_general does), then an unpack kernel writes the result's layout.
// IRON_CUDA_CONV_GEMM (read at prepare): "0" never takes the GEMM path,
// "1" takes it for every eligible convolution (tests), unset: when the
// product has at least 2^24 multiply-adds and 8 output features per group.
#include <stdlib.h>
#include <string.h>

#include "device/cuda/cuda_compile.h"
#include "device/cuda/cuda_cudnn.h"
#include "device/cuda/gen/conv.h"
#include "device/cuda/cuda_ops_internal.h"

// The patch matrix is built and multiplied in chunks of rows of at most
// this size; a kernel or product larger than the MAX takes the direct path.
#define CONV_GEMM_CHUNK_BYTES ((int64_t)256 << 20)
#define CONV_GEMM_MAX_BYTES ((int64_t)1 << 32)
#define CONV_GEMM_MIN_MACS ((int64_t)1 << 24)

typedef struct conv_params {
  const iron_cuda_api_t *api;
  bool empty, gemm;
  iron_cudnn_conv_t *dnn;    // cuDNN (then nothing else is planned)
  iron_cuda_function_t *fn;  // direct
  unsigned grid;
  // GEMM path
  iron_cuda_function_t *im2col_fn, *wpack_fn, *unpack_fn;
  unsigned im2col_grid, wpack_grid, unpack_grid;
  size_t patch_bytes, w_bytes, c_bytes;  // patch_bytes: one chunk
  int64_t m, n, chunk;                   // GEMM rows, columns; rows per chunk
  int64_t gk;                            // groups x K: patch elements per row
  size_t elem;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la;
  // [0]: a chunk of `chunk` rows, [1]: the last, shorter chunk (if any).
  cublasLtMatrixLayout_t lb[2], ld[2];
  cublasLtMatmulAlgo_t algo[2];
  size_t ws_size[2];
  float alpha, beta;
} conv_params_t;

static void conv_destroy(void *params) {
  conv_params_t *p = params;
  if (!p) return;
  iron_cuda_cudnn_conv_destroy(p->dnn);
  if (p->api && p->api->has_cublaslt) {
    if (p->la) p->api->cublasLtMatrixLayoutDestroy(p->la);
    for (int i = 0; i < 2; ++i) {
      if (p->lb[i]) p->api->cublasLtMatrixLayoutDestroy(p->lb[i]);
      if (p->ld[i]) p->api->cublasLtMatrixLayoutDestroy(p->ld[i]);
    }
    if (p->desc) p->api->cublasLtMatmulDescDestroy(p->desc);
  }
  free(p);
}

static int gemm_mode(void) {
  const char *e = getenv("IRON_CUDA_CONV_GEMM");
  if (e && e[0] == '0') return 0;
  if (e && e[0] == '1') return 1;
  return -1;
}

static bool tf32_enabled(void) {
  const char *e = getenv("IRON_CUDA_TF32");
  return !(e && e[0] == '0');
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

// cuBLASLt data type of an operand dtype the GEMM path takes, else -1.
static int lt_type(iron_dtype_t dt) {
  switch (dt) {
    case IRON_DTYPE_F32:
      return IRON_CUDA_R_32F;
    case IRON_DTYPE_F16:
      return IRON_CUDA_R_16F;
    case IRON_DTYPE_BF16:
      return IRON_CUDA_R_16BF;
    default:
      return -1;
  }
}

static bool gemm_eligible(const iron_cuda_conv_t *c) {
  int mode = gemm_mode();
  if (mode == 0) return false;
  // Operands of one dtype; the result in it too, or f32 from f16/bf16
  // (preferred_element_type): cuBLASLt reads 16-bit A/B into f32 D.
  if (c->lhs_dtype != c->rhs_dtype || lt_type(c->lhs_dtype) < 0 ||
      c->groups > 65535)
    return false;
  if (c->out_dtype != c->lhs_dtype && c->out_dtype != IRON_DTYPE_F32)
    return false;
  int64_t m, n, k;
  iron_cuda_conv_gemm_dims(c, &m, &n, &k);
  if (m <= 0 || n <= 0 || k <= 0) return false;
  int64_t es = 4;  // the widest element of either side
  // One row of patches must fit a chunk; the packed kernel and the product
  // must stay below the MAX.
  if (k > CONV_GEMM_CHUNK_BYTES / c->groups / es) return false;
  if (k > CONV_GEMM_MAX_BYTES / n / c->groups / es) return false;
  if (m > CONV_GEMM_MAX_BYTES / n / c->groups / es) return false;
  if (mode == 1) return true;
  // Narrow groups (depthwise convolutions) make GEMMs of width 1-7: the
  // direct kernel reads the input once instead of writing K x patches.
  return n >= 8 && (double)c->groups * (double)m * (double)n * (double)k >=
                       (double)CONV_GEMM_MIN_MACS;
}

static iron_status_t make_layout(const iron_cuda_api_t *api, int type,
                                 int64_t rows, int64_t cols, int64_t ld,
                                 int64_t batch, int64_t bstride,
                                 cublasLtMatrixLayout_t *out) {
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_cuda_lt_status(api->cublasLtMatrixLayoutCreate(
                              out, type, (uint64_t)rows, (uint64_t)cols, ld),
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

// Row-major C_g[M, N] = P_g[M, K] W_g[K, N] is column-major
// C^T[N, M] = W^T[N, K] P^T[K, M]: cuBLASLt's A is W (N x K, ld N), B is P
// (K x M, ld K), D is N x M (ld N); batches of G with dense strides.
// *out_ok false when cuBLASLt has no algorithm (the direct path is used).
static iron_status_t gemm_plan(iron_cuda_device_t *dev, const iron_ir_op_t *op,
                               const iron_cuda_conv_t *c, conv_params_t *p,
                               bool *out_ok) {
  const iron_cuda_api_t *api = dev->api;
  *out_ok = false;
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_lt_ensure(dev));
  int64_t m, n, k;
  iron_cuda_conv_gemm_dims(c, &m, &n, &k);
  const int type = lt_type(c->lhs_dtype), d_type = lt_type(c->out_dtype);
  const int compute = (c->lhs_dtype == IRON_DTYPE_F32 &&
                       precision_default(op) && tf32_enabled())
                          ? IRON_CUBLAS_COMPUTE_32F_FAST_TF32
                          : IRON_CUBLAS_COMPUTE_32F;
  p->alpha = 1.0f;
  p->beta = 0.0f;
  p->api = api;
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_lt_status(
      api->cublasLtMatmulDescCreate(&p->desc, compute, IRON_CUDA_R_32F),
      "cublasLtMatmulDescCreate"));
  int32_t opn = IRON_CUBLAS_OP_N;
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_lt_status(
      api->cublasLtMatmulDescSetAttribute(
          p->desc, IRON_CUBLASLT_MATMUL_DESC_TRANSA, &opn, sizeof(opn)),
      "cublasLtMatmulDescSetAttribute(TRANSA)"));
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_lt_status(
      api->cublasLtMatmulDescSetAttribute(
          p->desc, IRON_CUBLASLT_MATMUL_DESC_TRANSB, &opn, sizeof(opn)),
      "cublasLtMatmulDescSetAttribute(TRANSB)"));
  IRON_RETURN_IF_ERROR_PLAIN(
      make_layout(api, type, n, k, n, c->groups, k * n, &p->la));
  const int64_t es = (int64_t)iron_dtype_size(c->lhs_dtype);
  const int64_t es_d = (int64_t)iron_dtype_size(c->out_dtype);
  int64_t chunk = CONV_GEMM_CHUNK_BYTES / (c->groups * k * es);
  if (chunk < 1) chunk = 1;
  if (chunk > m) chunk = m;
  p->m = m;
  p->n = n;
  p->chunk = chunk;
  p->gk = c->groups * k;
  p->elem = (size_t)es_d;
  const int64_t rows[2] = {chunk, m % chunk};
  for (int i = 0; i < 2; ++i) {
    if (rows[i] == 0) continue;
    // D of a chunk: rows [r0, r0 + rows) of each group's [M, N] product.
    IRON_RETURN_IF_ERROR_PLAIN(make_layout(api, type, k, rows[i], k, c->groups,
                                           rows[i] * k, &p->lb[i]));
    IRON_RETURN_IF_ERROR_PLAIN(
        make_layout(api, d_type, n, rows[i], n, c->groups, m * n, &p->ld[i]));
    cublasLtMatmulPreference_t pref = NULL;
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_cuda_lt_status(api->cublasLtMatmulPreferenceCreate(&pref),
                            "cublasLtMatmulPreferenceCreate"));
    uint64_t ws = dev->lt_workspace_size;
    iron_status_t st = iron_cuda_lt_status(
        api->cublasLtMatmulPreferenceSetAttribute(
            pref, IRON_CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
            sizeof(ws)),
        "cublasLtMatmulPreferenceSetAttribute");
    cublasLtMatmulHeuristicResult_t res;
    memset(&res, 0, sizeof(res));
    int returned = 0;
    if (!st) {
      cublasStatus_t s = api->cublasLtMatmulAlgoGetHeuristic(
          dev->lt, p->desc, p->la, p->lb[i], p->ld[i], p->ld[i], pref, 1, &res,
          &returned);
      // NOT_SUPPORTED (15): no algorithm; the direct kernel runs instead.
      if (s != 0 && s != 15)
        st = iron_cuda_lt_status(s, "cublasLtMatmulAlgoGetHeuristic");
    }
    api->cublasLtMatmulPreferenceDestroy(pref);
    IRON_RETURN_IF_ERROR_PLAIN(st);
    if (returned < 1 || res.state != 0) return IRON_OK;
    p->algo[i] = res.algo;
    p->ws_size[i] = res.workspaceSize;
  }
  p->patch_bytes = (size_t)(c->groups * chunk * k * es);
  p->w_bytes = (size_t)(c->groups * k * n * es);
  p->c_bytes = (size_t)(c->groups * m * n * es_d);
  char *src = NULL;
  iron_status_t st =
      iron_cuda_gen_conv_im2col("iron_conv_im2col", c, &src, &p->im2col_grid);
  if (!st)
    st = iron_cuda_ops_request(dev, src, "iron_conv_im2col", &p->im2col_fn);
  free(src);
  src = NULL;
  if (!st)
    st = iron_cuda_gen_conv_wpack("iron_conv_wpack", c, &src, &p->wpack_grid);
  if (!st)
    st = iron_cuda_ops_request(dev, src, "iron_conv_wpack", &p->wpack_fn);
  free(src);
  src = NULL;
  if (!st)
    st =
        iron_cuda_gen_conv_unpack("iron_conv_unpack", c, &src, &p->unpack_grid);
  if (!st)
    st = iron_cuda_ops_request(dev, src, "iron_conv_unpack", &p->unpack_fn);
  free(src);
  if (!st) *out_ok = true;
  return st;
}

static iron_status_t conv_prepare_on(iron_device_t *base,
                                     const iron_ir_op_t *op,
                                     iron_region_t *const *regions,
                                     void **out_params) {
  (void)regions;
  iron_cuda_device_t *dev = iron_cuda_device_cast(base);
  iron_cuda_conv_t c;
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_conv_plan(op, &c));
  conv_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for params");
  p->empty = c.out_count == 0;
  iron_status_t st = IRON_OK;
  if (!p->empty) st = iron_cuda_cudnn_conv_prepare(dev, op, &p->dnn);
  if (!st && !p->empty && !p->dnn && gemm_eligible(&c)) {
    bool ok = false;
    st = gemm_plan(dev, op, &c, p, &ok);
    p->gemm = !st && ok;
  }
  if (!st && !p->empty && !p->gemm && !p->dnn) {
    char *src = NULL;
    st = iron_cuda_gen_conv("iron_conv", &c, &src, &p->grid);
    if (st) {
      st = iron_cuda_ops_refused(op, st);
    } else {
      st = iron_cuda_ops_request(dev, src, "iron_conv", &p->fn);
      free(src);
    }
  }
  if (st) {
    conv_destroy(p);
    return st;
  }
  *out_params = p;
  return IRON_OK;
}

static iron_status_t run_gemm(iron_cuda_device_t *dev, const conv_params_t *p,
                              const void *lhs, const void *rhs, void *out) {
  const iron_cuda_api_t *api = dev->api;
  iron_storage_t *tmp[3] = {NULL, NULL, NULL};
  iron_status_t st = iron_storage_allocate(&dev->base, p->patch_bytes, &tmp[0]);
  if (!st) st = iron_storage_allocate(&dev->base, p->w_bytes, &tmp[1]);
  if (!st) st = iron_storage_allocate(&dev->base, p->c_bytes, &tmp[2]);
  void *patches = st ? NULL : tmp[0]->data, *w = st ? NULL : tmp[1]->data;
  void *c = st ? NULL : tmp[2]->data;
  if (!st) {
    void *args[2] = {&rhs, &w};
    st = iron_cuda_launch(dev, p->wpack_fn, p->wpack_grid, 1, 1, 256, 0, args);
  }
  // cuBLASLt runs on the calling thread's context.
  if (!st) st = iron_cuda_device_enter(dev);
  for (int64_t r0 = 0; r0 < p->m && !st; r0 += p->chunk) {
    int64_t rows = p->m - r0 < p->chunk ? p->m - r0 : p->chunk;
    int i = rows == p->chunk ? 0 : 1;
    void *args[4] = {&lhs, &patches, &r0, &rows};
    st = iron_cuda_launch(dev, p->im2col_fn, iron_cuda_ops_grid(rows * p->gk),
                          1, 1, 256, 0, args);
    void *d = (char *)c + (size_t)(r0 * p->n) * p->elem;
    if (!st)
      st = iron_cuda_lt_status(
          api->cublasLtMatmul(dev->lt, p->desc, &p->alpha, w, p->la, patches,
                              p->lb[i], &p->beta, d, p->ld[i], d, p->ld[i],
                              &p->algo[i], (void *)(uintptr_t)dev->lt_workspace,
                              p->ws_size[i], dev->stream),
          "cublasLtMatmul (convolution)");
  }
  if (!st) {
    const void *cs = c;
    void *args[2] = {&cs, &out};
    st =
        iron_cuda_launch(dev, p->unpack_fn, p->unpack_grid, 1, 1, 256, 0, args);
  }
  // Stream-ordered frees: back to the pool after the kernels that use them.
  for (int i = 0; i < 3; ++i) iron_storage_release(tmp[i]);
  return st;
}

static iron_status_t conv_run(const iron_kernel_ctx_t *ctx, const void *params,
                              const iron_tensor_t *const *inputs,
                              iron_tensor_t *const *outputs) {
  const conv_params_t *p = params;
  if (p->empty) return IRON_OK;
  iron_cuda_device_t *dev = iron_cuda_device_cast(ctx->dev);
  if (p->dnn)
    return iron_cuda_cudnn_conv_run(dev, p->dnn, inputs[0]->data,
                                    inputs[1]->data, outputs[0]->data);
  if (p->gemm)
    return run_gemm(dev, p, inputs[0]->data, inputs[1]->data, outputs[0]->data);
  void *ptrs[3] = {inputs[0]->data, inputs[1]->data, outputs[0]->data};
  void *args[3] = {&ptrs[0], &ptrs[1], &ptrs[2]};
  return iron_cuda_launch(dev, p->fn, p->grid, 1, 1, 256, 0, args);
}

// Every path only enqueues work on the device's stream and allocates from
// its stream-ordered pool (cuDNN's algorithm ran once at prepare), so a
// loop body with convolutions can be recorded as a CUDA graph.
static const iron_kernel_t kConv = {.name = "cuda_convolution",
                                    .run = conv_run,
                                    .destroy = conv_destroy,
                                    .prepare_on = conv_prepare_on,
                                    .graph_capturable = true};

void iron_cuda_register_conv(iron_cuda_kernel_table_t table) {
  table[IRON_OP_CONVOLUTION] = &kConv;
}
