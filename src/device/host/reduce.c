// stablehlo.reduce on the host. One input whose body is a single
// associative op runs typed loops (reduce_fast.c). Any other body (argmax's
// variadic compare/select, ...) runs through ctx->call_region: when the body
// is element-wise, the inputs are laid out as [reduced, kept] and the body
// runs on whole rows of outputs, in XLA's sequential order while that is
// cheap (few reduced elements or wide rows), else as an order-preserving
// tree (adjacent rows merge, O(log n) calls); a body that is not
// element-wise runs once per element, in order.
#include <stdlib.h>
#include <string.h>

#include "device/host/host_kernel.h"
#include "device/host/reduce_fast.h"
#include "device/host/shape_copy.h"
#include "device/plans/reduce_plan.h"

#define IRON_REDUCE_MAX_INPUTS IRON_REDUCE_PLAN_MAX_INPUTS
#define IRON_REDUCE_COL_CHUNK 4096
// Generic bodies run in XLA's sequential order when the reduced size is at
// most this, or the rows at least IRON_REDUCE_WIDE wide; else pairwise.
#define IRON_REDUCE_SEQUENTIAL_MAX_R 64
#define IRON_REDUCE_WIDE 64

typedef struct reduce_params {
  uint32_t n;  // inputs (= init values = results)
  iron_dtype_t dtypes[IRON_REDUCE_MAX_INPUTS];
  int64_t outer, red, inner;  // fast path view [outer, red, inner]
  int64_t kept;               // outer * inner = result elements
  // Input -> [kept..., reduced...] (fast path, when the view needs it) or
  // [reduced..., kept...] (generic path); one plan per input.
  bool gather;
  iron_host_copy_plan_t plans[IRON_REDUCE_MAX_INPUTS];
  const iron_host_reduce_impl_t *impl;  // NULL: generic path
  const iron_region_t *region;
  bool elementwise;
} reduce_params_t;

static bool fast_enabled(void) {
  const char *e = getenv("IRON_HOST_REDUCE_FAST");
  return !(e && e[0] == '0');
}

// Gather plan: iteration over `first` dims then `second` dims of `t`.
static void order_plan(const iron_ir_type_t *t, const bool *reduced,
                       bool reduced_first, iron_host_copy_plan_t *p) {
  memset(p, 0, sizeof(*p));
  p->elem_size = iron_dtype_size(t->dtype);
  int64_t strides[IRON_MAX_RANK];
  iron_host_row_major_strides(t->rank, t->dims, strides);
  int32_t r = 0;
  for (int pass = 0; pass < 2; ++pass) {
    bool want_reduced = (pass == 0) == reduced_first;
    for (int32_t d = 0; d < t->rank; ++d) {
      if (reduced[d] != want_reduced) continue;
      p->dims[r] = t->dims[d];
      p->src_strides[r] = strides[d];
      r++;
    }
  }
  p->rank = r;
  iron_host_row_major_strides(r, p->dims, p->dst_strides);
  iron_host_copy_plan_finalize(p);
}

