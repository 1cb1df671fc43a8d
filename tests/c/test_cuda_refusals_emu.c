// GPU-free test of the CUDA kernels that replaced issue 12's refusals
// (README "What the CUDA device still refuses"): scatters of several
// operands (generic bodies, duplicate indices, window rows, overlapping
// windows, unique_indices), reduce_window of more than 8 operands, integer
// dots past one launch's grid and dtype mixes that are converted on the
// device. Each op is prepared with the CUDA kernel on a fake device (it
// must be accepted) and run with the host kernel (region bodies through
// the host's element-wise kernels, bb_region.h's interpreter, as the
// runtime's call_region does); the generated source is run on the CPU by
// cuda_emu.h's multi-thread shim (real blocks and grids) and compiled by
// NVRTC where it is installed. Results must equal the host's bit for bit
// (NaN payloads aside).
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "base/half.h"
#include "bb_region.h"
#include "conv_test_op.h"
#include "cuda_emu.h"
#include "cuda_test_nvrtc.h"
#include "device/cuda/cuda_compile.h"
#include "device/cuda/cuda_device.h"
#include "device/cuda/gen/ops.h"
#include "device/cuda/gen/prelude.h"
#include "host_test_ops.h"
#include "test.h"

static iron_cuda_api_t g_api;
static iron_cuda_kernel_table_t g_table;
static iron_cuda_device_t *g_dev;

// --- cases -----------------------------------------------------------------

#define MAX_CASES 120
#define MAX_PTRS 48
typedef struct rcase {
  char what[128];
  char *src, kname[96];
  int nptr;
  iron_tensor_t *t[MAX_PTRS];  // the kernel's arguments, in order
  unsigned grid[3], block;
  int nout;
  int out_at[MAX_PTRS];  // which of t are outputs
  iron_tensor_t *want[MAX_PTRS];
} rcase_t;
static rcase_t g_cases[MAX_CASES];
static int g_ncases;

static iron_tensor_t *tcopy(const iron_tensor_t *x) {
  iron_tensor_t *t = ht_tensor(x->dtype, x->rank, x->dims);
  memcpy(t->data, x->data, x->nbytes);
  return t;
}

// The pending source that defines kernel `kname`_<hash> (a __global__
// line), from index np0 on; *out_at at the name.
static const char *find_kernel(size_t np0, const char *kname,
                               const char **out_at) {
  size_t np = iron_cuda_compiler_pending_count(g_dev);
  char pat[96];
  snprintf(pat, sizeof(pat), " %s_", kname);
  for (size_t i = np0; i < np; ++i) {
    const char *s = iron_cuda_compiler_pending_source(g_dev, i);
    for (const char *at = strstr(s, pat); at; at = strstr(at + 1, pat)) {
      const char *line = at;
      while (line > s && line[-1] != '\n') --line;
      char head[256];
      snprintf(head, sizeof(head), "%.*s",
               (int)(at - line < 255 ? at - line : 255), line);
      if (strstr(head, "__global__")) {
        *out_at = at;
        return s;
      }
    }
  }
  return NULL;
}

// When set, add_case takes this source (a generator's output, kernel
// `kname` unrenamed) instead of preparing b with the CUDA kernel.
static const char *g_given_src;

// Prepares b with the CUDA kernel (must accept) and the host kernel, runs
// the host's on `host_in` (outputs `nres`), and queues the generated
// kernel `kname` with arguments `args` (owned; the outputs at out_at[]
// compared with the host's results), launched on grid x block.
static void add_case(ht_op_t *b, iron_region_t **regions,
                     iron_tensor_t **host_in, int nres, const char *kname,
                     iron_tensor_t **args, int nargs, const int *out_at,
                     const unsigned grid[3], unsigned block,
                     const char *what) {
  const iron_kernel_t *ck = g_table[b->op.kind];
  CHECK(g_given_src || ck != NULL);
  size_t np0 = iron_cuda_compiler_pending_count(g_dev);
  void *params = NULL;
  iron_status_t cst =
      g_given_src ? IRON_OK
                  : ck->prepare_on((iron_device_t *)g_dev, &b->op, regions,
                                   &params);
  if (params) {
    if (ck->destroy)
      ck->destroy(params);
    else
      free(params);
  }
  iron_tensor_t *want[MAX_PTRS] = {NULL};
  for (int i = 0; i < nres; ++i) want[i] = ht_tensor_like(&b->result_types[i]);
  const iron_kernel_t *hk = iron_host_kernel_lookup(b->op.kind);
  void *hp = NULL;
  iron_status_t hst = hk->prepare(&b->op, regions, &hp);
  if (!hst) {
    iron_kernel_ctx_t ctx = {0};
    ctx.call_region = bb_interp_call;
    hst = hk->run(&ctx, hp, (const iron_tensor_t *const *)host_in, want);
    if (hk->destroy)
      hk->destroy(hp);
    else
      free(hp);
  }
  if (cst || hst)
    fprintf(stderr, "%s: %s refused: %s\n", what, cst ? "CUDA" : "host",
            iron_status_message(cst ? cst : hst));
  CHECK(!cst && !hst);
  const char *at = NULL;
  const char *src = NULL;
  if (g_given_src && !cst && !hst) {
    src = g_given_src;
    char pat[96];
    snprintf(pat, sizeof(pat), " %s(", kname);
    at = strstr(src, pat);
  } else if (!cst && !hst) {
    src = find_kernel(np0, kname, &at);
  }
  CHECK(cst || hst || src != NULL);
  if (!src || g_ncases >= MAX_CASES) {
    iron_status_free(cst);
    iron_status_free(hst);
    for (int i = 0; i < nres; ++i) ht_tensor_free(want[i]);
    for (int i = 0; i < nargs; ++i) ht_tensor_free(args[i]);
    return;
  }
  rcase_t *c = &g_cases[g_ncases++];
  size_t kl = at ? strcspn(at + 1, "(") : 0;
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
  for (int i = 0; i < 3; ++i) c->grid[i] = grid[i];
  c->block = block;
}

