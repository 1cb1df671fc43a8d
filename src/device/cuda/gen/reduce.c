// stablehlo.reduce as generated CUDA C: the body is translated from the
// region IR; all sizes and strides are baked in. Dims are simplified first
// (size-1 dims dropped, adjacent dims of the same role merged) so a
// contiguous row reduce decomposes no index at all.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cuda/gen/prelude.h"
#include "device/cuda/gen/source.h"
#include "device/cuda/gen/types.h"
#include "device/cuda/cuda_fusion.h"
#include "device/cuda/gen/ops.h"
#include "device/plans/reduce_plan.h"

enum { MODE_THREAD, MODE_WARP, MODE_BLOCK, MODE_COLS };

typedef struct group {
  int32_t n;
  int64_t dims[IRON_MAX_RANK], strides[IRON_MAX_RANK];
  int64_t count;
  bool small;  // every offset fits 32 bits: cheaper index arithmetic
} group_t;

// Appends (dim, stride) as the new innermost entry of g, merging it into
// the previous one when they compose.
static void group_push(group_t *g, int64_t dim, int64_t stride) {
  g->count *= dim;
  if (dim == 1) return;
  if (g->n > 0 && g->strides[g->n - 1] == stride * dim) {
    g->dims[g->n - 1] *= dim;
    g->strides[g->n - 1] = stride;
    return;
  }
  g->dims[g->n] = dim;
  g->strides[g->n] = stride;
  g->n++;
}

// `var` += offset of linear index `lin` decomposed over g.
static void emit_offset(iron_cuda_text_t *t, const group_t *g, const char *lin,
                        const char *var) {
  if (g->n == 0) return;
  if (g->n == 1) {
    iron_cuda_text_printf(t, "%s += (%s) * %lldLL;\n", var, lin,
                          (long long)g->strides[0]);
    return;
  }
  // 64-bit division is emulated on the GPU: 32 bits when offsets fit.
  const char *it = g->small ? "int32_t" : "int64_t";
  const char *sx = g->small ? "" : "LL";
  iron_cuda_text_printf(t, "{ %s r_ = (%s)(%s);\n", it, it, lin);
  for (int32_t d = g->n - 1; d >= 0; --d) {
    if (d == 0) {
      iron_cuda_text_printf(t, "%s += (int64_t)(r_ * %lld%s); }\n", var,
                            (long long)g->strides[0], sx);
    } else {
      iron_cuda_text_printf(
          t, "{ %s q_ = r_ / %lld%s; %s += (int64_t)((r_ - q_ * %lld%s) * "
             "%lld%s); r_ = q_; }\n",
          it, (long long)g->dims[d], sx, var, (long long)g->dims[d], sx,
          (long long)g->strides[d], sx);
    }
  }
}

// body(acc..., x..., &n...); acc = n.
static void emit_combine(iron_cuda_text_t *t, uint32_t num,
                         const iron_cuda_type_t *ty, const char *acc,
                         const char *x) {
  iron_cuda_text_printf(t, "{ ");
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(t, "%s n%u_; ", ty[i].comp, i);
  iron_cuda_text_printf(t, "iron_body(");
  for (uint32_t i = 0; i < num; ++i) iron_cuda_text_printf(t, "%s%u, ", acc, i);
  for (uint32_t i = 0; i < num; ++i) iron_cuda_text_printf(t, "%s%u, ", x, i);
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(t, "&n%u_%s", i, i + 1 < num ? ", " : "");
  iron_cuda_text_printf(t, "); ");
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(t, "%s%u = n%u_; ", acc, i, i);
  iron_cuda_text_printf(t, "}\n");
}

// Folds a "maybe empty" partial (y, yh) into (acc, have).
static void emit_merge(iron_cuda_text_t *t, uint32_t num,
                       const iron_cuda_type_t *ty, const char *y,
                       const char *yh) {
  iron_cuda_text_printf(t, "if (%s) { if (have) ", yh);
  emit_combine(t, num, ty, "acc", y);
  iron_cuda_text_printf(t, "else { ");
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(t, "acc%u = %s%u; ", i, y, i);
  iron_cuda_text_printf(t, "have = 1; } }\n");
}

// Declares <px><i> = operand i's reduced element `r` (an expression over
// `base`), loaded or computed by the fused producers.
static void emit_load_x(iron_cuda_text_t *t, uint32_t num,
                        const iron_cuda_type_t *ty, const group_t *red,
                        const iron_cuda_reduce_fused_t *fz, const char *r,
                        const char *px) {
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(t, "%s %s%u;\n", ty[i].comp, px, i);
  iron_cuda_text_printf(t, "{ int64_t off = base;\n");
  emit_offset(t, red, r, "off");
  if (fz) {
    // The operands' element `off`, computed by the fused producers.
    for (uint32_t i = 0; i < num; ++i)
      iron_cuda_text_printf(t, "%s v%u_;\n", fz->value_ctypes[i], i);
    iron_cuda_text_printf(t, "%s(", fz->fn_name);
    for (uint32_t k = 0; k < fz->num_inputs; ++k)
      iron_cuda_text_printf(t, "fin%u, ", k);
    iron_cuda_text_printf(t, "off");
    for (uint32_t i = 0; i < num; ++i) iron_cuda_text_printf(t, ", v%u_", i);
    iron_cuda_text_printf(t, ");\n");
    for (uint32_t i = 0; i < num; ++i)
      iron_cuda_text_printf(t, "%s%u = (%s)v%u_;\n", px, i, ty[i].comp, i);
  } else {
    for (uint32_t i = 0; i < num; ++i)
      iron_cuda_text_printf(t, "%s%u = %s(in%u[off]);\n", px, i, ty[i].ld,
                            i);
  }
  iron_cuda_text_printf(t, "}\n");
}

// Folds <px><i> into (acc, have): combined when something was folded
// before, else copied.
static void emit_fold_x(iron_cuda_text_t *t, uint32_t num,
                        const iron_cuda_type_t *ty, const char *px) {
  iron_cuda_text_printf(t, "if (have) ");
  emit_combine(t, num, ty, "acc", px);
  iron_cuda_text_printf(t, "else { ");
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(t, "acc%u = %s%u; ", i, px, i);
  iron_cuda_text_printf(t, "have = 1; }\n");
}

// Loads the reduced element `r` of every operand into x<i> and folds it.
static void emit_load_fold(iron_cuda_text_t *t, uint32_t num,
                           const iron_cuda_type_t *ty, const group_t *red,
                           bool maybe_empty,
                           const iron_cuda_reduce_fused_t *fz) {
  emit_load_x(t, num, ty, red, fz, "r", "x");
  if (maybe_empty)
    emit_fold_x(t, num, ty, "x");
  else
    emit_combine(t, num, ty, "acc", "x");
}

