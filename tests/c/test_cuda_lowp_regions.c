// GPU-free test of the CUDA region-bodied kernels (reduce, sort, scatter,
// reduce_window, select_and_scatter) on the narrow dtypes (s4/u4, the f8
// family, f4E2M1FN, f8E8M0FNU; f6E2M3FN/f6E3M2FN, whose only bodies both
// devices run are the converting ones: the others are refused by both):
// each op is prepared with the CUDA kernel on
// a fake device (it must be accepted) and run with the host kernel, whose
// body runs through the host's element-wise kernels (an interpreter of the
// region below, as the runtime's call_region does); the generated source is
// compiled by NVRTC (sm_90a) and, as host C++ (cuda_emu.h), run on the
// CPU; results must equal the host's bit for bit (NaN payloads aside).
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "bb_region.h"
#include "compiler/plan.h"
#include "cuda_emu.h"
#include "cuda_test_nvrtc.h"
#include "device/cuda/gen/prelude.h"
#include "device/cuda/gen/source.h"
#include "device/cuda/gen/types.h"
#include "device/cuda/cuda_compile.h"
#include "device/cuda/cuda_device.h"
#include "device/cuda/gen/ops.h"
#include "base/narrow_float.h"
#include "device/host/ew_narrow.h"
#include "host_test_ops.h"
#include "test.h"

static iron_cuda_api_t g_api;
static iron_cuda_kernel_table_t g_table;
static iron_cuda_device_t *g_dev;

// --- cases -----------------------------------------------------------------

#define MAX_CASES 240
#define MAX_PTRS 6
typedef struct rcase {
  char what[96];
  char *src, kname[64];
  int nptr;
  iron_tensor_t *t[MAX_PTRS];  // the kernel's arguments, in order
  int nint;
  long long ints[4];  // integer arguments after the pointers
  int nout;
  int out_at[2];               // which of t are outputs
  iron_tensor_t *want[2];
} rcase_t;
static rcase_t g_cases[MAX_CASES];
static int g_ncases, g_refused_both;

static iron_tensor_t *tcopy(const iron_tensor_t *x) {
  iron_tensor_t *t = ht_tensor(x->dtype, x->rank, x->dims);
  memcpy(t->data, x->data, x->nbytes);
  return t;
}

// Prepares b with the CUDA kernel (must accept unless the host refuses
// too) and the host kernel, runs the host's on `host_in` (outputs
// `nres`), and queues the generated kernel `kname` with arguments `args`
// (copies; the outputs at out_at[] compared with the host's results).
static void add_case(ht_op_t *b, iron_region_t **regions,
                     iron_tensor_t **host_in, int nres, const char *kname,
                     iron_tensor_t **args, int nargs, const int *out_at,
                     const char *what) {
  const iron_kernel_t *ck = g_table[b->op.kind];
  CHECK(ck != NULL);
  size_t np0 = iron_cuda_compiler_pending_count(g_dev);
  void *params = NULL;
  iron_status_t cst =
      ck->prepare_on((iron_device_t *)g_dev, &b->op, regions, &params);
  free(params);
  iron_tensor_t *want[2] = {NULL, NULL};
  for (int i = 0; i < nres; ++i) want[i] = ht_tensor_like(&b->result_types[i]);
  const iron_kernel_t *hk = iron_host_kernel_lookup(b->op.kind);
  void *hp = NULL;
  iron_status_t hst = hk->prepare(&b->op, regions, &hp);
  if (!hst) {
    iron_kernel_ctx_t ctx = {0};
    ctx.call_region = bb_interp_call;
    hst = hk->run(&ctx, hp, (const iron_tensor_t *const *)host_in, want);
    if (hk->destroy) hk->destroy(hp); else free(hp);
  }
  bool ok = !cst && !hst;
  if (!ok) {
    if (cst && hst) {
      g_refused_both++;
    } else {
      fprintf(stderr, "%s: %s refused: %s\n", what, cst ? "CUDA" : "host",
              iron_status_message(cst ? cst : hst));
      CHECK(false);
    }
  }
  // The request names the kernel `kname`_<hash of its source>.
  const char *src = NULL, *at = NULL;
  size_t np = iron_cuda_compiler_pending_count(g_dev);
  char pat[64];
  snprintf(pat, sizeof(pat), " %s_", kname);
  for (size_t i = np0; ok && i < np && !src; ++i) {
    const char *s = iron_cuda_compiler_pending_source(g_dev, i);
    // The kernel itself: the match on a __global__ line (a source may
    // also name helpers after the kernel's prefix).
    for (at = strstr(s, pat); at && !src; at = src ? at : strstr(at + 1, pat)) {
      const char *line = at;
      while (line > s && line[-1] != '\n') --line;
      char head[256];
      snprintf(head, sizeof(head), "%.*s", (int)(at - line < 255 ? at - line : 255),
               line);
      if (strstr(head, "__global__")) src = s;
    }
  }
  CHECK(!ok || src != NULL);
  if (!ok || !src || g_ncases >= MAX_CASES) {
    iron_status_free(cst);
    iron_status_free(hst);
    for (int i = 0; i < nres; ++i) ht_tensor_free(want[i]);
    for (int i = 0; i < nargs; ++i) ht_tensor_free(args[i]);
    return;
  }
  rcase_t *c = &g_cases[g_ncases++];
  size_t kl = strcspn(at + 1, "(");
  snprintf(c->kname, sizeof(c->kname), "%.*s", (int)kl, at + 1);
  snprintf(c->what, sizeof(c->what), "%s", what);
  c->src = strdup(src);
  c->nptr = nargs;
  for (int i = 0; i < nargs; ++i) c->t[i] = args[i];
  c->nout = nres;
  for (int i = 0; i < nres; ++i) {
    c->out_at[i] = out_at[i];
    c->want[i] = want[i];
  }
}