// Values k/8 for k in [-16, 16] (integers: k; pred: k odd), so that f16 and
// bf16 sums round and the order of the updates shows.
static void put(iron_tensor_t *t, int64_t i, double v) {
  void *p = (char *)t->data + (size_t)i * iron_dtype_size(t->dtype);
  switch (t->dtype) {
    case IRON_DTYPE_F32: { float f = (float)v; memcpy(p, &f, 4); break; }
    case IRON_DTYPE_F64: memcpy(p, &v, 8); break;
    case IRON_DTYPE_F16: { uint16_t h = iron_f32_to_f16((float)v); memcpy(p, &h, 2); break; }
    case IRON_DTYPE_BF16: { uint16_t h = iron_f32_to_bf16((float)v); memcpy(p, &h, 2); break; }
    case IRON_DTYPE_S8: *(int8_t *)p = (int8_t)(v * 8); break;
    case IRON_DTYPE_U8: *(uint8_t *)p = (uint8_t)(int)(v * 8); break;
    case IRON_DTYPE_S16: { int16_t x = (int16_t)(v * 8); memcpy(p, &x, 2); break; }
    case IRON_DTYPE_S32: { int32_t x = (int32_t)(v * 8); memcpy(p, &x, 4); break; }
    case IRON_DTYPE_U32: { uint32_t x = (uint32_t)(int32_t)(v * 8); memcpy(p, &x, 4); break; }
    case IRON_DTYPE_S64: { int64_t x = (int64_t)(v * 8); memcpy(p, &x, 8); break; }
    case IRON_DTYPE_U64: { uint64_t x = (uint64_t)(int64_t)(v * 8); memcpy(p, &x, 8); break; }
    case IRON_DTYPE_PRED: *(uint8_t *)p = ((int)(v * 8) & 1) != 0; break;
    default: memset(p, 0, iron_dtype_size(t->dtype)); break;
  }
}

static void fill(iron_tensor_t *t) {
  for (int64_t i = 0; i < t->count; ++i)
    put(t, i, (double)((int64_t)(ht_rand() % 33) - 16) / 8.0);
}

static int run_emulation(void);
static void compile_all(void);
static void setup_device(void);
static void teardown_cases(void);

static iron_region_t *host_region(struct iron_region *hr, bb_t *body) {
  memset(hr, 0, sizeof(*hr));
  hr->ir = &body->region;
  hr->elementwise = true;
  return hr;
}

static const unsigned kGrid2[3] = {2, 1, 1};

// --- scatter of several operands -----------------------------------------

// Bodies over n operands (args a0..a{n-1}, u0..u{n-1}).
enum {
  SB_ARGMIN,  // n == 2: (value, index) of the smaller value, ties: smaller index
  SB_CHAIN,   // r_i = u_i - a_i + dt_i(a_{i+1 mod n}): order-dependent
  SB_SET,     // r_i = u_i: the last duplicate wins
};

