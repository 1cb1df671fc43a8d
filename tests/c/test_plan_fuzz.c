// Random op fuzz of the validation the devices share (src/device/plans/):
// for every op family whose attributes a plan decodes, thousands of ops are
// built from a few valid templates with random mutations (attribute values
// and lengths, dropped attributes, operand/result dims, ranks and dtypes,
// operand counts) and prepared on the host device and on the CUDA device
// (GPU-free: a fake device whose compiler only collects the generated
// sources, and whose cuBLASLt entries succeed).
//
// The devices must agree wherever the shared plan decides:
//   - a host INVALID_ARGUMENT is the CUDA status too (code and message), and
//     so is a CUDA INVALID_ARGUMENT on the host;
//   - where the host refuses (UNIMPLEMENTED), CUDA refuses too;
//   - where the host accepts, CUDA accepts or refuses by name
//     (UNIMPLEMENTED: what it cannot compute yet).
// IRON_PLAN_FUZZ_LOG=file writes one line per op (both statuses and a hash
// of the CUDA sources it generated), to compare two builds op by op.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cuda/cuda_compile.h"
#include "device/cuda/cuda_device.h"
#include "host_test_ops.h"
#include "region_builder.h"
#include "test.h"

// --- a fake CUDA device -----------------------------------------------------

static struct CUctx_st *const kCtx = (struct CUctx_st *)0x1000;
static CUresult f_get_current(CUcontext *c) {
  *c = kCtx;
  return 0;
}
static CUresult f_set_current(CUcontext c) {
  (void)c;
  return 0;
}
static CUresult f_mem_alloc(CUdeviceptr *p, size_t n) {
  (void)n;
  *p = 0x10000;
  return 0;
}
static cublasStatus_t f_lt_create(cublasLtHandle_t *h) {
  *h = (cublasLtHandle_t)0x2000;
  return 0;
}
static cublasStatus_t f_desc_create(cublasLtMatmulDesc_t *d, int c, int s) {
  (void)c;
  (void)s;
  *d = (cublasLtMatmulDesc_t)0x3000;
  return 0;
}
static cublasStatus_t f_desc_destroy(cublasLtMatmulDesc_t d) {
  (void)d;
  return 0;
}
static cublasStatus_t f_desc_set(cublasLtMatmulDesc_t d, int a, const void *b,
                                 size_t n) {
  (void)d, (void)a, (void)b, (void)n;
  return 0;
}
static cublasStatus_t f_layout_create(cublasLtMatrixLayout_t *l, int t,
                                      uint64_t r, uint64_t c, int64_t ld) {
  (void)t, (void)r, (void)c, (void)ld;
  *l = (cublasLtMatrixLayout_t)0x4000;
  return 0;
}
static cublasStatus_t f_layout_destroy(cublasLtMatrixLayout_t l) {
  (void)l;
  return 0;
}
static cublasStatus_t f_layout_set(cublasLtMatrixLayout_t l, int a,
                                   const void *b, size_t n) {
  (void)l, (void)a, (void)b, (void)n;
  return 0;
}
static cublasStatus_t f_pref_create(cublasLtMatmulPreference_t *p) {
  *p = (cublasLtMatmulPreference_t)0x5000;
  return 0;
}
static cublasStatus_t f_pref_destroy(cublasLtMatmulPreference_t p) {
  (void)p;
  return 0;
}
static cublasStatus_t f_pref_set(cublasLtMatmulPreference_t p, int a,
                                 const void *b, size_t n) {
  (void)p, (void)a, (void)b, (void)n;
  return 0;
}
static cublasStatus_t f_heuristic(
    cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
    cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
    cublasLtMatrixLayout_t dd, cublasLtMatmulPreference_t p, int req,
    cublasLtMatmulHeuristicResult_t *res, int *returned) {
  (void)h, (void)d, (void)a, (void)b, (void)c, (void)dd, (void)p, (void)req;
  memset(res, 0, sizeof(*res));
  *returned = 1;
  return 0;
}

static iron_cuda_api_t g_api;