// Random bytes of a narrow dtype: every encoding but f8E8M0FNU's 0x00
// (2^-127, an f32 denormal that XLA:CPU treats differently from op to op).
static void fill_narrow(iron_tensor_t *t, int salt) {
  int bits = iron_dtype_bits(t->dtype);
  for (int64_t i = 0; i < t->count; ++i) {
    uint8_t v = (uint8_t)((ht_rand() + (uint64_t)salt) & ((1u << bits) - 1));
    if (t->dtype == IRON_DTYPE_F8E8M0FNU && v == 0) v = 0x7f;
    ((uint8_t *)t->data)[i] = v;
  }
}

// Mostly small values (sums stay finite for a while), some of anything.
static void fill_mixed(iron_tensor_t *t) {
  fill_narrow(t, 0);
  iron_dtype_t dt = t->dtype;
  if (dt == IRON_DTYPE_S4 || dt == IRON_DTYPE_U4 ||
      dt == IRON_DTYPE_F8E8M0FNU)
    return;
  for (int64_t i = 0; i < t->count; ++i) {
    if (ht_rand() % 8 == 0) continue;
    double v = (double)((int64_t)(ht_rand() % 9) - 4) / (double)(1 << (ht_rand() % 3));
    ((uint8_t *)t->data)[i] = iron_narrow_float_encode(dt, v);
  }
}

static int flt_ctype(iron_dtype_t dt) {
  if (dt == IRON_DTYPE_S4) return IRON_CMP_TYPE_SIGNED;
  if (dt == IRON_DTYPE_U4) return IRON_CMP_TYPE_UNSIGNED;
  return IRON_CMP_TYPE_FLOAT;
}

enum { BODY_ADD, BODY_MAX, BODY_MULADD, BODY_CVT, BODY_MIXED, BODY_NEG };