static bb_t *scatter_body(int n, const iron_dtype_t *dts, int kind) {
  iron_dtype_t all[16];
  for (int i = 0; i < n; ++i) all[i] = all[n + i] = dts[i];
  bb_t *b = bb_new(2 * n, all);
  iron_ir_value_t *r[8] = {NULL};
  if (kind == SB_ARGMIN) {
    iron_ir_value_t *a0 = bb_arg(b, 0), *a1 = bb_arg(b, 1), *u0 = bb_arg(b, 2),
                    *u1 = bb_arg(b, 3);
    int ct0 = iron_dtype_is_float(dts[0]) ? IRON_CMP_TYPE_FLOAT
                                          : IRON_CMP_TYPE_SIGNED;
    iron_ir_value_t *lt = bb_cmp(b, IRON_CMP_LT, ct0, u0, a0);
    iron_ir_value_t *eq = bb_cmp(b, IRON_CMP_EQ, ct0, u0, a0);
    iron_ir_value_t *ilt = bb_cmp(b, IRON_CMP_LT, IRON_CMP_TYPE_SIGNED, u1, a1);
    iron_ir_value_t *tie = bb_op(b, IRON_OP_AND, IRON_DTYPE_PRED, 2, eq, ilt, NULL);
    iron_ir_value_t *pick = bb_op(b, IRON_OP_OR, IRON_DTYPE_PRED, 2, lt, tie, NULL);
    r[0] = bb_op(b, IRON_OP_SELECT, dts[0], 3, pick, u0, a0);
    r[1] = bb_op(b, IRON_OP_SELECT, dts[1], 3, pick, u1, a1);
  } else {
    for (int i = 0; i < n; ++i) {
      if (kind == SB_SET) {
        r[i] = bb_arg(b, n + i);
        continue;
      }
      iron_ir_value_t *a = bb_arg(b, i), *u = bb_arg(b, n + i);
      iron_ir_value_t *nx = bb_arg(b, (i + 1) % n);
      if (dts[(i + 1) % n] != dts[i])
        nx = bb_op(b, IRON_OP_CONVERT, dts[i], 1, nx, NULL, NULL);
      iron_ir_value_t *d = dts[i] == IRON_DTYPE_PRED
                               ? bb_op(b, IRON_OP_XOR, dts[i], 2, u, a, NULL)
                               : bb_op(b, IRON_OP_SUBTRACT, dts[i], 2, u, a, NULL);
      // f16/bf16 bodies of two arithmetic ops: region bodies fold them
      // unrounded on both devices' fast loops but bb_interp_call rounds
      // each op (gen/scalar.h's BODY mode), so one op there.
      if (dts[i] == IRON_DTYPE_F16 || dts[i] == IRON_DTYPE_BF16)
        r[i] = d;
      else
        r[i] = dts[i] == IRON_DTYPE_PRED
                 ? bb_op(b, IRON_OP_OR, dts[i], 2, d, nx, NULL)
                 : bb_op(b, IRON_OP_ADD, dts[i], 2, d, nx, NULL);
    }
  }
  bb_ret_n(b, n, r);
  return b;
}

typedef struct sshape {
  const char *name;
  int orank;
  int64_t od[2];     // operand dims
  int64_t npts;      // index points ([npts, 1] indices into operand dim 0)
  int64_t win;       // update window along operand dim 0 (1: inserted)
  bool unique;       // unique_indices (the indices are distinct then)
} sshape_t;

// Scatter of n operands of dts into od at npts points. Window 1: operand
// dim 0 is inserted (updates [npts, od[1..]]); wider: a window of `win`
// rows ([npts, win, od[1..]]), overlapping where points are close.
static void add_scatter_n(const sshape_t *s, int n, const iron_dtype_t *dts,
                          int body_kind) {
  int64_t idims[2] = {s->npts, 1};
  int64_t ud[3];
  int urank = 0;
  ud[urank++] = s->npts;
  if (s->win > 1) ud[urank++] = s->win;
  for (int d = 1; d < s->orank; ++d) ud[urank++] = s->od[d];
  int64_t zero = 0, one = 1;
  int64_t uwd[2];
  int nuwd = 0;
  for (int d = 1; d < urank; ++d) uwd[nuwd++] = d;
  ht_op_t b;
  ht_init(&b, IRON_OP_SCATTER);
  for (int i = 0; i < n; ++i) ht_operand(&b, dts[i], s->orank, s->od);
  ht_operand(&b, IRON_DTYPE_S32, 2, idims);
  for (int i = 0; i < n; ++i) ht_operand(&b, dts[i], urank, ud);
  for (int i = 0; i < n; ++i) ht_result(&b, dts[i], s->orank, s->od);
  ht_attr_i64(&b, "update_window_dims", nuwd, uwd);
  ht_attr_i64(&b, "inserted_window_dims", s->win > 1 ? 0 : 1, &zero);
  ht_attr_i64(&b, "input_batching_dims", 0, NULL);
  ht_attr_i64(&b, "scatter_indices_batching_dims", 0, NULL);
  ht_attr_i64(&b, "scatter_dims_to_operand_dims", 1, &zero);
  ht_attr_i64(&b, "index_vector_dim", 1, &one);
  if (s->unique) {
    uint32_t ai = b.op.num_attrs++;
    b.attrs[ai].kind = IRON_ATTR_BOOL;
    b.attrs[ai].b = true;
    b.named[ai].name = "unique_indices";
    b.named[ai].value = &b.attrs[ai];
  }
  bb_t *body = scatter_body(n, dts, body_kind);
  b.op.num_regions = 1;
  b.op.regions = &body->region;
  struct iron_region hr;
  iron_region_t *regions[1] = {host_region(&hr, body)};
  iron_tensor_t *ops[8], *upd[8];
  iron_tensor_t *idx = ht_tensor(IRON_DTYPE_S32, 2, idims);
  for (int i = 0; i < n; ++i) {
    ops[i] = ht_tensor(dts[i], s->orank, s->od);
    upd[i] = ht_tensor(dts[i], urank, ud);
    fill(ops[i]);
    fill(upd[i]);
  }
  // Indices: duplicates (a few distinct rows), one out of bounds and one
  // negative unless unique (then a permutation of distinct rows).
  int64_t rows = s->od[0] - s->win + 1;
  for (int64_t p = 0; p < s->npts; ++p) {
    int32_t v;
    if (s->unique)
      v = (int32_t)((p * 7) % rows);
    else if (p % 11 == 5)
      v = (int32_t)(rows + (p % 3));  // out of bounds: dropped
    else if (p % 13 == 7)
      v = -1;
    else
      v = (int32_t)(ht_rand() % (uint64_t)(rows < 5 ? rows : 5));
    ((int32_t *)idx->data)[p] = v;
  }
  iron_tensor_t *hin[17];
  for (int i = 0; i < n; ++i) {
    hin[i] = ops[i];
    hin[n + 1 + i] = upd[i];
  }
  hin[n] = idx;
  // Kernel (results..., indices, updates...): results start as operands.
  iron_tensor_t *args[17];
  int out_at[8];
  for (int i = 0; i < n; ++i) {
    args[i] = tcopy(ops[i]);
    args[n + 1 + i] = tcopy(upd[i]);
    out_at[i] = i;
  }
  args[n] = tcopy(idx);
  char what[128];
  int len = snprintf(what, sizeof(what), "scatter %s x%d body %d:", s->name,
                     n, body_kind);
  for (int i = 0; i < n; ++i)
    len += snprintf(what + len, sizeof(what) - (size_t)len, " %s",
                    iron_dtype_name(dts[i]));
  add_case(&b, regions, hin, n, "iron_scatter", args, 2 * n + 1, out_at,
           kGrid2, 256, what);
  for (int i = 0; i < n; ++i) {
    ht_tensor_free(ops[i]);
    ht_tensor_free(upd[i]);
  }
  ht_tensor_free(idx);
  free(body);
}

