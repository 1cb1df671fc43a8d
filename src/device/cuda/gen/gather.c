// stablehlo.gather / stablehlo.scatter as generated CUDA C. The plans
// follow the host kernels (gather.c, scatter_kernel.c) step by step, so the
// two devices agree on every dimension-number corner case.
#include <stdio.h>
#include <string.h>

#include "device/cuda/gen/ops.h"
#include "device/plans/gather_plan.h"

// The shared plan (src/device/plans/gather_plan.c) in the generator's
// form; elements are moved as words of 1, 2, 4, 8 or 16 bytes.
static iron_status_t from_plan(const iron_ir_op_t *op,
                               const iron_gather_plan_t *g,
                               iron_cuda_gs_plan_t *p) {
  memset(p, 0, sizeof(*p));
  for (int32_t i = 0; i < g->num; ++i) {
    size_t es = iron_dtype_size(g->dtype[i]);
    if (es != 1 && es != 2 && es != 4 && es != 8 && es != 16)
      return iron_ir_op_unimplemented(op, "on cuda for dtype %s",
                                      iron_dtype_name(g->dtype[i]));
    p->dtypes[i] = g->dtype[i];
  }
  p->num = g->num;
  p->dtype = g->dtype[0];
  p->idx_dtype = g->idx_dtype;
  p->nbatch = g->nbatch;
  for (int32_t j = 0; j < g->nbatch; ++j) {
    p->bdims[j] = g->bdims[j];
    p->b_idx_stride[j] = g->b_idx_stride[j];
    p->b_small_stride[j] = g->b_small_stride[j];
    p->b_op_stride[j] = g->b_op_stride[j];
    p->b_op_dim[j] = g->b_op_dim[j];
  }
  p->num_points = g->num_points;
  p->nstart = g->nstart;
  p->idx_vec_stride = g->idx_vec_stride;
  for (int32_t k = 0; k < g->nstart; ++k) {
    p->start_op_stride[k] = g->start_op_stride[k];
    p->start_max[k] = g->start_max[k];
  }
  p->box_rank = g->box.rank;
  p->box_count = g->box.count;
  for (int32_t i = 0; i < g->box.rank; ++i) {
    p->box_size[i] = g->box.size[i];
    p->box_a_stride[i] = g->box.a_stride[i];
    p->box_b_stride[i] = g->box.b_stride[i];
  }
  p->op_count = g->op_count;
  p->small_count = g->small_count;
  p->overlap = g->overlap;
  return IRON_OK;
}

iron_status_t iron_cuda_gather_plan(const iron_ir_op_t *op,
                                    iron_cuda_gs_plan_t *p) {
  iron_gather_plan_t g;
  IRON_RETURN_IF_ERROR_PLAIN(iron_gather_plan_read(op, &g));
  return from_plan(op, &g, p);
}

iron_status_t iron_cuda_scatter_plan(const iron_ir_op_t *op,
                                     iron_cuda_gs_plan_t *p) {
  iron_gather_plan_t g;
  IRON_RETURN_IF_ERROR_PLAIN(iron_scatter_plan_read(op, &g));
  return from_plan(op, &g, p);
}

iron_cuda_scatter_op_t iron_cuda_scatter_classify(const iron_ir_region_t *r) {
  return (iron_cuda_scatter_op_t)iron_scatter_plan_body(r);
}

// --- generation ---------------------------------------------------------------

static const char *copy_type(size_t es) {
  switch (es) {
    case 1: return "uint8_t";
    case 2: return "uint16_t";
    case 4: return "uint32_t";
    case 8: return "uint64_t";
    default: return "iron_c128";  // 16 bytes, copied as bits
  }
}