// Two-argument bodies (acc, x) -> result over dt.
static bb_t *body2(iron_dtype_t dt, int kind) {
  iron_dtype_t d2[2] = {dt, dt};
  bb_t *b = bb_new(2, d2);
  iron_ir_value_t *x = bb_arg(b, 0), *y = bb_arg(b, 1), *r = NULL;
  bool n4 = dt == IRON_DTYPE_S4 || dt == IRON_DTYPE_U4;
  switch (kind) {
    case BODY_ADD: r = bb_op(b, IRON_OP_ADD, dt, 2, x, y, NULL); break;
    case BODY_MAX: r = bb_op(b, IRON_OP_MAXIMUM, dt, 2, x, y, NULL); break;
    case BODY_MULADD:  // x + y * y: rounds twice, not associative
      r = bb_op(b, IRON_OP_MULTIPLY, dt, 2, y, y, NULL);
      r = bb_op(b, IRON_OP_ADD, dt, 2, x, r, NULL);
      break;
    case BODY_CVT: {  // dt(wide(x) - wide(y)) through s32 / f32
      iron_dtype_t w = n4 ? IRON_DTYPE_S32 : IRON_DTYPE_F32;
      iron_ir_value_t *a = bb_op(b, IRON_OP_CONVERT, w, 1, x, NULL, NULL);
      iron_ir_value_t *c = bb_op(b, IRON_OP_CONVERT, w, 1, y, NULL, NULL);
      r = bb_op(b, IRON_OP_SUBTRACT, w, 2, a, c, NULL);
      r = bb_op(b, IRON_OP_CONVERT, dt, 1, r, NULL, NULL);
      break;
    }
    case BODY_MIXED: {  // select(x > c, x - y, abs(y) * c)
      uint8_t cb = n4 ? 3 : iron_narrow_float_encode(dt, 1.5);
      if (dt == IRON_DTYPE_F8E8M0FNU) cb = 128;  // 2
      iron_ir_value_t *c = bb_const(b, dt, cb);
      iron_ir_value_t *p = bb_cmp(b, IRON_CMP_GT, flt_ctype(dt), x, c);
      iron_ir_value_t *d = bb_op(b, IRON_OP_SUBTRACT, dt, 2, x, y, NULL);
      iron_ir_value_t *e = y;  // abs takes signed ints and floats only
      if (dt != IRON_DTYPE_U4) e = bb_op(b, IRON_OP_ABS, dt, 1, y, NULL, NULL);
      e = bb_op(b, IRON_OP_MULTIPLY, dt, 2, e, c, NULL);
      r = bb_op(b, IRON_OP_SELECT, dt, 3, p, d, e);
      break;
    }
    default: {  // -(x) + y and a divide for floats
      r = bb_op(b, IRON_OP_NEGATE, dt, 1, x, NULL, NULL);
      r = bb_op(b, IRON_OP_ADD, dt, 2, r, y, NULL);
      if (!n4) r = bb_op(b, IRON_OP_DIVIDE, dt, 2, r, y, NULL);
      break;
    }
  }
  bb_ret(b, 1, r, NULL);
  return b;
}

static const char *kBodyName[] = {"add", "max", "x+y*y", "cvt", "mixed",
                                  "neg"};

static void add_reduce(iron_dtype_t dt, int kind, int rdim) {
  int64_t dims[2] = {5, 12}, od[1] = {dims[1 - rdim]}, rd = rdim;
  ht_op_t b;
  ht_init(&b, IRON_OP_REDUCE);
  ht_operand(&b, dt, 2, dims);
  ht_operand(&b, dt, 0, NULL);
  ht_result(&b, dt, 1, od);
  ht_attr_i64(&b, "dimensions", 1, &rd);
  bb_t *body = body2(dt, kind);
  b.op.num_regions = 1;
  b.op.regions = &body->region;
  struct iron_region hr;
  memset(&hr, 0, sizeof(hr));
  hr.ir = &body->region;
  hr.elementwise = true;
  iron_region_t *regions[1] = {&hr};
  iron_tensor_t *x = ht_tensor(dt, 2, dims), *init = ht_tensor(dt, 0, NULL);
  fill_mixed(x);
  fill_mixed(init);
  iron_tensor_t *hin[2] = {x, init};
  iron_tensor_t *args[3] = {tcopy(x), tcopy(init), ht_tensor(dt, 1, od)};
  int out_at[1] = {2};
  char what[96];
  snprintf(what, sizeof(what), "reduce %s dim %d %s", kBodyName[kind], rdim,
           iron_dtype_name(dt));
  add_case(&b, regions, hin, 1, "iron_reduce", args, 3, out_at, what);
  ht_tensor_free(x);
  ht_tensor_free(init);
  free(body);
}

