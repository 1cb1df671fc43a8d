// The row fusion kernel's text (see gen/row.h for the design and the
// summation order).
//
// Thread t of a row owns slots t * per_thread .. + per_thread - 1 of the
// row's summation tree: slot s is lane (s & 7) of leaf (s >> 3). Leaves are
// the nodes of the host's halving recursion, in a virtual perfect tree of
// `depth` levels: a node of at most 256 elements stops splitting and stands
// at its leftmost descendant; the other descendants are empty. Combining
// the slots in a perfect binary tree in slot order, skipping empty ones,
// is then exactly the host's recursion. Each thread folds its slots, the
// slots of a thread combine pairwise in registers, the threads of a warp
// by xor shuffles (every lane ends with the same value: each pair combines
// as (lower, upper)), the warps of a row through shared memory, read by
// every thread in tree order.
#include "device/cuda/gen/row.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cuda/gen/prelude.h"
#include "device/cuda/gen/scalar.h"
#include "device/cuda/gen/source.h"
#include "device/cuda/gen/text.h"
#include "device/cuda/gen/types.h"

void iron_cuda_row_layout(int64_t n, unsigned max_tpr,
                          iron_cuda_row_layout_t *out) {
  memset(out, 0, sizeof(*out));
  if (max_tpr == 0 || max_tpr > 1024) max_tpr = 1024;
  if (n < 16) {
    out->sequential = true;
    out->slots = 1;
    out->per_slot = (unsigned)(n > 0 ? n : 1);
  } else {
    int64_t mx = n;  // the largest node at each depth: ceil(n / 2^depth)
    bool shallow = false;  // a leaf of 256 above the deepest level
    while (mx > 256) {
      if (n >> out->depth <= 256) shallow = true;
      mx = (mx + 1) / 2;
      out->depth++;
    }
    int64_t leaf = shallow && mx < 256 ? 256 : mx;
    out->per_slot = (unsigned)((leaf + 7) / 8);
    out->slots = (int64_t)8 << out->depth;
  }
  int64_t tpr = out->slots < (int64_t)max_tpr ? out->slots : max_tpr;
  out->tpr = (unsigned)tpr;
  out->per_thread = (unsigned)(out->slots / tpr);
  if (tpr >= 32) {
    out->block = (unsigned)tpr;
    out->rows_per_block = 1;
  } else {
    out->block = 256;
    out->rows_per_block = (unsigned)(256 / tpr);
  }
}

// Compute -> storage (gen/scalar.h) and storage -> compute expressions.
static void store_text(iron_dtype_t dt, const char *v, char *buf, size_t cap) {
  iron_cuda_store_expr(dt, v, buf, cap);
}
// The store of an output of the element-wise device functions (rounded
// already: gen/scalar.h), not of a reduce's accumulator.
static void store_rounded_text(iron_dtype_t dt, const char *v, char *buf,
                               size_t cap) {
  iron_cuda_store_rounded_expr(dt, v, buf, cap);
}
// The exact load (iron_cuda_type.ld, not ld_fast): the host's f16 -> f32
// keeps NaN payloads, which a reduce may return.
static void load_text(iron_dtype_t dt, const char *v, char *buf, size_t cap) {
  const char *ld = iron_cuda_type(dt).ld;
  if (ld && ld[0])
    snprintf(buf, cap, "%s(%s)", ld, v);
  else
    snprintf(buf, cap, "%s", v);
}

// The accumulation type of a reduce's dtype (the host's TA).
static const char *acc_type(iron_dtype_t dt) {
  return dt == IRON_DTYPE_F64 ? "double" : "float";
}

static const char *op_fn(iron_op_kind_t k) {
  switch (k) {
    case IRON_OP_ADD: return "irow_add";
    case IRON_OP_MULTIPLY: return "irow_mul";
    case IRON_OP_MAXIMUM: return "iron_zmax";  // prelude: flushes operands
    case IRON_OP_MINIMUM: return "iron_zmin";
    default: return NULL;
  }
}

typedef struct gen {
  const iron_cuda_row_plan_t *p;
  iron_cuda_row_layout_t L;
  iron_cuda_text_t *s;
  bool uniform;           // every slot has per_slot elements
  int *cache;             // per view: CACHE_*
  bool any_row_cache;     // a per-row cache (reloaded for every row)
  const bool *loop_uses;  // per view: read by the element loop emitted now
  bool any_strided;
  int64_t padn;           // cached row length, padded (pad())
  bool aligned;           // no slot crosses a 256-element boundary
  int *keep_alias;        // per kept value: the view whose buffer it
                          // takes over, or -1 (its own buffer)
  bool row_sync;          // the row's shared buffers are refilled per row
} gen_t;

// Where an element view's values come from in the element loops: memory,
// a shared-memory copy of the row (loaded once per row, every pass reads
// it), or a shared-memory copy loaded once per block (a view that is the
// same for every row: gamma of a layer norm).
enum { CACHE_NONE = 0, CACHE_ROW, CACHE_BLOCK };

#define P(...) iron_cuda_text_printf(g->s, __VA_ARGS__)

static const char *st_of(iron_dtype_t dt) { return iron_cuda_ctype(dt); }

// Emits the call `name(&xv0.., &pv0.., idx, o0..)` with outputs declared
// as `C <pre><k>`.
static void emit_call(gen_t *g, const iron_cuda_row_fn_t *fn, const char *idx,
                      const char *pre) {
  const iron_cuda_row_plan_t *p = g->p;
  for (uint32_t k = 0; k < fn->num_outputs; ++k)
    P("%s %s%u;\n", iron_cuda_type(fn->out_dtypes[k]).comp, pre, k);
  P("%s(", fn->name);
  for (uint32_t v = 0; v < p->num_views; ++v) P("&xv%u, ", v);
  for (uint32_t q = 0; q < p->num_slots; ++q) P("&pv%u, ", q);
  for (uint32_t q = 0; q < p->num_keeps; ++q) P("&xk%u, ", q);
  P("(long long)(%s)", idx);
  for (uint32_t k = 0; k < fn->num_outputs; ++k) P(", %s%u", pre, k);
  P(");\n");
}