static iron_status_t reduce_prepare(const iron_ir_op_t *op,
                                    iron_region_t *const *regions,
                                    void **out_params) {
  iron_reduce_plan_t plan;
  IRON_RETURN_IF_ERROR_PLAIN(iron_reduce_plan_read(op, &plan));
  uint32_t n = plan.num;
  const iron_ir_type_t *t0 = plan.in;
  const bool *reduced = plan.reduced;
  reduce_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for params");
  p->n = n;
  for (uint32_t i = 0; i < n; ++i) p->dtypes[i] = plan.dtype[i];
  p->red = plan.red;
  p->kept = plan.kept;
  const iron_ir_region_t *ir =
      regions && regions[0] ? regions[0]->ir : &op->regions[0];
  if (n == 1 && fast_enabled()) {
    iron_op_kind_t k = iron_reduce_plan_body_op(ir, p->dtypes[0]);
    if (iron_reduce_plan_op_is_monoid(k))
      p->impl = iron_host_reduce_impl_lookup(k, p->dtypes[0]);
  }
  if (p->impl) {
    // Group the non-unit dims into runs of kept/reduced; [K? R? K?] is a
    // strided view, anything else is gathered to [kept, reduced].
    int groups = 0;
    bool last = false;
    int64_t sizes[3] = {1, 1, 1};
    bool kinds[3] = {false, false, false};
    bool fits = true;
    for (int32_t d = 0; d < t0->rank; ++d) {
      if (t0->dims[d] == 1) continue;
      if (groups == 0 || reduced[d] != last) {
        if (groups == 3) { fits = false; break; }
        kinds[groups] = reduced[d];
        groups++;
        last = reduced[d];
      }
      sizes[groups - 1] *= t0->dims[d];
    }
    if (fits && groups == 3 && (kinds[0] || !kinds[1])) fits = false;
    if (fits && groups == 2 && kinds[0] && kinds[1]) fits = false;
    if (fits) {
      p->outer = p->inner = 1;
      int g = 0;
      if (g < groups && !kinds[g]) p->outer = sizes[g++];
      if (g < groups && kinds[g]) g++;
      if (g < groups) p->inner = sizes[g];
    } else {
      p->gather = true;
      p->outer = p->kept;
      p->inner = 1;
      order_plan(t0, reduced, false, &p->plans[0]);
    }
  } else {
    if (!regions || !regions[0]) {
      free(p);
      return iron_ir_op_unimplemented(op, "without a compiled body");
    }
    p->region = regions[0];
    p->elementwise = regions[0]->elementwise;
    p->gather = true;
    for (uint32_t i = 0; i < n; ++i)
      order_plan(op->operands[i]->type, reduced, true, &p->plans[i]);
  }
  *out_params = p;
  return IRON_OK;
}

// ---------------------------------------------------------------------------
// Fast path

typedef struct fast_job {
  const iron_host_reduce_impl_t *impl;
  const char *in;
  char *acc;  // [nsplit][outer * inner] accumulation elements
  size_t in_es;
  int64_t outer, red, inner;
  int64_t nchunks, nsplit;
  int64_t chunk;   // columns per task (inner > 1)
  int64_t levels;  // cascade depth of the column kernel
  bool failed;
} fast_job_t;

static void fast_tasks(void *arg, int64_t begin, int64_t end) {
  fast_job_t *j = arg;
  size_t as = j->impl->acc_size;
  void *scratch = NULL;
  if (j->inner > 1) {
    scratch = malloc(as * (size_t)(j->levels * j->chunk));
    if (!scratch) {
      j->failed = true;  // benign race: only ever set to true
      return;
    }
  }
  for (int64_t t = begin; t < end; ++t) {
    int64_t s = t % j->nsplit;
    int64_t c = (t / j->nsplit) % j->nchunks;
    int64_t o = t / (j->nsplit * j->nchunks);
    int64_t r0 = j->red * s / j->nsplit, r1 = j->red * (s + 1) / j->nsplit;
    int64_t i0 = c * j->chunk;
    const char *x =
        j->in + (size_t)((o * j->red + r0) * j->inner + i0) * j->in_es;
    char *out = j->acc + (size_t)((s * j->outer + o) * j->inner + i0) * as;
    if (j->inner == 1) {
      j->impl->row(x, r1 - r0, out);
    } else {
      int64_t w = j->inner - i0 < j->chunk ? j->inner - i0 : j->chunk;
      j->impl->cols(x, r1 - r0, j->inner, w, out, scratch);
    }
  }
  free(scratch);
}

