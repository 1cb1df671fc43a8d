// The row fusion kernel's text (see cuda_gen_row.h for the design and the
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
#include "device/cuda/cuda_gen_row.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cuda/cuda_codegen.h"

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

// Storage -> compute and compute -> storage expressions.
static void store_text(iron_dtype_t dt, const char *v, char *buf, size_t cap) {
  switch (dt) {
    case IRON_DTYPE_PRED: snprintf(buf, cap, "(uint8_t)(%s)", v); break;
    case IRON_DTYPE_F16: snprintf(buf, cap, "iron_st_f16(%s)", v); break;
    case IRON_DTYPE_BF16: snprintf(buf, cap, "iron_st_bf16(%s)", v); break;
    default: snprintf(buf, cap, "%s", v); break;
  }
}

// The accumulation type of a reduce's dtype (the host's TA).
static const char *acc_type(iron_dtype_t dt) {
  return dt == IRON_DTYPE_F64 ? "double" : "float";
}

static const char *op_fn(iron_op_kind_t k) {
  switch (k) {
    case IRON_OP_ADD: return "irow_add";
    case IRON_OP_MULTIPLY: return "irow_mul";
    case IRON_OP_MAXIMUM: return "iron_fmax";
    case IRON_OP_MINIMUM: return "iron_fmin";
    default: return NULL;
  }
}

typedef struct gen {
  const iron_cuda_row_plan_t *p;
  iron_cuda_row_layout_t L;
  iron_cuda_src_t *s;
  bool cache;          // elem views held in registers for the row
  bool any_strided;
  bool strided_elem;   // a STRIDED view along reduced dims
} gen_t;

#define P(...) iron_cuda_src_printf(g->s, __VA_ARGS__)

static const char *st_of(iron_dtype_t dt) { return iron_cuda_ctype(dt); }

// Emits the call `name(&xv0.., &pv0.., idx, o0..)` with outputs declared
// as `C <pre><k>`.
static void emit_call(gen_t *g, const iron_cuda_row_fn_t *fn, const char *idx,
                      const char *pre) {
  const iron_cuda_row_plan_t *p = g->p;
  for (uint32_t k = 0; k < fn->num_outputs; ++k)
    P("%s %s%u;\n", iron_cuda_compute_ctype(fn->out_dtypes[k]), pre, k);
  P("%s(", fn->name);
  for (uint32_t v = 0; v < p->num_views; ++v) P("&xv%u, ", v);
  for (uint32_t q = 0; q < p->num_slots; ++q) P("&pv%u, ", q);
  P("(long long)(%s)", idx);
  for (uint32_t k = 0; k < fn->num_outputs; ++k) P(", %s%u", pre, k);
  P(");\n");
}

// The address of view v's element e in the current row.
static void view_addr(gen_t *g, uint32_t v, char *buf, size_t cap) {
  const iron_cuda_row_view_t *w = &g->p->views[v];
  switch (w->kind) {
    case IRON_CUDA_ROW_VIEW_FULL: snprintf(buf, cap, "rbase + e"); break;
    case IRON_CUDA_ROW_VIEW_ROW: snprintf(buf, cap, "row"); break;
    case IRON_CUDA_ROW_VIEW_ONE: snprintf(buf, cap, "0"); break;
    default:
      snprintf(buf, cap, w->elem ? "ro%u + eo%u" : "ro%u", v, v);
      break;
  }
}