// reduce_window: window 3, stride 2, padding (2, 1) over 17 elements.
static void add_reduce_window(iron_dtype_t dt, int kind) {
  int64_t dims[1] = {17}, od[1] = {9}, wd = 3, ws = 2, pad[2] = {2, 1};
  ht_op_t b;
  ht_init(&b, IRON_OP_REDUCE_WINDOW);
  ht_operand(&b, dt, 1, dims);
  ht_operand(&b, dt, 0, NULL);
  ht_result(&b, dt, 1, od);
  ht_attr_i64(&b, "window_dimensions", 1, &wd);
  ht_attr_i64(&b, "window_strides", 1, &ws);
  ht_attr_i64(&b, "padding", 2, pad);
  bb_t *body = body2(dt, kind);
  b.op.num_regions = 1;
  b.op.regions = &body->region;
  struct iron_region hr;
  memset(&hr, 0, sizeof(hr));
  hr.ir = &body->region;
  hr.elementwise = true;
  iron_region_t *regions[1] = {&hr};
  iron_tensor_t *x = ht_tensor(dt, 1, dims), *init = ht_tensor(dt, 0, NULL);
  fill_mixed(x);
  fill_mixed(init);
  iron_tensor_t *hin[2] = {x, init};
  iron_tensor_t *args[3] = {tcopy(x), tcopy(init), ht_tensor(dt, 1, od)};
  int out_at[1] = {2};
  char what[96];
  snprintf(what, sizeof(what), "reduce_window %s %s", kBodyName[kind],
           iron_dtype_name(dt));
  add_case(&b, regions, hin, 1, "iron_reduce_window", args, 3, out_at, what);
  ht_tensor_free(x);
  ht_tensor_free(init);
  free(body);
}

// Sort of (keys dt, s32 payload) rows of 37 along dim 1. Comparator: keys
// with -0 taken as +0 (a constant, a FLOAT compare, a select), then LT in
// the total order (floats) or the ints' order; `desc` swaps the arguments.
static void add_sort(iron_dtype_t dt, bool desc) {
  int64_t dims[2] = {3, 37};
  ht_op_t b;
  ht_init(&b, IRON_OP_SORT);
  ht_operand(&b, dt, 2, dims);
  ht_operand(&b, IRON_DTYPE_S32, 2, dims);
  ht_result(&b, dt, 2, dims);
  ht_result(&b, IRON_DTYPE_S32, 2, dims);
  uint32_t ai = b.op.num_attrs++;
  b.attrs[ai].kind = IRON_ATTR_INT;
  b.attrs[ai].i = 1;
  b.attrs[ai].int_dtype = IRON_DTYPE_S64;
  b.named[ai].name = "dimension";
  b.named[ai].value = &b.attrs[ai];
  ai = b.op.num_attrs++;
  b.attrs[ai].kind = IRON_ATTR_BOOL;
  b.attrs[ai].b = true;
  b.named[ai].name = "is_stable";
  b.named[ai].value = &b.attrs[ai];
  iron_dtype_t d4[4] = {dt, dt, IRON_DTYPE_S32, IRON_DTYPE_S32};
  bb_t *body = bb_new(4, d4);
  iron_ir_value_t *x = bb_arg(body, desc ? 1 : 0), *y = bb_arg(body, desc ? 0 : 1);
  bool n4 = dt == IRON_DTYPE_S4 || dt == IRON_DTYPE_U4;
  iron_ir_value_t *lt;
  if (n4) {
    lt = bb_cmp(body, IRON_CMP_LT, flt_ctype(dt), x, y);
  } else {
    iron_ir_value_t *z = bb_const(body, dt, 0);
    iron_ir_value_t *xz = bb_cmp(body, IRON_CMP_EQ, IRON_CMP_TYPE_FLOAT, x, z);
    iron_ir_value_t *yz = bb_cmp(body, IRON_CMP_EQ, IRON_CMP_TYPE_FLOAT, y, z);
    x = bb_op(body, IRON_OP_SELECT, dt, 3, xz, z, x);
    y = bb_op(body, IRON_OP_SELECT, dt, 3, yz, z, y);
    lt = bb_cmp(body, IRON_CMP_LT, IRON_CMP_TYPE_TOTALORDER, x, y);
  }
  bb_ret(body, 1, lt, NULL);
  b.op.num_regions = 1;
  b.op.regions = &body->region;
  struct iron_region hr;
  memset(&hr, 0, sizeof(hr));
  hr.ir = &body->region;
  hr.elementwise = true;
  iron_region_t *regions[1] = {&hr};
  iron_tensor_t *k = ht_tensor(dt, 2, dims), *v = ht_tensor(IRON_DTYPE_S32, 2, dims);
  fill_mixed(k);
  for (int64_t i = 0; i < v->count; ++i) ((int32_t *)v->data)[i] = (int32_t)i;
  iron_tensor_t *hin[2] = {k, v};
  iron_tensor_t *args[4] = {tcopy(k), tcopy(v), ht_tensor(dt, 2, dims),
                            ht_tensor(IRON_DTYPE_S32, 2, dims)};
  int out_at[2] = {2, 3};
  char what[96];
  snprintf(what, sizeof(what), "sort%s %s", desc ? " desc" : "",
           iron_dtype_name(dt));
  add_case(&b, regions, hin, 2, "iron_sort", args, 4, out_at, what);
  // The one-block sort kernel's geometry: dinner, n, rows, inner
  // (cuda_sort_program.h).
  if (g_ncases && strcmp(g_cases[g_ncases - 1].what, what) == 0) {
    rcase_t *c = &g_cases[g_ncases - 1];
    c->nint = 4;
    c->ints[0] = 1;
    c->ints[1] = dims[1];
    c->ints[2] = dims[0];
    c->ints[3] = 1;
  }
  ht_tensor_free(k);
  ht_tensor_free(v);
  free(body);
}