static iron_status_t fast_run(const iron_kernel_ctx_t *ctx,
                              const reduce_params_t *p,
                              const iron_tensor_t *const *inputs,
                              iron_tensor_t *const *outputs) {
  const iron_host_reduce_impl_t *impl = p->impl;
  size_t in_es = iron_dtype_size(p->dtypes[0]);
  int64_t kept = p->kept;
  const char *in = inputs[0]->data;
  void *gathered = NULL;
  if (p->gather) {
    gathered = malloc((size_t)p->plans[0].count * in_es + 1);
    if (!gathered) return IRON_ERR(RESOURCE_EXHAUSTED, "reduce: out of memory");
    iron_host_copy_run(ctx->pool, &p->plans[0], in, gathered, 0, 0);
    in = gathered;
  }
  fast_job_t j = {impl, in, NULL, in_es, p->outer, p->red, p->inner, 1, 1,
                  1, 2, false};
  int threads = ctx->pool ? iron_threadpool_size(ctx->pool) : 1;
  if (p->inner > 1) {
    // Whole rows per task stream memory contiguously; split the columns only
    // as far as the threads need.
    j.chunk = p->inner < IRON_REDUCE_COL_CHUNK ? p->inner
                                               : IRON_REDUCE_COL_CHUNK;
    if (threads > 1 && p->outer < threads && p->inner > 512) {
      int64_t want = (p->inner + threads - 1) / threads;
      want = (want + 63) / 64 * 64;
      if (want < j.chunk) j.chunk = want < 256 ? 256 : want;
    }
    j.nchunks = (p->inner + j.chunk - 1) / j.chunk;
  }
  int64_t tasks = p->outer * j.nchunks;
  // Few independent outputs but long reductions: split the reduced range and
  // combine the partial results afterwards.
  if (threads > 1 && tasks < 2 * threads && p->red >= 16384) {
    j.nsplit = p->red / 8192;
    if (j.nsplit > 4 * threads) j.nsplit = 4 * threads;
  }
  // The column kernel's cascade holds one partial per level of a binary
  // counter over 16-row blocks.
  for (int64_t blocks = (p->red / j.nsplit + 15) / 16; blocks > 1;
       blocks = (blocks + 1) / 2)
    j.levels++;
  size_t as = impl->acc_size;
  bool direct = as == in_es && j.nsplit == 1;  // accumulate into the output
  char *acc = direct ? outputs[0]->data
                     : malloc((size_t)(j.nsplit * kept) * as + 1);
  if (!acc) {
    free(gathered);
    return IRON_ERR(RESOURCE_EXHAUSTED, "reduce: out of memory");
  }
  j.acc = acc;
  int64_t work_per_task = p->red / j.nsplit * (p->inner == 1 ? 1 : j.chunk);
  int64_t grain = work_per_task >= 32768 ? 1 : 32768 / (work_per_task + 1) + 1;
  iron_threadpool_parallel_for(ctx->pool, tasks * j.nsplit, grain, fast_tasks,
                               &j);
  for (int64_t s = 1; s < j.nsplit; ++s)
    impl->combine(acc, acc + (size_t)(s * kept) * as, kept);
  impl->finish(acc, inputs[1]->data, outputs[0]->data, kept);
  if (!direct) free(acc);
  free(gathered);
  return j.failed ? IRON_ERR(RESOURCE_EXHAUSTED, "reduce: out of memory")
                  : IRON_OK;
}

// ---------------------------------------------------------------------------
// Generic path: the body through call_region.

