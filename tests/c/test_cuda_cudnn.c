// GPU-free tests of the cuDNN convolution path (cuda_cudnn*.c):
// - every stablehlo.convolution of tests/data/corpus and tests/data/conv
//   (the op conformance suite's convolutions and jax's training
//   convolutions, tests/gen_conv_corpus.py) is planned as a cuDNN call; the
//   plan must be consistent (cuDNN's output-size formula on its
//   descriptors gives the descriptor of the output, every tensor and copy
//   stays inside its buffer), real cuDNN must accept its descriptors and
//   compute the same output dims (when libcudnn.so.9 is on this machine:
//   descriptors need no GPU), and the plan, run on the CPU with cuDNN's
//   documented semantics and the generated staging kernels (cuda_emu.h),
//   must give the host convolution kernel's result bit for bit
//   (small-integer inputs: every sum is exact);
// - refusals: dtypes and forms cuDNN does not take are refused by the
//   plan (the op keeps the CUDA device's own kernels);
// - the loader: a missing library, a library without cuDNN's symbols, a
//   fake table of the wrong version; a fake cuDNN whose cudnnCreate fails
//   leaves the device without cuDNN (said once, remembered); the
//   algorithm choice from fake heuristics (exact kinds, determinism, TF32,
//   workspace, a refused workspace query).
#include <dirent.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "base/threadpool.h"
#include "corpus_files.h"
#include "cuda_emu.h"
#include "device/plans/conv_plan.h"
#include "device/cuda/cuda_compile.h"
#include "device/cuda/cuda_cudnn.h"
#include "device/cuda/gen/ops.h"
#include "host_test_ops.h"
#include "stablehlo/reader.h"
#include "test.h"

static iron_threadpool_t *g_pool;
static iron_cudnn_api_t g_real;  // real cuDNN when found (descriptors only)

// --- element access --------------------------------------------------------------

static double ld(iron_dtype_t dt, const void *b, int64_t i) {
  switch (dt) {
    case IRON_DTYPE_F32: return ((const float *)b)[i];
    case IRON_DTYPE_F64: return ((const double *)b)[i];
    case IRON_DTYPE_F16: return iron_f16_to_f32(((const uint16_t *)b)[i]);
    case IRON_DTYPE_BF16: return iron_bf16_to_f32(((const uint16_t *)b)[i]);
    default: return 0;
  }
}

// Sums are exact small integers: through f32 (exact) and then one rounding
// to the narrow type, as the host accumulates in f32 and rounds once.
static void st(iron_dtype_t dt, void *b, int64_t i, double v) {
  switch (dt) {
    case IRON_DTYPE_F32: ((float *)b)[i] = (float)v; break;
    case IRON_DTYPE_F64: ((double *)b)[i] = v; break;
    case IRON_DTYPE_F16: ((uint16_t *)b)[i] = iron_f32_to_f16((float)v); break;
    case IRON_DTYPE_BF16:
      ((uint16_t *)b)[i] = iron_f32_to_bf16((float)v);
      break;
    default: break;
  }
}

// --- cuDNN's semantics on the CPU ------------------------------------------------

static int64_t tidx(const iron_cudnn_tensor_t *t, int32_t nd,
                    const int64_t *idx) {
  int64_t o = t->offset;
  for (int32_t k = 0; k < nd; ++k) o += idx[k] * t->strides[k];
  return o;
}

// Runs the plan's call on host buffers (beta = 0: the output descriptor's
// every element is written). Products accumulate in double.
static void ref_call(const iron_cudnn_plan_t *p, void *const *bufs) {
  const int32_t nd = 2 + p->nsp;
  const iron_cudnn_tensor_t *x = &p->x, *w = &p->w, *y = &p->y;
  const int64_t groups = p->groups, cg = w->dims[1], kg = w->dims[0] / groups;
  const iron_cudnn_tensor_t *o =
      p->call == IRON_CUDNN_CALL_FORWARD         ? y
      : p->call == IRON_CUDNN_CALL_BACKWARD_DATA ? x
                                                 : w;
  int64_t ocount = 1;
  for (int32_t k = 0; k < nd; ++k) ocount *= o->dims[k];
  double *acc = calloc((size_t)ocount, sizeof(double));
  // Dense row-major index of the output tensor's logical dims.
  int64_t ostr[IRON_CUDNN_MAX_ND];
  int64_t s = 1;
  for (int32_t k = nd - 1; k >= 0; --k) {
    ostr[k] = s;
    s *= o->dims[k];
  }
  int64_t yi[IRON_CUDNN_MAX_ND], wi[IRON_CUDNN_MAX_ND], xi[IRON_CUDNN_MAX_ND];
  int64_t ycount = 1, wcount = 1;
  for (int32_t k = 0; k < nd; ++k) ycount *= y->dims[k];
  for (int32_t k = 1; k < nd; ++k) wcount *= w->dims[k];  // C/G, spatial
  void *xb = bufs[x->buf], *wb = bufs[w->buf], *yb = bufs[y->buf];
  for (int64_t a = 0; a < ycount; ++a) {
    int64_t r = a;
    for (int32_t k = nd - 1; k >= 0; --k) {
      yi[k] = r % y->dims[k];
      r /= y->dims[k];
    }
    const int64_t n = yi[0], kk = yi[1], g = kk / kg;
    for (int64_t b = 0; b < wcount; ++b) {
      int64_t q = b;
      for (int32_t k = nd - 1; k >= 1; --k) {
        wi[k] = q % w->dims[k];
        q /= w->dims[k];
      }
      wi[0] = kk;
      xi[0] = n;
      xi[1] = g * cg + wi[1];
      bool in = true;
      for (int32_t j = 0; j < p->nsp && in; ++j) {
        int64_t kr = p->mode == IRON_CUDNN_CONVOLUTION
                         ? w->dims[2 + j] - 1 - wi[2 + j]
                         : wi[2 + j];
        int64_t pos = yi[2 + j] * p->stride[j] - p->pad[j] + kr * p->dilation[j];
        in = pos >= 0 && pos < x->dims[2 + j];
        xi[2 + j] = pos;
      }
      if (!in) continue;
      const int64_t *oi = o == y ? yi : o == x ? xi : wi;
      int64_t dense = 0;
      for (int32_t k = 0; k < nd; ++k) dense += oi[k] * ostr[k];
      double u, v;
      if (p->call == IRON_CUDNN_CALL_FORWARD) {
        u = ld(p->dtype, xb, tidx(x, nd, xi));
        v = ld(p->dtype, wb, tidx(w, nd, wi));
      } else if (p->call == IRON_CUDNN_CALL_BACKWARD_DATA) {
        u = ld(p->dtype, yb, tidx(y, nd, yi));
        v = ld(p->dtype, wb, tidx(w, nd, wi));
      } else {
        u = ld(p->dtype, xb, tidx(x, nd, xi));
        v = ld(p->dtype, yb, tidx(y, nd, yi));
      }
      acc[dense] += u * v;
    }
  }
  void *ob = bufs[o->buf];
  int64_t oi[IRON_CUDNN_MAX_ND];
  for (int64_t a = 0; a < ocount; ++a) {
    int64_t r = a;
    for (int32_t k = nd - 1; k >= 0; --k) {
      oi[k] = r % o->dims[k];
      r /= o->dims[k];
    }
    st(p->dtype, ob, tidx(o, nd, oi), acc[a]);
  }
  free(acc);
}