// `int64_t iron_idx(const I *p, int64_t i)` for the index dtype
// (iron_gather_plan_index_read's rules: sub-byte ints in the low bits, u64
// saturates).
static void emit_index_reader(iron_cuda_text_t *t, iron_dtype_t dt) {
  const char *st = copy_type(iron_dtype_size(dt));
  const char *expr;
  switch (dt) {
    case IRON_DTYPE_S2: expr = "(int64_t)((int8_t)(uint8_t)(p[i] << 6) >> 6)"; break;
    case IRON_DTYPE_S4: expr = "(int64_t)((int8_t)(uint8_t)(p[i] << 4) >> 4)"; break;
    case IRON_DTYPE_U2: expr = "(int64_t)(p[i] & 3)"; break;
    case IRON_DTYPE_U4: expr = "(int64_t)(p[i] & 15)"; break;
    case IRON_DTYPE_S8: expr = "(int64_t)(int8_t)p[i]"; break;
    case IRON_DTYPE_S16: expr = "(int64_t)(int16_t)p[i]"; break;
    case IRON_DTYPE_S32: expr = "(int64_t)(int32_t)p[i]"; break;
    case IRON_DTYPE_S64: expr = "(int64_t)p[i]"; break;
    case IRON_DTYPE_U64:
      expr = "p[i] > 0x7fffffffffffffffull ? 0x7fffffffffffffffLL : "
             "(int64_t)p[i]";
      break;
    default: expr = "(int64_t)p[i]"; break;  // u8, u16, u32
  }
  iron_cuda_text_printf(
      t,
      "__device__ __forceinline__ int64_t iron_idx(const %s *p, int64_t i) {\n"
      "  return %s;\n}\n",
      st, expr);
}

// Decomposes `pt` over the points: sets idx_off, small_off, op_off and
// `ok` (false when a batching coordinate is outside the operand).
static void emit_point(iron_cuda_text_t *t, const iron_cuda_gs_plan_t *p) {
  iron_cuda_text_printf(t,
                        "int64_t rem = pt, idx_off = 0, small_off = 0, "
                        "op_off = 0;\nbool ok = true;\n");
  for (int32_t d = p->nbatch - 1; d >= 0; --d) {
    iron_cuda_text_printf(
        t,
        "{ int64_t q = rem / %lldLL, c = rem - q * %lldLL; rem = q;\n"
        "idx_off += c * %lldLL; small_off += c * %lldLL;\n",
        (long long)p->bdims[d], (long long)p->bdims[d],
        (long long)p->b_idx_stride[d], (long long)p->b_small_stride[d]);
    if (p->b_op_stride[d])
      iron_cuda_text_printf(t, "if (c >= %lldLL) ok = false; op_off += c * %lldLL;\n",
                            (long long)p->b_op_dim[d],
                            (long long)p->b_op_stride[d]);
    iron_cuda_text_printf(t, "}\n");
  }
  iron_cuda_text_printf(t, "(void)rem;\n");
}

// Start indices of the point: gather clamps them, scatter drops the point.
static void emit_starts(iron_cuda_text_t *t, const iron_cuda_gs_plan_t *p,
                        bool clamp) {
  for (int32_t k = 0; k < p->nstart; ++k) {
    iron_cuda_text_printf(t, "{ int64_t s = iron_idx(indices, idx_off + %lldLL);\n",
                          (long long)(k * p->idx_vec_stride));
    if (clamp)
      iron_cuda_text_printf(t,
                            "if (s < 0) s = 0; if (s > %lldLL) s = %lldLL;\n"
                            "op_off += s * %lldLL; }\n",
                            (long long)p->start_max[k],
                            (long long)p->start_max[k],
                            (long long)p->start_op_stride[k]);
    else
      iron_cuda_text_printf(t,
                            "if (s < 0 || s > %lldLL) ok = false;\n"
                            "else op_off += s * %lldLL; }\n",
                            (long long)p->start_max[k],
                            (long long)p->start_op_stride[k]);
  }
}

