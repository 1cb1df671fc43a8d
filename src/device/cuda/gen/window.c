// stablehlo.reduce_window as generated CUDA C: one thread per output
// element, nested loops over the window dims wider than 1 (all bounds baked
// in), padding and dilation holes skipped as on the host (window.c).
#include <stdio.h>

#include "device/cuda/gen/ops.h"

iron_status_t iron_cuda_gen_reduce_window(const char *name,
                                          const iron_cuda_window_t *w,
                                          uint32_t num,
                                          const iron_dtype_t *dtypes,
                                          const iron_region_t *body,
                                          char **out_src, unsigned *out_grid) {
  if (num == 0 || num > IRON_CUDA_WINDOW_MAX_OPERANDS)
    return IRON_ERR(UNIMPLEMENTED, "cuda reduce_window of %u operands", num);
  iron_cuda_type_t ty[IRON_CUDA_WINDOW_MAX_OPERANDS];
  for (uint32_t i = 0; i < num; ++i) {
    ty[i] = iron_cuda_type(dtypes[i]);
    if (!ty[i].store)
      return IRON_ERR(UNIMPLEMENTED, "cuda reduce_window for dtype %s",
                      iron_dtype_name(dtypes[i]));
  }
  int64_t in_strides[IRON_MAX_RANK], nout = 1;
  int64_t s = 1;
  for (int32_t d = w->rank - 1; d >= 0; --d) {
    in_strides[d] = s;
    s *= w->in_dims[d];
  }
  for (int32_t d = 0; d < w->rank; ++d) nout *= w->out_dims[d];
  iron_cuda_text_t t;
  iron_cuda_text_init(&t);
  iron_cuda_text_printf(&t, "%s", iron_cuda_prelude());
  iron_status_t st = iron_cuda_gen_region_fn(&t, "iron_body", body);
  if (st) {
    iron_cuda_text_free(&t);
    return st;
  }
  iron_cuda_text_printf(&t,
                        "extern \"C\" __global__ void __launch_bounds__(256) "
                        "%s(",
                        name);
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(&t, "const %s *__restrict__ in%u, ", ty[i].store, i);
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(&t, "const %s *__restrict__ init%u, ", ty[i].store,
                          i);
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(&t, "%s *__restrict__ out%u%s", ty[i].store, i,
                          i + 1 < num ? ", " : ") {\n");
  iron_cuda_text_printf(
      &t,
      "for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < "
      "%lldLL; o += (int64_t)gridDim.x * blockDim.x) {\n"
      "int64_t rem = o;\n",
      (long long)nout);
  for (int32_t d = w->rank - 1; d >= 0; --d)
    iron_cuda_text_printf(&t,
                          "const int64_t oc%d = rem %% %lldLL; rem /= %lldLL;\n",
                          d, (long long)w->out_dims[d],
                          (long long)w->out_dims[d]);
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(&t, "%s acc%u = %s(init%u[0]);\n", ty[i].comp, i,
                          ty[i].ld, i);
  // Per dim: a loop over k (or a single k = 0), pos, validity, offset.
  iron_cuda_text_printf(&t, "do {\n");
  for (int32_t d = 0; d < w->rank; ++d) {
    int64_t dil_in =
        w->in_dims[d] == 0 ? 0 : (w->in_dims[d] - 1) * w->base_dil[d] + 1;
    if (w->wdims[d] > 1)
      iron_cuda_text_printf(&t, "for (int64_t k%d = 0; k%d < %lldLL; ++k%d) {\n",
                            d, d, (long long)w->wdims[d], d);
    else
      iron_cuda_text_printf(&t, "{ const int64_t k%d = 0;\n", d);
    iron_cuda_text_printf(
        &t,
        "const int64_t p%d = oc%d * %lldLL + k%d * %lldLL - (%lldLL);\n"
        "if (p%d < 0 || p%d >= %lldLL",
        d, d, (long long)w->strides[d], d, (long long)w->win_dil[d],
        (long long)w->pad_lo[d], d, d, (long long)dil_in);
    if (w->base_dil[d] > 1)
      iron_cuda_text_printf(&t, " || p%d %% %lldLL != 0", d,
                            (long long)w->base_dil[d]);
    iron_cuda_text_printf(&t, ") continue;\n");
    iron_cuda_text_printf(&t, "const int64_t f%d = %s + (p%d / %lldLL) * %lldLL;\n",
                          d, d == 0 ? "0" : "f_prev", d,
                          (long long)w->base_dil[d], (long long)in_strides[d]);
    iron_cuda_text_printf(&t, "{ const int64_t f_prev = f%d; (void)f_prev;\n",
                          d);
  }
  if (w->rank > 0)
    iron_cuda_text_printf(&t, "const int64_t off = f%d;\n", w->rank - 1);
  else
    iron_cuda_text_printf(&t, "const int64_t off = 0;\n");
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(&t, "%s x%u = %s(in%u[off]);\n", ty[i].comp, i,
                          ty[i].ld, i);
  iron_cuda_text_printf(&t, "{ ");
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(&t, "%s n%u_; ", ty[i].comp, i);
  iron_cuda_text_printf(&t, "iron_body(");
  for (uint32_t i = 0; i < num; ++i) iron_cuda_text_printf(&t, "acc%u, ", i);
  for (uint32_t i = 0; i < num; ++i) iron_cuda_text_printf(&t, "x%u, ", i);
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(&t, "&n%u_%s", i, i + 1 < num ? ", " : ");");
  // Half types: the window stays in the half type, so every body result is
  // rounded to it (as the host's window.c and XLA:CPU do).
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(&t, " acc%u = %s(%s(n%u_));", i, ty[i].ld,
                          ty[i].st, i);
  iron_cuda_text_printf(&t, " }\n");
  for (int32_t d = 0; d < w->rank; ++d) iron_cuda_text_printf(&t, "}\n}\n");
  iron_cuda_text_printf(&t, "} while (0);\n");
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(&t, "out%u[o] = %s(acc%u);\n", i, ty[i].st, i);
  iron_cuda_text_printf(&t, "}\n}\n");
  int64_t g = (nout + 255) / 256;
  if (g < 1) g = 1;
  if (g > (1 << 20)) g = 1 << 20;
  *out_grid = (unsigned)g;
  return iron_cuda_text_finish(&t, out_src);
}