// Whether STRIDED view w steps through the row's elements in order (a
// vector along the reduced dims: gamma of a layer norm): element e is at
// its row offset + e.
static bool row_contiguous(const iron_row_shape_t *rs,
                           const iron_cuda_row_view_t *w) {
  int64_t s = 1;
  for (int32_t d = rs->rank - 1; d >= 0; --d) {
    if (!rs->reduced[d] || rs->dims[d] == 1) continue;
    if (w->strides[d] != s) return false;
    s *= rs->dims[d];
  }
  return true;
}

// Whether STRIDED view w is the same for every row (no kept-dim stride).
static bool row_invariant(const iron_row_shape_t *rs,
                          const iron_cuda_row_view_t *w) {
  if (w->kind != IRON_CUDA_ROW_VIEW_STRIDED) return false;
  for (int32_t d = 0; d < rs->rank; ++d)
    if (!rs->reduced[d] && rs->dims[d] != 1 && w->strides[d]) return false;
  return true;
}

// The memory address of view v's element `e` (an expression) in the
// current row; declares the element's coordinates first when the view
// needs them.
static void view_addr(gen_t *g, uint32_t v, const char *e, char *buf,
                      size_t cap) {
  const iron_cuda_row_view_t *w = &g->p->views[v];
  const iron_row_shape_t *rs = &g->p->rs;
  switch (w->kind) {
    case IRON_CUDA_ROW_VIEW_FULL:
      // In an element loop, from the slot's base.
      if (strcmp(e, "e") == 0)
        snprintf(buf, cap, g->L.sequential ? "gb_ + i" : "gb_ + 8 * i");
      else
        snprintf(buf, cap, "rbase + %s", e);
      return;
    case IRON_CUDA_ROW_VIEW_ROW: snprintf(buf, cap, "row"); return;
    case IRON_CUDA_ROW_VIEW_ONE: snprintf(buf, cap, "0"); return;
    default: break;
  }
  if (!w->elem) {
    snprintf(buf, cap, "ro%u", v);
    return;
  }
  if (row_contiguous(rs, w)) {
    snprintf(buf, cap, "ro%u + %s", v, e);
    return;
  }
  // The element's coordinates along the reduced dims.
  P("long long eo%u = 0;\n{ int r_ = %s;\n", v, e);
  for (int32_t d = rs->rank - 1; d >= 0; --d) {
    if (!rs->reduced[d] || rs->dims[d] == 1) continue;
    P("{ const int c_ = r_ %% %lld; r_ /= %lld; eo%u += (long long)c_ * "
      "%lldLL; }\n",
      (long long)rs->dims[d], (long long)rs->dims[d], v,
      (long long)w->strides[d]);
  }
  P("}\n");
  snprintf(buf, cap, "ro%u + eo%u", v, v);
}

// The shared-memory index of element `e` of a cached row: 8 elements of
// padding per 256, so that the 4 leaves of 256 elements a warp reads at
// once fall in different banks.
static void pad_text(const char *e, char *buf, size_t cap) {
  snprintf(buf, cap, "((%s) + (((%s) >> 8) << 3))", e, e);
}

// Whether 16-byte vectors of elements of es bytes can move a row between
// global memory and its shared buffer: every vector's shared index must
// be a whole number of vectors. A row buffer starts at rl * padn (a block
// cache at 0) and pads 8 elements per 256, so for 1-byte elements only
// rows of at most 256 whose padded length is a multiple of 16 qualify (a
// misaligned vector store is a fault on the GPU).
static bool shared_vectors(const gen_t *g, size_t es, bool per_row) {
  int64_t vec = es ? 16 / (int64_t)es : 0;
  if (vec < 2 || g->p->rs.n % vec != 0) return false;
  if (per_row && g->padn % vec != 0) return false;
  return g->p->rs.n <= 256 || 8 % vec == 0;
}

// The index of the loop's element (e, slot base sb_) in a row buffer.
static void row_index(const gen_t *g, char *buf, size_t cap) {
  if (g->aligned) {
    snprintf(buf, cap, g->L.sequential ? "sb_ + i" : "sb_ + 8 * i");
    return;
  }
  char pe[64];
  pad_text("e", pe, sizeof(pe));
  snprintf(buf, cap, "rl * %lld + %s", (long long)g->padn, pe);
}

// The shared buffer holding kept value f (its name).
static void keep_buf(const gen_t *g, uint32_t f, char *buf, size_t cap) {
  if (g->keep_alias[f] >= 0)
    snprintf(buf, cap, "shr%d", g->keep_alias[f]);
  else
    snprintf(buf, cap, "shk%u", f);
}

// The kept value's elements in that buffer. A cached row it reuses may
// hold another type of the same size (an int32 row, a float kept value):
// the buffer is then read and written through the kept value's type, bits
// as they are (an assignment would convert the value).
static void keep_elems(const gen_t *g, uint32_t f, char *buf, size_t cap) {
  int a = g->keep_alias[f];
  const char *ks = st_of(g->p->keeps[f].dtype);
  if (a >= 0 && strcmp(ks, st_of(g->p->views[a].dtype)) != 0)
    snprintf(buf, cap, "((%s *)shr%d)", ks, a);
  else
    keep_buf(g, f, buf, cap);
}

static bool loads(const gen_t *g, uint32_t v) {
  return g->p->views[v].elem && (!g->loop_uses || g->loop_uses[v]);
}