// Window element `w`: a_off (operand) and b_off (small tensor).
static void emit_window(iron_cuda_text_t *t, const iron_cuda_gs_plan_t *p) {
  iron_cuda_text_printf(t, "int64_t a_off = 0, b_off = 0;\n{ int64_t r = w;\n");
  for (int32_t d = p->box_rank - 1; d >= 0; --d)
    iron_cuda_text_printf(t,
                          "{ int64_t q = r / %lldLL, c = r - q * %lldLL; r = q;\n"
                          "a_off += c * %lldLL; b_off += c * %lldLL; }\n",
                          (long long)p->box_size[d], (long long)p->box_size[d],
                          (long long)p->box_a_stride[d],
                          (long long)p->box_b_stride[d]);
  iron_cuda_text_printf(t, "(void)r; }\n");
}

iron_status_t iron_cuda_gen_gather(const char *name,
                                   const iron_cuda_gs_plan_t *p,
                                   char **out_src) {
  const char *ct = copy_type(iron_dtype_size(p->dtype));
  iron_cuda_text_t t;
  iron_cuda_text_init(&t);
  iron_cuda_text_printf(&t, "%s", iron_cuda_prelude());
  emit_index_reader(&t, p->idx_dtype);
  iron_cuda_text_printf(
      &t,
      "extern \"C\" __global__ void __launch_bounds__(256) %s(const %s "
      "*__restrict__ operand, const %s *__restrict__ indices, %s "
      "*__restrict__ out) {\n"
      "for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < "
      "%lldLL; e += (int64_t)gridDim.x * blockDim.x) {\n"
      "int64_t pt = e / %lldLL, w = e - pt * %lldLL;\n",
      name, ct, copy_type(iron_dtype_size(p->idx_dtype)), ct,
      (long long)(p->num_points * p->box_count),
      (long long)(p->box_count ? p->box_count : 1),
      (long long)(p->box_count ? p->box_count : 1));
  emit_point(&t, p);
  emit_starts(&t, p, true);
  emit_window(&t, p);
  iron_cuda_text_printf(&t, "(void)ok;\nout[small_off + b_off] = operand[op_off "
                            "+ a_off];\n}\n}\n");
  return iron_cuda_text_finish(&t, out_src);
}