// --- plan consistency -----------------------------------------------------------

// Lowest and highest element a strided view touches.
static void view_range(int32_t nd, const int64_t *dims, int64_t off,
                       const int64_t *strides, int64_t *lo, int64_t *hi) {
  *lo = *hi = off;
  for (int32_t k = 0; k < nd; ++k) {
    int64_t e = (dims[k] - 1) * strides[k];
    if (e < 0)
      *lo += e;
    else
      *hi += e;
  }
}

static bool inside(const iron_conv_plan_t *cp, const iron_cudnn_plan_t *p,
                   int32_t buf, int32_t nd, const int64_t *dims, int64_t off,
                   const int64_t *strides) {
  int64_t lo, hi;
  view_range(nd, dims, off, strides, &lo, &hi);
  return lo >= 0 && hi < iron_cudnn_plan_buf_elems(cp, p, buf);
}

// cuDNN's forward output dims of the plan's x, w and convolution.
static void fwd_dims(const iron_cudnn_plan_t *p, int64_t *out) {
  out[0] = p->x.dims[0];
  out[1] = p->w.dims[0];
  for (int32_t j = 0; j < p->nsp; ++j) {
    int64_t dk = (p->w.dims[2 + j] - 1) * p->dilation[j] + 1;
    out[2 + j] = (p->x.dims[2 + j] + 2 * p->pad[j] - dk) / p->stride[j] + 1;
  }
}

static void check_consistent(const char *what, const iron_conv_plan_t *cp,
                             const iron_cudnn_plan_t *p) {
  const int32_t nd = 2 + p->nsp;
  int64_t want[IRON_CUDNN_MAX_ND];
  fwd_dims(p, want);
  bool ok = p->nsp >= 2 && p->nsp <= 3 && p->groups >= 1 &&
            p->x.dims[1] == p->w.dims[1] * p->groups &&
            p->w.dims[0] % p->groups == 0;
  for (int32_t k = 0; k < nd; ++k) ok = ok && want[k] == p->y.dims[k];
  for (int32_t j = 0; j < p->nsp; ++j)
    ok = ok && p->pad[j] >= 0 && p->stride[j] >= 1 && p->dilation[j] >= 1 &&
         p->x.dims[2 + j] + 2 * p->pad[j] >= (p->w.dims[2 + j] - 1) *
                                                     p->dilation[j] + 1;
  if (!ok) fprintf(stderr, "%s: %s plan: inconsistent dims\n", what,
                   iron_cudnn_call_name(p->call));
  CHECK(ok);
  // Filters are dense in their format.
  int64_t fs[IRON_CUDNN_MAX_ND], sp = 1;
  for (int32_t j = p->nsp - 1; j >= 0; --j) {
    fs[2 + j] =
        (p->filter_format == IRON_CUDNN_TENSOR_NHWC ? p->w.dims[1] : 1) * sp;
    sp *= p->w.dims[2 + j];
  }
  fs[1] = p->filter_format == IRON_CUDNN_TENSOR_NHWC ? 1 : sp;
  fs[0] = p->w.dims[1] * sp;
  bool dense = p->w.offset == 0;
  for (int32_t k = 0; k < nd; ++k)
    dense = dense && (p->w.dims[k] == 1 || p->w.strides[k] == fs[k]);
  CHECK(dense);
  // Everything inside its buffer; copies into/out of the right buffers.
  const iron_cudnn_tensor_t *ts[3] = {&p->x, &p->w, &p->y};
  for (int i = 0; i < 3; ++i) {
    bool in = inside(cp, p, ts[i]->buf, nd, ts[i]->dims, ts[i]->offset,
                     ts[i]->strides);
    if (!in) fprintf(stderr, "%s: tensor %d out of its buffer\n", what, i);
    CHECK(in);
  }
  for (int32_t i = 0; i < p->num_pre + p->num_post; ++i) {
    const iron_cudnn_copy_t *c =
        i < p->num_pre ? &p->pre[i] : &p->post[i - p->num_pre];
    CHECK(inside(cp, p, c->src_buf, c->nd, c->dims, c->src_offset,
                 c->src_strides));
    CHECK(inside(cp, p, c->dst_buf, c->nd, c->dims, c->dst_offset,
                 c->dst_strides));
    if (i < p->num_pre)
      CHECK(c->dst_buf >= IRON_CUDNN_BUF_STAGE &&
            c->src_buf < IRON_CUDNN_BUF_STAGE);
    else
      CHECK(c->dst_buf == IRON_CUDNN_BUF_OUT &&
            c->src_buf >= IRON_CUDNN_BUF_STAGE);
  }
  // The call's output is the result or a stage copied into it.
  const iron_cudnn_tensor_t *o =
      p->call == IRON_CUDNN_CALL_FORWARD         ? &p->y
      : p->call == IRON_CUDNN_CALL_BACKWARD_DATA ? &p->x
                                                 : &p->w;
  // (A staged output may have nothing to copy: every result element it
  // covers lies in the padding, and the result is zero-filled.)
  CHECK(o->buf == IRON_CUDNN_BUF_OUT ||
        (p->num_post == 1 && p->post[0].src_buf == o->buf) ||
        (p->num_post == 0 && o->buf >= IRON_CUDNN_BUF_STAGE && p->out_zero));
}

// Real cuDNN (no GPU needed for descriptors): it accepts the plan's
// descriptors and its output-size function agrees.
static void check_real_descs(const char *what, const iron_cudnn_plan_t *p) {
  if (!g_real.has_cudnn) return;
  iron_cudnn_descs_t d;
  iron_status_t st = iron_cudnn_descs_create(&g_real, p, &d);
  if (st) fprintf(stderr, "%s: %s\n", what, iron_status_message(st));
  CHECK_OK(st);
  if (st) return;
  int dims[IRON_CUDNN_MAX_ND];
  int nd = 2 + p->nsp;
  cudnnStatus_t r =
      g_real.cudnnGetConvolutionNdForwardOutputDim(d.conv, d.x, d.w, nd, dims);
  CHECK_EQ_INT(r, 0);
  for (int k = 0; r == 0 && k < nd; ++k) {
    if (dims[k] != p->y.dims[k])
      fprintf(stderr, "%s: cuDNN output dim %d: %d, plan %lld\n", what, k,
              dims[k], (long long)p->y.dims[k]);
    CHECK_EQ_INT(dims[k], p->y.dims[k]);
  }
  iron_cudnn_descs_destroy(&g_real, &d);
}

// --- corpus walk ---------------------------------------------------------------------

#define MAX_CASES 8192
typedef struct plan_case {
  char what[240];
  iron_conv_plan_t cp;  // its types point at `types` (the module is gone)
  iron_ir_type_t types[3];
  iron_cudnn_plan_t plan;
  iron_tensor_t *lhs, *rhs, *want;
  int first_copy;  // index of its first copy kernel in g_copy_src
} plan_case_t;
static plan_case_t *g_cases;
static int g_ncases;
static char *g_copy_src[4 * MAX_CASES];
static int g_ncopy;