// ---------------------------------------------------------------------------
// Cumulative windows (cumsum & co.), in the host's order (window.c, DEF_SCAN:
// XLA:CPU's ReduceWindowRewriter with base 16). Level L holds n_L values:
// level 0 the line, level L+1 the block totals of level L (blocks of 16,
// the last one padded with init), up to the first level of <= 16 values.
// A level-L scan value is op(within-block fold, across) where across is the
// neighbouring block's scan value one level up (init at the line's end); at
// the top level it is the plain fold. Each fold starts at init and takes
// its elements in index order. One thread per line walks the line once:
// forward, a running fold per level; reverse, the current block's 16
// values per level (a reverse within-block fold starts at the element and
// runs to the block's end, so it is recomputed per element).

#define SCAN_BASE 16

static const char *scan_uint_type(iron_dtype_t dt) {
  switch (dt) {
    case IRON_DTYPE_S8: case IRON_DTYPE_U8: return "uint8_t";
    case IRON_DTYPE_S16: case IRON_DTYPE_U16: return "uint16_t";
    case IRON_DTYPE_S32: case IRON_DTYPE_U32: return "uint32_t";
    case IRON_DTYPE_S64: case IRON_DTYPE_U64: return "uint64_t";
    default: return NULL;
  }
}

bool iron_cuda_scan_supported(iron_op_kind_t kind, iron_dtype_t dt) {
  iron_cuda_type_t ty = iron_cuda_type_plain(dt);
  if (!ty.store || dt == IRON_DTYPE_PRED) return false;
  if (ty.is_complex) return kind == IRON_OP_ADD || kind == IRON_OP_MULTIPLY;
  return kind == IRON_OP_ADD || kind == IRON_OP_MULTIPLY ||
         kind == IRON_OP_MAXIMUM || kind == IRON_OP_MINIMUM;
}