// Inside an element loop (e declared): the element's value of every elem
// view the loop reads.
static void emit_elem_loads(gen_t *g) {
  const iron_cuda_row_plan_t *p = g->p;
  for (uint32_t v = 0; v < p->num_views; ++v) {
    if (!loads(g, v)) continue;
    char pe[64], ri[96];
    pad_text("e", pe, sizeof(pe));
    row_index(g, ri, sizeof(ri));
    if (g->cache[v] == CACHE_ROW) {
      P("xv%u = shr%u[%s];\n", v, v, ri);
    } else if (g->cache[v] == CACHE_BLOCK) {
      P("xv%u = shb%u[%s];\n", v, v, pe);
    } else {
      char a[96];
      view_addr(g, v, "e", a, sizeof(a));
      P("xv%u = in%u[%s];\n", v, p->views[v].input, a);
    }
  }
}

// Opens the loop over this thread's elements: q_ (slot, unrolled), i
// (element of the slot), e (element of the row). Close with
// emit_elem_close.
static void emit_elem_open(gen_t *g) {
  P("#pragma unroll\nfor (int q_ = 0; q_ < %u; ++q_) {\n", g->L.per_thread);
  if (g->aligned)
    P("const int sb_ = rl * %lld + st[q_] + ((st[q_] >> 8) << 3); "
      "(void)sb_;\n",
      (long long)g->padn);
  P("const long long gb_ = rbase + st[q_]; (void)gb_;\n");
  P("#pragma unroll 4\nfor (int i = 0; i < %u; ++i) {\n", g->L.per_slot);
  if (g->uniform)
    P("if (!valid) continue;\n");
  else
    P("if (!valid || i >= cnt[q_]) continue;\n");
  if (g->L.sequential)
    P("const int e = i;\n");
  else
    P("const int e = st[q_] + 8 * i;\n");
}

static void emit_elem_close(gen_t *g) {
  (void)g;
  P("}\n}\n");
}

// Inside an element loop: the kept values function fn reads.
static void emit_keep_loads(gen_t *g, const iron_cuda_row_fn_t *fn) {
  if (!fn->uses_keep) return;
  for (uint32_t f = 0; f < g->p->num_keeps; ++f) {
    if (!fn->uses_keep[f]) continue;
    char b[64], ri[96];
    keep_elems(g, f, b, sizeof(b));
    row_index(g, ri, sizeof(ri));
    P("xk%u = %s[%s];\n", f, b, ri);
  }
}

// Inside pass k's loop, after its function: the kept values it computes.
static void emit_keep_stores(gen_t *g, uint32_t k) {
  const iron_cuda_row_plan_t *p = g->p;
  for (uint32_t f = 0; f < p->num_keeps; ++f) {
    const iron_cuda_row_keep_t *kp = &p->keeps[f];
    if (kp->pass != k) continue;
    char o[16], st[64], b[64], ri[96];
    snprintf(o, sizeof(o), "o%u", kp->fn_output);
    store_rounded_text(kp->dtype, o, st, sizeof(st));
    keep_elems(g, f, b, sizeof(b));
    row_index(g, ri, sizeof(ri));
    P("xk%u = %s; %s[%s] = xk%u;\n", f, st, b, ri, f);
  }
}

// Combines the partials ar<r>[q] of reduce r (with hr<r>[q]) into v<r>.
static void emit_combine_thread(gen_t *g, uint32_t r) {
  const iron_cuda_row_reduce_t *red = &g->p->reduces[r];
  const char *A = acc_type(red->dtype);
  const char *f = op_fn(red->body);
  unsigned pt = g->L.per_thread;
  for (unsigned w = 1; w < pt; w *= 2)
    for (unsigned q = 0; q + w < pt; q += 2 * w)
      P("IROW_MERGE(%s, ar%u[%u], hr%u[%u], ar%u[%u], hr%u[%u]);\n", f, r,
        q, r, q, r, q + w, r, q + w);
  P("%s v%u = ar%u[0]; int h%u = hr%u[0];\n", A, r, r, r, r);
}

static void emit_combine_lanes(gen_t *g, uint32_t r) {
  const iron_cuda_row_reduce_t *red = &g->p->reduces[r];
  const char *A = acc_type(red->dtype);
  const char *f = op_fn(red->body);
  unsigned lanes = g->L.tpr < 32 ? g->L.tpr : 32;
  if (lanes < 2) return;
  P("#pragma unroll\n"
    "for (int d = 1; d < %u; d <<= 1) {\n"
    "%s y = __shfl_xor_sync(0xffffffffu, v%u, d);\n"
    "int yh = __shfl_xor_sync(0xffffffffu, h%u, d);\n"
    "if (lane & d) { IROW_MERGE(%s, y, yh, v%u, h%u); v%u = y; h%u = yh; }\n"
    "else IROW_MERGE(%s, v%u, h%u, y, yh);\n"
    "}\n",
    lanes, A, r, r, f, r, r, r, r, f, r, r);
}