// `void iron_apply(S *dst, S upd)`: dst = combine(dst, upd) atomically.
static iron_status_t emit_atomic(iron_cuda_text_t *t, iron_dtype_t dt,
                                 iron_cuda_scatter_op_t op) {
  iron_cuda_type_t ty = iron_cuda_type_plain(dt);
  if (!ty.store)
    return IRON_ERR(UNIMPLEMENTED, "cuda scatter for dtype %s",
                    iron_dtype_name(dt));
  bool pred = dt == IRON_DTYPE_PRED;
  if (pred) {  // on i1 add/max/or are "or"; multiply/min/and are "and"
    if (op == IRON_CUDA_SCATTER_ADD || op == IRON_CUDA_SCATTER_MAX)
      op = IRON_CUDA_SCATTER_OR;
    if (op == IRON_CUDA_SCATTER_MUL || op == IRON_CUDA_SCATTER_MIN)
      op = IRON_CUDA_SCATTER_AND;
  }
  iron_cuda_text_printf(t, "__device__ __forceinline__ void iron_apply(%s *dst, %s upd) {\n",
                        ty.store, ty.store);
  if (ty.is_complex) {
    if (op != IRON_CUDA_SCATTER_ADD)
      return IRON_ERR(UNIMPLEMENTED, "cuda scatter: complex only adds");
    // Components add independently, so two atomics are exact.
    iron_cuda_text_printf(t, "atomicAdd(&dst->re, upd.re); atomicAdd(&dst->im, "
                             "upd.im);\n}\n");
    return IRON_OK;
  }
  // Native atomics.
  if (op == IRON_CUDA_SCATTER_ADD) {
    const char *cast = NULL;
    switch (dt) {
      case IRON_DTYPE_F32: cast = "float"; break;
      case IRON_DTYPE_F64: cast = "double"; break;
      case IRON_DTYPE_S32: cast = "int"; break;
      case IRON_DTYPE_U32: cast = "unsigned"; break;
      case IRON_DTYPE_S64:
      case IRON_DTYPE_U64: cast = "unsigned long long"; break;
      default: break;
    }
    if (cast) {
      iron_cuda_text_printf(t, "atomicAdd((%s *)dst, (%s)upd);\n}\n", cast, cast);
      return IRON_OK;
    }
  }
  if (op == IRON_CUDA_SCATTER_MAX || op == IRON_CUDA_SCATTER_MIN) {
    const char *cast = NULL;
    switch (dt) {
      case IRON_DTYPE_S32: cast = "int"; break;
      case IRON_DTYPE_U32: cast = "unsigned"; break;
      case IRON_DTYPE_S64: cast = "long long"; break;
      case IRON_DTYPE_U64: cast = "unsigned long long"; break;
      default: break;
    }
    if (cast) {
      iron_cuda_text_printf(t, "atomic%s((%s *)dst, (%s)upd);\n}\n",
                            op == IRON_CUDA_SCATTER_MAX ? "Max" : "Min", cast,
                            cast);
      return IRON_OK;
    }
  }
  // CAS loop on the aligned 32/64-bit word holding the element.
  char comb[256];
  const char *c = ty.comp;
  switch (op) {
    case IRON_CUDA_SCATTER_ADD:
    case IRON_CUDA_SCATTER_MUL: {
      const char *sym = op == IRON_CUDA_SCATTER_ADD ? "+" : "*";
      if (ty.is_float)
        snprintf(comb, sizeof(comb), "x %s y", sym);
      else
        snprintf(comb, sizeof(comb), "(%s)((uint64_t)x %s (uint64_t)y)", c, sym);
      break;
    }
    case IRON_CUDA_SCATTER_MAX:
    case IRON_CUDA_SCATTER_MIN: {
      // Floats: denormals read as zero in the flush mode (iron_zmax).
      bool max = op == IRON_CUDA_SCATTER_MAX;
      snprintf(comb, sizeof(comb), "%s(x, y)",
               ty.is_float ? (max ? "iron_zmax" : "iron_zmin")
                           : (max ? "iron_imax" : "iron_imin"));
      break;
    }
    case IRON_CUDA_SCATTER_OR:
    case IRON_CUDA_SCATTER_AND:
      if (ty.is_float)
        return IRON_ERR(UNIMPLEMENTED, "cuda scatter: bitwise on floats");
      snprintf(comb, sizeof(comb), "(%s)(x %s y)", c,
               op == IRON_CUDA_SCATTER_OR ? "|" : "&");
      break;
    default:
      return IRON_ERR(UNIMPLEMENTED, "cuda scatter: no atomic for this body");
  }
  size_t es = iron_dtype_size(dt);
  if (es == 8) {
    iron_cuda_text_printf(
        t,
        "unsigned long long *wp = (unsigned long long *)dst;\n"
        "unsigned long long old = *wp, as;\n"
        "%s y = %s(upd);\n"
        "do { as = old; %s cur; iron_bitcopy(&cur, &as, 8); %s x = %s(cur);\n"
        "%s nv = %s(%s); unsigned long long nb; iron_bitcopy(&nb, &nv, 8);\n"
        "old = atomicCAS(wp, as, nb); } while (old != as);\n}\n",
        c, ty.ld, ty.store, c, ty.ld, ty.store, ty.st, comb);
  } else {
    // 1, 2 or 4 bytes inside the aligned word (storage is 64-byte padded, so
    // the word never leaves the allocation).
    iron_cuda_text_printf(
        t,
        "uint64_t addr = (uint64_t)dst;\n"
        "unsigned *wp = (unsigned *)(addr & ~3ull);\n"
        "unsigned sh = (unsigned)(addr & 3) * 8;\n"
        "unsigned mask = %s;\n"
        "%s y = %s(upd);\n"
        "unsigned old = *wp, as;\n"
        "do { as = old; unsigned bits = (as >> sh) & mask; %s cur; "
        "iron_bitcopy(&cur, &bits, %zu); %s x = %s(cur);\n"
        "%s nv = %s(%s); unsigned nb = 0; iron_bitcopy(&nb, &nv, %zu);\n"
        "old = atomicCAS(wp, as, (as & ~(mask << sh)) | ((nb & mask) << sh)); "
        "} while (old != as);\n}\n",
        es == 4 ? "0xffffffffu" : es == 2 ? "0xffffu" : "0xffu", c, ty.ld,
        ty.store, es, c, ty.ld, ty.store, ty.st, comb, es);
  }
  return IRON_OK;
}