static iron_status_t generic_run(const iron_kernel_ctx_t *ctx,
                                 const reduce_params_t *p,
                                 const iron_tensor_t *const *inputs,
                                 iron_tensor_t *const *outputs) {
  uint32_t n = p->n;
  int64_t kept = p->kept, red = p->red;
  if (!ctx->call_region)
    return IRON_ERR(FAILED_PRECONDITION, "reduce: no call_region");
  if (red == 0) {  // every result is its init value
    for (uint32_t i = 0; i < n; ++i)
      iron_host_fill(ctx->pool, outputs[i]->data, kept, inputs[n + i]->data,
                     iron_dtype_size(p->dtypes[i]));
    return IRON_OK;
  }
  char *bufs[2 * IRON_REDUCE_MAX_INPUTS] = {NULL};
  iron_status_t st = IRON_OK;
  for (uint32_t i = 0; i < n && !st; ++i) {
    size_t es = iron_dtype_size(p->dtypes[i]);
    bufs[i] = malloc((size_t)(red * kept) * es + 1);
    bufs[n + i] = malloc((size_t)((red + 1) / 2 * kept) * es + 1);
    if (!bufs[i] || !bufs[n + i])
      st = IRON_ERR(RESOURCE_EXHAUSTED, "reduce: out of memory");
    else
      iron_host_copy_run(ctx->pool, &p->plans[i], inputs[i]->data, bufs[i], 0,
                         0);
  }
  iron_tensor_t tin[2 * IRON_REDUCE_MAX_INPUTS], tout[IRON_REDUCE_MAX_INPUTS];
  const iron_tensor_t *pin[2 * IRON_REDUCE_MAX_INPUTS];
  iron_tensor_t *pout[IRON_REDUCE_MAX_INPUTS];
  for (uint32_t i = 0; i < 2 * n; ++i) pin[i] = &tin[i];
  for (uint32_t i = 0; i < n; ++i) pout[i] = &tout[i];
  if (!st && p->elementwise &&
      (red <= IRON_REDUCE_SEQUENTIAL_MAX_R || kept >= IRON_REDUCE_WIDE)) {
    // XLA's order (acc = body(acc, x[r]) from init, r ascending), on whole
    // rows of `kept` outputs: exact even for bodies that are not associative
    // (e.g. a + b*b), and cheap while rows are wide or few.
    char *ping[IRON_REDUCE_MAX_INPUTS] = {NULL}, *pong[IRON_REDUCE_MAX_INPUTS] = {NULL};
    for (uint32_t i = 0; i < n && !st; ++i) {
      size_t es = iron_dtype_size(p->dtypes[i]);
      ping[i] = malloc((size_t)kept * es + 1);
      pong[i] = malloc((size_t)kept * es + 1);
      if (!ping[i] || !pong[i])
        st = IRON_ERR(RESOURCE_EXHAUSTED, "reduce: out of memory");
    }
    for (int64_t r = 0; r < red && !st; ++r) {
      bool last = r == red - 1;
      for (uint32_t i = 0; i < n; ++i) {
        size_t es = iron_dtype_size(p->dtypes[i]);
        tin[i] = r == 0 ? *inputs[n + i] : iron_tensor_vector(ping[i], p->dtypes[i], kept);
        tin[n + i] = iron_tensor_vector(bufs[i] + (size_t)(r * kept) * es, p->dtypes[i], kept);
        tout[i] = iron_tensor_vector(last ? outputs[i]->data : pong[i], p->dtypes[i], kept);
      }
      st = ctx->call_region(ctx, p->region, pin, pout);
      for (uint32_t i = 0; i < n; ++i) {
        char *t = ping[i];
        ping[i] = pong[i];
        pong[i] = t;
      }
    }
    for (uint32_t i = 0; i < n; ++i) {
      free(ping[i]);
      free(pong[i]);
    }
  } else if (!st && p->elementwise) {
    // Long reductions of few outputs: the body is taken to be associative,
    // as StableHLO requires, and combined as a tree so it runs O(log n)
    // times on vectors. The tree merges adjacent rows (2i, 2i + 1), never
    // row i with row i + r/2: associative bodies that are not commutative
    // depend on the order of their operands (jax's argmax keeps its first
    // operand when both are NaN, so merging a later row first returned a
    // later NaN's index; issue 13).
    // cur: bufs[0..n) with `r` rows of `kept`; the even and odd rows are
    // gathered into bufs[n..2n) and odd[], merged into cur's first rows.
    char *odd[IRON_REDUCE_MAX_INPUTS] = {NULL};
    for (uint32_t i = 0; i < n && !st; ++i) {
      size_t es = iron_dtype_size(p->dtypes[i]);
      odd[i] = malloc((size_t)(red / 2 * kept) * es + 1);
      if (!odd[i]) st = IRON_ERR(RESOURCE_EXHAUSTED, "reduce: out of memory");
    }
    char **cur = bufs, **even = bufs + n;
    int64_t r = red;
    while (!st && r > 1) {
      int64_t h = r / 2;
      for (uint32_t i = 0; i < n; ++i) {
        size_t es = iron_dtype_size(p->dtypes[i]);
        iron_host_copy_plan_t cp;
        memset(&cp, 0, sizeof(cp));
        cp.rank = 2;
        cp.dims[0] = h;
        cp.dims[1] = kept;
        cp.src_strides[0] = 2 * kept;
        cp.src_strides[1] = 1;
        cp.dst_strides[0] = kept;
        cp.dst_strides[1] = 1;
        cp.elem_size = es;
        iron_host_copy_plan_finalize(&cp);
        iron_host_copy_run(ctx->pool, &cp, cur[i], even[i], 0, 0);
        iron_host_copy_run(ctx->pool, &cp, cur[i], odd[i], kept, 0);
        tin[i] = iron_tensor_vector(even[i], p->dtypes[i], h * kept);
        tin[n + i] = iron_tensor_vector(odd[i], p->dtypes[i], h * kept);
        tout[i] = iron_tensor_vector(cur[i], p->dtypes[i], h * kept);
      }
      st = ctx->call_region(ctx, p->region, pin, pout);
      if (r % 2)  // the last row moves up, after the merged ones
        for (uint32_t i = 0; i < n; ++i) {
          size_t es = iron_dtype_size(p->dtypes[i]);
          memmove(cur[i] + (size_t)(h * kept) * es,
                  cur[i] + (size_t)(2 * h * kept) * es, (size_t)kept * es);
        }
      r = h + r % 2;
    }
    for (uint32_t i = 0; i < n; ++i) free(odd[i]);
    // result = body(init, partial)
    for (uint32_t i = 0; i < n && !st; ++i) {
      tin[i] = *inputs[n + i];
      tin[n + i] = iron_tensor_vector(cur[i], p->dtypes[i], kept);
      tout[i] = iron_tensor_vector(outputs[i]->data, p->dtypes[i], kept);
    }
    if (!st) st = ctx->call_region(ctx, p->region, pin, pout);
  } else if (!st) {
    // One element at a time, in order: acc = body(acc, x[r]).
    unsigned char acc[IRON_REDUCE_MAX_INPUTS][16], nacc[IRON_REDUCE_MAX_INPUTS][16];
    for (int64_t o = 0; o < kept && !st; ++o) {
      for (uint32_t i = 0; i < n; ++i)
        memcpy(acc[i], inputs[n + i]->data, iron_dtype_size(p->dtypes[i]));
      for (int64_t r = 0; r < red && !st; ++r) {
        for (uint32_t i = 0; i < n; ++i) {
          size_t es = iron_dtype_size(p->dtypes[i]);
          tin[i] = iron_tensor_vector(acc[i], p->dtypes[i], 1);
          tin[n + i] = iron_tensor_vector(bufs[i] + (size_t)(r * kept + o) * es,
                           p->dtypes[i], 1);
          tout[i] = iron_tensor_vector(nacc[i], p->dtypes[i], 1);
        }
        st = ctx->call_region(ctx, p->region, pin, pout);
        memcpy(acc, nacc, sizeof(acc));
      }
      for (uint32_t i = 0; i < n && !st; ++i) {
        size_t es = iron_dtype_size(p->dtypes[i]);
        memcpy((char *)outputs[i]->data + (size_t)o * es, acc[i], es);
      }
    }
  }
  for (uint32_t i = 0; i < 2 * n; ++i) free(bufs[i]);
  return st;
}

static iron_status_t reduce_run(const iron_kernel_ctx_t *ctx, const void *params,
                                const iron_tensor_t *const *inputs,
                                iron_tensor_t *const *outputs) {
  const reduce_params_t *p = params;
  if (p->kept == 0) return IRON_OK;
  if (!p->impl) return generic_run(ctx, p, inputs, outputs);
  if (p->red == 0) {
    iron_host_fill(ctx->pool, outputs[0]->data, p->kept, inputs[1]->data,
                   iron_dtype_size(p->dtypes[0]));
    return IRON_OK;
  }
  return fast_run(ctx, p, inputs, outputs);
}

static const iron_kernel_t kReduce = {
    .name = "reduce", .prepare = reduce_prepare, .run = reduce_run};

void iron_host_register_reduce(iron_kernel_table_t table) {
  table[IRON_OP_REDUCE] = &kReduce;
}