// Reduces of pass k: their results, kept in their slots.
static iron_status_t emit_pass(gen_t *g, uint32_t k) {
  const iron_cuda_row_plan_t *p = g->p;
  const iron_cuda_row_fn_t *fn = &p->elem_fns[k];
  unsigned pt = g->L.per_thread;
  P("// pass %u\n{\n", k);
  for (uint32_t r = 0; r < p->num_reduces; ++r) {
    if (p->reduces[r].pass != k) continue;
    P("%s ar%u[%u] = {}; int hr%u[%u];\n", acc_type(p->reduces[r].dtype), r,
      pt, r, pt);
    P("#pragma unroll\nfor (int q_ = 0; q_ < %u; ++q_) hr%u[q_] = valid && "
      "cnt[q_] > 0;\n",
      pt, r);
  }
  bool *use = calloc(p->num_views + 1, sizeof(bool));
  if (!use) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (row kernel)");
  for (uint32_t v = 0; v < p->num_views; ++v)
    use[v] = fn->name && (!fn->uses || fn->uses[v]);
  for (uint32_t r = 0; r < p->num_reduces; ++r)
    if (p->reduces[r].pass == k && p->reduces[r].operand_view >= 0)
      use[p->reduces[r].operand_view] = true;
  emit_elem_open(g);
  g->loop_uses = use;
  emit_elem_loads(g);
  g->loop_uses = NULL;
  free(use);
  if (fn->name) {
    emit_keep_loads(g, fn);
    emit_call(g, fn, "e", "o");
    emit_keep_stores(g, k);
  }
  for (uint32_t r = 0; r < p->num_reduces; ++r) {
    const iron_cuda_row_reduce_t *red = &p->reduces[r];
    if (red->pass != k) continue;
    const char *A = acc_type(red->dtype);
    char x[64];
    if (red->operand_view >= 0) {
      char xv[16];
      snprintf(xv, sizeof(xv), "xv%d", red->operand_view);
      load_text(p->views[red->operand_view].dtype, xv, x, sizeof(x));
    } else
      snprintf(x, sizeof(x), "o%u", red->fn_output);
    P("if (i == 0) ar%u[q_] = (%s)%s; else ar%u[q_] = %s(ar%u[q_], "
      "(%s)%s);\n",
      r, A, x, r, op_fn(red->body), r, A, x);
  }
  emit_elem_close(g);
  bool any_cross = g->L.tpr > 32;
  unsigned nw = g->L.tpr / 32;
  for (uint32_t r = 0; r < p->num_reduces; ++r) {
    if (p->reduces[r].pass != k) continue;
    emit_combine_thread(g, r);
    emit_combine_lanes(g, r);
    if (any_cross) {
      const char *A = acc_type(p->reduces[r].dtype);
      P("__shared__ %s shv%u[%u]; __shared__ int shh%u[%u];\n"
        "if (lane == 0) { shv%u[warp] = v%u; shh%u[warp] = h%u; }\n",
        A, r, nw, r, nw, r, r, r, r);
    }
  }
  if (any_cross) {
    P("__syncthreads();\n");
    for (uint32_t r = 0; r < p->num_reduces; ++r) {
      const iron_cuda_row_reduce_t *red = &p->reduces[r];
      if (red->pass != k) continue;
      const char *A = acc_type(red->dtype);
      const char *f = op_fn(red->body);
      P("{ %s wv[%u]; int wh[%u];\n"
        "#pragma unroll\nfor (int w = 0; w < %u; ++w) { wv[w] = shv%u[w]; "
        "wh[w] = shh%u[w]; }\n",
        A, nw, nw, nw, r, r);
      for (unsigned w = 1; w < nw; w *= 2)
        for (unsigned q = 0; q + w < nw; q += 2 * w)
          P("IROW_MERGE(%s, wv[%u], wh[%u], wv[%u], wh[%u]);\n", f, q, q,
            q + w, q + w);
      P("v%u = wv[0]; h%u = wh[0]; }\n", r, r);
    }
    P("__syncthreads();\n");
  }
  // The result: init first, as the host's finish.
  for (uint32_t r = 0; r < p->num_reduces; ++r) {
    const iron_cuda_row_reduce_t *red = &p->reduces[r];
    if (red->pass != k) continue;
    const char *A = acc_type(red->dtype);
    char val[160], st[256], xv[16], init[64];
    snprintf(xv, sizeof(xv), "xv%u", red->init_view);
    load_text(p->views[red->init_view].dtype, xv, init, sizeof(init));
    snprintf(val, sizeof(val), "%s((%s)%s, v%u)", op_fn(red->body), A, init,
             r);
    store_text(red->dtype, val, st, sizeof(st));
    P("pv%u = %s;\n", red->slot, st);
  }
  P("}\n");
  return IRON_OK;
}

// R_level: per-row values of this level, and the outputs among them and
// the reduces' results of this level.
static void emit_row_values(gen_t *g, uint32_t level) {
  const iron_cuda_row_plan_t *p = g->p;
  const iron_cuda_row_fn_t *fn = &p->row_fns[level];
  if (fn->name && fn->num_outputs) {
    P("{\n");
    emit_call(g, fn, "0", "o");
    for (uint32_t k = 0; k < fn->num_outputs; ++k) {
      char o[16], st[64];
      snprintf(o, sizeof(o), "o%u", k);
      store_rounded_text(fn->out_dtypes[k], o, st, sizeof(st));
      P("pv%u = %s;\n", fn->dest[k], st);
    }
    P("}\n");
  }
  for (uint32_t q = 0; q < p->num_slots; ++q) {
    const iron_cuda_row_slot_t *sl = &p->slots[q];
    if (sl->level != level || sl->output < 0) continue;
    P("if (t == 0 && valid) out%d[row] = pv%u;\n", sl->output, q);
  }
}