static iron_cuda_device_t *fake_device(void) {
  g_api.cuCtxGetCurrent = f_get_current;
  g_api.cuCtxSetCurrent = f_set_current;
  g_api.cuMemAlloc = f_mem_alloc;
  g_api.cublasLtCreate = f_lt_create;
  g_api.cublasLtMatmulDescCreate = f_desc_create;
  g_api.cublasLtMatmulDescDestroy = f_desc_destroy;
  g_api.cublasLtMatmulDescSetAttribute = f_desc_set;
  g_api.cublasLtMatrixLayoutCreate = f_layout_create;
  g_api.cublasLtMatrixLayoutDestroy = f_layout_destroy;
  g_api.cublasLtMatrixLayoutSetAttribute = f_layout_set;
  g_api.cublasLtMatmulPreferenceCreate = f_pref_create;
  g_api.cublasLtMatmulPreferenceDestroy = f_pref_destroy;
  g_api.cublasLtMatmulPreferenceSetAttribute = f_pref_set;
  g_api.cublasLtMatmulAlgoGetHeuristic = f_heuristic;
  iron_cuda_device_t *d = calloc(1, sizeof(*d));
  snprintf(d->arch, sizeof(d->arch), "sm_90a");
  d->num_sms = 132;
  d->api = &g_api;
  d->ctx = kCtx;
  return d;
}

static void fake_device_free(iron_cuda_device_t *d) {
  iron_cuda_compiler_destroy(d->compiler);
  free(d);
}

// --- random ops
// ---------------------------------------------------------------

static int64_t rnd(int64_t lo, int64_t hi) { return ht_rand_range(lo, hi); }
static bool chance(int percent) { return rnd(0, 99) < percent; }

static iron_dtype_t any_dtype(void) {
  return (iron_dtype_t)rnd(1, IRON_DTYPE_COUNT - 1);
}

static const iron_dtype_t kCommon[] = {
    IRON_DTYPE_F32,  IRON_DTYPE_F16, IRON_DTYPE_BF16,    IRON_DTYPE_F64,
    IRON_DTYPE_S32,  IRON_DTYPE_S8,  IRON_DTYPE_U8,      IRON_DTYPE_S64,
    IRON_DTYPE_PRED, IRON_DTYPE_C64, IRON_DTYPE_C128,    IRON_DTYPE_S4,
    IRON_DTYPE_U16,  IRON_DTYPE_U64, IRON_DTYPE_F8E4M3FN};
static iron_dtype_t common_dtype(void) {
  return kCommon[rnd(0, (int64_t)(sizeof(kCommon) / sizeof(kCommon[0])) - 1)];
}
// A data dtype: mostly common ones, sometimes any.
static iron_dtype_t data_dtype(void) {
  return chance(85) ? common_dtype() : any_dtype();
}

static void attr_int(ht_op_t *b, const char *name, int64_t v) {
  uint32_t i = b->op.num_attrs++;
  b->attrs[i].kind = IRON_ATTR_INT;
  b->attrs[i].i = v;
  b->attrs[i].int_dtype = IRON_DTYPE_S64;
  b->named[i].name = name;
  b->named[i].value = &b->attrs[i];
}

static void attr_bool(ht_op_t *b, const char *name, bool v) {
  uint32_t i = b->op.num_attrs++;
  b->attrs[i].kind = IRON_ATTR_BOOL;
  b->attrs[i].b = v;
  b->named[i].name = name;
  b->named[i].value = &b->attrs[i];
}

static void attr_enum(ht_op_t *b, const char *name, iron_enum_kind_t kind,
                      int32_t v) {
  uint32_t i = b->op.num_attrs++;
  b->attrs[i].kind = IRON_ATTR_ENUM;
  b->attrs[i].enumv.kind = kind;
  b->attrs[i].enumv.value = v;
  b->named[i].name = name;
  b->named[i].value = &b->attrs[i];
}

// A list attribute of n values.
static void attr_list(ht_op_t *b, const char *name, int n, const int64_t *v) {
  ht_attr_i64(b, name, n, v);
}
#define LIST(b, name, ...)                                     \
  do {                                                         \
    const int64_t v_[] = {__VA_ARGS__};                        \
    attr_list(b, name, (int)(sizeof(v_) / sizeof(v_[0])), v_); \
  } while (0)
#define EMPTY(b, name) attr_list(b, name, 0, NULL)

static void operand(ht_op_t *b, iron_dtype_t dt, int rank,
                    const int64_t *dims) {
  ht_operand(b, dt, rank, dims);
}
#define OPND(b, dt, ...)                                           \
  do {                                                             \
    const int64_t d_[] = {0, __VA_ARGS__};                         \
    operand(b, dt, (int)(sizeof(d_) / sizeof(d_[0])) - 1, d_ + 1); \
  } while (0)
#define RES(b, dt, ...)                                              \
  do {                                                               \
    const int64_t d_[] = {0, __VA_ARGS__};                           \
    ht_result(b, dt, (int)(sizeof(d_) / sizeof(d_[0])) - 1, d_ + 1); \
  } while (0)
#define SCALAR(b, dt) ht_operand(b, dt, 0, NULL)