// Loads in flight per thread in the batched loops (emit_fold_range): a
// loop that folds each element as it arrives has one load in flight per
// thread, which leaves tall narrow column reductions (batch norm's
// [131072, 64] sums) and short full reductions latency-bound; B loads
// issued before the B folds keep B in flight. Fewer with many operands
// (registers). 1 when IRON_CUDA_REDUCE_BATCH=0.
static int batch_loads(uint32_t num) {
  const char *env = getenv("IRON_CUDA_REDUCE_BATCH");
  if (env && env[0] == '0') return 1;
  return num <= 2 ? 8 : num <= 4 ? 4 : 2;
}

// Folds elements r = from, from + step, ... < to (expressions evaluated
// once) into (acc, have) in that order, B loads at a time. Only the first
// element of a batch checks `have` (the others follow it), and nothing is
// peeled, so a thread of exactly B elements (a 2^20 reduce split into
// segments of 8 x 256) runs one batch.
static void emit_fold_range(iron_cuda_text_t *t, uint32_t num,
                            const iron_cuda_type_t *ty, const group_t *red,
                            const iron_cuda_reduce_fused_t *fz,
                            const char *from, const char *to, int64_t step,
                            int batch) {
  iron_cuda_text_printf(t, "{ int64_t r = %s;\nconst int64_t rend_ = %s;\n",
                        from, to);
  if (batch > 1) {
    iron_cuda_text_printf(t, "for (; r + %lldLL < rend_; r += %lldLL) {\n",
                          (long long)((batch - 1) * step),
                          (long long)(batch * step));
    for (int b = 0; b < batch; ++b) {
      char rb[64], px[16];
      snprintf(rb, sizeof(rb), "r + %lldLL", (long long)(b * step));
      snprintf(px, sizeof(px), "xb%d_", b);
      emit_load_x(t, num, ty, red, fz, rb, px);
    }
    emit_fold_x(t, num, ty, "xb0_");
    for (int b = 1; b < batch; ++b) {
      char px[16];
      snprintf(px, sizeof(px), "xb%d_", b);
      emit_combine(t, num, ty, "acc", px);
    }
    iron_cuda_text_printf(t, "}\n");
  }
  iron_cuda_text_printf(t, "for (; r < rend_; r += %lldLL) {\n",
                        (long long)step);
  emit_load_x(t, num, ty, red, fz, "r", "x");
  emit_fold_x(t, num, ty, "x");
  iron_cuda_text_printf(t, "}\n}\n");
}

// Elements per lane and stage of the staged ordered loop (emit_staged):
// the per-warp staging arrays [8 warps][32 lanes][K + 1] of every operand
// stay within 24 KiB, so that 8 blocks of 256 threads (a full SM) fit in
// an H200 SM's 228 KiB of shared memory and a split's 1056 blocks run in
// one wave (argmax's f32 + s32 at K = 16 would take 34.8 KiB: 6 blocks).
// K = 8 still keeps 8 loads in flight per lane. 0 when even K = 4 does
// not fit (or IRON_CUDA_REDUCE_STAGE=0): such reduces load each thread's
// chunk directly.
static int stage_elems(uint32_t num, const iron_dtype_t *dtypes) {
  const char *env = getenv("IRON_CUDA_REDUCE_STAGE");
  if (env && env[0] == '0') return 0;
  size_t bytes = 0;
  for (uint32_t i = 0; i < num; ++i) {
    size_t es = iron_dtype_size(dtypes[i]);
    bytes += es < 4 ? 4 : es;
  }
  for (int k = 16; k >= 4; k /= 2)
    if ((size_t)8 * 32 * (size_t)(k + 1) * bytes <= 24 * 1024) return k;
  return 0;
}

// Bodies that are not a single commutative op (argmax's compare/select,
// whose NaN rule keeps its first operand) must fold the elements in order:
// every thread folds one contiguous chunk of `c` elements, and the chunks
// merge in thread order afterwards. Loading a chunk directly would make a
// warp's loads 32 chunks apart (one cache line per lane per load); here
// the 32 lanes of a warp, whose chunks are adjacent ([wfirst, wfirst + 32
// c) up to `end`), stage K elements of every chunk at a time through
// shared memory: lanes load consecutive elements of one or two chunks
// (coalesced, K loads in flight per lane), then each lane folds its own
// row of the stage in order. Only warp barriers: warps run independently.
static void emit_stage(iron_cuda_text_t *t, uint32_t num,
                       const iron_cuda_type_t *ty, const group_t *red,
                       const iron_cuda_reduce_fused_t *fz, int64_t c, int k,
                       bool guarded) {
  // Unguarded: every element of the stage exists (the warp's 32 chunks end
  // before `end`, and c is a multiple of K), so no compare per element.
  char g1[96], g2[96];
  snprintf(g1, sizeof(g1), "%s", "1");
  snprintf(g2, sizeof(g2), "%s", "1");
  if (guarded) {
    snprintf(g1, sizeof(g1), "j + col_ < %lldLL && r < we_", (long long)c);
    snprintf(g2, sizeof(g2), "j + c_ < %lldLL && me_ + c_ < we_",
             (long long)c);
  }
  iron_cuda_text_printf(
      t,
      "#pragma unroll\n"
      "for (int i_ = 0; i_ < %d; ++i_) {\n"
      "const int p_ = i_ * 32 + l_, row_ = p_ / %d, col_ = p_ %% %d;\n"
      "const int64_t r = wf_ + (int64_t)row_ * %lldLL + j + col_;\n"
      "if (%s) {\n",
      k, k, k, (long long)c, g1);
  emit_load_x(t, num, ty, red, fz, "r", "x");
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(t, "st%u_[w_][row_][col_] = x%u;\n", i, i);
  iron_cuda_text_printf(
      t,
      "}\n}\n__syncwarp();\n"
      "{ const int64_t me_ = wf_ + (int64_t)l_ * %lldLL + j;\n"
      "(void)me_;\n"
      "#pragma unroll\n"
      "for (int c_ = 0; c_ < %d; ++c_) {\n"
      "if (%s) {\n",
      (long long)c, k, g2);
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(t, "%s x%u = st%u_[w_][l_][c_];\n", ty[i].comp, i,
                          i);
  emit_fold_x(t, num, ty, "x");
  iron_cuda_text_printf(t, "}\n}\n}\n__syncwarp();\n");
}

