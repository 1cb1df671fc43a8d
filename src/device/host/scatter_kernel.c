// stablehlo.scatter on the host (variadic; registered from gather.c).
//
// Results start as copies of the operands. Updates are applied in order:
// update scatter points in row-major order of the index tensor's batch dims,
// then the window elements of each in row-major order, which is the order
// XLA:CPU applies them (it matters for duplicates under "set" or any
// non-commutative body). As in XLA, an update whose whole window is not in
// bounds is dropped entirely (checked on jax's CPU backend: start 4 with a
// window of 2 into a dim of 5 writes nothing).
//
// Fast path (single operand): prepare recognises bodies that return the
// second argument ("set"), or add/multiply/maximum/minimum/or/and of the two
// arguments, and runs typed loops over contiguous window runs. max/min
// propagate NaN like XLA. Any other body (and every variadic scatter) calls
// the compiled region per element on rank-0 tensors.
// IRON_HOST_SCATTER_FAST=0 turns the fast path off.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "device/host/ew_common.h"
#include "device/host/gather_copy.h"
#include "device/host/host_kernel.h"

#define SCATTER_MAX_OPERANDS IRON_SCATTER_PLAN_MAX_OPERANDS


typedef void (*combine_fn_t)(char *dst, int64_t ds, const char *src,
                             int64_t ss, int64_t n);

typedef struct scatter_params {
  iron_gather_plan_t plan;  // src/device/plans/gather_plan.c
  size_t es[SCATTER_MAX_OPERANDS];
  iron_scatter_body_t body;
  combine_fn_t combine;  // fast path (not for SET)
  const iron_region_t *region;
} scatter_params_t;

// ---------------------------------------------------------------------------
// Typed combine loops

#define DEF_COMBINE(name, T, EXPR)                                         \
  static void name(char *d_, int64_t ds, const char *s_, int64_t ss,       \
                   int64_t n) {                                            \
    for (int64_t i = 0; i < n; ++i) {                                      \
      T a, b;                                                              \
      memcpy(&a, d_ + (size_t)(i * ds) * sizeof(T), sizeof(T));            \
      memcpy(&b, s_ + (size_t)(i * ss) * sizeof(T), sizeof(T));            \
      T r = (EXPR);                                                        \
      memcpy(d_ + (size_t)(i * ds) * sizeof(T), &r, sizeof(T));            \
    }                                                                      \
  }