// One random change to the op.
static void mutate(ht_op_t *b) {
  int what = (int)rnd(0, 99);
  if (what < 40 && b->op.num_attrs > 0) {
    uint32_t i = (uint32_t)rnd(0, b->op.num_attrs - 1);
    iron_ir_attr_t *a = &b->attrs[i];
    if (chance(10)) {  // dropped
      b->named[i].name = "dropped";
      return;
    }
    if (a->kind == IRON_ATTR_INT) {
      a->i = rnd(-2, 6);
    } else if (a->kind == IRON_ATTR_BOOL) {
      a->b = !a->b;
    } else if (a->kind == IRON_ATTR_ENUM) {
      a->enumv.value = (int32_t)rnd(-1, 4);
    } else if (a->kind == IRON_ATTR_DENSE) {
      int64_t n = b->attr_types[i].dims[0];
      if (chance(30)) {  // another length
        int64_t m = n + (chance(50) ? 1 : -1);
        if (m < 0) m = 1;
        if (m > IRON_MAX_RANK) m = IRON_MAX_RANK;
        for (int64_t k = n; k < m; ++k) b->attr_data[i][k] = rnd(-1, 4);
        b->attr_types[i].dims[0] = m;
        a->dense.size = (size_t)m * 8;
      } else if (n > 0) {
        b->attr_data[i][rnd(0, n - 1)] = chance(80) ? rnd(-1, 5) : rnd(-3, 9);
      }
    }
    return;
  }
  // Types: an operand or a result.
  uint32_t nt = b->op.num_operands + b->op.num_results;
  if (nt == 0) return;
  uint32_t k = (uint32_t)rnd(0, nt - 1);
  iron_ir_type_t *t = k < b->op.num_operands
                          ? &b->operand_types[k]
                          : &b->result_types[k - b->op.num_operands];
  if (what < 70) {
    if (t->rank > 0) t->dims[rnd(0, t->rank - 1)] = rnd(0, 6);
  } else if (what < 80) {
    if (chance(50) && t->rank > 0) {
      t->rank--;
    } else if (t->rank < 5) {
      t->dims[t->rank++] = rnd(1, 4);
    }
  } else if (what < 95) {
    t->dtype = chance(50) ? common_dtype() : any_dtype();
  } else if (chance(50) && b->op.num_operands > 0) {
    b->op.num_operands--;
  } else if (b->op.num_results > 0) {
    b->op.num_results--;
  }
}

static void mutate_some(ht_op_t *b) {
  int r = (int)rnd(0, 99);
  int n = r < 25 ? 0 : r < 65 ? 1 : r < 90 ? 2 : 3;
  for (int i = 0; i < n; ++i) mutate(b);
}

// Region bodies: scalar args of dt.
static rb_t *body_binary(iron_op_kind_t kind, iron_dtype_t dt) {
  return rb_binary(kind, dt);
}
static rb_t *body_set(iron_dtype_t dt) {
  rb_t *r = rb_new();
  iron_ir_value_t *x = rb_arg(r, dt), *y = rb_arg(r, dt);
  (void)x;
  rb_return(r, 1, &y);
  return r;
}
// x * y + x (a generic body).
static rb_t *body_generic(iron_dtype_t dt) {
  rb_t *r = rb_new();
  iron_ir_value_t *x = rb_arg(r, dt), *y = rb_arg(r, dt);
  iron_ir_value_t *m = rb_op(r, IRON_OP_MULTIPLY, dt, x, y, NULL);
  iron_ir_value_t *s = rb_op(r, IRON_OP_ADD, dt, m, x, NULL);
  rb_return(r, 1, &s);
  return r;
}
// Two (x_i, y_i) pairs added pairwise.
static rb_t *body_pair_add(iron_dtype_t a, iron_dtype_t c) {
  rb_t *r = rb_new();
  iron_ir_value_t *x0 = rb_arg(r, a), *x1 = rb_arg(r, c);
  iron_ir_value_t *y0 = rb_arg(r, a), *y1 = rb_arg(r, c);
  iron_ir_value_t *s[2] = {rb_op(r, IRON_OP_ADD, a, x0, y0, NULL),
                           rb_op(r, IRON_OP_ADD, c, x1, y1, NULL)};
  rb_return(r, 2, s);
  return r;
}

static rb_t *random_body(iron_dtype_t dt) {
  static const iron_op_kind_t kinds[] = {IRON_OP_ADD,     IRON_OP_MULTIPLY,
                                         IRON_OP_MAXIMUM, IRON_OP_MINIMUM,
                                         IRON_OP_OR,      IRON_OP_AND};
  int r = (int)rnd(0, 9);
  if (r < 6) return body_binary(kinds[r], dt);
  if (r < 8) return body_set(dt);
  return body_generic(dt);
}