static void add_scatters(void) {
  static const sshape_t kShapes[] = {
      {"scalars", 1, {6, 0}, 40, 1, false},
      {"rows", 2, {9, 5}, 23, 1, false},
      {"overlap", 1, {12, 0}, 17, 3, false},
      {"overlap_rows", 2, {7, 3}, 9, 2, false},
      {"unique", 2, {50, 3}, 50, 1, true},
      {"unique_rows_big", 2, {300, 4}, 300, 1, true},
      {"many_points", 1, {4, 0}, 700, 1, false},
  };
  static const iron_dtype_t kPairs[][2] = {
      {IRON_DTYPE_F32, IRON_DTYPE_S32},  {IRON_DTYPE_F16, IRON_DTYPE_S32},
      {IRON_DTYPE_BF16, IRON_DTYPE_S64}, {IRON_DTYPE_F64, IRON_DTYPE_U8},
      {IRON_DTYPE_S32, IRON_DTYPE_S32},
  };
  for (size_t k = 0; k < sizeof(kShapes) / sizeof(kShapes[0]); ++k) {
    for (size_t p = 0; p < sizeof(kPairs) / sizeof(kPairs[0]); ++p) {
      add_scatter_n(&kShapes[k], 2, kPairs[p], SB_ARGMIN);
      add_scatter_n(&kShapes[k], 2, kPairs[p], SB_CHAIN);
    }
    static const iron_dtype_t k3[3] = {IRON_DTYPE_F16, IRON_DTYPE_S8,
                                       IRON_DTYPE_F64};
    static const iron_dtype_t k4[4] = {IRON_DTYPE_BF16, IRON_DTYPE_PRED,
                                       IRON_DTYPE_F32, IRON_DTYPE_U32};
    add_scatter_n(&kShapes[k], 3, k3, SB_CHAIN);
    add_scatter_n(&kShapes[k], 3, k3, SB_SET);
    add_scatter_n(&kShapes[k], 4, k4, SB_CHAIN);
    // One operand with a body that is not an atomic combine: the same
    // in-order path.
    add_scatter_n(&kShapes[k], 1, k4, SB_CHAIN);
    add_scatter_n(&kShapes[k], 1, k3, SB_CHAIN);
  }
}

// --- reduce_window of more than 8 operands ---------------------------------

// Body over n operands: acc_i + dt_i(x_{i+1 mod n}) (one arithmetic op per
// result: see scatter_body), so every operand's window feeds another's.
static bb_t *window_body(int n, const iron_dtype_t *dts) {
  iron_dtype_t all[2 * 16];
  for (int i = 0; i < n; ++i) all[i] = all[n + i] = dts[i];
  bb_t *b = bb_new(2 * n, all);
  iron_ir_value_t *r[16];
  for (int i = 0; i < n; ++i) {
    iron_ir_value_t *x = bb_arg(b, n + (i + 1) % n);
    if (dts[(i + 1) % n] != dts[i])
      x = bb_op(b, IRON_OP_CONVERT, dts[i], 1, x, NULL, NULL);
    r[i] = bb_op(b, IRON_OP_ADD, dts[i], 2, bb_arg(b, i), x, NULL);
  }
  bb_ret_n(b, n, r);
  return b;
}