iron_status_t iron_cuda_gen_scan(const char *name, const iron_cuda_scan_t *s,
                                 iron_dtype_t dt, char **out_src,
                                 unsigned *out_grid) {
  if (!iron_cuda_scan_supported(s->kind, dt))
    return IRON_ERR(UNIMPLEMENTED, "cuda cumulative %s for dtype %s",
                    iron_op_kind_name(s->kind), iron_dtype_name(dt));
  if (s->n < 1 || s->outer < 0 || s->inner < 0)
    return IRON_ERR(INVALID_ARGUMENT, "cuda scan: bad line geometry");
  iron_cuda_type_t ty = iron_cuda_type_plain(dt);
  bool is_int = !ty.is_float && !ty.is_complex;
  bool wrap = is_int && (s->kind == IRON_OP_ADD || s->kind == IRON_OP_MULTIPLY);
  const char *acc = wrap ? scan_uint_type(dt) : ty.comp;
  // Level sizes.
  int64_t nl[24];
  int lv = 0;
  nl[lv++] = s->n;
  while (nl[lv - 1] > SCAN_BASE && lv < 24) {
    nl[lv] = (nl[lv - 1] + SCAN_BASE - 1) / SCAN_BASE;
    ++lv;
  }
  int top = lv - 1;
  int64_t n_out = s->n + (s->excl ? 1 : 0);
  int64_t lines = s->outer * s->inner;
  iron_cuda_text_t t;
  iron_cuda_text_init(&t);
  iron_cuda_text_printf(&t, "%s", iron_cuda_prelude());
  iron_cuda_text_printf(&t, "typedef %s iron_acc;\n", acc);
  // The combiner, as the host's (window.c ADD_/MUL_, IMAX_/IMIN_, the half
  // types rounding every result, complex with the plain formula); float
  // max/min as XLA's max/min.
  iron_cuda_text_printf(&t,
                        "__device__ __forceinline__ iron_acc iron_sop(iron_acc a, "
                        "iron_acc b) {\n");
  bool half = dt == IRON_DTYPE_F16 || dt == IRON_DTYPE_BF16;
  // Denormals read and written as zero, as in every other float op
  // (scalar.c; XLA:CPU runs with FTZ/DAZ): -ftz flushes an f32 add or
  // multiply itself but not f64 arithmetic (max/min: iron_zmax below).
  bool flush = iron_cuda_flush_denormals() && ty.is_float && !ty.is_complex;
  switch (s->kind) {
    case IRON_OP_ADD:
    case IRON_OP_MULTIPLY: {
      const char *sym = s->kind == IRON_OP_ADD ? "+" : "*";
      if (ty.is_complex)
        iron_cuda_text_printf(&t, "return %s(a, b);\n",
                              s->kind == IRON_OP_ADD ? "iron_cadd" : "iron_cmul_plain");
      else if (wrap)
        iron_cuda_text_printf(
            &t, "return (iron_acc)((uint64_t)a %s (uint64_t)b);\n", sym);
      else if (half)
        iron_cuda_text_printf(&t, "return %s(%s(a %s b));\n", ty.ld, ty.st,
                              sym);
      else if (flush)
        iron_cuda_text_printf(&t, "return iron_daz(iron_daz(a) %s iron_daz(b));\n",
                              sym);
      else
        iron_cuda_text_printf(&t, "return a %s b;\n", sym);
      break;
    }
    case IRON_OP_MAXIMUM:
    case IRON_OP_MINIMUM: {
      const char *sym = s->kind == IRON_OP_MAXIMUM ? ">" : "<";
      // Floats: NaN wins, and of +0/-0 max takes +0 and min -0 whichever
      // comes first (measured: XLA:CPU's cummax of [0, -0] is [0, 0]).
      // Denormals read as zero in the flush mode (prelude: iron_zmax).
      if (ty.is_float)
        iron_cuda_text_printf(&t, "return %s(a, b);\n",
                              s->kind == IRON_OP_MAXIMUM ? "iron_zmax"
                                                         : "iron_zmin");
      else
        iron_cuda_text_printf(&t, "return a %s b ? a : b;\n", sym);
      break;
    }
    default:
      iron_cuda_text_free(&t);
      return IRON_ERR(UNIMPLEMENTED, "cuda cumulative %s",
                      iron_op_kind_name(s->kind));
  }
  iron_cuda_text_printf(&t, "}\n");
  const char *st = wrap ? "" : ty.st;
  const char *st_cast = wrap ? ty.store : "";
  iron_cuda_text_printf(
      &t,
      "extern \"C\" __global__ void __launch_bounds__(256) %s(const %s "
      "*__restrict__ in0, const %s *__restrict__ init0, %s *__restrict__ "
      "out0) {\n"
      "const int64_t nl[%d] = {",
      name, ty.store, ty.store, ty.store, lv);
  for (int l = 0; l < lv; ++l)
    iron_cuda_text_printf(&t, "%lldLL%s", (long long)nl[l],
                          l + 1 < lv ? ", " : "};\n(void)nl;\n");
  iron_cuda_text_printf(
      &t,
      "for (int64_t l = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; l < "
      "%lldLL; l += (int64_t)gridDim.x * blockDim.x) {\n"
      "const int64_t o_ = l / %lldLL, i_ = l - o_ * %lldLL;\n"
      "const %s *x = in0 + o_ * %lldLL + i_;\n"
      "%s *y = out0 + o_ * %lldLL + i_;\n"
      "const iron_acc init = (iron_acc)%s(init0[0]);\n",
      (long long)lines, (long long)s->inner, (long long)s->inner, ty.store,
      (long long)(s->n * s->inner), ty.store, (long long)(n_out * s->inner),
      ty.ld);
  if (s->excl && !s->rev)
    iron_cuda_text_printf(&t, "y[0] = init0[0];\ny += %lldLL;\n",
                          (long long)s->inner);
  if (s->excl && s->rev)
    iron_cuda_text_printf(&t, "y[%lldLL] = init0[0];\n",
                          (long long)(s->n * s->inner));
  if (!s->rev) {
    iron_cuda_text_printf(
        &t,
        "iron_acc w[%d], ac[%d];\nint64_t c[%d];\n"
        "for (int L = 0; L < %d; ++L) {\n"
        "w[L] = init; ac[L] = init; c[L] = 0;\n}\n"
        "for (int64_t k = 0; k < %lldLL; ++k) {\n"
        "iron_acc v = (iron_acc)%s(x[k * %lldLL]);\n"
        "for (int L = 0;; ++L) {\n"
        "w[L] = iron_sop(w[L], v);\n"
        "const int64_t idx = c[L]++;\n"
        "const iron_acc s = L == %d ? w[L] : iron_sop(w[L], ac[L]);\n"
        "if (L == 0) y[k * %lldLL] = (%s)%s(s); else ac[L - 1] = s;\n"
        "if (L == %d) break;\n"
        "const bool last = idx == nl[L] - 1;\n"
        "if (!last && (idx & %d) != %d) break;\n"
        "if (last) for (int64_t p = (idx & %d) + 1; p < %d; ++p) w[L] = "
        "iron_sop(w[L], init);\n"
        "v = w[L]; w[L] = init;\n"
        "}\n}\n",
        lv, lv, lv, lv, (long long)s->n, ty.ld, (long long)s->inner, top,
        (long long)s->inner, st_cast[0] ? st_cast : ty.store, st, top,
        SCAN_BASE - 1, SCAN_BASE - 1, SCAN_BASE - 1, SCAN_BASE);
  } else {
    iron_cuda_text_printf(
        &t,
        "iron_acc b[%d][%d], ac[%d];\nint64_t c[%d];\n"
        "for (int L = 0; L < %d; ++L) {\n"
        "ac[L] = init; c[L] = 0;\n"
        "for (int q = 0; q < %d; ++q) b[L][q] = init;\n}\n"
        "for (int64_t k = %lldLL; k >= 0; --k) {\n"
        "iron_acc v = (iron_acc)%s(x[k * %lldLL]);\n"
        "for (int L = 0;; ++L) {\n"
        "const int64_t idx = nl[L] - 1 - c[L]++;\n"
        "const int j = (int)(idx & %d);\n"
        "b[L][j] = v;\n"
        "const int end = L == %d ? (int)nl[L] : %d;\n"
        "iron_acc wv = init;\n"
        "for (int q = j; q < end; ++q) wv = iron_sop(wv, b[L][q]);\n"
        "const iron_acc s = L == %d ? wv : iron_sop(wv, ac[L]);\n"
        "if (L == 0) y[k * %lldLL] = (%s)%s(s); else ac[L - 1] = s;\n"
        "if (L == %d || j != 0) break;\n"
        "v = wv;\n"
        "}\n}\n",
        lv, SCAN_BASE, lv, lv, lv, SCAN_BASE, (long long)(s->n - 1), ty.ld,
        (long long)s->inner, SCAN_BASE - 1, top, SCAN_BASE, top,
        (long long)s->inner, st_cast[0] ? st_cast : ty.store, st, top);
  }
  iron_cuda_text_printf(&t, "}\n}\n");
  int64_t g = (lines + 255) / 256;
  *out_grid = (unsigned)(g < 1 ? 1 : g > (1 << 20) ? (1 << 20) : g);
  return iron_cuda_text_finish(&t, out_src);
}