// Integer add/mul wrap: computed on unsigned 64-bit (no UB, same bits).
#define INT_OPS(sfx, T)                                              \
  DEF_COMBINE(add_##sfx, T, (T)((uint64_t)a + (uint64_t)b))          \
  DEF_COMBINE(mul_##sfx, T, (T)((uint64_t)a * (uint64_t)b))          \
  DEF_COMBINE(max_##sfx, T, a > b ? a : b)                           \
  DEF_COMBINE(min_##sfx, T, a < b ? a : b)
INT_OPS(s8, int8_t)
INT_OPS(s16, int16_t)
INT_OPS(s32, int32_t)
INT_OPS(s64, int64_t)
INT_OPS(u8, uint8_t)
INT_OPS(u16, uint16_t)
INT_OPS(u32, uint32_t)
INT_OPS(u64, uint64_t)

// Bitwise on the bytes, as XLA:CPU and the CUDA kernels combine them: a
// bool byte other than 0/1 (a numpy view) keeps its bits (max(0x60, 0) is
// 0x60, min(0x60, 1) is 0).
DEF_COMBINE(or_pred, uint8_t, (uint8_t)(a | b))
DEF_COMBINE(and_pred, uint8_t, (uint8_t)(a & b))

// XLA's maximum/minimum, as the element-wise kernels compute them
// (ew_common.h): NaN wins, -0 orders below +0, and a denormal operand
// reads as zero (XLA:CPU's DAZ: x.at[i].min(3) of 1e-40 is 0).
#define FMAX_XLA(a, b) ew_fmax(ew_daz(a), ew_daz(b))
#define FMIN_XLA(a, b) ew_fmin(ew_daz(a), ew_daz(b))
#define FMAXF_XLA(a, b) ew_fmaxf(ew_dazf(a), ew_dazf(b))
#define FMINF_XLA(a, b) ew_fminf(ew_dazf(a), ew_dazf(b))
#define FLT_OPS(sfx, T, MAXF, MINF)         \
  DEF_COMBINE(add_##sfx, T, a + b)          \
  DEF_COMBINE(mul_##sfx, T, a * b)          \
  DEF_COMBINE(max_##sfx, T, MAXF(a, b))     \
  DEF_COMBINE(min_##sfx, T, MINF(a, b))
FLT_OPS(f32, float, FMAXF_XLA, FMINF_XLA)
FLT_OPS(f64, double, FMAX_XLA, FMIN_XLA)

// f16 / bf16 compute in f32 and round back after every update.
#define HALF_OPS(sfx, TO, FROM)                                              \
  DEF_COMBINE(add_##sfx, uint16_t, FROM(TO(a) + TO(b)))                      \
  DEF_COMBINE(mul_##sfx, uint16_t, FROM(TO(a) * TO(b)))                      \
  DEF_COMBINE(max_##sfx, uint16_t, FROM(FMAXF_XLA(TO(a), TO(b))))                 \
  DEF_COMBINE(min_##sfx, uint16_t, FROM(FMINF_XLA(TO(a), TO(b))))
HALF_OPS(f16, iron_f16_to_f32, iron_f32_to_f16)
HALF_OPS(bf16, iron_bf16_to_f32, iron_f32_to_bf16)

#define CPLX_OPS(sfx, F)                                                  \
  typedef struct { F re, im; } cplx_##sfx##_t;                            \
  static inline cplx_##sfx##_t cadd_##sfx(cplx_##sfx##_t a,               \
                                          cplx_##sfx##_t b) {             \
    cplx_##sfx##_t r = {a.re + b.re, a.im + b.im};                        \
    return r;                                                             \
  }                                                                       \
  static inline cplx_##sfx##_t cmul_##sfx(cplx_##sfx##_t a,               \
                                          cplx_##sfx##_t b) {             \
    cplx_##sfx##_t r = {a.re * b.re - a.im * b.im,                        \
                        a.re * b.im + a.im * b.re};                       \
    return r;                                                             \
  }                                                                       \
  DEF_COMBINE(add_##sfx, cplx_##sfx##_t, cadd_##sfx(a, b))                \
  DEF_COMBINE(mul_##sfx, cplx_##sfx##_t, cmul_##sfx(a, b))
CPLX_OPS(c64, float)
CPLX_OPS(c128, double)

static combine_fn_t combine_for(iron_scatter_body_t body, iron_dtype_t dt) {
#define PICK4(sfx)                              \
  switch (body) {                               \
    case IRON_SCATTER_BODY_ADD: return add_##sfx;            \
    case IRON_SCATTER_BODY_MUL: return mul_##sfx;            \
    case IRON_SCATTER_BODY_MAX: return max_##sfx;            \
    case IRON_SCATTER_BODY_MIN: return min_##sfx;            \
    default: return NULL;                       \
  }
  switch (dt) {
    case IRON_DTYPE_S8: PICK4(s8)
    case IRON_DTYPE_S16: PICK4(s16)
    case IRON_DTYPE_S32: PICK4(s32)
    case IRON_DTYPE_S64: PICK4(s64)
    case IRON_DTYPE_U8: PICK4(u8)
    case IRON_DTYPE_U16: PICK4(u16)
    case IRON_DTYPE_U32: PICK4(u32)
    case IRON_DTYPE_U64: PICK4(u64)
    case IRON_DTYPE_F16: PICK4(f16)
    case IRON_DTYPE_BF16: PICK4(bf16)
    case IRON_DTYPE_F32: PICK4(f32)
    case IRON_DTYPE_F64: PICK4(f64)
    case IRON_DTYPE_C64:
      return body == IRON_SCATTER_BODY_ADD ? add_c64 : body == IRON_SCATTER_BODY_MUL ? mul_c64 : NULL;
    case IRON_DTYPE_C128:
      return body == IRON_SCATTER_BODY_ADD ? add_c128 : body == IRON_SCATTER_BODY_MUL ? mul_c128 : NULL;
    case IRON_DTYPE_PRED:
      // On i1, add/max/or are "or"; multiply/min/and are "and".
      if (body == IRON_SCATTER_BODY_ADD || body == IRON_SCATTER_BODY_MAX || body == IRON_SCATTER_BODY_OR)
        return or_pred;
      if (body == IRON_SCATTER_BODY_MUL || body == IRON_SCATTER_BODY_MIN || body == IRON_SCATTER_BODY_AND)
        return and_pred;
      return NULL;
    default:
      return NULL;
  }
#undef PICK4
}

static bool fast_enabled(void) {
  const char *e = getenv("IRON_HOST_SCATTER_FAST");
  return !(e && e[0] == '0');
}

// ---------------------------------------------------------------------------
// Prepare

static iron_status_t scatter_fill(const iron_ir_op_t *op,
                                  iron_region_t *const *regions,
                                  scatter_params_t *p) {
  IRON_RETURN_IF_ERROR_PLAIN(iron_scatter_plan_read(op, &p->plan));
  int32_t n = p->plan.num;
  for (int32_t i = 0; i < n; ++i) p->es[i] = iron_dtype_size(p->plan.dtype[i]);
  p->body = IRON_SCATTER_BODY_GENERIC;
  if (n == 1 && fast_enabled()) {
    p->body = iron_scatter_plan_body(&op->regions[0]);
    if (p->body != IRON_SCATTER_BODY_GENERIC && p->body != IRON_SCATTER_BODY_SET) {
      p->combine = combine_for(p->body, p->plan.dtype[0]);
      if (!p->combine) p->body = IRON_SCATTER_BODY_GENERIC;
    }
  }
  if (p->body == IRON_SCATTER_BODY_GENERIC) {
    if (!regions || !regions[0])
      return iron_ir_op_unimplemented(op, "without a compiled update body");
    p->region = regions[0];
  }
  return NULL;
}

static iron_status_t scatter_prepare(const iron_ir_op_t *op,
                                     iron_region_t *const *regions,
                                     void **out_params) {
  *out_params = NULL;
  scatter_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "scatter params");
  iron_status_t st = scatter_fill(op, regions, p);
  if (st) {
    free(p);
    return st;
  }
  *out_params = p;
  return NULL;
}

// ---------------------------------------------------------------------------
// Run

typedef struct generic_state {
  const iron_kernel_ctx_t *ctx;
  iron_tensor_t args[2 * SCATTER_MAX_OPERANDS];
  const iron_tensor_t *arg_ptrs[2 * SCATTER_MAX_OPERANDS];
  iron_tensor_t res[SCATTER_MAX_OPERANDS];
  iron_tensor_t *res_ptrs[SCATTER_MAX_OPERANDS];
  unsigned char res_buf[SCATTER_MAX_OPERANDS][16];
} generic_state_t;

// Applies one window element (result offset a, update offset b) through the
// region.
static iron_status_t generic_apply(const scatter_params_t *p,
                                   generic_state_t *g,
                                   iron_tensor_t *const *outputs,
                                   const iron_tensor_t *const *updates,
                                   int64_t a, int64_t b) {
  for (int32_t i = 0; i < p->plan.num; ++i) {
    g->args[i].data = (char *)outputs[i]->data + (size_t)a * p->es[i];
    g->args[p->plan.num + i].data =
        (char *)updates[i]->data + (size_t)b * p->es[i];
  }
  IRON_RETURN_IF_ERROR_PLAIN(
      g->ctx->call_region(g->ctx, p->region, g->arg_ptrs, g->res_ptrs));
  for (int32_t i = 0; i < p->plan.num; ++i)
    memcpy((char *)outputs[i]->data + (size_t)a * p->es[i], g->res_buf[i],
           p->es[i]);
  return NULL;
}

typedef struct copy_job {
  char *dst;
  const char *src;
  size_t nbytes;
} copy_job_t;

#define COPY_CHUNK ((size_t)1 << 20)

static void copy_chunks(void *arg, int64_t begin, int64_t end) {
  const copy_job_t *j = arg;
  size_t lo = (size_t)begin * COPY_CHUNK;
  size_t hi = (size_t)end * COPY_CHUNK;
  if (hi > j->nbytes) hi = j->nbytes;
  memcpy(j->dst + lo, j->src + lo, hi - lo);
}

// The result starts as the operand; large copies (embedding gradients into
// a big table) are split over the pool, 1 MiB chunks.
static void copy_bytes(iron_threadpool_t *pool, void *dst, const void *src,
                       size_t nbytes) {
  copy_job_t j = {dst, src, nbytes};
  int64_t chunks = (int64_t)((nbytes + COPY_CHUNK - 1) / COPY_CHUNK);
  iron_threadpool_parallel_for(pool, chunks, 4, copy_chunks, &j);
}

static iron_status_t scatter_run(const iron_kernel_ctx_t *ctx,
                                 const void *params,
                                 const iron_tensor_t *const *inputs,
                                 iron_tensor_t *const *outputs) {
  const scatter_params_t *p = params;
  int32_t n = p->plan.num;
  for (int32_t i = 0; i < n; ++i)
    if (outputs[i]->data != inputs[i]->data && inputs[i]->nbytes)
      copy_bytes(ctx ? ctx->pool : NULL, outputs[i]->data, inputs[i]->data,
                 inputs[i]->nbytes);
  if (p->plan.op_count == 0 || p->plan.box.count == 0 || p->plan.num_points == 0)
    return NULL;
  const void *idx = inputs[n]->data;
  const iron_tensor_t *const *updates = inputs + n + 1;

  generic_state_t *g = NULL;
  if (p->body == IRON_SCATTER_BODY_GENERIC) {
    if (!ctx || !ctx->call_region)
      return IRON_ERR(INTERNAL, "stablehlo.scatter: body needs call_region");
    g = calloc(1, sizeof(*g));
    if (!g) return IRON_ERR(RESOURCE_EXHAUSTED, "scatter state");
    g->ctx = ctx;
    for (int32_t i = 0; i < n; ++i) {
      iron_tensor_t *t = &g->args[i];
      t->dtype = p->plan.dtype[i];
      t->rank = 0;
      t->count = 1;
      t->nbytes = p->es[i];
      g->args[n + i] = *t;
      g->res[i] = *t;
      g->res[i].data = g->res_buf[i];
      g->arg_ptrs[i] = &g->args[i];
      g->arg_ptrs[n + i] = &g->args[n + i];
      g->res_ptrs[i] = &g->res[i];
    }
  }

  const iron_gather_box_t *box = &p->plan.box;
  int32_t inner = box->rank - 1;
  char *out0 = outputs[0]->data;
  const char *upd0 = updates[0]->data;
  size_t es0 = p->es[0];
  iron_status_t st = NULL;
  for (int64_t pt = 0; pt < p->plan.num_points && !st; ++pt) {
    int64_t rem = pt, idx_off = 0, upd_off = 0, op_off = 0;
    bool ok = true;
    for (int32_t d = p->plan.nbatch - 1; d >= 0; --d) {
      int64_t c = rem % p->plan.bdims[d];
      rem /= p->plan.bdims[d];
      idx_off += c * p->plan.b_idx_stride[d];
      upd_off += c * p->plan.b_small_stride[d];
      if (p->plan.b_op_stride[d]) {
        if (c >= p->plan.b_op_dim[d]) ok = false;
        op_off += c * p->plan.b_op_stride[d];
      }
    }
    for (int32_t k = 0; k < p->plan.nstart && ok; ++k) {
      int64_t s = iron_gather_plan_index_read(idx, p->plan.idx_dtype,
                                         idx_off + k * p->plan.idx_vec_stride);
      if (s < 0 || s > p->plan.start_max[k])
        ok = false;
      else
        op_off += s * p->plan.start_op_stride[k];
    }
    if (!ok) continue;  // XLA drops an update whose window is out of bounds
    if (box->rank == 0) {
      if (p->body == IRON_SCATTER_BODY_SET)
        memcpy(out0 + (size_t)op_off * es0, upd0 + (size_t)upd_off * es0, es0);
      else if (p->body == IRON_SCATTER_BODY_GENERIC)
        st = generic_apply(p, g, outputs, updates, op_off, upd_off);
      else
        p->combine(out0 + (size_t)op_off * es0, 1,
                   upd0 + (size_t)upd_off * es0, 1, 1);
      continue;
    }
    int64_t ctr[IRON_MAX_RANK] = {0};
    int64_t a = op_off, b = upd_off;
    for (;;) {
      int64_t len = box->size[inner];
      int64_t as = box->a_stride[inner], bs = box->b_stride[inner];
      if (p->body == IRON_SCATTER_BODY_SET) {
        iron_gather_copy_strided(out0 + (size_t)a * es0, as,
                                 upd0 + (size_t)b * es0, bs, len, es0);
      } else if (p->body == IRON_SCATTER_BODY_GENERIC) {
        for (int64_t e = 0; e < len && !st; ++e)
          st = generic_apply(p, g, outputs, updates, a + e * as, b + e * bs);
        if (st) break;
      } else {
        p->combine(out0 + (size_t)a * es0, as, upd0 + (size_t)b * es0, bs,
                   len);
      }
      int32_t d = inner - 1;
      for (; d >= 0; --d) {
        a += box->a_stride[d];
        b += box->b_stride[d];
        if (++ctr[d] < box->size[d]) break;
        a -= box->a_stride[d] * box->size[d];
        b -= box->b_stride[d] * box->size[d];
        ctr[d] = 0;
      }
      if (d < 0) break;
    }
  }
  free(g);
  return st;
}

const iron_kernel_t iron_host_scatter_kernel = {
    .name = "scatter",
    .prepare = scatter_prepare,
    .run = scatter_run,
    .destroy = NULL,
    .inplace_ok = false,
    .elementwise = false,
};