// Counters for the summary and the coverage checks.
static int g_convs, g_planned, g_refused_float, g_refused_other;
static int g_by_call[3], g_staged_in, g_staged_out, g_filter_copies,
    g_out_zero, g_packed;

static void fill_small_ints(iron_tensor_t *t) {
  for (int64_t i = 0; i < t->count; ++i)
    st(t->dtype, t->data, i, (double)ht_rand_range(-2, 2));
}

static bool is_float(iron_dtype_t dt) {
  return dt == IRON_DTYPE_F16 || dt == IRON_DTYPE_BF16 ||
         dt == IRON_DTYPE_F32 || dt == IRON_DTYPE_F64;
}

// Queues a plan for the CPU run: inputs, the host kernel's result, the
// plan's staging kernels.
static void queue_case(const char *what, const iron_ir_op_t *op,
                       const iron_conv_plan_t *cp,
                       const iron_cudnn_plan_t *plan) {
  CHECK(g_ncases < MAX_CASES);
  if (g_ncases >= MAX_CASES) return;
  plan_case_t *c = &g_cases[g_ncases++];
  snprintf(c->what, sizeof(c->what), "%s (%s)", what,
           iron_cudnn_call_name(plan->call));
  c->cp = *cp;
  c->types[0] = *cp->lhs;
  c->types[1] = *cp->rhs;
  c->types[2] = *cp->out;
  c->cp.lhs = &c->types[0];
  c->cp.rhs = &c->types[1];
  c->cp.out = &c->types[2];
  c->plan = *plan;
  c->lhs = ht_tensor_like(cp->lhs);
  c->rhs = ht_tensor_like(cp->rhs);
  c->want = ht_tensor_like(cp->out);
  fill_small_ints(c->lhs);
  fill_small_ints(c->rhs);
  const iron_kernel_t *k = iron_reference_kernel_lookup(IRON_OP_CONVOLUTION);
  void *params = NULL;
  iron_status_t st = k->prepare(op, NULL, &params);
  if (!st) {
    iron_kernel_ctx_t ctx = {0};
    ctx.pool = g_pool;
    const iron_tensor_t *ins[2] = {c->lhs, c->rhs};
    iron_tensor_t *outs[1] = {c->want};
    st = k->run(&ctx, params, ins, outs);
    if (k->destroy) k->destroy(params); else free(params);
  }
  CHECK_OK(st);
  c->first_copy = g_ncopy;
  for (int32_t i = 0; i < plan->num_pre + plan->num_post; ++i) {
    const iron_cudnn_copy_t *cc =
        i < plan->num_pre ? &plan->pre[i] : &plan->post[i - plan->num_pre];
    char name[48];
    snprintf(name, sizeof(name), "iron_cudnn_copy_t%d", g_ncopy);
    char *src = NULL;
    unsigned grid = 0;
    CHECK_OK(iron_cudnn_gen_copy(name, iron_dtype_size(plan->dtype), cc, &src,
                                 &grid));
    CHECK(grid >= 1);
    g_copy_src[g_ncopy++] = src;
  }
}

typedef enum { CONV_INVALID, CONV_PLANNED, CONV_REFUSED, CONV_OTHER } added_t;

// Plans one convolution (every call that fits), checks each plan, and
// queues the first for the CPU run with the host kernel's result.
// `quiet`: refusals of float convolutions are expected (random sweep).
static char g_last_why[512];  // the last refusal's reason

static added_t add_conv(const char *what, const iron_ir_op_t *op,
                        bool quiet) {
  iron_conv_plan_t cp;
  iron_status_t st0 = iron_conv_plan_read(op, &cp);
  if (st0) {  // not a convolution any device runs
    iron_status_free(st0);
    return CONV_INVALID;
  }
  g_convs++;
  iron_cudnn_call_t calls[2];
  int n = iron_cudnn_plan_calls(&cp, calls);
  bool same_dt = cp.lhs->dtype == cp.out->dtype &&
                 cp.rhs->dtype == cp.out->dtype;
  const bool eligible = same_dt && is_float(cp.out->dtype);
  iron_cudnn_plan_t plan;
  char why[512] = "";
  bool planned = false;
  for (int i = 0; i < n; ++i) {
    iron_cudnn_plan_t p;
    if (!iron_cudnn_plan_make(&cp, calls[i], true, &p, why, sizeof(why)))
      continue;
    check_consistent(what, &cp, &p);
    check_real_descs(what, &p);
    if (!planned) plan = p;
    planned = true;
  }
  if (!planned) {
    if (eligible) {
      g_refused_float++;
      snprintf(g_last_why, sizeof(g_last_why), "%s", n ? why : "no call");
      if (!quiet)
        fprintf(stderr, "  refused %s %s -> %s: %s\n", what,
                iron_dtype_name(cp.lhs->dtype), iron_dtype_name(cp.out->dtype),
                n ? why : "no call");
      return CONV_REFUSED;
    }
    g_refused_other++;
    return CONV_OTHER;
  }
  // Only one-dtype float convolutions are planned.
  CHECK(eligible);
  if (getenv("IRON_TEST_VERBOSE")) {
    printf("  %s %s: %s, %d pre, %d post, filter %s, pads", what,
           iron_dtype_name(cp.out->dtype), iron_cudnn_call_name(plan.call),
           plan.num_pre, plan.num_post,
           plan.w.buf >= IRON_CUDNN_BUF_STAGE ? "staged" : "in place");
    for (int32_t j = 0; j < plan.nsp; ++j)
      printf(" %lld", (long long)plan.pad[j]);
    printf("%s\n", plan.out_zero ? ", zero-filled" : "");
  }
  g_planned++;
  g_by_call[plan.call]++;
  g_staged_in += plan.num_pre > 0 && plan.pre[0].dst_buf != plan.w.buf;
  g_staged_out += plan.num_post > 0 &&
                  plan.call != IRON_CUDNN_CALL_BACKWARD_FILTER;
  g_filter_copies += (plan.w.buf >= IRON_CUDNN_BUF_STAGE);
  g_out_zero += plan.out_zero;
  queue_case(what, op, &cp, &plan);
  // A plan with a sub-view also has its packed form (taken when cuDNN
  // refuses the sub-view's strides): no sub-view left, same result.
  if (plan.cropped) {
    iron_cudnn_plan_t packed;
    bool ok = iron_cudnn_plan_make_packed(&cp, plan.call, true, true, &packed,
                                          why, sizeof(why));
    CHECK(ok && !packed.cropped);
    if (ok) {
      check_consistent(what, &cp, &packed);
      check_real_descs(what, &packed);
      char w2[200];
      snprintf(w2, sizeof(w2), "%.150s packed", what);
      queue_case(w2, op, &cp, &packed);
      g_packed++;
    }
  }
  return CONV_PLANNED;
}