// Several operands: `void iron_apply_n(int64_t a, int64_t b, results...,
// updates...)` runs the body on element a of every result and element b
// of every update and stores each result. The body sees all operands'
// current values before any is written (the host's call_region does too).
static iron_status_t emit_apply_n(iron_cuda_text_t *t,
                                  const iron_cuda_gs_plan_t *p,
                                  const iron_region_t *body) {
  for (int32_t i = 0; i < p->num; ++i)
    if (!iron_cuda_type(p->dtypes[i]).store)
      return IRON_ERR(UNIMPLEMENTED, "cuda scatter body for dtype %s",
                      iron_dtype_name(p->dtypes[i]));
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_gen_region_fn(t, "iron_body", body));
  iron_cuda_text_printf(t, "__device__ __forceinline__ void iron_apply_n("
                           "int64_t a, int64_t b");
  for (int32_t i = 0; i < p->num; ++i)
    iron_cuda_text_printf(t, ", %s *__restrict__ result%d",
                          iron_cuda_type(p->dtypes[i]).store, i);
  for (int32_t i = 0; i < p->num; ++i)
    iron_cuda_text_printf(t, ", const %s *__restrict__ updates%d",
                          iron_cuda_type(p->dtypes[i]).store, i);
  iron_cuda_text_printf(t, ") {\n");
  for (int32_t i = 0; i < p->num; ++i)
    iron_cuda_text_printf(t, "%s r%d;\n", iron_cuda_type(p->dtypes[i]).comp, i);
  iron_cuda_text_printf(t, "iron_body(");
  for (int32_t i = 0; i < p->num; ++i)
    iron_cuda_text_printf(t, "%s%s(result%d[a])", i ? ", " : "",
                          iron_cuda_type(p->dtypes[i]).ld, i);
  for (int32_t i = 0; i < p->num; ++i)
    iron_cuda_text_printf(t, ", %s(updates%d[b])",
                          iron_cuda_type(p->dtypes[i]).ld, i);
  for (int32_t i = 0; i < p->num; ++i) iron_cuda_text_printf(t, ", &r%d", i);
  iron_cuda_text_printf(t, ");\n");
  for (int32_t i = 0; i < p->num; ++i)
    iron_cuda_text_printf(t, "result%d[a] = %s(r%d);\n", i,
                          iron_cuda_type(p->dtypes[i]).st, i);
  iron_cuda_text_printf(t, "}\n");
  return IRON_OK;
}