static void emit_staged(iron_cuda_text_t *t, uint32_t num,
                        const iron_cuda_type_t *ty, const group_t *red,
                        const iron_cuda_reduce_fused_t *fz,
                        const char *wfirst, int64_t c, const char *end,
                        int k) {
  // Short chunks (a warp-per-row reduce of 100 elements: 4 per lane)
  // take smaller stages rather than leave most of a stage empty.
  while (k > 4 && k > c) k /= 2;
  iron_cuda_text_printf(t, "{\n");
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(t, "__shared__ %s st%u_[8][32][%d];\n", ty[i].comp,
                          i, k + 1);
  iron_cuda_text_printf(
      t,
      "const int64_t wf_ = %s, we_ = %s;\n"
      "const int w_ = threadIdx.x >> 5, l_ = threadIdx.x & 31;\n"
      "for (int64_t j = 0; j < %lldLL; j += %d) {\n",
      wfirst, end, (long long)c, k);
  if (c % k == 0) {
    // Warp-uniform: all 32 chunks of this warp are whole.
    iron_cuda_text_printf(t, "if (wf_ + %lldLL <= we_) {\n",
                          (long long)(32 * c));
    emit_stage(t, num, ty, red, fz, c, k, false);
    iron_cuda_text_printf(t, "} else {\n");
    emit_stage(t, num, ty, red, fz, c, k, true);
    iron_cuda_text_printf(t, "}\n");
  } else {
    emit_stage(t, num, ty, red, fz, c, k, true);
  }
  iron_cuda_text_printf(t, "}\n}\n");
}

// Writes init (+) acc (or init alone when nothing was reduced) to out<i>[o].
static void emit_finish(iron_cuda_text_t *t, uint32_t num,
                        const iron_cuda_type_t *ty) {
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(t, "%s i%u = %s(init%u[0]);\n", ty[i].comp, i,
                          ty[i].ld, i);
  iron_cuda_text_printf(t, "if (have) ");
  emit_combine(t, num, ty, "i", "acc");
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(t, "out%u[o] = %s(i%u);\n", i, ty[i].st, i);
}

// Merges every thread's (acc, have) into thread 0's, in thread order when
// `ordered` (neighbouring lanes first, then the 8 warps left to right),
// through the block's sh<i>[8] / sh_have[8]. Every thread must reach it.
static void emit_block_tree(iron_cuda_text_t *t, uint32_t num,
                            const iron_cuda_type_t *ty, bool ordered) {
  iron_cuda_text_printf(t, "%s",
                        ordered ? "for (int d = 1; d < 32; d <<= 1) {\n"
                                : "for (int d = 16; d >= 1; d >>= 1) {\n");
  iron_cuda_text_printf(t,
                        "int yh = __shfl_down_sync(0xffffffffu, have, d);\n");
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(t, "%s y%u = iron_shfl(acc%u, d);\n", ty[i].comp, i,
                          i);
  iron_cuda_text_printf(t, "%s",
                        ordered ? "if ((lane & (2 * d - 1)) == 0 && lane + d "
                                  "< 32) "
                                : "if (lane + d < 32) ");
  emit_merge(t, num, ty, "y", "yh");
  iron_cuda_text_printf(t, "}\nif (lane == 0) { sh_have[warp] = have; ");
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(t, "sh%u[warp] = acc%u; ", i, i);
  iron_cuda_text_printf(t,
                        "}\n__syncthreads();\n"
                        "if (threadIdx.x == 0) {\nhave = 0;\n"
                        "for (int w = 0; w < 8; ++w) {\n");
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(t, "%s z%u = sh%u[w];\n", ty[i].comp, i, i);
  emit_merge(t, num, ty, "z", "sh_have[w]");
  iron_cuda_text_printf(t, "}\n}\n");
}

// The op of a body `return op(arg0, arg1)` (either order) with a
// commutative, associative op (src/device/plans/reduce_plan.h);
// IRON_OP_UNKNOWN otherwise.
static iron_op_kind_t single_op_kind(const iron_region_t *body,
                                     uint32_t num, iron_dtype_t dtype) {
  if (num != 1) return IRON_OP_UNKNOWN;
  iron_op_kind_t k = iron_reduce_plan_body_op(body->ir, dtype);
  return iron_reduce_plan_op_is_monoid(k) ? k : IRON_OP_UNKNOWN;
}
static bool single_op_body(const iron_region_t *body, uint32_t num,
                           iron_dtype_t dtype) {
  return single_op_kind(body, num, dtype) != IRON_OP_UNKNOWN;
}

static int pick_mode(int32_t rank, const int64_t *dims, const bool *reduced,
                     int64_t nout, int64_t nred) {
  bool inner_reduced = true;  // the innermost non-1 dim is reduced
  for (int32_t d = rank - 1; d >= 0; --d)
    if (dims[d] != 1) {
      inner_reduced = reduced[d];
      break;
    }
  if (nout <= 0 || nred <= 0) return MODE_THREAD;
  if (inner_reduced && nred >= 2048) return MODE_BLOCK;
  if (inner_reduced && nred > 8) return MODE_WARP;
  if (!inner_reduced && nout < 32 && nred >= 4096) return MODE_BLOCK;
  if (!inner_reduced && nout < 131072 && nred >= 32) return MODE_COLS;
  return MODE_THREAD;
}

// Blocks a split reduce aims for: 8 blocks of 256 threads on each of the
// H200's 132 SMs (a full GPU of threads, so enough loads in flight).
// IRON_CUDA_REDUCE_SPLIT=0 never splits; a number >= 2 sets the target
// (for tuning); 0 returned means no split.
#define SPLIT_TARGET_BLOCKS 1056
static int64_t split_target(void) {
  const char *env = getenv("IRON_CUDA_REDUCE_SPLIT");
  if (!env || !env[0]) return SPLIT_TARGET_BLOCKS;
  long long v = atoll(env);
  if (env[0] == '0' || v == 0) return 0;
  return v >= 2 ? (int64_t)v : SPLIT_TARGET_BLOCKS;
}