// Inside an element loop (e declared): the element's value of every elem
// view (from the cache when there is one).
static void emit_elem_loads(gen_t *g) {
  const iron_cuda_row_plan_t *p = g->p;
  const iron_row_shape_t *rs = &p->rs;
  if (g->strided_elem && !g->cache) {
    // The element's coordinates along the reduced dims.
    P("{ int r_ = e;\n");
    for (int32_t d = rs->rank - 1; d >= 0; --d) {
      if (!rs->reduced[d] || rs->dims[d] == 1) continue;
      P("const int ec%d = r_ %% %lld; r_ /= %lld;\n", d,
        (long long)rs->dims[d], (long long)rs->dims[d]);
    }
    for (uint32_t v = 0; v < p->num_views; ++v) {
      const iron_cuda_row_view_t *w = &p->views[v];
      if (w->kind != IRON_CUDA_ROW_VIEW_STRIDED || !w->elem) continue;
      P("eo%u = 0", v);
      for (int32_t d = 0; d < rs->rank; ++d)
        if (rs->reduced[d] && rs->dims[d] != 1 && w->strides[d])
          P(" + (long long)ec%d * %lldLL", d, (long long)w->strides[d]);
      P(";\n");
    }
    P("}\n");
  }
  for (uint32_t v = 0; v < p->num_views; ++v) {
    if (!p->views[v].elem) continue;
    if (g->cache) {
      P("xv%u = cv%u[q_ * %u + i];\n", v, v, g->L.per_slot);
    } else {
      char a[64];
      view_addr(g, v, a, sizeof(a));
      P("xv%u = in%u[%s];\n", v, p->views[v].input, a);
    }
  }
}

// Opens the loop over this thread's elements: q_ (slot, unrolled), i
// (element of the slot), e (element of the row). Close with
// emit_elem_close.
static void emit_elem_open(gen_t *g, bool unroll_all) {
  P("#pragma unroll\nfor (int q_ = 0; q_ < %u; ++q_) {\n", g->L.per_thread);
  if (unroll_all)
    P("#pragma unroll\n");
  else
    P("#pragma unroll 4\n");
  P("for (int i = 0; i < %u; ++i) {\n"
    "if (!valid || i >= cnt[q_]) continue;\n",
    g->L.per_slot);
  if (g->L.sequential)
    P("const int e = i;\n");
  else
    P("const int e = st[q_] + 8 * i;\n");
}