// Staged results (IRON_CUDA_ROW_STAGE_OUT): a thread's elements of a row
// are 8 apart (the summation tree's lanes), so its direct stores are 2 or
// 4 bytes wide and a warp's store covers 4 pieces of 16 or 32 bytes. When
// a shared row buffer of the output's element size is there (a cached
// input row or a kept value; the last loop reads each of them only at the
// thread's own element, before it writes it), the last loop writes its
// results there instead, and the row's threads then copy the row out with
// 16-byte stores, as emit_cache_fill reads it in. Returns the buffer's
// name, or false.
static bool stage_buffer(gen_t *g, uint32_t k, char taken[][32],
                         uint32_t ntaken, char *buf, size_t cap) {
  const iron_cuda_row_plan_t *p = g->p;
  const char *e = getenv("IRON_CUDA_ROW_STAGE_OUT");  // compile time only
  if ((e && strcmp(e, "0") == 0) || !g->aligned || g->L.sequential ||
      !g->row_sync)
    return false;
  size_t es = iron_dtype_size(p->final_fn.out_dtypes[k]);
  if (es == 0 || es > 8 || !shared_vectors(g, es, true)) return false;
  for (uint32_t c = 0; c < p->num_views + p->num_keeps; ++c) {
    char nm[32];
    if (c < p->num_views) {
      if (g->cache[c] != CACHE_ROW || iron_dtype_size(p->views[c].dtype) != es)
        continue;
      snprintf(nm, sizeof(nm), "shr%u", c);
    } else {
      uint32_t f = c - p->num_views;
      if (iron_dtype_size(p->keeps[f].dtype) != es) continue;
      keep_buf(g, f, nm, sizeof(nm));
    }
    bool used = false;
    for (uint32_t h = 0; h < ntaken; ++h) used = used || !strcmp(taken[h], nm);
    if (used) continue;
    snprintf(buf, cap, "%s", nm);
    return true;
  }
  return false;
}

static void emit_final(gen_t *g) {
  const iron_cuda_row_plan_t *p = g->p;
  const iron_cuda_row_fn_t *fn = &p->final_fn;
  if (!fn->name || !fn->num_outputs) return;
  char stage[16][32];
  bool staged[16];
  uint32_t ntaken = 0;
  for (uint32_t k = 0; k < fn->num_outputs && k < 16; ++k) {
    staged[k] = stage_buffer(g, k, stage, ntaken, stage[ntaken],
                             sizeof(stage[0]));
    if (staged[k]) ntaken++;
  }
  P("// results\n{\n");
  emit_elem_open(g);
  g->loop_uses = fn->uses;
  emit_elem_loads(g);
  g->loop_uses = NULL;
  emit_keep_loads(g, fn);
  emit_call(g, fn, "e", "o");
  uint32_t si = 0;
  for (uint32_t k = 0; k < fn->num_outputs; ++k) {
    char o[16], st[64];
    snprintf(o, sizeof(o), "o%u", k);
    store_rounded_text(fn->out_dtypes[k], o, st, sizeof(st));
    if (k < 16 && staged[k]) {
      char ri[96];
      row_index(g, ri, sizeof(ri));
      P("((%s *)%s)[%s] = %s;\n", st_of(fn->out_dtypes[k]), stage[si++], ri,
        st);
      continue;
    }
    P("out%u[%s] = %s;\n", fn->dest[k],
      g->L.sequential ? "gb_ + i" : "gb_ + 8 * i", st);
  }
  emit_elem_close(g);
  if (ntaken) {
    // Every thread's results are in; the row's threads copy them out.
    P("__syncthreads();\nif (valid) {\n");
    si = 0;
    for (uint32_t k = 0; k < fn->num_outputs; ++k) {
      if (k >= 16 || !staged[k]) continue;
      const char *S = st_of(fn->out_dtypes[k]);
      int vec = (int)(16 / iron_dtype_size(fn->out_dtypes[k]));
      const long long N = (long long)p->rs.n;
      char pj[64];
      pad_text("j", pj, sizeof(pj));
      P("if ((((unsigned long long)out%u) & 15ull) == 0) {\n"
        "for (int j = t * %d; j < %lld; j += %u * %d)\n"
        "*(iron_vec<%s, %d> *)(out%u + rbase + j) = "
        "*(const iron_vec<%s, %d> *)&((const %s *)%s)[rl * %lld + %s];\n"
        "} else {\n"
        "for (int j = t; j < %lld; j += %u)\n"
        "out%u[rbase + j] = ((const %s *)%s)[rl * %lld + %s];\n}\n",
        fn->dest[k], vec, N, g->L.tpr, vec, S, vec, fn->dest[k], S, vec, S,
        stage[si], (long long)g->padn, pj, N, g->L.tpr, fn->dest[k], S,
        stage[si], (long long)g->padn, pj);
      si++;
    }
    P("}\n");
  }
  P("}\n");
}

// Copies view v's values of the current row (CACHE_ROW) or of any row
// (CACHE_BLOCK) into its shared array, by the row's tpr threads (t):
// 16-byte loads where the view is a contiguous row of whole vectors and
// the pointer allows (checked once: `al<v>`).
static void emit_cache_fill(gen_t *g, uint32_t v) {
  const iron_cuda_row_plan_t *p = g->p;
  const iron_cuda_row_view_t *w = &p->views[v];
  const long long N = (long long)p->rs.n;
  size_t es = iron_dtype_size(w->dtype);
  int vec = es ? (int)(16 / es) : 1;
  bool row = g->cache[v] == CACHE_ROW;
  char dst[96], pj[64];
  bool contiguous = w->kind == IRON_CUDA_ROW_VIEW_FULL ||
                    (w->kind == IRON_CUDA_ROW_VIEW_STRIDED &&
                     row_contiguous(&p->rs, w));
  const char *S = st_of(w->dtype);
  if (contiguous && shared_vectors(g, es, row)) {
    pad_text("j", pj, sizeof(pj));
    if (row)
      snprintf(dst, sizeof(dst), "shr%u[rl * %lld + %s]", v,
               (long long)g->padn, pj);
    else
      snprintf(dst, sizeof(dst), "shb%u[%s]", v, pj);
    char basev[32];
    if (w->kind == IRON_CUDA_ROW_VIEW_FULL)
      snprintf(basev, sizeof(basev), "rbase");
    else
      snprintf(basev, sizeof(basev), "ro%u", v);
    P("if (al%u) {\n"
      "for (int j = t * %d; j < %lld; j += %u * %d) {\n"
      "const iron_vec<%s, %d> x_ = *(const iron_vec<%s, %d> *)(in%u + %s + "
      "j);\n"
      "*(iron_vec<%s, %d> *)&%s = x_;\n"
      "}\n} else ",
      v, vec, N, g->L.tpr, vec, S, vec, S, vec, w->input, basev, S, vec, dst);
  }
  pad_text("j", pj, sizeof(pj));
  if (row)
    snprintf(dst, sizeof(dst), "shr%u[rl * %lld + %s]", v, (long long)g->padn,
             pj);
  else
    snprintf(dst, sizeof(dst), "shb%u[%s]", v, pj);
  P("{\nfor (int j = t; j < %lld; j += %u) {\n", N, g->L.tpr);
  char a[96];
  view_addr(g, v, "j", a, sizeof(a));
  P("%s = in%u[%s];\n}\n}\n", dst, w->input, a);
}