// --- families -------------------------------------------------------------

typedef struct fcase {
  ht_op_t b;
  rb_t *body;  // or NULL
} fcase_t;

static void use_body(fcase_t *c, rb_t *body) {
  c->body = body;
  c->b.op.regions = &body->region;
  c->b.op.num_regions = 1;
}

static void gen_gather(fcase_t *c) {
  ht_op_t *b = &c->b;
  ht_init(b, IRON_OP_GATHER);
  iron_dtype_t dt = data_dtype();
  iron_dtype_t it = chance(70) ? IRON_DTYPE_S32 : any_dtype();
  switch (rnd(0, 3)) {
    case 0:  // embedding lookup
      OPND(b, dt, 5, 4);
      OPND(b, it, 3, 1);
      RES(b, dt, 3, 4);
      LIST(b, "offset_dims", 1);
      LIST(b, "collapsed_slice_dims", 0);
      LIST(b, "start_index_map", 0);
      LIST(b, "index_vector_dim", 1);
      LIST(b, "slice_sizes", 1, 4);
      break;
    case 1:  // batched
      OPND(b, dt, 2, 5, 3);
      OPND(b, it, 2, 4, 1);
      RES(b, dt, 2, 4, 3);
      LIST(b, "offset_dims", 2);
      LIST(b, "collapsed_slice_dims", 1);
      LIST(b, "operand_batching_dims", 0);
      LIST(b, "start_indices_batching_dims", 0);
      LIST(b, "start_index_map", 1);
      LIST(b, "index_vector_dim", 2);
      LIST(b, "slice_sizes", 1, 1, 3);
      break;
    case 2:  // 2-D windows
      OPND(b, dt, 6, 7);
      OPND(b, it, 4, 2);
      RES(b, dt, 4, 2, 3);
      LIST(b, "offset_dims", 1, 2);
      EMPTY(b, "collapsed_slice_dims");
      LIST(b, "start_index_map", 0, 1);
      LIST(b, "index_vector_dim", 1);
      LIST(b, "slice_sizes", 2, 3);
      break;
    default:  // scalar index, index_vector_dim = rank
      OPND(b, dt, 5);
      ht_operand(b, it, 0, NULL);
      RES(b, dt, 2);
      LIST(b, "offset_dims", 0);
      LIST(b, "start_index_map", 0);
      LIST(b, "index_vector_dim", 0);
      LIST(b, "slice_sizes", 2);
      break;
  }
  if (chance(20)) attr_bool(b, "indices_are_sorted", chance(50));
  mutate_some(b);
}

static void gen_scatter(fcase_t *c) {
  ht_op_t *b = &c->b;
  ht_init(b, IRON_OP_SCATTER);
  iron_dtype_t dt = data_dtype();
  iron_dtype_t it = chance(70) ? IRON_DTYPE_S32 : any_dtype();
  switch (rnd(0, 3)) {
    case 0:
      OPND(b, dt, 5, 4);
      OPND(b, it, 3, 1);
      OPND(b, dt, 3, 4);
      RES(b, dt, 5, 4);
      LIST(b, "update_window_dims", 1);
      LIST(b, "inserted_window_dims", 0);
      LIST(b, "scatter_dims_to_operand_dims", 0);
      LIST(b, "index_vector_dim", 1);
      use_body(c, random_body(dt));
      break;
    case 1:
      OPND(b, dt, 2, 5, 3);
      OPND(b, it, 2, 4, 1);
      OPND(b, dt, 2, 4, 3);
      RES(b, dt, 2, 5, 3);
      LIST(b, "update_window_dims", 2);
      LIST(b, "inserted_window_dims", 1);
      LIST(b, "input_batching_dims", 0);
      LIST(b, "scatter_indices_batching_dims", 0);
      LIST(b, "scatter_dims_to_operand_dims", 1);
      LIST(b, "index_vector_dim", 2);
      use_body(c, random_body(dt));
      break;
    case 2: {  // variadic
      iron_dtype_t d2 = data_dtype();
      OPND(b, dt, 5, 4);
      OPND(b, d2, 5, 4);
      OPND(b, it, 3, 1);
      OPND(b, dt, 3, 4);
      OPND(b, d2, 3, 4);
      RES(b, dt, 5, 4);
      RES(b, d2, 5, 4);
      LIST(b, "update_window_dims", 1);
      LIST(b, "inserted_window_dims", 0);
      LIST(b, "scatter_dims_to_operand_dims", 0);
      LIST(b, "index_vector_dim", 1);
      use_body(c, body_pair_add(dt, d2));
      break;
    }
    default:  // windows that may overlap
      OPND(b, dt, 6, 5);
      OPND(b, it, 2, 1);
      OPND(b, dt, 2, 3, 5);
      RES(b, dt, 6, 5);
      LIST(b, "update_window_dims", 1, 2);
      EMPTY(b, "inserted_window_dims");
      LIST(b, "scatter_dims_to_operand_dims", 0);
      LIST(b, "index_vector_dim", 1);
      use_body(c, random_body(dt));
      break;
  }
  if (chance(30)) attr_bool(b, "unique_indices", chance(50));
  mutate_some(b);
}