static void walk_region(const char *file, const iron_ir_region_t *r) {
  for (uint32_t b = 0; b < r->num_blocks; ++b) {
    const iron_ir_block_t *bl = &r->blocks[b];
    for (uint32_t i = 0; i < bl->num_ops; ++i) {
      const iron_ir_op_t *op = bl->ops[i];
      if (op->kind == IRON_OP_CONVOLUTION) {
        char what[160];
        snprintf(what, sizeof(what), "%.120s:%d", file, (int)op->loc.line);
        add_conv(what, op, false);
      }
      for (uint32_t k = 0; k < op->num_regions; ++k)
        walk_region(file, &op->regions[k]);
    }
  }
}

static int walk_dir(const char *dir) {
  DIR *d = opendir(dir);
  CHECK(d != NULL);
  if (!d) return 0;
  int files = 0;
  struct dirent *e;
  char *names[4096];
  int n = 0;
  while ((e = readdir(d)) && n < 4096) {
    size_t len = strlen(e->d_name);
    if (len > 7 && strcmp(e->d_name + len - 7, ".mlirbc") == 0)
      names[n++] = strdup(e->d_name);
  }
  closedir(d);
  for (int i = 0; i < n; ++i) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
    size_t size = 0;
    char *bytes = test_read_file(path, &size);
    iron_ir_module_t *m = NULL;
    if (bytes && iron_stablehlo_read(bytes, size, &m) == IRON_OK && m) {
      files++;
      for (uint32_t f = 0; f < m->num_funcs; ++f)
        walk_region(names[i], &m->funcs[f].body);
      iron_ir_module_destroy(m);
    }
    free(bytes);
    free(names[i]);
  }
  return files;
}

// Runs every planned case on the CPU: zero fills, staging copies (the
// generated kernels, compiled as C++), the call with cuDNN's semantics,
// the post copy; the result must equal the host kernel's bit for bit.
typedef void (*copy_fn_t)(const void *, void *);

static void run_cases(const cuda_emu_lib_t *lib) {
  int bad = 0;
  for (int ci = 0; ci < g_ncases; ++ci) {
    plan_case_t *c = &g_cases[ci];
    const iron_cudnn_plan_t *p = &c->plan;
    const size_t es = iron_dtype_size(p->dtype);
    iron_tensor_t *got = ht_tensor_like(c->cp.out);
    // Garbage where the plan claims to write: what it does not write must
    // not matter (or be zero-filled by the plan).
    memset(got->data, 0x7b, got->nbytes);
    void *bufs[IRON_CUDNN_BUF_STAGE + IRON_CUDNN_MAX_STAGE] = {
        c->lhs->data, c->rhs->data, got->data};
    for (int32_t k = 0; k < p->num_stage; ++k) {
      size_t nb = (size_t)p->stage_elems[k] * es;
      bufs[IRON_CUDNN_BUF_STAGE + k] = malloc(nb + 8);
      memset(bufs[IRON_CUDNN_BUF_STAGE + k], p->stage_zero[k] ? 0 : 0x5d, nb);
    }
    if (p->out_zero) memset(got->data, 0, got->nbytes);
    int kc = c->first_copy;
    bool ran = true;
    for (int32_t i = 0; i < p->num_pre; ++i, ++kc) {
      char name[48];
      snprintf(name, sizeof(name), "iron_cudnn_copy_t%d", kc);
      void *sym = cuda_emu_sym(lib, name);
      CHECK(sym != NULL);
      if (!sym) { ran = false; break; }
      copy_fn_t fn;
      memcpy(&fn, &sym, sizeof(fn));
      fn(bufs[p->pre[i].src_buf], bufs[p->pre[i].dst_buf]);
    }
    if (ran) ref_call(p, bufs);
    for (int32_t i = 0; ran && i < p->num_post; ++i, ++kc) {
      char name[48];
      snprintf(name, sizeof(name), "iron_cudnn_copy_t%d", kc);
      void *sym = cuda_emu_sym(lib, name);
      CHECK(sym != NULL);
      if (!sym) { ran = false; break; }
      copy_fn_t fn;
      memcpy(&fn, &sym, sizeof(fn));
      fn(bufs[p->post[i].src_buf], bufs[p->post[i].dst_buf]);
    }
    bool same = ran && memcmp(got->data, c->want->data, got->nbytes) == 0;
    if (!same && bad++ < 20) {
      int64_t first = -1;
      for (int64_t i = 0; i < got->count && first < 0; ++i)
        if (memcmp((char *)got->data + i * es, (char *)c->want->data + i * es,
                   es) != 0)
          first = i;
      fprintf(stderr, "  mismatch %s: element %lld: %g vs host %g\n", c->what,
              (long long)first,
              first >= 0 ? ld(p->dtype, got->data, first) : 0.0,
              first >= 0 ? ld(p->dtype, c->want->data, first) : 0.0);
    }
    CHECK(same);
    for (int32_t k = 0; k < p->num_stage; ++k)
      free(bufs[IRON_CUDNN_BUF_STAGE + k]);
    ht_tensor_free(got);
  }
}

static void test_corpus_plans(void) {
  int files = walk_dir(IRON_TEST_DATA_DIR "/corpus");
  int conv_files = walk_dir(IRON_TEST_DATA_DIR "/conv");
  CHECK(files > 300);
  CHECK(conv_files >= 100);
  printf("cuDNN plans: %d files, %d convolutions: %d planned (%d forward, %d "
         "backward data, %d backward filter; %d with a staged input, %d with "
         "a staged output, %d filter copies, %d zero-filled results, %d "
         "sub-views also packed), %d "
         "float ones refused, %d of other dtypes refused%s\n",
         files + conv_files, g_convs, g_planned, g_by_call[0], g_by_call[1],
         g_by_call[2], g_staged_in, g_staged_out, g_filter_copies, g_out_zero,
         g_packed,
         g_refused_float, g_refused_other,
         g_real.has_cudnn ? "; descriptors checked with real cuDNN" : "");
  // Every call kind and every staging form is exercised.
  CHECK(g_by_call[0] > 0 && g_by_call[1] > 0 && g_by_call[2] > 0);
  CHECK(g_staged_in > 0 && g_staged_out > 0 && g_filter_copies > 0 &&
        g_out_zero > 0);
  CHECK(g_refused_other > 0);
  // Every float convolution of one dtype has a cuDNN call (the forms none
  // expresses, lhs dilation with window strides or with batch groups, are
  // in no program here: a new refusal needs a look).
  CHECK_EQ_INT(g_refused_float, 0);
}

#include "conv_test_op.h"

// A random convolution: 0-3 spatial dims, every dim in a random place,
// strides, padding (negative too), lhs and rhs dilation, window reversal,
// feature or batch groups.
typedef struct rgeom {
  int nsp;
  int64_t n, ci, co, fgc, bgc;
  int64_t in[3], k[3], out[3];
  int64_t str[3], pad[6], ld[3], rd[3], rev[3];
  int64_t lpos[5], kpos[5], opos[5];  // [batch/in-f, feature/out-f, spatial]
} rgeom_t;