// Column reduces with few 32-output tiles (a layernorm's gamma/beta
// gradients: 512 sums of 16384 rows make 16 blocks; batch norm's
// per-channel sums of [131072, 64] make 2) leave most of the GPU idle.
// They split the reduced rows into segments, one block per (tile,
// segment): each block writes its partials to module-scope scratch, and
// the last block of a tile to finish (a per-tile atomic counter) merges
// the segments in order, so the result does not depend on block timing.
// The scratch lives in the kernel's module (one stream per device runs one
// kernel at a time, and the last block resets the counter). Returns the
// number of segments: 1 means no split.
#define SPLIT_MIN_ROWS 128
#define SPLIT_MAX_SCRATCH (4 << 20)
static int64_t cols_segments(int64_t nout, int64_t nred, uint32_t num,
                             bool splittable) {
  int64_t ntiles = (nout + 31) / 32;
  const int64_t target = split_target();
  if (!target || !splittable || ntiles >= target / 2 ||
      nred < 2 * SPLIT_MIN_ROWS)
    return 1;
  // Whole waves: at most the target (1280 blocks would run a second,
  // mostly idle wave of 224).
  int64_t nseg = target / ntiles;
  if (nseg > nred / SPLIT_MIN_ROWS) nseg = nred / SPLIT_MIN_ROWS;
  while (nseg > 1 && nseg * ntiles * 32 * (int64_t)num * 12 > SPLIT_MAX_SCRATCH)
    nseg /= 2;
  return nseg < 2 ? 1 : nseg;
}

// Row split segments: multiples of 1024 elements (a block's 16-byte vector
// loads stay aligned), of 256 threads x K elements for the staged ordered
// loop (each thread's chunk a whole number of stages).
static int64_t seg_align(int stage) { return stage ? 256 * stage : 1024; }

// Row reduces with few outputs (a full reduce to a scalar: one row of
// 2^28 elements) would run one block per output and leave the GPU idle.
// They split each row into segments, one block per (output, segment), and
// merge like the column split: partials to module scratch, the last block
// of an output folds its segments in order, so the bits never depend on
// block timing. Segments of 2048 elements at least: a 2^20 reduce (a
// while loop's convergence test) fills the GPU with 512 blocks of 8
// elements per thread instead of 128 of 32 (7.75 us against XLA's 2.4 on
// the H200, 2026-12-03). Returns the number of segments (1: no split).
#define ROWSPLIT_MIN_ELEMS 2048
static int64_t row_segments(int64_t nout, int64_t nred, uint32_t num,
                            bool splittable, int64_t align) {
  const int64_t target = split_target();
  if (!target || !splittable || nout >= target / 4 ||
      nred < 2 * ROWSPLIT_MIN_ELEMS)
    return 1;
  int64_t nseg = target / nout;
  if (nseg > nred / ROWSPLIT_MIN_ELEMS) nseg = nred / ROWSPLIT_MIN_ELEMS;
  while (nseg > 1 && nseg * nout * (int64_t)num * 12 > SPLIT_MAX_SCRATCH)
    nseg /= 2;
  if (nseg < 2) return 1;
  // Segments are whole multiples of `align` elements (seg_align), so
  // vector loads stay aligned and every segment but the last is full.
  int64_t seg = (nred + nseg - 1) / nseg;
  seg = (seg + align - 1) / align * align;
  nseg = (nred + seg - 1) / seg;
  return nseg < 2 ? 1 : nseg;
}
iron_status_t iron_cuda_reduce_dims(const iron_ir_op_t *op, int32_t rank,
                                    bool *out_reduced) {
  return iron_reduce_plan_dims(op, rank, out_reduced);
}
iron_status_t iron_cuda_reduce_check(const iron_ir_op_t *op,
                                     iron_dtype_t *out_dtypes,
                                     bool *out_reduced) {
  iron_reduce_plan_t plan;
  IRON_RETURN_IF_ERROR_PLAIN(iron_reduce_plan_read(op, &plan));
  for (uint32_t i = 0; i < plan.num; ++i) out_dtypes[i] = plan.dtype[i];
  memcpy(out_reduced, plan.reduced, sizeof(plan.reduced));
  return IRON_OK;
}

int64_t iron_cuda_reduce_threads(int32_t rank, const int64_t *dims,
                                 const bool *reduced) {
  int64_t nout = 1, nred = 1;
  for (int32_t d = 0; d < rank; ++d) {
    if (reduced[d])
      nred *= dims[d];
    else
      nout *= dims[d];
  }
  switch (pick_mode(rank, dims, reduced, nout, nred)) {
    case MODE_WARP: return nout * 32;
    case MODE_BLOCK:
      return nout * 256 * row_segments(nout, nred, 1, true, seg_align(0));
    case MODE_COLS:
      // Real scalar types (the split's precondition) are not known here:
      // count the split that a real reduce would get.
      return (nout + 31) / 32 * 256 * cols_segments(nout, nred, 1, true);
    default: return nout;
  }
}

// Merges the split's partials q0 <= q < q1 (runtime bounds in scope) into
// (acc, have) in order; `at` is the index expression of partial q with one
// %s for q. B partials are loaded before they merge: the last block of a
// tile merges hundreds of partials per thread slice, and one dependent
// L2 round trip each made it the kernel's tail (batch norm's sums).
static void emit_merge_parts(iron_cuda_text_t *t, uint32_t num,
                             const iron_cuda_type_t *ty, const char *at,
                             int batch) {
  char idx[128], yh[160], px[16], hv[16];
  iron_cuda_text_printf(t, "{ int64_t q = q0;\n");
  if (batch > 1) {
    iron_cuda_text_printf(t, "for (; q + %d < q1; q += %d) {\n", batch - 1,
                          batch);
    for (int b = 0; b < batch; ++b) {
      char qb[32];
      snprintf(qb, sizeof(qb), "q + %d", b);
      snprintf(idx, sizeof(idx), at, qb);
      for (uint32_t i = 0; i < num; ++i)
        iron_cuda_text_printf(t, "const %s zb%d_%u = iron_part%u[%s];\n",
                              ty[i].comp, b, i, i, idx);
      iron_cuda_text_printf(t, "const int zh%d_ = iron_phave[%s];\n", b, idx);
    }
    for (int b = 0; b < batch; ++b) {
      snprintf(px, sizeof(px), "zb%d_", b);
      snprintf(hv, sizeof(hv), "zh%d_", b);
      emit_merge(t, num, ty, px, hv);
    }
    iron_cuda_text_printf(t, "}\n");
  }
  iron_cuda_text_printf(t, "for (; q < q1; ++q) {\n");
  snprintf(idx, sizeof(idx), at, "q");
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(t, "%s z%u = iron_part%u[%s];\n", ty[i].comp, i, i,
                          idx);
  snprintf(yh, sizeof(yh), "iron_phave[%s]", idx);
  emit_merge(t, num, ty, "z", yh);
  iron_cuda_text_printf(t, "}\n}\n");
}

// Column tiles (MODE_COLS): lane = output within the tile, ty = slice.
static void emit_cols_shared(iron_cuda_text_t *t, uint32_t num,
                             const iron_cuda_type_t *ty) {
  iron_cuda_text_printf(
      t,
      "const int lane = threadIdx.x & 31, ty = threadIdx.x >> 5;\n"
      "__shared__ int sh_have[8][32];\n");
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(t, "__shared__ %s sh%u[8][32];\n", ty[i].comp, i);
}