static void gen_slice(fcase_t *c) {
  ht_op_t *b = &c->b;
  ht_init(b, IRON_OP_SLICE);
  iron_dtype_t dt = data_dtype();
  if (chance(70)) {
    OPND(b, dt, 4, 6);
    RES(b, dt, 2, 3);
    LIST(b, "start_indices", 1, 0);
    LIST(b, "limit_indices", 3, 6);
    if (chance(80)) LIST(b, "strides", 1, 2);
  } else {
    OPND(b, dt, 3, 5, 2);
    RES(b, dt, 3, 2, 1);
    LIST(b, "start_indices", 0, 1, 1);
    LIST(b, "limit_indices", 3, 5, 2);
    LIST(b, "strides", 1, 3, 1);
  }
  mutate_some(b);
}

static void gen_pad(fcase_t *c) {
  ht_op_t *b = &c->b;
  ht_init(b, IRON_OP_PAD);
  iron_dtype_t dt = data_dtype();
  OPND(b, dt, 3, 4);
  SCALAR(b, dt);
  RES(b, dt, 6, 5);
  LIST(b, "edge_padding_low", 1, -1);
  LIST(b, "edge_padding_high", 0, 2);
  LIST(b, "interior_padding", 1, 0);
  mutate_some(b);
}

static void gen_concatenate(fcase_t *c) {
  ht_op_t *b = &c->b;
  ht_init(b, IRON_OP_CONCATENATE);
  iron_dtype_t dt = data_dtype();
  if (chance(50)) {
    OPND(b, dt, 2, 3);
    OPND(b, dt, 4, 3);
    OPND(b, dt, 0, 3);
    RES(b, dt, 6, 3);
    if (chance(50))
      attr_int(b, "dimension", 0);
    else
      LIST(b, "dimension", 0);
  } else {
    OPND(b, dt, 2, 3, 1);
    OPND(b, dt, 2, 2, 1);
    RES(b, dt, 2, 5, 1);
    attr_int(b, "dimension", 1);
  }
  mutate_some(b);
}

static void gen_dynamic_slice(fcase_t *c) {
  ht_op_t *b = &c->b;
  ht_init(b, IRON_OP_DYNAMIC_SLICE);
  iron_dtype_t dt = data_dtype();
  iron_dtype_t it = chance(70) ? IRON_DTYPE_S32 : any_dtype();
  OPND(b, dt, 5, 6);
  SCALAR(b, it);
  SCALAR(b, chance(80) ? it : any_dtype());
  RES(b, dt, 2, 3);
  LIST(b, "slice_sizes", 2, 3);
  mutate_some(b);
}

static void gen_dynamic_update_slice(fcase_t *c) {
  ht_op_t *b = &c->b;
  ht_init(b, IRON_OP_DYNAMIC_UPDATE_SLICE);
  iron_dtype_t dt = data_dtype();
  iron_dtype_t it = chance(70) ? IRON_DTYPE_S32 : any_dtype();
  OPND(b, dt, 5, 6);
  OPND(b, dt, 2, 3);
  SCALAR(b, it);
  SCALAR(b, chance(80) ? it : any_dtype());
  RES(b, dt, 5, 6);
  mutate_some(b);
}

static void gen_broadcast_in_dim(fcase_t *c) {
  ht_op_t *b = &c->b;
  ht_init(b, IRON_OP_BROADCAST_IN_DIM);
  iron_dtype_t dt = data_dtype();
  OPND(b, dt, 3, 1);
  RES(b, dt, 2, 3, 4);
  LIST(b, "broadcast_dimensions", 1, 2);
  mutate_some(b);
}