static void shuffle(int64_t *p, int n) {
  for (int i = 0; i < n; ++i) p[i] = i;
  for (int i = n - 1; i > 0; --i) {
    int j = (int)ht_rand_range(0, i);
    int64_t t = p[i];
    p[i] = p[j];
    p[j] = t;
  }
}

static void random_geom(rgeom_t *g) {
  memset(g, 0, sizeof(*g));
  g->nsp = (int)ht_rand_range(0, 3);
  // The forms jax emits, in turn: forward, input gradient (lhs dilation,
  // stride 1), weight gradient (batch groups), and anything.
  int form = (int)ht_rand_range(0, 3);
  int64_t groups = ht_rand_range(1, 3);
  bool batch = form == 2 || (form == 3 && ht_rand_range(0, 1));
  g->fgc = batch ? 1 : groups;
  g->bgc = batch ? groups : 1;
  g->n = ht_rand_range(1, 3) * g->bgc;
  g->ci = ht_rand_range(1, 4) * g->fgc;
  g->co = ht_rand_range(1, 4) * groups;
  bool rev = ht_rand_range(0, 3) == 0;
  for (int d = 0; d < g->nsp; ++d) {
    for (;;) {
      g->in[d] = ht_rand_range(1, 7);
      g->k[d] = ht_rand_range(1, 4);
      g->str[d] = form == 1 ? 1 : ht_rand_range(1, 3);
      g->ld[d] = form == 1 ? ht_rand_range(1, 3) : form == 3 ? ht_rand_range(1, 2) : 1;
      g->rd[d] = ht_rand_range(1, 3);
      g->pad[2 * d] = ht_rand_range(-2, 4);
      g->pad[2 * d + 1] = ht_rand_range(-2, 4);
      g->rev[d] = rev;
      int64_t din = (g->in[d] - 1) * g->ld[d] + 1;
      int64_t dk = (g->k[d] - 1) * g->rd[d] + 1;
      int64_t span = din + g->pad[2 * d] + g->pad[2 * d + 1] - dk;
      if (span >= 0) {
        g->out[d] = span / g->str[d] + 1;
        break;
      }
    }
  }
  shuffle(g->lpos, g->nsp + 2);
  shuffle(g->kpos, g->nsp + 2);
  shuffle(g->opos, g->nsp + 2);
}

static void build_op(conv_op_t *c, const rgeom_t *g, iron_dtype_t dt) {
  memset(c, 0, sizeof(*c));
  ht_init(&c->b, IRON_OP_CONVOLUTION);
  c->b.op.attrs = c->named;
  int rank = g->nsp + 2;
  int64_t ld[5], kd[5], od[5];
  int64_t lsz[5] = {g->n, g->ci}, ksz[5] = {g->ci / g->fgc, g->co},
          osz[5] = {g->n / g->bgc, g->co};
  for (int d = 0; d < g->nsp; ++d) {
    lsz[2 + d] = g->in[d];
    ksz[2 + d] = g->k[d];
    osz[2 + d] = g->out[d];
  }
  for (int l = 0; l < rank; ++l) {
    ld[g->lpos[l]] = lsz[l];
    kd[g->kpos[l]] = ksz[l];
    od[g->opos[l]] = osz[l];
  }
  ht_operand(&c->b, dt, rank, ld);
  ht_operand(&c->b, dt, rank, kd);
  ht_result(&c->b, dt, rank, od);
  attr1(c, "input_batch_dimension", g->lpos[0]);
  attr1(c, "input_feature_dimension", g->lpos[1]);
  attr(c, "input_spatial_dimensions", g->nsp, g->lpos + 2);
  attr1(c, "kernel_input_feature_dimension", g->kpos[0]);
  attr1(c, "kernel_output_feature_dimension", g->kpos[1]);
  attr(c, "kernel_spatial_dimensions", g->nsp, g->kpos + 2);
  attr1(c, "output_batch_dimension", g->opos[0]);
  attr1(c, "output_feature_dimension", g->opos[1]);
  attr(c, "output_spatial_dimensions", g->nsp, g->opos + 2);
  if (g->nsp > 0) {
    attr(c, "window_strides", g->nsp, g->str);
    attr(c, "padding", 2 * g->nsp, g->pad);
    attr(c, "lhs_dilation", g->nsp, g->ld);
    attr(c, "rhs_dilation", g->nsp, g->rd);
    attr(c, "window_reversal", g->nsp, g->rev);
  }
  attr1(c, "feature_group_count", g->fgc);
  attr1(c, "batch_group_count", g->bgc);
}

// Random convolutions of every form and layout: each either has a plan
// (checked and run like the corpus's) or is one of the forms no cuDNN call
// expresses (lhs dilation with window strides or with batch groups).
static void test_random_plans(void) {
  static const iron_dtype_t kDt[4] = {IRON_DTYPE_F32, IRON_DTYPE_F64,
                                      IRON_DTYPE_F16, IRON_DTYPE_BF16};
  int planned = 0, refused = 0, by_call[3] = {0, 0, 0};
  const int ncases = getenv("IRON_TEST_CUDNN_RANDOM") ? atoi(getenv("IRON_TEST_CUDNN_RANDOM")) : 600;
  for (int i = 0; i < ncases; ++i) {
    rgeom_t g;
    random_geom(&g);
    conv_op_t c;
    build_op(&c, &g, kDt[i % 4]);
    char what[160];
    snprintf(what, sizeof(what), "random #%d (nsp %d, fgc %lld, bgc %lld)",
             i, g.nsp, (long long)g.fgc, (long long)g.bgc);
    int before = g_ncases;
    added_t a = add_conv(what, &c.b.op, true);
    CHECK(a == CONV_PLANNED || a == CONV_REFUSED);
    bool ld = false, str = false;
    for (int d = 0; d < g.nsp; ++d) {
      ld = ld || g.ld[d] > 1;
      str = str || g.str[d] > 1;
    }
    bool inexpressible = ld && (str || g.bgc > 1);
    if (a == CONV_REFUSED) {
      refused++;
      if (!inexpressible) {
        fprintf(stderr, "  refused %s: %s\n   ", what, g_last_why);
        for (int d = 0; d < g.nsp; ++d)
          fprintf(stderr, " [in %lld k %lld out %lld str %lld ld %lld rd %lld pad %lld,%lld rev %lld]",
                  (long long)g.in[d], (long long)g.k[d], (long long)g.out[d],
                  (long long)g.str[d], (long long)g.ld[d], (long long)g.rd[d],
                  (long long)g.pad[2 * d], (long long)g.pad[2 * d + 1], (long long)g.rev[d]);
        fprintf(stderr, "\n");
      }
      CHECK(inexpressible);
    } else if (a == CONV_PLANNED) {
      planned++;
      CHECK(!inexpressible);
      if (g_ncases > before) by_call[g_cases[before].plan.call]++;
    }
  }
  printf("random convolutions: %d planned (%d forward, %d backward data, %d "
         "backward filter; %d sub-views also packed), %d refused as "
         "inexpressible\n",
         planned, by_call[0], by_call[1], by_call[2], g_packed, refused);
  CHECK(by_call[0] > 50 && by_call[1] > 50 && by_call[2] > 50);
  CHECK(g_packed > 10);  // sub-views and their packed forms exercised
}