// scatter of 10 updates into 16 elements at indices with duplicates.
static void add_scatter(iron_dtype_t dt, int kind) {
  int64_t od[1] = {16}, idims[2] = {10, 1}, ud[1] = {10};
  int64_t zero = 0, one = 1;
  ht_op_t b;
  ht_init(&b, IRON_OP_SCATTER);
  ht_operand(&b, dt, 1, od);
  ht_operand(&b, IRON_DTYPE_S32, 2, idims);
  ht_operand(&b, dt, 1, ud);
  ht_result(&b, dt, 1, od);
  ht_attr_i64(&b, "update_window_dims", 0, NULL);
  ht_attr_i64(&b, "inserted_window_dims", 1, &zero);
  ht_attr_i64(&b, "input_batching_dims", 0, NULL);
  ht_attr_i64(&b, "scatter_indices_batching_dims", 0, NULL);
  ht_attr_i64(&b, "scatter_dims_to_operand_dims", 1, &zero);
  ht_attr_i64(&b, "index_vector_dim", 1, &one);
  bb_t *body = body2(dt, kind);
  b.op.num_regions = 1;
  b.op.regions = &body->region;
  struct iron_region hr;
  memset(&hr, 0, sizeof(hr));
  hr.ir = &body->region;
  hr.elementwise = true;
  iron_region_t *regions[1] = {&hr};
  iron_tensor_t *x = ht_tensor(dt, 1, od), *u = ht_tensor(dt, 1, ud);
  iron_tensor_t *idx = ht_tensor(IRON_DTYPE_S32, 2, idims);
  fill_mixed(x);
  fill_mixed(u);
  static const int32_t kIdx[10] = {3, 7, 3, 15, 0, 7, 3, 20, -1, 9};
  memcpy(idx->data, kIdx, sizeof(kIdx));
  iron_tensor_t *hin[3] = {x, idx, u};
  // Kernel (result, indices, updates): result starts as the operand.
  iron_tensor_t *args[3] = {tcopy(x), tcopy(idx), tcopy(u)};
  int out_at[1] = {0};
  char what[96];
  snprintf(what, sizeof(what), "scatter %s %s", kBodyName[kind],
           iron_dtype_name(dt));
  add_case(&b, regions, hin, 1, "iron_scatter", args, 3, out_at, what);
  ht_tensor_free(x);
  ht_tensor_free(u);
  ht_tensor_free(idx);
  free(body);
}