// reduce_window of n operands over [5, 11]: window (2, 3), strides (2, 2),
// padding ((1, 0), (2, 1)), base dilation (1, 2) on the second dim.
static void add_window_n(int n) {
  static const iron_dtype_t kCycle[8] = {
      IRON_DTYPE_F32, IRON_DTYPE_S32, IRON_DTYPE_F16,  IRON_DTYPE_S8,
      IRON_DTYPE_F64, IRON_DTYPE_U32, IRON_DTYPE_BF16, IRON_DTYPE_S64};
  iron_dtype_t dts[16];
  for (int i = 0; i < n; ++i) dts[i] = kCycle[(i * 3) % 8];
  int64_t dims[2] = {5, 11}, wd[2] = {2, 3}, ws[2] = {2, 2},
          bd[2] = {1, 2}, pad[4] = {1, 0, 2, 1};
  // out = floor((padded - window) / stride) + 1 of padded = dilated + pads
  int64_t od[2] = {(5 + 1 - 2) / 2 + 1, ((11 - 1) * 2 + 1 + 3 - 3) / 2 + 1};
  ht_op_t b;
  ht_init(&b, IRON_OP_REDUCE_WINDOW);
  for (int i = 0; i < n; ++i) ht_operand(&b, dts[i], 2, dims);
  for (int i = 0; i < n; ++i) ht_operand(&b, dts[i], 0, NULL);
  for (int i = 0; i < n; ++i) ht_result(&b, dts[i], 2, od);
  ht_attr_i64(&b, "window_dimensions", 2, wd);
  ht_attr_i64(&b, "window_strides", 2, ws);
  ht_attr_i64(&b, "base_dilations", 2, bd);
  ht_attr_i64(&b, "padding", 4, pad);
  bb_t *body = window_body(n, dts);
  b.op.num_regions = 1;
  b.op.regions = &body->region;
  struct iron_region hr;
  iron_region_t *regions[1] = {host_region(&hr, body)};
  iron_tensor_t *hin[32], *args[48];
  int out_at[16];
  for (int i = 0; i < n; ++i) {
    hin[i] = ht_tensor(dts[i], 2, dims);
    hin[n + i] = ht_tensor(dts[i], 0, NULL);
    fill(hin[i]);
    fill(hin[n + i]);
  }
  // Kernel (in..., init..., out...).
  for (int i = 0; i < 2 * n; ++i) args[i] = tcopy(hin[i]);
  for (int i = 0; i < n; ++i) {
    args[2 * n + i] = ht_tensor(dts[i], 2, od);
    out_at[i] = 2 * n + i;
  }
  char what[128];
  snprintf(what, sizeof(what), "reduce_window of %d operands", n);
  add_case(&b, regions, hin, n, "iron_reduce_window", args, 3 * n, out_at,
           kGrid2, 256, what);
  for (int i = 0; i < 2 * n; ++i) ht_tensor_free(hin[i]);
  free(body);
}

static void test_window_operands(void) {
  setup_device();
  for (int n = 2; n <= 16; n += (n < 8 ? 6 : 1)) add_window_n(n);
  CHECK_EQ_INT(g_ncases, 10);
  CHECK_EQ_INT(run_emulation(), 0);
  compile_all();
  teardown_cases();
}

// --- convolution window attributes past 2^40 --------------------------------

// 1-D convolution lhs [1, 2, 5] (b, f, 0), rhs [2, 3, 3] (i, o, 0), result
// [1, 3, 2]: lhs dilation 2^42, rhs dilation 2^45, padding (2^45, 2^45),
// stride 2^44 (dilated input 2^44 + 1, window 2^46 + 1, span 2^44: two
// outputs, which read input elements 0 and 4).
static void add_big_window_conv(iron_dtype_t dt, iron_dtype_t out_dt) {
  conv_op_t c;
  memset(&c, 0, sizeof(c));
  ht_init(&c.b, IRON_OP_CONVOLUTION);
  c.b.op.attrs = c.named;
  int64_t ld[3] = {1, 2, 5}, kd[3] = {2, 3, 3}, od[3] = {1, 3, 2};
  ht_operand(&c.b, dt, 3, ld);
  ht_operand(&c.b, dt, 3, kd);
  ht_result(&c.b, out_dt, 3, od);
  const int64_t zero = 0, two = 2, stride = 1ll << 44, ldil = 1ll << 42,
                rdil = 1ll << 45, pad[2] = {1ll << 45, 1ll << 45};
  attr1(&c, "input_batch_dimension", 0);
  attr1(&c, "input_feature_dimension", 1);
  attr(&c, "input_spatial_dimensions", 1, &two);
  attr1(&c, "kernel_input_feature_dimension", 0);
  attr1(&c, "kernel_output_feature_dimension", 1);
  attr(&c, "kernel_spatial_dimensions", 1, &two);
  attr1(&c, "output_batch_dimension", 0);
  attr1(&c, "output_feature_dimension", 1);
  attr(&c, "output_spatial_dimensions", 1, &two);
  attr(&c, "window_strides", 1, &stride);
  attr(&c, "padding", 2, pad);
  attr(&c, "lhs_dilation", 1, &ldil);
  attr(&c, "rhs_dilation", 1, &rdil);
  attr(&c, "window_reversal", 1, &zero);
  attr1(&c, "feature_group_count", 1);
  attr1(&c, "batch_group_count", 1);
  iron_tensor_t *l = ht_tensor(dt, 3, ld), *r = ht_tensor(dt, 3, kd);
  fill(l);
  fill(r);
  iron_tensor_t *hin[2] = {l, r};
  iron_tensor_t *args[3] = {tcopy(l), tcopy(r), ht_tensor(out_dt, 3, od)};
  int out_at[1] = {2};
  char what[128];
  snprintf(what, sizeof(what), "conv with 2^44 stride %s -> %s",
           iron_dtype_name(dt), iron_dtype_name(out_dt));
  add_case(&c.b, NULL, hin, 1, "iron_conv", args, 3, out_at, kGrid2, 256,
           what);
  // The host's result is not all zeros (the windows do reach the input).
  if (g_ncases > 0) {
    const iron_tensor_t *w = g_cases[g_ncases - 1].want[0];
    bool any = false;
    for (size_t i = 0; i < w->nbytes; ++i) any = any || ((uint8_t *)w->data)[i];
    CHECK(any);
  }
  ht_tensor_free(l);
  ht_tensor_free(r);
}