static void test_emulation(void) {
  if (!cuda_emu_have_cxx()) {
    fprintf(stderr, "no C++ compiler: plans not run\n");
    CHECK(false);
    return;
  }
  cuda_emu_lib_t lib;
  bool built = g_ncopy == 0 ||
               cuda_emu_build((const char *const *)g_copy_src, g_ncopy,
                              iron_cuda_prelude(), &lib);
  CHECK(built);
  if (!built) return;
  if (g_ncopy == 0) memset(&lib, 0, sizeof(lib));
  run_cases(&lib);
  cuda_emu_close(&lib);
}

// The staging kernels compile with NVRTC (the GPU's compiler) for every
// element size.
static void test_copy_nvrtc(void) {
  iron_cuda_api_t api;
  iron_cuda_api_load_from(NULL, NULL, "/nonexistent/libcublasLt.so",
                          &api);
  if (!api.has_nvrtc) {
    fprintf(stderr, "NVRTC not found: copy kernels not compiled (%s)\n",
            api.nvrtc_error);
    return;
  }
  int idx[3] = {0, g_ncopy / 2, g_ncopy - 1};
  for (int i = 0; i < 3 && g_ncopy > 0; ++i) {
    void *cubin = NULL;
    size_t size = 0;
    iron_status_t st = iron_cuda_nvrtc_compile(&api, g_copy_src[idx[i]],
                                               "sm_90a", &cubin, &size);
    CHECK_OK(st);
    free(cubin);
  }
  for (size_t es = 2; es <= 8; es *= 2) {
    iron_cudnn_copy_t c;
    memset(&c, 0, sizeof(c));
    c.nd = 6;
    for (int k = 0; k < 6; ++k) {
      c.dims[k] = 2 + k;
      c.src_strides[k] = 100 - k;
      c.dst_strides[k] = 7 * k + 1;
    }
    c.src_offset = 3;
    c.dst_offset = 5;
    // 8-byte elements: indices past 2^31 (the 64-bit variant).
    if (es == 8) c.src_strides[0] = (int64_t)1 << 32;
    char *src = NULL;
    unsigned grid = 0;
    CHECK_OK(iron_cudnn_gen_copy("iron_cudnn_copy", es, &c, &src, &grid));
    CHECK(strstr(src, es == 8 ? "int64_t r" : "uint32_t r") != NULL);
    void *cubin = NULL;
    size_t size = 0;
    CHECK_OK(iron_cuda_nvrtc_compile(&api, src, "sm_90a", &cubin, &size));
    free(cubin);
    free(src);
  }
  char *src = NULL;
  unsigned grid = 0;
  iron_cudnn_copy_t c = {0};
  c.nd = 1;
  c.dims[0] = 4;
  iron_status_t st = iron_cudnn_gen_copy("x", 3, &c, &src, &grid);
  CHECK(st != IRON_OK);
  iron_status_free(st);
}

// --- refusals of hand-built forms ----------------------------------------------------

// A 2-D NCHW convolution with the given window attributes.
static bool plan_nchw(iron_dtype_t dt, iron_dtype_t odt, const int64_t *pad,
                      const int64_t *stride, const int64_t *lhs_dil,
                      int64_t rev, iron_cudnn_plan_t *out, char *why) {
  conv_op_t c;
  memset(&c, 0, sizeof(c));
  ht_init(&c.b, IRON_OP_CONVOLUTION);
  c.b.op.attrs = c.named;
  int64_t x[4] = {2, 4, 9, 9}, w[4] = {6, 4, 3, 3};
  int64_t o[4] = {2, 6, 0, 0};
  for (int d = 0; d < 2; ++d) {
    int64_t din = (x[2 + d] - 1) * lhs_dil[d] + 1;
    o[2 + d] = (din + pad[2 * d] + pad[2 * d + 1] - 3) / stride[d] + 1;
  }
  ht_operand(&c.b, dt, 4, x);
  ht_operand(&c.b, dt, 4, w);
  ht_result(&c.b, odt, 4, o);
  int64_t sp[2] = {2, 3}, rv[2] = {rev, rev == 2 ? 0 : rev};
  if (rev == 2) rv[0] = 1;
  attr1(&c, "input_batch_dimension", 0);
  attr1(&c, "input_feature_dimension", 1);
  attr(&c, "input_spatial_dimensions", 2, sp);
  attr1(&c, "kernel_output_feature_dimension", 0);
  attr1(&c, "kernel_input_feature_dimension", 1);
  attr(&c, "kernel_spatial_dimensions", 2, sp);
  attr1(&c, "output_batch_dimension", 0);
  attr1(&c, "output_feature_dimension", 1);
  attr(&c, "output_spatial_dimensions", 2, sp);
  attr(&c, "window_strides", 2, stride);
  attr(&c, "padding", 4, pad);
  attr(&c, "lhs_dilation", 2, lhs_dil);
  attr(&c, "window_reversal", 2, rv);
  iron_conv_plan_t cp;
  iron_status_t st = iron_conv_plan_read(&c.b.op, &cp);
  CHECK_OK(st);
  if (st) return false;
  iron_cudnn_call_t calls[2];
  int n = iron_cudnn_plan_calls(&cp, calls);
  strcpy(why, "no call");
  for (int i = 0; i < n; ++i)
    if (iron_cudnn_plan_make(&cp, calls[i], true, out, why, 256)) {
      check_consistent("hand-built", &cp, out);
      return true;
    }
  return false;
}