// select_and_scatter: windows of 3, stride 2, padding (1, 1) over 15
// elements; select GE (the max pool's), scatter with body `kind`.
static void add_sas(iron_dtype_t dt, int kind) {
  int64_t dims[1] = {15}, sd[1] = {8}, wd = 3, ws = 2, pad[2] = {1, 1};
  ht_op_t b;
  ht_init(&b, IRON_OP_SELECT_AND_SCATTER);
  ht_operand(&b, dt, 1, dims);
  ht_operand(&b, dt, 1, sd);
  ht_operand(&b, dt, 0, NULL);
  ht_result(&b, dt, 1, dims);
  ht_attr_i64(&b, "window_dimensions", 1, &wd);
  ht_attr_i64(&b, "window_strides", 1, &ws);
  ht_attr_i64(&b, "padding", 2, pad);
  iron_dtype_t d2[2] = {dt, dt};
  bb_t *sel = bb_new(2, d2);
  bb_ret(sel, 1,
         bb_cmp(sel, IRON_CMP_GE, flt_ctype(dt), bb_arg(sel, 0),
                bb_arg(sel, 1)),
         NULL);
  bb_t *body = body2(dt, kind);
  iron_ir_region_t regs[2] = {sel->region, body->region};
  b.op.num_regions = 2;
  b.op.regions = regs;
  struct iron_region hr[2];
  memset(hr, 0, sizeof(hr));
  hr[0].ir = &sel->region;
  hr[0].elementwise = true;
  hr[1].ir = &body->region;
  hr[1].elementwise = true;
  iron_region_t *regions[2] = {&hr[0], &hr[1]};
  iron_tensor_t *x = ht_tensor(dt, 1, dims), *s = ht_tensor(dt, 1, sd);
  iron_tensor_t *init = ht_tensor(dt, 0, NULL);
  fill_mixed(x);
  fill_mixed(s);
  fill_mixed(init);
  iron_tensor_t *hin[3] = {x, s, init};
  // Kernel (operand, source, out): out starts as the init value.
  iron_tensor_t *out = ht_tensor(dt, 1, dims);
  memset(out->data, *(uint8_t *)init->data, out->nbytes);
  iron_tensor_t *args[3] = {tcopy(x), tcopy(s), out};
  int out_at[1] = {2};
  char what[96];
  snprintf(what, sizeof(what), "select_and_scatter %s %s", kBodyName[kind],
           iron_dtype_name(dt));
  add_case(&b, regions, hin, 1, "iron_select_and_scatter", args, 3, out_at,
           what);
  ht_tensor_free(x);
  ht_tensor_free(s);
  ht_tensor_free(init);
  free(sel);
  free(body);
}

// --- comparison --------------------------------------------------------------

static bool narrow_nan(iron_dtype_t dt, uint8_t v) {
  if (dt == IRON_DTYPE_F8E8M0FNU) return v == 0xff;
  if (dt == IRON_DTYPE_S4 || dt == IRON_DTYPE_U4) return false;
  return isnan(iron_narrow_float_decode(dt, v));
}

static bool elem_same(iron_dtype_t dt, const uint8_t *g, const uint8_t *w) {
  if (dt == IRON_DTYPE_S4 || dt == IRON_DTYPE_U4) return ((g[0] ^ w[0]) & 0xf) == 0;
  if (iron_ew_narrow_is(dt) || dt == IRON_DTYPE_F8E8M0FNU) {
    if (narrow_nan(dt, g[0]) || narrow_nan(dt, w[0]))
      return narrow_nan(dt, g[0]) && narrow_nan(dt, w[0]);
    return g[0] == w[0];
  }
  return memcmp(g, w, iron_dtype_size(dt)) == 0;
}

typedef void (*k3_t)(void *, void *, void *);
typedef void (*k4i4_t)(void *, void *, void *, void *, long long, long long,
                       long long, long long);
typedef void (*k4_t)(void *, void *, void *, void *);

// One source per case, each in its namespace after one copy of the ops
// prelude.
static char *joined_text(const char *prelude) {
  size_t pl = strlen(prelude), len = pl + 1;
  for (int i = 0; i < g_ncases; ++i) len += strlen(g_cases[i].src) + 96;
  char *text = malloc(len);
  size_t at = (size_t)snprintf(text, len, "%s", prelude);
  for (int i = 0; i < g_ncases; ++i) {
    const char *s = g_cases[i].src;
    CHECK(strncmp(s, prelude, pl) == 0);
    at += (size_t)snprintf(text + at, len - at,
                           "namespace n%d {\n%s\n}\n",
                           i, s + pl);
  }
  return text;
}