// Shared memory for cached rows, in bytes (static shared memory is at
// most 48 KB; the reduces' exchange arrays take a little).
enum { kCacheBytes = 44 << 10, kCacheBytesPerWarp = 14 << 10 };

// Whether the element loop of function k (E_k; k = passes: F) reads view v.
static bool loop_reads_view(const iron_cuda_row_plan_t *p, uint32_t k,
                            uint32_t v) {
  const iron_cuda_row_fn_t *fn = k < p->passes ? &p->elem_fns[k] : &p->final_fn;
  bool u = fn->name && fn->num_outputs && (!fn->uses || fn->uses[v]);
  for (uint32_t r = 0; r < p->num_reduces && k < p->passes; ++r)
    u = u || (p->reduces[r].pass == k &&
              p->reduces[r].operand_view == (int32_t)v);
  return u;
}

iron_status_t iron_cuda_gen_row(const iron_cuda_row_plan_t *p,
                                char **out_source, char **out_name,
                                unsigned *out_grid, unsigned *out_block) {
  const iron_row_shape_t *rs = &p->rs;
  if (rs->n < 2 || rs->rows < 1 || p->passes < 1)
    return IRON_ERR(INVALID_ARGUMENT, "row fusion: bad row shape");
  gen_t gg;
  gen_t *g = &gg;
  memset(g, 0, sizeof(*g));
  g->p = p;
  iron_cuda_row_layout(rs->n, p->max_threads_per_row, &g->L);
  const iron_cuda_row_layout_t *L = &g->L;
  if (L->per_thread > 16)
    return IRON_ERR(UNIMPLEMENTED, "row fusion of rows of %lld elements",
                    (long long)rs->n);
  for (uint32_t r = 0; r < p->num_reduces; ++r)
    if (!op_fn(p->reduces[r].body))
      return IRON_ERR(UNIMPLEMENTED, "row fusion of this reduce body");
  g->uniform = L->sequential || rs->n == L->slots * L->per_slot;
  // Leaves of 256 elements start on multiples of 256 (and rows of at most
  // 256 are one leaf): a slot's padded index is its base + 8 i.
  g->aligned = rs->n <= 256 || (g->uniform && L->per_slot == 32);
  g->padn = rs->n + (rs->n >> 8) * 8 + 8;
  // Caches, while they fit: rows read by two element loops or more, most
  // read first (a row read again later has left L1), then views that are
  // the same for every row (read by every row of the block; hot in L1/L2
  // anyway).
  g->cache = calloc(p->num_views + 1, sizeof(int));
  unsigned *reads = calloc(p->num_views + 1, sizeof(unsigned));
  if (!g->cache || !reads) {
    free(g->cache);
    free(reads);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (row kernel)");
  }
  for (uint32_t v = 0; v < p->num_views; ++v) {
    const iron_cuda_row_view_t *w = &p->views[v];
    if (w->kind == IRON_CUDA_ROW_VIEW_STRIDED) g->any_strided = true;
    if (!w->elem) continue;
    for (uint32_t k = 0; k < p->passes; ++k) {
      const iron_cuda_row_fn_t *fn = &p->elem_fns[k];
      bool u = fn->name && (!fn->uses || fn->uses[v]);
      for (uint32_t r = 0; r < p->num_reduces; ++r)
        u = u || (p->reduces[r].pass == k &&
                  p->reduces[r].operand_view == (int32_t)v);
      reads[v] += u;
    }
    const iron_cuda_row_fn_t *ff = &p->final_fn;
    reads[v] += ff->name && ff->num_outputs && (!ff->uses || ff->uses[v]);
  }
  const char *ce = getenv("IRON_CUDA_ROW_CACHE");  // compile time only
  // At most 14 KB per warp of the block as well, so that caches leave 16
  // warps or more resident per SM (227 KB of shared memory): a one-warp
  // block of a 1000-element layer norm gradient with everything cached
  // (29 KB) would run 7 warps per SM.
  int64_t budget = ce && strcmp(ce, "0") == 0 ? 0 : kCacheBytes;
  int64_t per_warp = (int64_t)kCacheBytesPerWarp * ((L->block + 31) / 32);
  if (budget > per_warp) budget = per_warp;
  int64_t used = 0;
  for (unsigned want = p->passes + 1; want >= 2; --want)
    for (uint32_t v = 0; v < p->num_views; ++v) {
      const iron_cuda_row_view_t *w = &p->views[v];
      if (reads[v] != want || g->cache[v] || row_invariant(rs, w)) continue;
      int64_t b = g->padn * (int64_t)iron_dtype_size(w->dtype) *
                  (int64_t)L->rows_per_block;
      if (used + b > budget) continue;
      used += b;
      g->cache[v] = CACHE_ROW;
      g->any_row_cache = true;
    }
  for (uint32_t v = 0; v < p->num_views; ++v) {
    const iron_cuda_row_view_t *w = &p->views[v];
    if (!w->elem || !reads[v] || !row_invariant(rs, w)) continue;
    int64_t b = g->padn * (int64_t)iron_dtype_size(w->dtype);
    if (used + b > budget || rs->rows < 2 * (int64_t)L->rows_per_block)
      continue;
    used += b;
    g->cache[v] = CACHE_BLOCK;
  }
  free(reads);
  // Kept element values: in the buffer of a cached row of the same
  // element size that no later loop reads (the thread overwrites its own
  // elements), else in a buffer of their own.
  g->keep_alias = calloc(p->num_keeps + 1, sizeof(int));
  if (!g->keep_alias) {
    free(g->cache);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (row kernel)");
  }
  for (uint32_t f = 0; f < p->num_keeps; ++f) {
    const iron_cuda_row_keep_t *kp = &p->keeps[f];
    g->keep_alias[f] = -1;
    for (uint32_t v = 0; v < p->num_views && g->keep_alias[f] < 0; ++v) {
      if (g->cache[v] != CACHE_ROW ||
          iron_dtype_size(p->views[v].dtype) != iron_dtype_size(kp->dtype))
        continue;
      bool taken = false;
      for (uint32_t h = 0; h < f; ++h) taken = taken || g->keep_alias[h] == (int)v;
      for (uint32_t k = kp->pass + 1; k <= p->passes && !taken; ++k)
        taken = loop_reads_view(p, k, v);
      if (!taken) g->keep_alias[f] = (int)v;
    }
    if (g->keep_alias[f] >= 0) continue;
    int64_t b = g->padn * (int64_t)iron_dtype_size(kp->dtype) *
                (int64_t)L->rows_per_block;
    if (used + b > budget) {
      free(g->cache);
      free(g->keep_alias);
      return IRON_ERR(RESOURCE_EXHAUSTED, "row fusion: kept values do not "
                      "fit in shared memory");
    }
    used += b;
  }
  g->row_sync = g->any_row_cache;
  // Registers per thread the kernel is compiled for (IRON_CUDA_ROW_REGS:
  // tuning): 64 keeps 32 warps resident per SM.
  unsigned regs = 64;
  const char *re = getenv("IRON_CUDA_ROW_REGS");  // compile time only
  if (re && atoi(re) >= 32 && atoi(re) <= 255) regs = (unsigned)atoi(re);
  unsigned min_blocks = 65536 / (L->block * regs);
  if (min_blocks < 1) min_blocks = 1;
  if (min_blocks > 32) min_blocks = 32;
  iron_cuda_text_t body;
  iron_cuda_text_init(&body);
  g->s = &body;
  P("%s", p->fn_text ? p->fn_text : "");
  // The reduce combiners (float or double accumulators). Denormals read
  // and written as zero where the device flushes them (XLA:CPU's FTZ/DAZ):
  // -ftz does it for an f32 add or multiply, not for f64 arithmetic (and
  // the prelude's iron_zmax/iron_zmin for max/min).
  if (iron_cuda_flush_denormals())
    P("static __device__ __forceinline__ float irow_add(float x, float y) "
      "{ return x + y; }\n"
      "static __device__ __forceinline__ float irow_mul(float x, float y) "
      "{ return x * y; }\n"
      "static __device__ __forceinline__ double irow_add(double x, double y) "
      "{ return iron_daz(iron_daz(x) + iron_daz(y)); }\n"
      "static __device__ __forceinline__ double irow_mul(double x, double y) "
      "{ return iron_daz(iron_daz(x) * iron_daz(y)); }\n");
  else
    P("template <class A> static __device__ __forceinline__ A irow_add(A x, A y) "
      "{ return x + y; }\n"
      "template <class A> static __device__ __forceinline__ A irow_mul(A x, A y) "
      "{ return x * y; }\n");
  // Combines partials that may be empty (h: not empty).
  P("#define IROW_MERGE(F, a, ha, b, hb) { if ((ha) && (hb)) (a) = F((a), "
    "(b)); else if (hb) (a) = (b); (ha) = (ha) | (hb); }\n");
  const long long N = (long long)rs->n, ROWS = (long long)rs->rows;
  const long long nrb = (ROWS + L->rows_per_block - 1) / L->rows_per_block;
  P("extern \"C\" __global__ void __launch_bounds__(%u, %u) %s(", L->block,
    min_blocks, IRON_CUDA_KERNEL_PLACEHOLDER);
  for (uint32_t i = 0; i < p->num_inputs; ++i)
    P("%sconst %s *__restrict__ in%u", i ? ", " : "",
      st_of(p->input_dtypes[i]), i);
  for (uint32_t j = 0; j < p->num_outputs; ++j)
    P("%s%s *__restrict__ out%u", (p->num_inputs || j) ? ", " : "",
      st_of(p->output_dtypes[j]), j);
  P(") {\n");
  P("const int tid = threadIdx.x, lane = tid & 31;\n");
  P("const int t = tid & %u, rl = tid / %u; (void)rl;\n", L->tpr - 1, L->tpr);
  if (L->tpr > 32) P("const int warp = tid >> 5;\n");
  // This thread's slots: first element and count.
  P("int st[%u], cnt[%u];\n", L->per_thread, L->per_thread);
  P("#pragma unroll\nfor (int q_ = 0; q_ < %u; ++q_) {\n", L->per_thread);
  if (L->sequential) {
    P("st[q_] = 0; cnt[q_] = %lld;\n", N);
  } else {
    P("const int s_ = t * %u + q_, leaf = s_ >> 3, k_ = s_ & 7;\n"
      "int start = 0, size = %lld;\n"
      "#pragma unroll\n"
      "for (int b_ = %d; b_ >= 0; --b_) {\n"
      "  const int bit = (leaf >> b_) & 1;\n"
      "  if (size <= 256) { if (bit) size = 0; }\n"
      "  else { const int h_ = size >> 1; if (bit) { start += h_; size -= h_; "
      "} else size = h_; }\n"
      "}\n"
      "st[q_] = start + k_; cnt[q_] = size > k_ ? (size - k_ + 7) >> 3 : 0;\n",
      L->per_thread, N, L->depth - 1);
  }
  P("}\n");
  // Values of every view (pointers to these go to the device functions).
  for (uint32_t v = 0; v < p->num_views; ++v) {
    const iron_cuda_row_view_t *w = &p->views[v];
    const char *S = st_of(w->dtype);
    P("%s xv%u = %s();\n", S, v, S);
    if (w->kind == IRON_CUDA_ROW_VIEW_ONE)
      P("xv%u = in%u[0];\n", v, w->input);
    if (w->kind == IRON_CUDA_ROW_VIEW_STRIDED) P("long long ro%u = 0;\n", v);
    if (g->cache[v]) {
      // Rows start on 16 bytes when the pointer does and rows are whole
      // vectors (checked where the copy is generated).
      P("const bool al%u = (((unsigned long long)in%u) & 15ull) == 0;\n", v,
        w->input);
      if (g->cache[v] == CACHE_ROW)
        P("__align__(16) __shared__ %s shr%u[%lld];\n", S, v,
          (long long)(g->padn * L->rows_per_block));
      else
        P("__align__(16) __shared__ %s shb%u[%lld];\n", S, v,
          (long long)g->padn);
    }
  }
  for (uint32_t q = 0; q < p->num_slots; ++q) {
    const char *S = st_of(p->slots[q].dtype);
    P("%s pv%u = %s();\n", S, q, S);
  }
  for (uint32_t f = 0; f < p->num_keeps; ++f) {
    const char *S = st_of(p->keeps[f].dtype);
    P("%s xk%u = %s();\n", S, f, S);
    if (g->keep_alias[f] < 0)
      P("__align__(16) __shared__ %s shk%u[%lld];\n", S, f,
        (long long)(g->padn * L->rows_per_block));
  }
  // Views the same for every row: once per block.
  bool any_block = false;
  for (uint32_t v = 0; v < p->num_views; ++v) {
    if (g->cache[v] != CACHE_BLOCK) continue;
    any_block = true;
    P("{\nconst long long rbase = 0; (void)rbase;\n");
    emit_cache_fill(g, v);
    P("}\n");
  }
  if (any_block) P("__syncthreads();\n");
  if (L->rows_per_block == 1)
    P("for (long long row = blockIdx.x; row < %lldLL; row += gridDim.x) {\n"
      "const bool valid = true;\n",
      ROWS);
  else
    P("for (long long rb = blockIdx.x; rb < %lldLL; rb += gridDim.x) {\n"
      "const long long row = rb * %u + tid / %u;\n"
      "const bool valid = row < %lldLL;\n",
      nrb, L->rows_per_block, L->tpr, ROWS);
  P("const long long rbase = row * %lldLL; (void)rbase;\n", N);
  if (g->any_strided) {
    P("{ long long r_ = row;\n");
    for (int32_t d = rs->rank - 1; d >= 0; --d) {
      if (rs->reduced[d] || rs->dims[d] == 1) continue;
      P("const long long rc%d = r_ %% %lldLL; r_ /= %lldLL; (void)rc%d;\n", d,
        (long long)rs->dims[d], (long long)rs->dims[d], d);
    }
    for (uint32_t v = 0; v < p->num_views; ++v) {
      const iron_cuda_row_view_t *w = &p->views[v];
      if (w->kind != IRON_CUDA_ROW_VIEW_STRIDED) continue;
      P("ro%u = 0", v);
      for (int32_t d = 0; d < rs->rank; ++d)
        if (!rs->reduced[d] && rs->dims[d] != 1 && w->strides[d])
          P(" + rc%d * %lldLL", d, (long long)w->strides[d]);
      P(";\n");
    }
    P("}\n");
  }
  // Per-row values of the views.
  for (uint32_t v = 0; v < p->num_views; ++v) {
    const iron_cuda_row_view_t *w = &p->views[v];
    if (w->elem || w->kind == IRON_CUDA_ROW_VIEW_ONE) continue;
    char a[96];
    view_addr(g, v, "0", a, sizeof(a));
    P("if (valid) xv%u = in%u[%s];\n", v, w->input, a);
  }
  if (g->any_row_cache) {
    // The row's elements, read once.
    P("if (valid) {\n");
    for (uint32_t v = 0; v < p->num_views; ++v)
      if (g->cache[v] == CACHE_ROW) emit_cache_fill(g, v);
    P("}\n__syncthreads();\n");
  }
  emit_row_values(g, 0);
  iron_status_t st = IRON_OK;
  for (uint32_t k = 0; k < p->passes && !st; ++k) {
    st = emit_pass(g, k);
    emit_row_values(g, k + 1);
  }
  emit_final(g);
  // The next row overwrites the cached one.
  if (g->row_sync) P("__syncthreads();\n");
  P("}\n}\n");
  free(g->cache);
  free(g->keep_alias);
  if (st) {
    iron_cuda_text_free(&body);
    return st;
  }
  int64_t cap = (int64_t)(p->num_sms > 0 ? p->num_sms : 132) * 64;
  int64_t grid = nrb < cap ? nrb : cap;
  if (grid < 1) grid = 1;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_cuda_source_make(&body, "iron_row", out_source, out_name));
  *out_grid = (unsigned)grid;
  *out_block = L->block;
  return IRON_OK;
}