static void test_refusals(void) {
  iron_cudnn_plan_t p;
  char why[256];
  const int64_t pad0[4] = {1, 1, 1, 1}, s1[2] = {1, 1}, s2[2] = {2, 2};
  CHECK(plan_nchw(IRON_DTYPE_F32, IRON_DTYPE_F32, pad0, s1, s1, 0, &p, why));
  CHECK(p.call == IRON_CUDNN_CALL_FORWARD && p.mode ==
        IRON_CUDNN_CROSS_CORRELATION && p.num_pre == 0 && !p.out_zero);
  CHECK(p.filter_format == IRON_CUDNN_TENSOR_NCHW && p.tf32);
  // Reversed window: cuDNN's CONVOLUTION mode.
  CHECK(plan_nchw(IRON_DTYPE_F32, IRON_DTYPE_F32, pad0, s1, s1, 1, &p, why));
  CHECK(p.mode == IRON_CUDNN_CONVOLUTION);
  // Reversed in one dim only: refused.
  CHECK(!plan_nchw(IRON_DTYPE_F32, IRON_DTYPE_F32, pad0, s1, s1, 2, &p, why));
  CHECK(strstr(why, "reversed") != NULL);
  // Mixed dtypes, integers, complex: refused.
  CHECK(!plan_nchw(IRON_DTYPE_BF16, IRON_DTYPE_F32, pad0, s1, s1, 0, &p, why));
  CHECK(strstr(why, "dtypes") != NULL);
  CHECK(!plan_nchw(IRON_DTYPE_S32, IRON_DTYPE_S32, pad0, s1, s1, 0, &p, why));
  CHECK(!plan_nchw(IRON_DTYPE_C64, IRON_DTYPE_C64, pad0, s1, s1, 0, &p, why));
  // lhs dilation with window strides: no cuDNN call.
  CHECK(!plan_nchw(IRON_DTYPE_F32, IRON_DTYPE_F32, pad0, s2, s2, 0, &p, why));
  // lhs dilation alone: backward data; f64, f16 planned too.
  CHECK(plan_nchw(IRON_DTYPE_F64, IRON_DTYPE_F64, pad0, s1, s2, 0, &p, why));
  CHECK(p.call == IRON_CUDNN_CALL_BACKWARD_DATA &&
        p.mode == IRON_CUDNN_CONVOLUTION && !p.tf32 &&
        p.compute_type == IRON_CUDNN_DATA_DOUBLE);
  CHECK(plan_nchw(IRON_DTYPE_F16, IRON_DTYPE_F16, pad0, s2, s1, 0, &p, why));
  CHECK(p.data_type == IRON_CUDNN_DATA_HALF &&
        p.compute_type == IRON_CUDNN_DATA_FLOAT);
  // Asymmetric padding: a staged input, a zero-filled stage.
  const int64_t asym[4] = {0, 1, 2, 0};
  CHECK(plan_nchw(IRON_DTYPE_F32, IRON_DTYPE_F32, asym, s2, s1, 0, &p, why));
  CHECK(p.num_pre == 1 && p.num_stage == 1 && p.stage_zero[0] &&
        p.x.buf == IRON_CUDNN_BUF_STAGE && p.pad[0] == 0 && p.pad[1] == 0);
  // Negative padding: a crop of the input in place.
  const int64_t neg[4] = {-1, -2, -1, 0};
  CHECK(plan_nchw(IRON_DTYPE_F32, IRON_DTYPE_F32, neg, s1, s1, 0, &p, why));
  CHECK(p.num_pre == 0 && p.x.buf == IRON_CUDNN_BUF_LHS && p.x.offset == 9 + 1);
}

// --- the loader and fake tables --------------------------------------------------------

static void test_loader(void) {
  iron_cudnn_api_t api;
  iron_cudnn_api_load_from("/nonexistent/libcudnn.so.9", &api);
  CHECK(!api.has_cudnn && strstr(api.error, "not found") != NULL);
  // A library without cuDNN's symbols.
  iron_cudnn_api_load_from("libm.so.6", &api);
  CHECK(!api.has_cudnn);
  CHECK(strstr(api.error, "lacks the symbol cudnnGetVersion") != NULL);
  // The real one when this machine has it (the test runs without).
  iron_cudnn_api_load_from(NULL, &api);
  if (api.has_cudnn) {
    CHECK(api.version >= 90000 && api.version < 100000);
    CHECK(api.path[0] != '\0' && api.error[0] == '\0');
  } else {
    CHECK(strstr(api.error, "libcudnn") != NULL);
    fprintf(stderr, "cuDNN not on this machine: %s\n", api.error);
  }
  // The process-wide table answers the same.
  const iron_cudnn_api_t *g = iron_cudnn_api_get();
  CHECK(g->has_cudnn == api.has_cudnn);
}

// Fake cuDNN: counters and configurable answers.
static int g_creates, g_destroys, g_create_status;
static int g_fake_version = 91900;
static iron_cudnn_algo_perf_t g_fake_perf[8];
static int g_fake_nperf;
static int g_ws_fail_algo = -1, g_last_math = -1;

static size_t fake_version(void) { return (size_t)g_fake_version; }
static const char *fake_err(cudnnStatus_t s) {
  return s == 1001 ? "CUDNN_STATUS_NOT_INITIALIZED" : "CUDNN_STATUS_OTHER";
}
static void fake_last(char *m, size_t n) { snprintf(m, n, "fake detail"); }
static cudnnStatus_t fake_create(cudnnHandle_t *h) {
  g_creates++;
  *h = (cudnnHandle_t)(uintptr_t)0x1234;
  return g_create_status;
}
static cudnnStatus_t fake_destroy(cudnnHandle_t h) {
  (void)h;
  g_destroys++;
  return 0;
}
static cudnnStatus_t fake_math(cudnnConvolutionDescriptor_t d, int m) {
  (void)d;
  g_last_math = m;
  return 0;
}
static cudnnStatus_t fake_fwd_v7(cudnnHandle_t h, cudnnTensorDescriptor_t x,
                                 cudnnFilterDescriptor_t w,
                                 cudnnConvolutionDescriptor_t c,
                                 cudnnTensorDescriptor_t y, int req, int *ret,
                                 iron_cudnn_algo_perf_t *perf) {
  (void)h, (void)x, (void)w, (void)c, (void)y;
  int n = g_fake_nperf < req ? g_fake_nperf : req;
  memcpy(perf, g_fake_perf, sizeof(*perf) * (size_t)n);
  *ret = n;
  return 0;
}
static cudnnStatus_t fake_fwd_ws(cudnnHandle_t h, cudnnTensorDescriptor_t x,
                                 cudnnFilterDescriptor_t w,
                                 cudnnConvolutionDescriptor_t c,
                                 cudnnTensorDescriptor_t y, int algo,
                                 size_t *size) {
  (void)h, (void)x, (void)w, (void)c, (void)y;
  *size = 4096;
  return algo == g_ws_fail_algo ? IRON_CUDNN_STATUS_NOT_SUPPORTED : 0;
}

// Driver fakes for a device struct with no GPU behind it.
static CUresult fake_ctx_get(CUcontext *c) {
  *c = NULL;
  return 0;
}
static CUresult fake_ctx_set(CUcontext c) {
  (void)c;
  return 0;
}
static CUresult fake_stream_create(CUstream *s, unsigned f) {
  (void)f;
  *s = (CUstream)(uintptr_t)0x99;
  return 0;
}
static CUresult fake_stream_op(CUstream s) {
  (void)s;
  return 0;
}

static void fill_fake(iron_cudnn_api_t *api) {
  iron_cudnn_api_t real;
  memset(api, 0, sizeof(*api));
  // Every entry non-NULL (fake ones where the test calls them).
  iron_cudnn_api_load_from(NULL, &real);
#define FILL(field, sym, ret, params) \
  api->field = real.field ? real.field : (ret(*) params)(uintptr_t)fake_version;
  IRON_CUDNN_SYMBOLS(FILL)
#undef FILL
  api->cudnnGetVersion = fake_version;
  api->cudnnGetErrorString = fake_err;
  api->cudnnGetLastErrorString = fake_last;
  api->cudnnCreate = fake_create;
  api->cudnnDestroy = fake_destroy;
  api->cudnnSetConvolutionMathType = fake_math;
  api->cudnnGetConvolutionForwardAlgorithm_v7 = fake_fwd_v7;
  api->cudnnGetConvolutionForwardWorkspaceSize = fake_fwd_ws;
  snprintf(api->path, sizeof(api->path), "fake");
}