static void gen_broadcast(fcase_t *c) {
  ht_op_t *b = &c->b;
  ht_init(b, IRON_OP_BROADCAST);
  iron_dtype_t dt = data_dtype();
  OPND(b, dt, 3);
  RES(b, dt, 2, 3);
  LIST(b, "broadcast_sizes", 2);
  mutate_some(b);
}

static void gen_transpose(fcase_t *c) {
  ht_op_t *b = &c->b;
  ht_init(b, IRON_OP_TRANSPOSE);
  iron_dtype_t dt = data_dtype();
  OPND(b, dt, 2, 3, 4);
  RES(b, dt, 4, 2, 3);
  LIST(b, "permutation", 2, 0, 1);
  mutate_some(b);
}

static void gen_reverse(fcase_t *c) {
  ht_op_t *b = &c->b;
  ht_init(b, IRON_OP_REVERSE);
  iron_dtype_t dt = data_dtype();
  OPND(b, dt, 3, 4);
  RES(b, dt, 3, 4);
  if (chance(50))
    LIST(b, "dimensions", 0);
  else
    LIST(b, "dimensions", 1, 0);
  mutate_some(b);
}

static void gen_iota(fcase_t *c) {
  ht_op_t *b = &c->b;
  ht_init(b, IRON_OP_IOTA);
  RES(b, data_dtype(), 3, 4);
  if (chance(50))
    attr_int(b, "iota_dimension", 1);
  else
    LIST(b, "iota_dimension", 0);
  mutate_some(b);
}

static void gen_reshape(fcase_t *c) {
  ht_op_t *b = &c->b;
  ht_init(b, IRON_OP_RESHAPE);
  iron_dtype_t dt = data_dtype();
  OPND(b, dt, 2, 6);
  RES(b, dt, 3, 4);
  mutate_some(b);
}

static void gen_rng(fcase_t *c) {
  ht_op_t *b = &c->b;
  ht_init(b, IRON_OP_RNG_BIT_GENERATOR);
  iron_dtype_t st = chance(80) ? IRON_DTYPE_U64 : common_dtype();
  int64_t n = chance(80) ? 2 : rnd(1, 4);
  OPND(b, st, n);
  RES(b, st, n);
  iron_dtype_t ot = chance(50) ? IRON_DTYPE_U32 : data_dtype();
  switch (rnd(0, 2)) {
    case 0:
      RES(b, ot, 3, 5);
      break;
    case 1:
      RES(b, ot, 7);
      break;
    default:
      ht_result(b, ot, 0, NULL);
      break;
  }
  if (chance(80))
    attr_enum(b, "rng_algorithm", IRON_ENUM_RNG_ALGORITHM, (int32_t)rnd(0, 2));
  mutate_some(b);
}

static void dot_dtypes(iron_dtype_t *l, iron_dtype_t *r, iron_dtype_t *o) {
  int k = (int)rnd(0, 9);
  if (k < 5) {
    *l = *r = *o = common_dtype();
  } else if (k < 7) {
    *l = *r = chance(50) ? IRON_DTYPE_S8 : IRON_DTYPE_BF16;
    *o = chance(50) ? IRON_DTYPE_S32 : IRON_DTYPE_F32;
  } else {
    *l = data_dtype();
    *r = data_dtype();
    *o = data_dtype();
  }
}

static void gen_dot_general(fcase_t *c) {
  ht_op_t *b = &c->b;
  ht_init(b, IRON_OP_DOT_GENERAL);
  iron_dtype_t l, r, o;
  dot_dtypes(&l, &r, &o);
  if (chance(60)) {
    OPND(b, l, 2, 3, 4);
    OPND(b, r, 2, 4, 5);
    RES(b, o, 2, 3, 5);
    LIST(b, "lhs_batching_dimensions", 0);
    LIST(b, "rhs_batching_dimensions", 0);
    LIST(b, "lhs_contracting_dimensions", 2);
    LIST(b, "rhs_contracting_dimensions", 1);
  } else {
    OPND(b, l, 3, 4);
    OPND(b, r, 4);
    RES(b, o, 3);
    EMPTY(b, "lhs_batching_dimensions");
    EMPTY(b, "rhs_batching_dimensions");
    LIST(b, "lhs_contracting_dimensions", 1);
    LIST(b, "rhs_contracting_dimensions", 0);
  }
  mutate_some(b);
}

static void gen_dot(fcase_t *c) {
  ht_op_t *b = &c->b;
  ht_init(b, IRON_OP_DOT);
  iron_dtype_t l, r, o;
  dot_dtypes(&l, &r, &o);
  OPND(b, l, 3, 4);
  OPND(b, r, 4, 5);
  RES(b, o, 3, 5);
  mutate_some(b);
}