static void run_emulation(void) {
  CHECK(cuda_emu_have_cxx());
  if (!cuda_emu_have_cxx() || g_ncases == 0) return;
  char *text = joined_text(iron_cuda_prelude());
  const char *srcs[1] = {text};
  cuda_emu_lib_t lib;
  bool built = cuda_emu_build(srcs, 1, NULL, &lib);
  free(text);
  CHECK(built);
  if (!built) return;
#if defined(__x86_64__)
  unsigned csr = _mm_getcsr();
  _mm_setcsr(csr | 0x8040u);  // FTZ and DAZ, as XLA:CPU and -ftz
#endif
  int bad = 0;
  for (int i = 0; i < g_ncases; ++i) {
    rcase_t *c = &g_cases[i];
    void *sym = cuda_emu_sym(&lib, c->kname);
    CHECK(sym != NULL);
    if (!sym) continue;
    void *p[MAX_PTRS];
    for (int k = 0; k < c->nptr; ++k) p[k] = c->t[k]->data;
    if (c->nint == 4) {
      k4i4_t f;
      memcpy(&f, &sym, sizeof(f));
      f(p[0], p[1], p[2], p[3], c->ints[0], c->ints[1], c->ints[2],
        c->ints[3]);
    } else if (c->nptr == 3) {
      k3_t f;
      memcpy(&f, &sym, sizeof(f));
      f(p[0], p[1], p[2]);
    } else {
      k4_t f;
      memcpy(&f, &sym, sizeof(f));
      f(p[0], p[1], p[2], p[3]);
    }
    for (int o = 0; o < c->nout; ++o) {
      const iron_tensor_t *g = c->t[c->out_at[o]], *w = c->want[o];
      size_t es = iron_dtype_size(w->dtype);
      int64_t nbad = 0, first = -1;
      for (int64_t e = 0; e < w->count; ++e)
        if (!elem_same(w->dtype, (const uint8_t *)g->data + e * es,
                       (const uint8_t *)w->data + e * es)) {
          if (first < 0) first = e;
          nbad++;
        }
      if (nbad) {
        fprintf(stderr,
                "emulation mismatch: %s (result %d): %lld/%lld, first %lld: "
                "got 0x%02x want 0x%02x\n",
                c->what, o, (long long)nbad, (long long)w->count,
                (long long)first, ((const uint8_t *)g->data)[first * es],
                ((const uint8_t *)w->data)[first * es]);
        bad++;
      }
    }
  }
#if defined(__x86_64__)
  _mm_setcsr(csr);
#endif
  CHECK_EQ_INT(bad, 0);
  fprintf(stderr, "emulated %d region kernels, %d mismatched (%d refused by "
                  "both)\n", g_ncases, bad, g_refused_both);
  cuda_emu_close(&lib);
}

static void compile_all(void) {
  CHECK(cuda_test_load_nvrtc(&g_api));
  char *text = joined_text(iron_cuda_prelude());
  void *cubin = NULL;
  size_t size = 0;
  CHECK_OK(iron_cuda_nvrtc_compile(&g_api, text, "sm_90a", &cubin, &size));
  CHECK(size > 0);
  free(cubin);
  free(text);
}