static void test_fake_table(void) {
  iron_cudnn_api_t api;
  fill_fake(&api);
  g_fake_version = 80907;
  iron_cudnn_api_check(&api);
  CHECK(!api.has_cudnn && strstr(api.error, "8.9.7") != NULL &&
        strstr(api.error, "not cuDNN 9") != NULL);
  g_fake_version = 91900;
  iron_cudnn_api_check(&api);
  CHECK(api.has_cudnn && api.version == 91900);
  api.cudnnConvolutionBackwardFilter = NULL;
  iron_cudnn_api_check(&api);
  CHECK(!api.has_cudnn &&
        strstr(api.error, "lacks the symbol cudnnConvolutionBackwardFilter"));
  fill_fake(&api);
  iron_cudnn_api_check(&api);
  CHECK(api.has_cudnn);

  // A device without a GPU behind it: cudnnCreate fails, the device keeps
  // its own kernels, asked once.
  iron_cuda_api_t cu;
  memset(&cu, 0, sizeof(cu));
  cu.cuCtxGetCurrent = fake_ctx_get;
  cu.cuCtxSetCurrent = fake_ctx_set;
  cu.cuStreamCreate = fake_stream_create;
  cu.cuStreamDestroy = fake_stream_op;
  cu.cuStreamSynchronize = fake_stream_op;
  iron_cuda_device_t dev;
  memset(&dev, 0, sizeof(dev));
  dev.api = &cu;
  dev.ordinal = 3;
  g_creates = g_destroys = 0;
  g_create_status = IRON_CUDNN_STATUS_NOT_INITIALIZED;
  iron_cudnn_device_t *s = NULL;
  char why[512] = "";
  CHECK(!iron_cudnn_device_get(&dev, &api, &s, why, sizeof(why)));
  CHECK(strstr(why, "device 3") && strstr(why, "cudnnCreate") &&
        strstr(why, "NOT_INITIALIZED") && strstr(why, "fake detail"));
  why[0] = '\0';
  CHECK(!iron_cudnn_device_get(&dev, &api, &s, why, sizeof(why)));
  CHECK(strstr(why, "cudnnCreate") != NULL);
  CHECK_EQ_INT(g_creates, 1);
  iron_cuda_cudnn_release(&dev);
  CHECK(dev.cudnn == NULL);
  // cudnnCreate works: the handle is made once and destroyed with the
  // device.
  g_create_status = 0;
  CHECK(iron_cudnn_device_get(&dev, &api, &s, why, sizeof(why)));
  CHECK(iron_cudnn_device_get(&dev, &api, &s, why, sizeof(why)));
  CHECK_EQ_INT(g_creates, 2);
  iron_cuda_cudnn_release(&dev);
  CHECK_EQ_INT(g_destroys, 1);

  // The algorithm choice.
  iron_cudnn_plan_t p;
  memset(&p, 0, sizeof(p));
  p.call = IRON_CUDNN_CALL_FORWARD;
  p.dtype = IRON_DTYPE_F32;
  p.tf32 = false;
  iron_cudnn_descs_t d;
  memset(&d, 0, sizeof(d));
  iron_cudnn_algo_perf_t *f = g_fake_perf;
  memset(g_fake_perf, 0, sizeof(g_fake_perf));
  // FFT (not exact), non-deterministic, TF32 for exact f32, refused,
  // too much workspace, then the one that fits.
  f[0] = (iron_cudnn_algo_perf_t){.algo = IRON_CUDNN_FWD_ALGO_FFT,
                                  .determinism = 1, .mathType = 3};
  f[1] = (iron_cudnn_algo_perf_t){.algo = 1, .determinism = 0, .mathType = 3};
  f[2] = (iron_cudnn_algo_perf_t){.algo = 1, .determinism = 1, .mathType = 1};
  f[3] = (iron_cudnn_algo_perf_t){.algo = 0, .status = 3000,
                                  .determinism = 1, .mathType = 3};
  f[4] = (iron_cudnn_algo_perf_t){.algo = 2, .determinism = 1, .mathType = 3,
                                  .memory = (size_t)1 << 40};
  f[5] = (iron_cudnn_algo_perf_t){.algo = 1, .determinism = 1, .mathType = 0,
                                  .memory = 100};
  f[6] = (iron_cudnn_algo_perf_t){.algo = 3, .determinism = 1, .mathType = 3};
  g_fake_nperf = 7;
  iron_cudnn_choice_t ch;
  CHECK(iron_cudnn_choose(&api, NULL, &p, &d, 1 << 20, &ch, why, sizeof(why)));
  // DEFAULT math for exact f32 runs as FMA.
  CHECK(ch.algo == 1 && ch.math_type == IRON_CUDNN_FMA_MATH &&
        ch.workspace == 4096 && g_last_math == IRON_CUDNN_FMA_MATH);
  // Its workspace query refuses: the next one.
  g_ws_fail_algo = 1;
  CHECK(iron_cudnn_choose(&api, NULL, &p, &d, 1 << 20, &ch, why, sizeof(why)));
  CHECK_EQ_INT(ch.algo, 3);
  g_ws_fail_algo = -1;
  // TF32 allowed: the tensor-op candidate first.
  p.tf32 = true;
  CHECK(iron_cudnn_choose(&api, NULL, &p, &d, 1 << 20, &ch, why, sizeof(why)));
  CHECK(ch.algo == 1 && ch.math_type == IRON_CUDNN_TENSOR_OP_MATH);
  // Nothing acceptable: refused, saying why.
  g_fake_nperf = 5;
  p.tf32 = false;
  CHECK(!iron_cudnn_choose(&api, NULL, &p, &d, 1 << 20, &ch, why,
                           sizeof(why)));
  CHECK(strstr(why, "no algorithm") != NULL);
  CHECK(!iron_cudnn_pick(&p, g_fake_perf, 0, 1 << 20, &ch, why, sizeof(why)));
}

static const iron_test_case_t kTests[] = {
    {"loader", test_loader},
    {"fake_table", test_fake_table},
    {"refusals", test_refusals},
    {"corpus_plans", test_corpus_plans},
    {"random_plans", test_random_plans},
    {"emulation", test_emulation},
    {"copy_nvrtc", test_copy_nvrtc},
};

int main(void) {
  CHECK_OK(iron_threadpool_create(2, &g_pool));
  iron_cudnn_api_load_from(NULL, &g_real);
  g_cases = calloc(MAX_CASES, sizeof(*g_cases));
  for (size_t i = 0; i < sizeof(kTests) / sizeof(kTests[0]); ++i) {
    iron_test_current_ = kTests[i].name;
    kTests[i].fn();
  }
  for (int i = 0; i < g_ncases; ++i) {
    ht_tensor_free(g_cases[i].lhs);
    ht_tensor_free(g_cases[i].rhs);
    ht_tensor_free(g_cases[i].want);
  }
  free(g_cases);
  for (int i = 0; i < g_ncopy; ++i) free(g_copy_src[i]);
  iron_threadpool_destroy(g_pool);
  printf("%d checks, %d failed\n", iron_test_checks_, iron_test_failures_);
  return iron_test_failures_ ? 1 : 0;
}