iron_status_t iron_cuda_gen_scatter(const char *name,
                                    const iron_cuda_gs_plan_t *p,
                                    iron_cuda_scatter_op_t op,
                                    const iron_region_t *body,
                                    bool unique_indices, char **out_src,
                                    unsigned *out_grid) {
  iron_cuda_type_t ty = iron_cuda_type(p->dtype);
  size_t es = iron_dtype_size(p->dtype);
  const char *st = ty.store ? ty.store : copy_type(es);
  int32_t num = p->num > 1 ? p->num : 1;
  // Several operands: one body combines them all (no atomic form).
  if (num > 1) op = IRON_CUDA_SCATTER_GENERIC;
  bool atomic = op != IRON_CUDA_SCATTER_SET && op != IRON_CUDA_SCATTER_GENERIC;
  // Narrow dtypes round each body result: no atomic form, the body runs in
  // XLA:CPU's order like generic bodies.
  if (ty.is_narrow && atomic) {
    atomic = false;
    op = IRON_CUDA_SCATTER_GENERIC;
  }
  // Complex products (and anything but adds) have no atomic form: they run
  // the body in XLA:CPU's order (points in order) like generic bodies.
  if (ty.is_complex && op != IRON_CUDA_SCATTER_ADD) {
    atomic = false;
    if (op != IRON_CUDA_SCATTER_SET) op = IRON_CUDA_SCATTER_GENERIC;
  }
  bool parallel = atomic || unique_indices;
  iron_cuda_text_t t;
  iron_cuda_text_init(&t);
  iron_cuda_text_printf(&t, "%s", iron_cuda_prelude());
  emit_index_reader(&t, p->idx_dtype);
  iron_status_t s = IRON_OK;
  if (num > 1) {
    s = emit_apply_n(&t, p, body);
  } else if (atomic && !unique_indices) {
    s = emit_atomic(&t, p->dtype, op);
  } else if (op == IRON_CUDA_SCATTER_SET) {
    iron_cuda_text_printf(&t,
                          "__device__ __forceinline__ void iron_apply(%s *dst, "
                          "%s upd) { *dst = upd; }\n",
                          st, st);
  } else {
    // Plain read-modify-write: unique indices, or one thread per window
    // element walking the points in order.
    if (!ty.store)
      s = IRON_ERR(UNIMPLEMENTED, "cuda scatter body for dtype %s",
                   iron_dtype_name(p->dtype));
    if (!s) s = iron_cuda_gen_region_fn(&t, "iron_body", body);
    if (!s)
      iron_cuda_text_printf(&t,
                            "__device__ __forceinline__ void iron_apply(%s *dst, "
                            "%s upd) { %s r; iron_body(%s(*dst), %s(upd), &r); "
                            "*dst = %s(r); }\n",
                            st, st, ty.comp, ty.ld, ty.ld, ty.st);
  }
  if (s) {
    iron_cuda_text_free(&t);
    return s;
  }
  const char *it = copy_type(iron_dtype_size(p->idx_dtype));
  // The statement that applies window element (op_off + a_off, small_off +
  // b_off).
  char apply[64 + 24 * 2 * IRON_SCATTER_PLAN_MAX_OPERANDS];
  if (num > 1) {
    iron_cuda_text_printf(&t,
                          "extern \"C\" __global__ void __launch_bounds__(256) "
                          "%s(",
                          name);
    int n = snprintf(apply, sizeof(apply),
                     "iron_apply_n(op_off + a_off, small_off + b_off");
    for (int32_t i = 0; i < num; ++i) {
      iron_cuda_text_printf(&t, "%s *__restrict__ result%d, ",
                            iron_cuda_type(p->dtypes[i]).store, i);
      n += snprintf(apply + n, sizeof(apply) - (size_t)n, ", result%d", i);
    }
    iron_cuda_text_printf(&t, "const %s *__restrict__ indices", it);
    for (int32_t i = 0; i < num; ++i) {
      iron_cuda_text_printf(&t, ", const %s *__restrict__ updates%d",
                            iron_cuda_type(p->dtypes[i]).store, i);
      n += snprintf(apply + n, sizeof(apply) - (size_t)n, ", updates%d", i);
    }
    iron_cuda_text_printf(&t, ") {\n");
    snprintf(apply + n, sizeof(apply) - (size_t)n, ");\n");
  } else {
    iron_cuda_text_printf(&t,
                          "extern \"C\" __global__ void __launch_bounds__(256) "
                          "%s(%s *__restrict__ result, const %s *__restrict__ "
                          "indices, const %s *__restrict__ updates) {\n",
                          name, st, it, st);
    snprintf(apply, sizeof(apply), "iron_apply(&result[op_off + a_off], "
                                   "updates[small_off + b_off]);\n");
  }
  int64_t bc = p->box_count ? p->box_count : 1;
  int64_t threads;
  if (parallel) {
    threads = p->num_points * p->box_count;
    iron_cuda_text_printf(
        &t,
        "for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < "
        "%lldLL; e += (int64_t)gridDim.x * blockDim.x) {\n"
        "int64_t pt = e / %lldLL, w = e - pt * %lldLL;\n",
        (long long)threads, (long long)bc, (long long)bc);
    emit_point(&t, p);
    emit_starts(&t, p, false);
    iron_cuda_text_printf(&t, "if (!ok) continue;\n");
    emit_window(&t, p);
    iron_cuda_text_printf(&t, "%s}\n}\n", apply);
  } else {
    // In order: thread w owns window element w of every point. When windows
    // of different points may overlap partially, one thread does it all.
    threads = p->overlap ? 1 : p->box_count;
    iron_cuda_text_printf(
        &t,
        "for (int64_t w0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; "
        "w0 < %lldLL; w0 += (int64_t)gridDim.x * blockDim.x) {\n"
        "for (int64_t pt = 0; pt < %lldLL; ++pt) {\n",
        (long long)threads, (long long)p->num_points);
    emit_point(&t, p);
    emit_starts(&t, p, false);
    iron_cuda_text_printf(&t, "if (!ok) continue;\n");
    if (p->overlap)
      iron_cuda_text_printf(&t, "for (int64_t w = 0; w < %lldLL; ++w) {\n",
                            (long long)p->box_count);
    else
      iron_cuda_text_printf(&t, "for (int64_t w = w0; w < w0 + 1; ++w) {\n");
    emit_window(&t, p);
    iron_cuda_text_printf(&t, "%s}\n}\n}\n}\n", apply);
  }
  *out_grid = (unsigned)(threads < 1 ? 1 : (threads + 255) / 256 > (1 << 20)
                                                ? (1 << 20)
                                                : (threads + 255) / 256);
  return iron_cuda_text_finish(&t, out_src);
}