// Each thread folds its slice's rows [r0, r1) (`rows` declares them) with
// batched loads, the slices meet in shared memory and, where `merge_cond` holds, merge in
// order into (acc, have); the merge loop is left open for the caller.
static void emit_cols_slices(iron_cuda_text_t *t, uint32_t num,
                             const iron_cuda_type_t *ty,
                             const group_t *kept, const group_t *red,
                             const iron_cuda_reduce_fused_t *fz, int64_t nout,
                             const char *rows, const char *merge_cond) {
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(t, "%s acc%u = %s{};\n", ty[i].comp, i, ty[i].comp);
  iron_cuda_text_printf(t, "if (o < %lldLL) {\nint64_t base = 0;\n",
                        (long long)nout);
  emit_offset(t, kept, "o", "base");
  iron_cuda_text_printf(t, "%s", rows);
  emit_fold_range(t, num, ty, red, fz, "r0", "r1", 1, batch_loads(num));
  iron_cuda_text_printf(t, "}\nsh_have[ty][lane] = have;\n");
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(t, "sh%u[ty][lane] = acc%u;\n", i, i);
  iron_cuda_text_printf(t,
                        "__syncthreads();\n"
                        "if (%s) {\nhave = 0;\n"
                        "for (int w = 0; w < 8; ++w) {\n",
                        merge_cond);
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(t, "%s z%u = sh%u[w][lane];\n", ty[i].comp, i, i);
  emit_merge(t, num, ty, "z", "sh_have[w][lane]");
  iron_cuda_text_printf(t, "}\n");
}

iron_status_t iron_cuda_gen_reduce(const char *name, int32_t rank,
                                   const int64_t *dims, const bool *reduced,
                                   uint32_t num, const iron_dtype_t *dtypes,
                                   const iron_region_t *body,
                                   char **out_src, unsigned *out_grid,
                                   unsigned *out_block) {
  return iron_cuda_gen_reduce_fused(name, rank, dims, reduced, num, dtypes,
                                    body, NULL, out_src, out_grid, out_block);
}