static void test_big_window_conv(void) {
  // The direct kernel (cuDNN and the GEMM path are other kernels).
  setenv("IRON_CUDA_CUDNN", "0", 1);
  setenv("IRON_CUDA_CONV_GEMM", "0", 1);
  setup_device();
  add_big_window_conv(IRON_DTYPE_F32, IRON_DTYPE_F32);
  add_big_window_conv(IRON_DTYPE_S32, IRON_DTYPE_S32);
  add_big_window_conv(IRON_DTYPE_F16, IRON_DTYPE_F32);
  CHECK_EQ_INT(g_ncases, 3);
  CHECK_EQ_INT(run_emulation(), 0);
  compile_all();
  teardown_cases();
  unsetenv("IRON_CUDA_CUDNN");
  unsetenv("IRON_CUDA_CONV_GEMM");
}

// --- integer dot_general past one launch's grid ---------------------------

// [batch, m, k] x [batch, k, n] -> [batch, m, n] of integer dtypes, on a
// grid capped at `limit` (the kernel's tile loops cover the rest; on the
// GPU the cap is 2^31-1 x 65535 x 65535).
static void add_int_dot(int64_t batch, int64_t m, int64_t n, int64_t k,
                        iron_dtype_t ldt, iron_dtype_t rdt, iron_dtype_t odt,
                        const unsigned limit[3]) {
  int64_t ld[3] = {batch, m, k}, rd[3] = {batch, k, n}, od[3] = {batch, m, n};
  int64_t zero = 0, one = 1, two = 2;
  ht_op_t b;
  ht_init(&b, IRON_OP_DOT_GENERAL);
  ht_operand(&b, ldt, 3, ld);
  ht_operand(&b, rdt, 3, rd);
  ht_result(&b, odt, 3, od);
  ht_attr_i64(&b, "lhs_batching_dimensions", 1, &zero);
  ht_attr_i64(&b, "rhs_batching_dimensions", 1, &zero);
  ht_attr_i64(&b, "lhs_contracting_dimensions", 1, &two);
  ht_attr_i64(&b, "rhs_contracting_dimensions", 1, &one);
  iron_tensor_t *l = ht_tensor(ldt, 3, ld), *r = ht_tensor(rdt, 3, rd);
  fill(l);
  fill(r);
  iron_tensor_t *hin[2] = {l, r};
  iron_tensor_t *args[3] = {tcopy(l), tcopy(r), ht_tensor(odt, 3, od)};
  int out_at[1] = {2};
  unsigned grid[3];
  iron_cuda_dot_int_grid(batch, m, n, limit, grid);
  char what[128];
  snprintf(what, sizeof(what),
           "dot %lldx%lldx%lldx%lld %s x %s -> %s on grid %u,%u,%u",
           (long long)batch, (long long)m, (long long)n, (long long)k,
           iron_dtype_name(ldt), iron_dtype_name(rdt), iron_dtype_name(odt),
           grid[0], grid[1], grid[2]);
  add_case(&b, NULL, hin, 1, "iron_dot_int", args, 3, out_at, grid, 256,
           what);
  ht_tensor_free(l);
  ht_tensor_free(r);
}

static void test_int_dot_grid(void) {
  // What the device asks for: never past its limits, whatever the size.
  static const unsigned kDevice[3] = {0x7fffffffu, 65535u, 65535u};
  unsigned g[3];
  iron_cuda_dot_int_grid(70000, 16LL * 65535 + 1, 16LL * 65535 * 1024 * 3,
                         kDevice, g);
  CHECK(g[0] == 3u * 65535u * 1024u && g[1] == 65535u && g[2] == 65535u);
  iron_cuda_dot_int_grid(3, 20, 33, kDevice, g);
  CHECK(g[0] == 3 && g[1] == 2 && g[2] == 3);
  setup_device();
  // (k differs per grid: identical sources share one pending kernel.)
  static const unsigned kSmall[3][3] = {{1, 1, 1}, {2, 3, 2}, {5, 1, 7}};
  for (int i = 0; i < 3; ++i) {
    add_int_dot(5, 50, 70, 19 + i, IRON_DTYPE_S32, IRON_DTYPE_S8,
                IRON_DTYPE_S32, kSmall[i]);
    add_int_dot(3, 33, 17, 40 + i, IRON_DTYPE_U8, IRON_DTYPE_S64,
                IRON_DTYPE_S64, kSmall[i]);
    add_int_dot(9, 16, 16, 5 + i, IRON_DTYPE_S16, IRON_DTYPE_S16,
                IRON_DTYPE_S16, kSmall[i]);
  }
  CHECK_EQ_INT(g_ncases, 9);
  CHECK_EQ_INT(run_emulation(), 0);
  compile_all();
  teardown_cases();
}