// A known value: the generated reduce folds init then the elements in
// order with a rounding per op (f8E4M3FN: 1 + 0.0625 rounds to 1 each
// time, so sixteen of them leave 1, not 2).
static void test_known_value(void) {
  int64_t dims[1] = {16}, rd = 0;
  iron_dtype_t dt = IRON_DTYPE_F8E4M3FN;
  ht_op_t b;
  ht_init(&b, IRON_OP_REDUCE);
  ht_operand(&b, dt, 1, dims);
  ht_operand(&b, dt, 0, NULL);
  ht_result(&b, dt, 0, NULL);
  ht_attr_i64(&b, "dimensions", 1, &rd);
  bb_t *body = body2(dt, BODY_ADD);
  b.op.num_regions = 1;
  b.op.regions = &body->region;
  struct iron_region hr;
  memset(&hr, 0, sizeof(hr));
  hr.ir = &body->region;
  hr.elementwise = true;
  iron_region_t *regions[1] = {&hr};
  iron_tensor_t *x = ht_tensor(dt, 1, dims), *init = ht_tensor(dt, 0, NULL);
  memset(x->data, iron_narrow_float_encode(dt, 0.0625), 16);
  *(uint8_t *)init->data = iron_narrow_float_encode(dt, 1.0);
  iron_tensor_t *hin[2] = {x, init};
  iron_tensor_t *args[3] = {tcopy(x), tcopy(init), ht_tensor(dt, 0, NULL)};
  int out_at[1] = {2};
  int at = g_ncases;
  add_case(&b, regions, hin, 1, "iron_reduce", args, 3, out_at,
           "reduce known value f8E4M3FN");
  CHECK_EQ_INT(g_ncases, at + 1);
  if (g_ncases == at + 1)
    CHECK_EQ_INT(*(uint8_t *)g_cases[at].want[0]->data,
                 iron_narrow_float_encode(dt, 1.0));
  ht_tensor_free(x);
  ht_tensor_free(init);
  free(body);
}

static void test_lowp_regions(void) {
  g_dev = calloc(1, sizeof(*g_dev));
  snprintf(g_dev->arch, sizeof(g_dev->arch), "sm_90a");
  g_dev->num_sms = 132;
  g_dev->api = &g_api;
  iron_cuda_register_ops(g_table);
  static const iron_dtype_t kNarrow[] = {
      IRON_DTYPE_S4,          IRON_DTYPE_U4,          IRON_DTYPE_F8E4M3FN,
      IRON_DTYPE_F8E5M2,      IRON_DTYPE_F8E4M3B11FNUZ, IRON_DTYPE_F8E4M3FNUZ,
      IRON_DTYPE_F8E5M2FNUZ,  IRON_DTYPE_F8E4M3,      IRON_DTYPE_F8E3M4,
      IRON_DTYPE_F4E2M1FN,    IRON_DTYPE_F8E8M0FNU,   IRON_DTYPE_F6E2M3FN,
      IRON_DTYPE_F6E3M2FN};
  test_known_value();
  for (size_t i = 0; i < sizeof(kNarrow) / sizeof(kNarrow[0]); ++i) {
    iron_dtype_t dt = kNarrow[i];
    bool n4 = dt == IRON_DTYPE_S4 || dt == IRON_DTYPE_U4;
    for (int kind = BODY_ADD; kind <= BODY_NEG; ++kind) {
      // Max (and s4/u4 adds) take the parallel shapes, which the one-thread
      // emulation cannot run: reduced over dim 0 (5 elements: one thread
      // per output) for those.
      bool par = kind == BODY_MAX || (n4 && kind == BODY_ADD);
      if (!par) add_reduce(dt, kind, 1);
      if (par || kind == BODY_MULADD) add_reduce(dt, kind, 0);
      if (kind != BODY_MAX) add_scatter(dt, kind);
    }
    add_reduce_window(dt, BODY_ADD);
    add_reduce_window(dt, BODY_MIXED);
    add_sort(dt, false);
    add_sort(dt, true);
    add_sas(dt, BODY_ADD);
    add_sas(dt, BODY_MULADD);
  }
  fprintf(stderr, "%d region cases generated\n", g_ncases);
  CHECK(g_ncases > 150);
  CHECK(g_ncases < MAX_CASES);  // none dropped
  // f6: the converting bodies run (reduce and scatter per type), the 16
  // others per type are refused by both devices.
  CHECK_EQ_INT(g_refused_both, 2 * 16);
  run_emulation();
  compile_all();
  for (int i = 0; i < g_ncases; ++i) {
    free(g_cases[i].src);
    for (int k = 0; k < g_cases[i].nptr; ++k) ht_tensor_free(g_cases[i].t[k]);
    for (int k = 0; k < g_cases[i].nout; ++k) ht_tensor_free(g_cases[i].want[k]);
  }
  iron_cuda_compiler_destroy(g_dev->compiler);
  free(g_dev);
}

static const iron_test_case_t kTests[] = {
    {"lowp_regions", test_lowp_regions},
};

IRON_TEST_MAIN(kTests)