iron_status_t iron_cuda_gen_reduce_fused(
    const char *name, int32_t rank, const int64_t *dims, const bool *reduced,
    uint32_t num, const iron_dtype_t *dtypes, const iron_region_t *body,
    const iron_cuda_reduce_fused_t *fz, char **out_src, unsigned *out_grid,
    unsigned *out_block) {
  // Accumulators are named scalars (acc0, acc1, ...): any count the plan
  // accepts (IRON_REDUCE_PLAN_MAX_INPUTS, as the host).
  if (num == 0 || num > IRON_REDUCE_PLAN_MAX_INPUTS)
    return IRON_ERR(UNIMPLEMENTED, "cuda reduce of %u operands", num);
  iron_cuda_type_t ty[IRON_REDUCE_PLAN_MAX_INPUTS];
  bool narrow = false;
  for (uint32_t i = 0; i < num; ++i) {
    ty[i] = iron_cuda_type(dtypes[i]);
    if (!ty[i].store || (ty[i].is_narrow && fz))
      return IRON_ERR(UNIMPLEMENTED, "cuda reduce for dtype %s%s",
                      iron_dtype_name(dtypes[i]), fz ? " (fused)" : "");
    narrow = narrow || ty[i].is_narrow;
  }
  group_t kept, red;
  memset(&kept, 0, sizeof(kept));
  memset(&red, 0, sizeof(red));
  kept.count = red.count = 1;
  int64_t strides[IRON_MAX_RANK];
  int64_t s = 1;
  for (int32_t d = rank - 1; d >= 0; --d) {
    strides[d] = s;
    s *= dims[d];
  }
  for (int32_t d = 0; d < rank; ++d)
    group_push(reduced[d] ? &red : &kept, dims[d], strides[d]);
  kept.small = red.small = s < ((int64_t)1 << 31);
  int64_t nout = kept.count, nred = red.count;
  // Single-op bodies (add, max, ...) are commutative: threads may take
  // strided (coalesced) elements. Any other body (argmax's NaN rule picks
  // its first argument) must see the elements in order.
  bool ordered = !single_op_body(body, num, dtypes[0]);
  const int stage = ordered ? stage_elems(num, dtypes) : 0;
  // Narrow floats round every body result, so their sums and products are
  // not associative: one thread per output folds init then the elements in
  // order, as the host's reduce does (XLA's order; the host folds pairwise
  // only past 64 elements into fewer than 64 outputs). Orders do not
  // matter for max/min (they pick an operand) nor for s4/u4 single ops
  // (wrapping in 4 bits is a ring map of the 8-bit ops): those keep the
  // parallel shapes.
  iron_op_kind_t k1 = single_op_kind(body, num, dtypes[0]);
  bool in_order = narrow && !(k1 == IRON_OP_MAXIMUM ||
                              k1 == IRON_OP_MINIMUM ||
                              (k1 != IRON_OP_UNKNOWN && !ty[0].is_float));
  int mode =
      in_order ? MODE_THREAD : pick_mode(rank, dims, reduced, nout, nred);
  // Column tiles keep every operand's [8][32] partials in shared memory:
  // many wide operands (16 f64 ones) would pass the 48 KiB a kernel's
  // static shared memory may hold; those reduce one output per thread.
  size_t comp_bytes = 0;
  for (uint32_t i = 0; i < num; ++i) {
    size_t es = iron_dtype_size(dtypes[i]);
    comp_bytes += es < 4 ? 4 : es;
  }
  if (mode == MODE_COLS && 8 * 32 * (comp_bytes + 4) > 40 * 1024)
    mode = MODE_THREAD;
  bool splittable = true;  // partials of real scalar types
  for (uint32_t i = 0; i < num; ++i)
    if (ty[i].is_complex) splittable = false;
  int64_t nseg =
      mode == MODE_COLS    ? cols_segments(nout, nred, num, splittable)
      : mode == MODE_BLOCK
          ? row_segments(nout, nred, num, splittable, seg_align(stage))
                           : 1;
  iron_cuda_text_t t;
  iron_cuda_text_init(&t);
  iron_cuda_text_printf(&t, "%s%s", iron_cuda_prelude(),
                        fz ? fz->fn_text : "");
  iron_status_t st = iron_cuda_gen_region_fn(&t, "iron_body", body);
  if (st) {
    iron_cuda_text_free(&t);
    return st;
  }
  const int64_t ntiles = (nout + 31) / 32;
  if (nseg > 1) {
    // Column split: one partial per (segment, output of a tile), a counter
    // per tile. Row split: one partial per (output, segment), a counter per
    // output.
    const int64_t nparts = mode == MODE_COLS ? nseg * ntiles * 32 : nseg * nout;
    const int64_t ncount = mode == MODE_COLS ? ntiles : nout;
    for (uint32_t i = 0; i < num; ++i)
      iron_cuda_text_printf(&t, "__device__ %s iron_part%u[%lld];\n",
                            ty[i].comp, i, (long long)nparts);
    iron_cuda_text_printf(&t,
                          "__device__ int iron_phave[%lld];\n"
                          "__device__ unsigned iron_count[%lld];\n",
                          (long long)nparts, (long long)ncount);
  }
  iron_cuda_text_printf(&t,
                        "extern \"C\" __global__ void __launch_bounds__(256) "
                        "%s(",
                        name);
  if (fz) {
    for (uint32_t k = 0; k < fz->num_inputs; ++k)
      iron_cuda_text_printf(&t, "const %s *__restrict__ fin%u, ",
                            fz->input_ctypes[k], k);
  } else {
    for (uint32_t i = 0; i < num; ++i)
      iron_cuda_text_printf(&t, "const %s *__restrict__ in%u, ", ty[i].store,
                            i);
    for (uint32_t i = 0; i < num; ++i)
      iron_cuda_text_printf(&t, "const %s *__restrict__ init%u, ",
                            ty[i].store, i);
  }
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(&t, "%s *__restrict__ out%u%s", ty[i].store, i,
                          i + 1 < num ? ", " : ") {\n");
  if (fz)
    for (uint32_t i = 0; i < num; ++i)
      iron_cuda_text_printf(&t, "const %s *init%u = (const %s *)fin%u;\n",
                            ty[i].store, i, ty[i].store, fz->init_inputs[i]);
  int64_t blocks;
  if (mode == MODE_COLS && nseg > 1) {
    // One block per (tile, segment); 8 slices of the segment per block as
    // in the unsplit tiles, then the segments merge in the tile's last
    // block (see cols_segments).
    int64_t seg = (nred + nseg - 1) / nseg;
    int64_t chunk = (seg + 7) / 8;
    const long long np = (long long)(ntiles * 32);
    emit_cols_shared(&t, num, ty);
    iron_cuda_text_printf(
        &t,
        "__shared__ int sh_last;\n"
        "const int64_t tile = blockIdx.x / %lldLL, sg = blockIdx.x %% %lldLL;\n"
        "const int64_t o = tile * 32 + lane;\n"
        "int have = 0;\n",
        (long long)nseg, (long long)nseg);
    char rows[512];
    snprintf(rows, sizeof(rows),
             "const int64_t s1 = sg * %lldLL + %lldLL < %lldLL ? sg * %lldLL + "
             "%lldLL : %lldLL;\n"
             "const int64_t r0 = sg * %lldLL + (int64_t)ty * %lldLL;\n"
             "const int64_t r1 = r0 + %lldLL < s1 ? r0 + %lldLL : s1;\n",
             (long long)seg, (long long)seg, (long long)nred, (long long)seg,
             (long long)seg, (long long)nred, (long long)seg, (long long)chunk,
             (long long)chunk, (long long)chunk);
    emit_cols_slices(&t, num, ty, &kept, &red, fz, nout, rows, "ty == 0");
    for (uint32_t i = 0; i < num; ++i)
      iron_cuda_text_printf(&t, "iron_part%u[sg * %lldLL + o] = acc%u;\n", i,
                            np, i);
    // Publish the partials before counting this block in.
    iron_cuda_text_printf(
        &t,
        "iron_phave[sg * %lldLL + o] = have;\n"
        "__threadfence();\n}\n"
        "__syncthreads();\n"
        "if (threadIdx.x == 0) sh_last = atomicAdd(&iron_count[tile], 1u) == "
        "%lluu;\n"
        "__syncthreads();\n"
        "if (!sh_last) return;\n"
        "__threadfence();\n"
        // This block never read the other blocks' partials before, so no
        // stale copy of them can sit in its L1. The 8 slices fold 1/8 of
        // the segments each (hundreds of them for batch norm's columns),
        // then merge in slice order as the rows did.
        "have = 0;\n"
        "if (o < %lldLL) {\n"
        "const int64_t q0 = (int64_t)ty * %lldLL;\n"
        "const int64_t q1 = q0 + %lldLL < %lldLL ? q0 + %lldLL : %lldLL;\n",
        np, (unsigned long long)(nseg - 1), (long long)nout,
        (long long)((nseg + 7) / 8), (long long)((nseg + 7) / 8),
        (long long)nseg, (long long)((nseg + 7) / 8), (long long)nseg);
    char at[64];
    snprintf(at, sizeof(at), "(%%s) * %lldLL + o", np);
    emit_merge_parts(&t, num, ty, at, batch_loads(num));
    iron_cuda_text_printf(&t, "}\nsh_have[ty][lane] = have;\n");
    for (uint32_t i = 0; i < num; ++i)
      iron_cuda_text_printf(&t, "sh%u[ty][lane] = acc%u;\n", i, i);
    iron_cuda_text_printf(&t,
                          "__syncthreads();\n"
                          "if (ty == 0 && o < %lldLL) {\nhave = 0;\n"
                          "for (int w = 0; w < 8; ++w) {\n",
                          (long long)nout);
    for (uint32_t i = 0; i < num; ++i)
      iron_cuda_text_printf(&t, "%s z%u = sh%u[w][lane];\n", ty[i].comp, i,
                            i);
    emit_merge(&t, num, ty, "z", "sh_have[w][lane]");
    iron_cuda_text_printf(&t, "}\n");
    emit_finish(&t, num, ty);
    iron_cuda_text_printf(&t, "}\nif (threadIdx.x == 0) iron_count[tile] = 0;\n}\n");
    blocks = ntiles * nseg;
  } else if (mode == MODE_BLOCK && nseg > 1) {
    // One block per (output, segment of its row); see row_segments (which
    // made the segment a multiple of 1024 elements).
    int64_t seg = (nred + nseg - 1) / nseg;
    seg = (seg + seg_align(stage) - 1) / seg_align(stage) * seg_align(stage);
    iron_cuda_text_printf(
        &t,
        "const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
        "__shared__ int sh_have[8];\n__shared__ int sh_last;\n");
    for (uint32_t i = 0; i < num; ++i)
      iron_cuda_text_printf(&t, "__shared__ %s sh%u[8];\n", ty[i].comp, i);
    iron_cuda_text_printf(
        &t,
        "const int64_t o = blockIdx.x / %lldLL, sg = blockIdx.x %% %lldLL;\n"
        "int64_t base = 0;\n",
        (long long)nseg, (long long)nseg);
    emit_offset(&t, &kept, "o", "base");
    iron_cuda_text_printf(&t, "int have = 0;\n");
    for (uint32_t i = 0; i < num; ++i)
      iron_cuda_text_printf(&t, "%s acc%u = %s{};\n", ty[i].comp, i,
                            ty[i].comp);
    iron_cuda_text_printf(
        &t,
        "const int64_t s0 = sg * %lldLL;\n"
        "const int64_t s1 = s0 + %lldLL < %lldLL ? s0 + %lldLL : %lldLL;\n",
        (long long)seg, (long long)seg, (long long)nred, (long long)seg,
        (long long)nred);
    if (ordered && stage) {
      int64_t chunk = (seg + 255) / 256;
      char wf[96];
      snprintf(wf, sizeof(wf), "s0 + (int64_t)(threadIdx.x & ~31) * %lldLL",
               (long long)chunk);
      emit_staged(&t, num, ty, &red, fz, wf, chunk, "s1", stage);
    } else if (ordered) {
      int64_t chunk = (seg + 255) / 256;
      iron_cuda_text_printf(
          &t,
          "const int64_t r0 = s0 + (int64_t)threadIdx.x * %lldLL;\n"
          "const int64_t r1 = r0 + %lldLL < s1 ? r0 + %lldLL : s1;\n"
          "for (int64_t r = r0; r < r1; ++r) {\n",
          (long long)chunk, (long long)chunk, (long long)chunk);
      emit_load_fold(&t, num, ty, &red, true, fz);
      iron_cuda_text_printf(&t, "}\n");
    } else {
      // A contiguous row of one plain operand is read 16 bytes at a time
      // (when its address allows; the check is uniform over the block).
      const size_t esize = iron_dtype_size(dtypes[0]);
      const int vec = esize && esize <= 8 ? (int)(16 / esize) : 1;
      const bool vector = num == 1 && !fz && !ty[0].is_narrow && vec > 1 &&
                          (red.n == 0 || (red.n == 1 && red.strides[0] == 1)) &&
                          nred % vec == 0 && seg % vec == 0 &&
                          iron_cuda_vectorize_enabled();
      if (vector) {
        iron_cuda_text_printf(
            &t,
            "struct __align__(16) iron_vec_ { %s v[%d]; };\n"
            "if ((((unsigned long long)(in0 + base)) & 15ull) == 0) {\n"
            "const iron_vec_ *vp = (const iron_vec_ *)(in0 + base);\n"
            "#pragma unroll 2\n"
            "for (int64_t q = s0 / %d + threadIdx.x; q < s1 / %d; q += 256) "
            "{\n"
            "const iron_vec_ w_ = vp[q];\n"
            "#pragma unroll\n"
            "for (int k = 0; k < %d; ++k) {\n"
            "%s x0 = %s(w_.v[k]);\n"
            "if (have) ",
            ty[0].store, vec, vec, vec, vec, ty[0].comp, ty[0].ld);
        emit_combine(&t, 1, ty, "acc", "x");
        iron_cuda_text_printf(&t,
                              "else { acc0 = x0; have = 1; }\n}\n}\n"
                              "} else {\n");
      }
      // Several loads in flight per thread (emit_fold_range).
      emit_fold_range(&t, num, ty, &red, fz, "s0 + threadIdx.x", "s1", 256,
                      batch_loads(num));
      if (vector) iron_cuda_text_printf(&t, "}\n");
    }
    emit_block_tree(&t, num, ty, ordered);
    iron_cuda_text_printf(&t, "if (threadIdx.x == 0) {\n");
    for (uint32_t i = 0; i < num; ++i)
      iron_cuda_text_printf(&t, "iron_part%u[o * %lldLL + sg] = acc%u;\n", i,
                            (long long)nseg, i);
    // Publish the partial before counting this block in; the last block
    // of the output never read the other partials before, so no stale copy
    // of them sits in its L1.
    iron_cuda_text_printf(
        &t,
        "iron_phave[o * %lldLL + sg] = have;\n"
        "__threadfence();\n"
        "sh_last = atomicAdd(&iron_count[o], 1u) == %lluu;\n}\n"
        "__syncthreads();\n"
        "if (!sh_last) return;\n"
        "__threadfence();\n",
        (long long)nseg, (unsigned long long)(nseg - 1));
    const int64_t pc = (nseg + 255) / 256;
    iron_cuda_text_printf(
        &t,
        "have = 0;\n"
        "{ const int64_t q0 = (int64_t)threadIdx.x * %lldLL;\n"
        "const int64_t q1 = q0 + %lldLL < %lldLL ? q0 + %lldLL : %lldLL;\n",
        (long long)pc, (long long)pc, (long long)nseg, (long long)pc,
        (long long)nseg);
    char at[64];
    snprintf(at, sizeof(at), "o * %lldLL + (%%s)", (long long)nseg);
    emit_merge_parts(&t, num, ty, at, batch_loads(num));
    iron_cuda_text_printf(&t, "}\n");
    // The segments merge in order whatever the body.
    emit_block_tree(&t, num, ty, true);
    iron_cuda_text_printf(&t, "if (threadIdx.x == 0) {\n");
    emit_finish(&t, num, ty);
    iron_cuda_text_printf(&t, "iron_count[o] = 0;\n}\n}\n");
    blocks = nout * nseg;
  } else if (mode == MODE_COLS) {
    // Column tiles: 32 consecutive outputs (lanes; the innermost kept dim
    // has stride 1, so loads coalesce) x 8 slices of the reduced elements,
    // each slice a contiguous chunk; slices merge in order.
    int64_t chunk = (nred + 7) / 8;
    emit_cols_shared(&t, num, ty);
    iron_cuda_text_printf(
        &t,
        "for (int64_t tile = blockIdx.x; tile < %lldLL; tile += gridDim.x) "
        "{\n"
        "const int64_t o = tile * 32 + lane;\n"
        "int have = 0;\n",
        (long long)((nout + 31) / 32));
    char rows[256], cond[64];
    snprintf(rows, sizeof(rows),
             "const int64_t r0 = (int64_t)ty * %lldLL;\n"
             "const int64_t r1 = r0 + %lldLL < %lldLL ? r0 + %lldLL : %lldLL;\n",
             (long long)chunk, (long long)chunk, (long long)nred,
             (long long)chunk, (long long)nred);
    snprintf(cond, sizeof(cond), "ty == 0 && o < %lldLL", (long long)nout);
    emit_cols_slices(&t, num, ty, &kept, &red, fz, nout, rows, cond);
    emit_finish(&t, num, ty);
    iron_cuda_text_printf(&t, "}\n__syncthreads();\n}\n}\n");
    blocks = (nout + 31) / 32;
  } else if (mode == MODE_THREAD) {
    iron_cuda_text_printf(
        &t,
        "for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; "
        "o < %lldLL; o += (int64_t)gridDim.x * blockDim.x) {\n"
        "int64_t base = 0;\n",
        (long long)nout);
    emit_offset(&t, &kept, "o", "base");
    for (uint32_t i = 0; i < num; ++i)
      iron_cuda_text_printf(&t, "%s acc%u = %s(init%u[0]);\n", ty[i].comp, i,
                            ty[i].ld, i);
    iron_cuda_text_printf(&t, "for (int64_t r = 0; r < %lldLL; ++r) {\n",
                          (long long)nred);
    emit_load_fold(&t, num, ty, &red, false, fz);
    iron_cuda_text_printf(&t, "}\n");
    for (uint32_t i = 0; i < num; ++i)
      iron_cuda_text_printf(&t, "out%u[o] = %s(acc%u);\n", i, ty[i].st, i);
    iron_cuda_text_printf(&t, "}\n}\n");
    blocks = (nout + 255) / 256;
  } else {
    bool warp = mode == MODE_WARP;
    if (warp)
      iron_cuda_text_printf(
          &t,
          "const int lane = threadIdx.x & 31;\n"
          "for (int64_t o = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) "
          ">> 5; o < %lldLL; o += ((int64_t)gridDim.x * blockDim.x) >> 5) {\n",
          (long long)nout);
    else
      iron_cuda_text_printf(
          &t,
          "const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
          "__shared__ int sh_have[8];\n");
    if (!warp) {
      for (uint32_t i = 0; i < num; ++i)
        iron_cuda_text_printf(&t, "__shared__ %s sh%u[8];\n", ty[i].comp, i);
      iron_cuda_text_printf(&t,
                            "for (int64_t o = blockIdx.x; o < %lldLL; o += "
                            "gridDim.x) {\n",
                            (long long)nout);
    }
    iron_cuda_text_printf(&t, "int64_t base = 0;\n");
    emit_offset(&t, &kept, "o", "base");
    iron_cuda_text_printf(&t, "int have = 0;\n");
    for (uint32_t i = 0; i < num; ++i)
      iron_cuda_text_printf(&t, "%s acc%u = %s{};\n", ty[i].comp, i,
                            ty[i].comp);
    int nth = warp ? 32 : 256;
    if (ordered && stage) {
      int64_t chunk = (nred + nth - 1) / nth;
      char wf[96], en[32];
      snprintf(wf, sizeof(wf), "%s",
               warp ? "0" : "(int64_t)(threadIdx.x & ~31)");
      if (!warp)
        snprintf(wf, sizeof(wf), "(int64_t)(threadIdx.x & ~31) * %lldLL",
                 (long long)chunk);
      snprintf(en, sizeof(en), "%lldLL", (long long)nred);
      emit_staged(&t, num, ty, &red, fz, wf, chunk, en, stage);
    } else if (ordered) {
      // Each thread folds one contiguous chunk, in order.
      int64_t chunk = (nred + nth - 1) / nth;
      iron_cuda_text_printf(
          &t,
          "const int64_t r0 = (int64_t)%s * %lldLL;\n"
          "const int64_t r1 = r0 + %lldLL < %lldLL ? r0 + %lldLL : %lldLL;\n"
          "for (int64_t r = r0; r < r1; ++r) {\n",
          warp ? "lane" : "threadIdx.x", (long long)chunk, (long long)chunk,
          (long long)nred, (long long)chunk, (long long)nred);
      emit_load_fold(&t, num, ty, &red, true, fz);
      iron_cuda_text_printf(&t, "}\n");
    } else {
      char from[32], to[32];
      snprintf(from, sizeof(from), "%s", warp ? "lane" : "threadIdx.x");
      snprintf(to, sizeof(to), "%lldLL", (long long)nred);
      emit_fold_range(&t, num, ty, &red, fz, from, to, nth, batch_loads(num));
    }
    // Warp tree. Ordered: pairs of neighbouring chunks merge first (d = 1,
    // 2, 4, ...), so lane 0 folds the chunks left to right. Otherwise lane
    // l takes lane l + d's partial (d = 16, 8, ...).
    iron_cuda_text_printf(&t, "%s",
                          ordered ? "for (int d = 1; d < 32; d <<= 1) {\n"
                                  : "for (int d = 16; d >= 1; d >>= 1) {\n");
    iron_cuda_text_printf(&t,
                          "int yh = __shfl_down_sync(0xffffffffu, have, d);\n");
    for (uint32_t i = 0; i < num; ++i)
      iron_cuda_text_printf(&t, "%s y%u = iron_shfl(acc%u, d);\n", ty[i].comp,
                            i, i);
    iron_cuda_text_printf(&t, "%s",
                          ordered ? "if ((lane & (2 * d - 1)) == 0 && lane + d "
                                    "< 32) "
                                  : "if (lane + d < 32) ");
    emit_merge(&t, num, ty, "y", "yh");
    iron_cuda_text_printf(&t, "}\n");
    if (warp) {
      iron_cuda_text_printf(&t, "if (lane == 0) {\n");
      emit_finish(&t, num, ty);
      iron_cuda_text_printf(&t, "}\n}\n}\n");
      blocks = (nout + 7) / 8;
    } else {
      iron_cuda_text_printf(&t, "if (lane == 0) { sh_have[warp] = have; ");
      for (uint32_t i = 0; i < num; ++i)
        iron_cuda_text_printf(&t, "sh%u[warp] = acc%u; ", i, i);
      iron_cuda_text_printf(&t,
                            "}\n__syncthreads();\n"
                            "if (threadIdx.x == 0) {\nhave = 0;\n"
                            "for (int w = 0; w < 8; ++w) {\n");
      for (uint32_t i = 0; i < num; ++i)
        iron_cuda_text_printf(&t, "%s z%u = sh%u[w];\n", ty[i].comp, i, i);
      emit_merge(&t, num, ty, "z", "sh_have[w]");
      iron_cuda_text_printf(&t, "}\n");
      emit_finish(&t, num, ty);
      iron_cuda_text_printf(&t, "}\n__syncthreads();\n}\n}\n");
      blocks = nout;
    }
  }
  if (blocks < 1) blocks = 1;
  if (blocks > (1 << 20)) blocks = 1 << 20;
  *out_grid = (unsigned)blocks;
  *out_block = 256;
  return iron_cuda_text_finish(&t, out_src);
}