// --- dot_general dtype mixes converted on the device ------------------------

// The pack kernels that convert dot operands (sub-byte integers, f8/f4 into
// complex) against the host's convert of the same elements, every byte
// value (upper bits set too: jax hands s2 -1 as 0x03, others may not mask).
static void add_pack(iron_dtype_t from, iron_dtype_t to) {
  int64_t n = 256;
  ht_op_t b;
  ht_init(&b, IRON_OP_CONVERT);
  ht_operand(&b, from, 1, &n);
  ht_result(&b, to, 1, &n);
  iron_tensor_t *x = ht_tensor(from, 1, &n);
  for (int64_t i = 0; i < n; ++i) ((uint8_t *)x->data)[i] = (uint8_t)i;
  // The host reads sub-byte values from the low bits only.
  int bits = iron_dtype_bits(from);
  if (bits < 8)
    for (int64_t i = 0; i < n; ++i) ((uint8_t *)x->data)[i] &= (uint8_t)((1 << bits) - 1);
  char *src = NULL;
  int64_t one = 1;
  iron_status_t st = iron_cuda_gen_pack("iron_pack_t", from, to, 1, &n, &one, &src);
  CHECK_OK(st);
  if (st) {
    ht_tensor_free(x);
    return;
  }
  iron_tensor_t *hin[1] = {x};
  iron_tensor_t *args[2] = {tcopy(x), ht_tensor(to, 1, &n)};
  int out_at[1] = {1};
  char what[128];
  snprintf(what, sizeof(what), "dot pack %s -> %s", iron_dtype_name(from),
           iron_dtype_name(to));
  // Unique kernel names (one library).
  char kname[64];
  snprintf(kname, sizeof(kname), "iron_pack_%d_%d", (int)from, (int)to);
  char *named = malloc(strlen(src) + 64);
  const char *at = strstr(src, " iron_pack_t(");
  sprintf(named, "%.*s %s%s", (int)(at - src), src, kname, at + strlen(" iron_pack_t"));
  g_given_src = named;
  add_case(&b, NULL, hin, 1, kname, args, 2, out_at, kGrid2, 256, what);
  g_given_src = NULL;
  free(named);
  free(src);
  ht_tensor_free(x);
}

static void test_dot_mixes(void) {
  setup_device();
  add_pack(IRON_DTYPE_S2, IRON_DTYPE_S8);
  add_pack(IRON_DTYPE_U2, IRON_DTYPE_U8);
  add_pack(IRON_DTYPE_S2, IRON_DTYPE_F32);
  add_pack(IRON_DTYPE_U2, IRON_DTYPE_C64);
  add_pack(IRON_DTYPE_F8E4M3FN, IRON_DTYPE_C64);
  add_pack(IRON_DTYPE_F8E5M2, IRON_DTYPE_C128);
  add_pack(IRON_DTYPE_F4E2M1FN, IRON_DTYPE_C64);
  CHECK_EQ_INT(g_ncases, 7);
  // The integer dot takes s2/u2 operands now (packed to s8/u8 first).
  {
    int64_t ld[2] = {3, 4}, rd[2] = {4, 5}, od[2] = {3, 5}, one = 1,
            zero = 0;
    ht_op_t b;
    ht_init(&b, IRON_OP_DOT_GENERAL);
    ht_operand(&b, IRON_DTYPE_S2, 2, ld);
    ht_operand(&b, IRON_DTYPE_U2, 2, rd);
    ht_result(&b, IRON_DTYPE_S32, 2, od);
    ht_attr_i64(&b, "lhs_batching_dimensions", 0, NULL);
    ht_attr_i64(&b, "rhs_batching_dimensions", 0, NULL);
    ht_attr_i64(&b, "lhs_contracting_dimensions", 1, &one);
    ht_attr_i64(&b, "rhs_contracting_dimensions", 1, &zero);
    const iron_kernel_t *ck = g_table[IRON_OP_DOT_GENERAL];
    void *params = NULL;
    iron_status_t st =
        ck->prepare_on((iron_device_t *)g_dev, &b.op, NULL, &params);
    CHECK_OK(st);
    if (params) ck->destroy(params);
  }
  CHECK_EQ_INT(run_emulation(), 0);
  compile_all();
  teardown_cases();
}

// --- comparison --------------------------------------------------------------