static void emit_elem_close(gen_t *g) {
  (void)g;
  P("}\n}\n");
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
static void emit_pass(gen_t *g, uint32_t k) {
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
  emit_elem_open(g, g->cache);
  emit_elem_loads(g);
  if (fn->name) emit_call(g, fn, "e", "o");
  for (uint32_t r = 0; r < p->num_reduces; ++r) {
    const iron_cuda_row_reduce_t *red = &p->reduces[r];
    if (red->pass != k) continue;
    const char *A = acc_type(red->dtype);
    char x[48];
    if (red->operand_view >= 0)
      snprintf(x, sizeof(x), "iron_ld(xv%d)", red->operand_view);
    else
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
    char val[160], st[256];
    snprintf(val, sizeof(val), "%s((%s)iron_ld(xv%u), v%u)",
             op_fn(red->body), A, red->init_view, r);
    store_text(red->dtype, val, st, sizeof(st));
    P("pv%u = %s;\n", red->slot, st);
  }
  P("}\n");
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
      store_text(fn->out_dtypes[k], o, st, sizeof(st));
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

static void emit_final(gen_t *g) {
  const iron_cuda_row_plan_t *p = g->p;
  const iron_cuda_row_fn_t *fn = &p->final_fn;
  if (!fn->name || !fn->num_outputs) return;
  P("// results\n{\n");
  emit_elem_open(g, g->cache);
  emit_elem_loads(g);
  emit_call(g, fn, "e", "o");
  for (uint32_t k = 0; k < fn->num_outputs; ++k) {
    char o[16], st[64];
    snprintf(o, sizeof(o), "o%u", k);
    store_text(fn->out_dtypes[k], o, st, sizeof(st));
    P("out%u[rbase + e] = %s;\n", fn->dest[k], st);
  }
  emit_elem_close(g);
  P("}\n");
}

// Registers a thread may hold for the row's inputs (32-bit words).
enum { kCacheWords = 64 };

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
  if (g->L.per_thread > 16)
    return IRON_ERR(UNIMPLEMENTED, "row fusion of rows of %lld elements",
                    (long long)rs->n);
  for (uint32_t r = 0; r < p->num_reduces; ++r)
    if (!op_fn(p->reduces[r].body))
      return IRON_ERR(UNIMPLEMENTED, "row fusion of this reduce body");
  size_t words = 0;
  for (uint32_t v = 0; v < p->num_views; ++v) {
    const iron_cuda_row_view_t *w = &p->views[v];
    if (w->kind == IRON_CUDA_ROW_VIEW_STRIDED) g->any_strided = true;
    if (w->kind == IRON_CUDA_ROW_VIEW_STRIDED && w->elem)
      g->strided_elem = true;
    if (w->elem) {
      size_t es = iron_dtype_size(w->dtype);
      words += (size_t)g->L.per_thread * g->L.per_slot * (es > 4 ? es / 4 : 1);
    }
  }
  g->cache = words <= kCacheWords;
  iron_cuda_src_t body;
  iron_cuda_src_init(&body);
  g->s = &body;
  P("%s", p->fn_text ? p->fn_text : "");
  P("template <class A> static __device__ __forceinline__ A irow_add(A x, A y) "
    "{ return x + y; }\n"
    "template <class A> static __device__ __forceinline__ A irow_mul(A x, A y) "
    "{ return x * y; }\n"
    // Combines partials that may be empty (h: not empty).
    "#define IROW_MERGE(F, a, ha, b, hb) { if ((ha) && (hb)) (a) = F((a), "
    "(b)); else if (hb) (a) = (b); (ha) = (ha) | (hb); }\n");
  const iron_cuda_row_layout_t *L = &g->L;
  const long long N = (long long)rs->n, ROWS = (long long)rs->rows;
  const long long nrb = (ROWS + L->rows_per_block - 1) / L->rows_per_block;
  P("extern \"C\" __global__ void __launch_bounds__(%u) %s(", L->block,
    IRON_CUDA_KERNEL_PLACEHOLDER);
  for (uint32_t i = 0; i < p->num_inputs; ++i)
    P("%sconst %s *__restrict__ in%u", i ? ", " : "",
      st_of(p->input_dtypes[i]), i);
  for (uint32_t j = 0; j < p->num_outputs; ++j)
    P("%s%s *__restrict__ out%u", (p->num_inputs || j) ? ", " : "",
      st_of(p->output_dtypes[j]), j);
  P(") {\n");
  P("const int tid = threadIdx.x, lane = tid & 31;\n");
  P("const int t = tid & %u;\n", L->tpr - 1);
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
    const char *S = st_of(p->views[v].dtype);
    P("%s xv%u = %s();\n", S, v, S);
    if (p->views[v].kind == IRON_CUDA_ROW_VIEW_ONE)
      P("xv%u = in%u[0];\n", v, p->views[v].input);
    if (p->views[v].kind == IRON_CUDA_ROW_VIEW_STRIDED)
      P("long long ro%u = 0, eo%u = 0; (void)eo%u;\n", v, v, v);
  }
  for (uint32_t q = 0; q < p->num_slots; ++q) {
    const char *S = st_of(p->slots[q].dtype);
    P("%s pv%u = %s();\n", S, q, S);
  }
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
      P("const long long rc%d = r_ %% %lldLL; r_ /= %lldLL;\n", d,
        (long long)rs->dims[d], (long long)rs->dims[d]);
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
    char a[64];
    view_addr(g, v, a, sizeof(a));
    P("if (valid) xv%u = in%u[%s];\n", v, w->input, a);
  }
  if (g->cache) {
    // The row's elements, read once.
    for (uint32_t v = 0; v < p->num_views; ++v)
      if (p->views[v].elem)
        P("%s cv%u[%u];\n", st_of(p->views[v].dtype), v,
          L->per_thread * L->per_slot);
    g->cache = false;  // loads below read memory
    emit_elem_open(g, true);
    emit_elem_loads(g);
    for (uint32_t v = 0; v < p->num_views; ++v)
      if (p->views[v].elem) P("cv%u[q_ * %u + i] = xv%u;\n", v, L->per_slot, v);
    emit_elem_close(g);
    g->cache = true;
  }
  emit_row_values(g, 0);
  for (uint32_t k = 0; k < p->passes; ++k) {
    emit_pass(g, k);
    emit_row_values(g, k + 1);
  }
  emit_final(g);
  P("}\n}\n");
  int64_t cap = (int64_t)(p->num_sms > 0 ? p->num_sms : 132) * 64;
  int64_t grid = nrb < cap ? nrb : cap;
  if (grid < 1) grid = 1;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_cuda_source_make(&body, "iron_row", out_source, out_name));
  *out_grid = (unsigned)grid;
  *out_block = L->block;
  return IRON_OK;
}