static void gen_reduce(fcase_t *c) {
  ht_op_t *b = &c->b;
  ht_init(b, IRON_OP_REDUCE);
  iron_dtype_t dt = data_dtype();
  if (chance(70)) {
    OPND(b, dt, 3, 4);
    SCALAR(b, dt);
    RES(b, dt, 3);
    LIST(b, "dimensions", 1);
    use_body(c, chance(80) ? body_binary(
                                 chance(50) ? IRON_OP_ADD : IRON_OP_MAXIMUM, dt)
                           : body_generic(dt));
  } else {
    iron_dtype_t d2 = chance(50) ? IRON_DTYPE_S32 : data_dtype();
    OPND(b, dt, 2, 3, 4);
    OPND(b, d2, 2, 3, 4);
    SCALAR(b, dt);
    SCALAR(b, d2);
    RES(b, dt, 3);
    RES(b, d2, 3);
    LIST(b, "dimensions", 0, 2);
    use_body(c, chance(50) ? rb_argmax(dt, d2) : body_pair_add(dt, d2));
  }
  mutate_some(b);
}

static void gen_reduce_precision(fcase_t *c) {
  ht_op_t *b = &c->b;
  ht_init(b, IRON_OP_REDUCE_PRECISION);
  iron_dtype_t dt =
      chance(70) ? (iron_dtype_t)kCommon[rnd(0, 3)] : data_dtype();
  OPND(b, dt, 4, 3);
  RES(b, dt, 4, 3);
  if (chance(90)) attr_int(b, "exponent_bits", rnd(0, 11));
  if (chance(90)) attr_int(b, "mantissa_bits", rnd(-1, 52));
  mutate_some(b);
}

static void gen_bitcast(fcase_t *c) {
  ht_op_t *b = &c->b;
  ht_init(b, IRON_OP_BITCAST_CONVERT);
  iron_dtype_t a = data_dtype(), r = chance(30) ? a : data_dtype();
  int ab = iron_dtype_bits(a), rb = iron_dtype_bits(r);
  OPND(b, a, 8);
  int64_t n = rb > 0 ? 8 * ab / rb : 8;
  if (n < 1) n = 1;
  if (ab > rb && rb > 0 && chance(50)) {
    RES(b, r, 8, ab / rb);
  } else {
    RES(b, r, n);
  }
  mutate_some(b);
}

typedef struct family {
  const char *name;
  void (*gen)(fcase_t *c);
} family_t;

static const family_t kFamilies[] = {
    {"gather", gen_gather},
    {"scatter", gen_scatter},
    {"slice", gen_slice},
    {"pad", gen_pad},
    {"concatenate", gen_concatenate},
    {"dynamic_slice", gen_dynamic_slice},
    {"dynamic_update_slice", gen_dynamic_update_slice},
    {"broadcast_in_dim", gen_broadcast_in_dim},
    {"broadcast", gen_broadcast},
    {"transpose", gen_transpose},
    {"reverse", gen_reverse},
    {"iota", gen_iota},
    {"reshape", gen_reshape},
    {"rng_bit_generator", gen_rng},
    {"dot_general", gen_dot_general},
    {"dot", gen_dot},
    {"reduce", gen_reduce},
    {"reduce_precision", gen_reduce_precision},
    {"bitcast_convert", gen_bitcast},
};
#define NUM_FAMILIES (sizeof(kFamilies) / sizeof(kFamilies[0]))

// --- running --------------------------------------------------------------

static uint64_t fnv(uint64_t h, const char *s) {
  for (const unsigned char *c = (const unsigned char *)s; *c; ++c) {
    h ^= *c;
    h *= 1099511628211ull;
  }
  return h;
}

static const char *code_name(iron_status_t s) {
  switch (iron_status_code(s)) {
    case IRON_STATUS_OK:
      return "OK";
    case IRON_STATUS_INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case IRON_STATUS_UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    default:
      return "OTHER";
  }
}

static bool names_cuda(const char *m) {
  return strstr(m, "cuda") || strstr(m, "CUDA") || strstr(m, "cuBLAS");
}

typedef struct tally {
  int cases, host_ok, cuda_ok, both_refused, violations;
} tally_t;

static void report(const char *fam, int i, const char *why, iron_status_t h,
                   iron_status_t d) {
  fprintf(stderr, "  %s #%d: %s\n    host: %s %s\n    cuda: %s %s\n", fam, i,
          why, code_name(h), h ? iron_status_message(h) : "", code_name(d),
          d ? iron_status_message(d) : "");
}