static bool elem_same(iron_dtype_t dt, const uint8_t *g, const uint8_t *w) {
  if (dt == IRON_DTYPE_F32) {
    float a, b;
    memcpy(&a, g, 4);
    memcpy(&b, w, 4);
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  } else if (dt == IRON_DTYPE_F64) {
    double a, b;
    memcpy(&a, g, 8);
    memcpy(&b, w, 8);
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  } else if (dt == IRON_DTYPE_F16 || dt == IRON_DTYPE_BF16) {
    uint16_t a, b;
    memcpy(&a, g, 2);
    memcpy(&b, w, 2);
    float fa = dt == IRON_DTYPE_F16 ? iron_f16_to_f32(a) : iron_bf16_to_f32(a);
    float fb = dt == IRON_DTYPE_F16 ? iron_f16_to_f32(b) : iron_bf16_to_f32(b);
    if (isnan(fa) || isnan(fb)) return isnan(fa) && isnan(fb);
  } else if (dt == IRON_DTYPE_PRED) {
    return (g[0] != 0) == (w[0] != 0);
  } else if (dt == IRON_DTYPE_S4 || dt == IRON_DTYPE_U4) {
    return ((g[0] ^ w[0]) & 0xf) == 0;
  }
  return memcmp(g, w, iron_dtype_size(dt)) == 0;
}

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
    at += (size_t)snprintf(text + at, len - at, "namespace n%d {\n%s\n}\n", i,
                           s + pl);
  }
  return text;
}

static int run_emulation(void) {
  CHECK(cuda_emu_have_cxx());
  if (!cuda_emu_have_cxx() || g_ncases == 0) return 0;
  // The multi-thread shim finds kernels by their extern "C" names, which
  // differ (hashes), so the sources go in as they are.
  const char **srcs = calloc((size_t)g_ncases, sizeof(char *));
  for (int i = 0; i < g_ncases; ++i) srcs[i] = g_cases[i].src;
  cuda_emu_lib_t lib;
  bool built = cuda_emu_build_mt(srcs, g_ncases, iron_cuda_prelude(), &lib);
  free(srcs);
  CHECK(built);
  if (!built) return 0;
#if defined(__x86_64__)
  unsigned csr = _mm_getcsr();
  _mm_setcsr(csr | 0x8040u);  // FTZ and DAZ, as XLA:CPU and -ftz
#endif
  int bad = 0;
  for (int i = 0; i < g_ncases; ++i) {
    rcase_t *c = &g_cases[i];
    void *p[MAX_PTRS], *a[MAX_PTRS];
    for (int k = 0; k < c->nptr; ++k) {
      p[k] = c->t[k]->data;
      a[k] = &p[k];
    }
    int r = cuda_emu_launch3(&lib, c->kname, c->grid, c->block, a);
    CHECK_EQ_INT(r, 0);
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
        uint64_t gb = 0, wb = 0;
        memcpy(&gb, (const uint8_t *)g->data + first * es, es < 8 ? es : 8);
        memcpy(&wb, (const uint8_t *)w->data + first * es, es < 8 ? es : 8);
        fprintf(stderr,
                "emulation mismatch: %s (result %d): %lld/%lld, first %lld: "
                "got 0x%llx want 0x%llx\n",
                c->what, o, (long long)nbad, (long long)w->count,
                (long long)first, (unsigned long long)gb,
                (unsigned long long)wb);
        bad++;
      }
    }
  }
#if defined(__x86_64__)
  _mm_setcsr(csr);
#endif
  fprintf(stderr, "emulated %d kernels, %d mismatched\n", g_ncases, bad);
  cuda_emu_close(&lib);
  return bad;
}

static void compile_all(void) {
  if (!cuda_test_load_nvrtc(&g_api)) {
    fprintf(stderr, "no NVRTC: the sources are not compiled\n");
    return;
  }
  char *text = joined_text(iron_cuda_prelude());
  void *cubin = NULL;
  size_t size = 0;
  CHECK_OK(iron_cuda_nvrtc_compile(&g_api, text, "sm_90a", &cubin, &size));
  CHECK(size > 0);
  free(cubin);
  free(text);
}

static void setup_device(void) {
  g_dev = calloc(1, sizeof(*g_dev));
  snprintf(g_dev->arch, sizeof(g_dev->arch), "sm_90a");
  g_dev->num_sms = 132;
  g_dev->api = &g_api;
  iron_cuda_register_ops(g_table);
}

static void teardown_cases(void) {
  for (int i = 0; i < g_ncases; ++i) {
    free(g_cases[i].src);
    for (int k = 0; k < g_cases[i].nptr; ++k) ht_tensor_free(g_cases[i].t[k]);
    for (int k = 0; k < g_cases[i].nout; ++k)
      ht_tensor_free(g_cases[i].want[k]);
  }
  g_ncases = 0;
  iron_cuda_compiler_destroy(g_dev->compiler);
  free(g_dev);
  g_dev = NULL;
}

static void test_variadic_scatter(void) {
  setup_device();
  add_scatters();
  fprintf(stderr, "%d scatter cases\n", g_ncases);
  CHECK(g_ncases >= 90);
  CHECK_EQ_INT(run_emulation(), 0);
  compile_all();
  teardown_cases();
}

static const iron_test_case_t kTests[] = {
    {"variadic_scatter", test_variadic_scatter},
    {"int_dot_grid", test_int_dot_grid},
    {"window_operands", test_window_operands},
    {"big_window_conv", test_big_window_conv},
    {"dot_mixes", test_dot_mixes},
};

IRON_TEST_MAIN(kTests)