iron_status_t iron_cuda_gen_select_and_scatter(
    const char *name, const iron_cuda_window_t *w, iron_dtype_t dt,
    const iron_region_t *select, const iron_region_t *scatter,
    char **out_src, unsigned *out_grid) {
  iron_cuda_type_t ty = iron_cuda_type(dt);
  if (!ty.store || ty.is_complex)
    return IRON_ERR(UNIMPLEMENTED, "cuda select_and_scatter for dtype %s",
                    iron_dtype_name(dt));
  for (int32_t d = 0; d < w->rank; ++d)
    if (w->base_dil[d] != 1 || w->win_dil[d] != 1)
      return IRON_ERR(UNIMPLEMENTED, "cuda select_and_scatter with dilation");
  iron_cuda_scatter_op_t op = iron_cuda_scatter_classify(scatter->ir);
  // Narrow dtypes: no atomics (see iron_cuda_gen_scatter).
  bool atomic = op != IRON_CUDA_SCATTER_SET &&
                op != IRON_CUDA_SCATTER_GENERIC && !ty.is_narrow;
  int64_t in_strides[IRON_MAX_RANK], nsrc = 1, s = 1;
  for (int32_t d = w->rank - 1; d >= 0; --d) {
    in_strides[d] = s;
    s *= w->in_dims[d];
  }
  for (int32_t d = 0; d < w->rank; ++d) nsrc *= w->out_dims[d];
  iron_cuda_text_t t;
  iron_cuda_text_init(&t);
  iron_cuda_text_printf(&t, "%s", iron_cuda_prelude());
  iron_status_t st = iron_cuda_gen_region_fn(&t, "iron_select", select);
  if (!st && atomic) st = emit_atomic(&t, dt, op);
  if (!st && !atomic) {
    st = iron_cuda_gen_region_fn(&t, "iron_body", scatter);
    if (!st)
      iron_cuda_text_printf(&t,
                            "__device__ __forceinline__ void iron_apply(%s *dst, "
                            "%s upd) { %s r; iron_body(%s(*dst), %s(upd), &r); "
                            "*dst = %s(r); }\n",
                            ty.store, ty.store, ty.comp, ty.ld, ty.ld, ty.st);
  }
  if (st) {
    iron_cuda_text_free(&t);
    return st;
  }
  iron_cuda_text_printf(
      &t,
      "extern \"C\" __global__ void __launch_bounds__(256) %s(const %s "
      "*__restrict__ operand, const %s *__restrict__ source, %s *out) {\n",
      name, ty.store, ty.store, ty.store);
  if (atomic)
    iron_cuda_text_printf(
        &t,
        "for (int64_t so = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; so "
        "< %lldLL; so += (int64_t)gridDim.x * blockDim.x) {\n",
        (long long)nsrc);
  else  // in source order, as XLA:CPU applies them
    iron_cuda_text_printf(
        &t,
        "if (blockIdx.x != 0 || threadIdx.x != 0) return;\n"
        "for (int64_t so = 0; so < %lldLL; ++so) {\n",
        (long long)nsrc);
  iron_cuda_text_printf(&t, "int64_t rem = so;\n");
  for (int32_t d = w->rank - 1; d >= 0; --d)
    iron_cuda_text_printf(&t,
                          "const int64_t oc%d = rem %% %lldLL; rem /= %lldLL;\n",
                          d, (long long)w->out_dims[d],
                          (long long)w->out_dims[d]);
  iron_cuda_text_printf(&t, "(void)rem;\nint have = 0;\nint64_t best = 0;\n%s bv = 0;\n"
                            "do {\n",
                        ty.comp);
  for (int32_t d = 0; d < w->rank; ++d) {
    if (w->wdims[d] > 1)
      iron_cuda_text_printf(&t, "for (int64_t k%d = 0; k%d < %lldLL; ++k%d) {\n",
                            d, d, (long long)w->wdims[d], d);
    else
      iron_cuda_text_printf(&t, "{ const int64_t k%d = 0;\n", d);
    iron_cuda_text_printf(
        &t,
        "const int64_t p%d = oc%d * %lldLL + k%d - (%lldLL);\n"
        "if (p%d < 0 || p%d >= %lldLL) continue;\n"
        "const int64_t f%d = %s + p%d * %lldLL;\n"
        "{ const int64_t f_prev = f%d; (void)f_prev;\n",
        d, d, (long long)w->strides[d], d, (long long)w->pad_lo[d], d, d,
        (long long)w->in_dims[d], d, d == 0 ? "0" : "f_prev", d,
        (long long)in_strides[d], d);
  }
  char offv[16];
  snprintf(offv, sizeof(offv), w->rank > 0 ? "f%d" : "0", w->rank - 1);
  iron_cuda_text_printf(
      &t,
      "const int64_t off = %s;\n"
      "%s v = %s(operand[off]);\n"
      "if (!have) { have = 1; best = off; bv = v; }\n"
      "else { uint8_t keep; iron_select(bv, v, &keep); if (!keep) { best = off; "
      "bv = v; } }\n",
      offv, ty.comp, ty.ld);
  for (int32_t d = 0; d < w->rank; ++d) iron_cuda_text_printf(&t, "}\n}\n");
  iron_cuda_text_printf(&t,
                        "} while (0);\n"
                        "if (have) iron_apply(&out[best], source[so]);\n}\n}\n");
  int64_t g = atomic ? (nsrc + 255) / 256 : 1;
  if (g < 1) g = 1;
  if (g > (1 << 20)) g = 1 << 20;
  *out_grid = (unsigned)g;
  return iron_cuda_text_finish(&t, out_src);
}