static void run_family(const family_t *f, int n, FILE *log, tally_t *t) {
  int shown = 0;
  for (int i = 0; i < n; ++i) {
    // A device per op: its compiler lists every source the op requested
    // (one device would list a source only the first time).
    iron_cuda_device_t *dev = fake_device();
    fcase_t *c = calloc(1, sizeof(*c));
    f->gen(c);
    iron_op_kind_t kind = c->b.op.kind;
    const iron_kernel_t *h = iron_host_kernel_lookup(kind);
    const iron_kernel_t *k = iron_cuda_kernel_lookup(kind);
    CHECK(h != NULL && k != NULL && k->prepare_on != NULL);
    if (!h || !k || !k->prepare_on) {
      fake_device_free(dev);
      return;
    }
    iron_region_t reg = {0};
    iron_region_t *regs[1] = {NULL};
    if (c->body) {
      reg.ir = &c->body->region;
      reg.elementwise = true;
      regs[0] = &reg;
    }
    void *hp = NULL, *cp = NULL;
    iron_status_t hs = h->prepare(&c->b.op, regs, &hp);
    if (!hs) {
      if (h->destroy)
        h->destroy(hp);
      else
        free(hp);
    }
    size_t before = iron_cuda_compiler_pending_count(dev);
    iron_status_t cs = k->prepare_on((iron_device_t *)dev, &c->b.op, regs, &cp);
    if (!cs) {
      if (k->destroy)
        k->destroy(cp);
      else
        free(cp);
    }
    uint64_t src = 1469598103934665603ull;
    size_t after = iron_cuda_compiler_pending_count(dev);
    for (size_t s = before; s < after; ++s)
      src = fnv(src, iron_cuda_compiler_pending_source(dev, s));
    const char *hm = hs ? iron_status_message(hs) : "";
    const char *cm = cs ? iron_status_message(cs) : "";
    if (log)
      fprintf(log, "%s %d H %s %s | C %s %s | src %zu %016llx\n", f->name, i,
              code_name(hs), hm, code_name(cs), cm, after - before,
              (unsigned long long)src);
    t->cases++;
    t->host_ok += hs == NULL;
    t->cuda_ok += cs == NULL;
    t->both_refused += hs && cs;
    const char *why = NULL;
    int hc = iron_status_code(hs), cc = iron_status_code(cs);
    if ((hc == IRON_STATUS_INVALID_ARGUMENT ||
         cc == IRON_STATUS_INVALID_ARGUMENT) &&
        (hc != cc || strcmp(hm, cm) != 0))
      why = "an invalid op gets another status on the other device";
    else if (hc == IRON_STATUS_UNIMPLEMENTED &&
             (cc != IRON_STATUS_UNIMPLEMENTED ||
              (strcmp(hm, cm) != 0 && !names_cuda(cm))))
      why = "the host's refusal is not CUDA's";
    else if (hc == IRON_STATUS_OK && cc != IRON_STATUS_OK &&
             (cc != IRON_STATUS_UNIMPLEMENTED || !names_cuda(cm)))
      why = "CUDA refuses what the host takes, without naming CUDA";
    else if (hc != IRON_STATUS_OK && hc != IRON_STATUS_INVALID_ARGUMENT &&
             hc != IRON_STATUS_UNIMPLEMENTED)
      why = "unexpected host status";
    if (why) {
      t->violations++;
      if (shown++ < 5) report(f->name, i, why, hs, cs);
    }
    iron_status_free(hs);
    iron_status_free(cs);
    free(c->body);
    free(c);
    fake_device_free(dev);
  }
}

static void test_plan_fuzz(void) {
  const char *path = getenv("IRON_PLAN_FUZZ_LOG");
  FILE *log = path ? fopen(path, "w") : NULL;
  int n = 2000;
  const char *e = getenv("IRON_PLAN_FUZZ_CASES");
  if (e) n = atoi(e);
  ht_rand_state = 0x9e3779b97f4a7c15ull;
  for (size_t f = 0; f < NUM_FAMILIES; ++f) {
    tally_t t = {0};
    run_family(&kFamilies[f], n, log, &t);
    fprintf(stderr,
            "%-22s %5d ops: host takes %5d, cuda %5d, both refuse %5d, "
            "disagreements %d\n",
            kFamilies[f].name, t.cases, t.host_ok, t.cuda_ok, t.both_refused,
            t.violations);
    CHECK_EQ_INT(t.violations, 0);
  }
  if (log) fclose(log);
}

static const iron_test_case_t kTests[] = {
    {"plan_fuzz", test_plan_fuzz},
};

IRON_TEST_MAIN(kTests)
