// stablehlo.convolution as generated CUDA C (gen/conv.h). The plan
// validates the op with the host's checks (device/plans/conv_plan.h); the
// kernel is the host's direct loops with every size, stride and window
// attribute baked in: per result element, kernel positions in row-major
// order (a position where any spatial dim lands on padding or a
// lhs-dilation hole is skipped), then the group's input features, summed in
// the accumulation dtype. Products and sums round separately (the device
// compiles with -fmad=false), as the host's C loops do.
#include "device/cuda/gen/conv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/plans/conv_plan.h"
#include "device/cuda/gen/prelude.h"
#include "device/cuda/gen/source.h"
#include "device/cuda/gen/types.h"
#include "device/cuda/gen/ops.h"

// f8/f4 (not f8E8M0FNU) operands and results of the direct kernel: read as
// f32 (exact), results from the f32 sum through f16 as XLA:CPU (host
// conv.c). *f receives the format.
typedef struct conv_nf {
  int eb, mb, bias, kind;
} conv_nf_t;
static bool conv_narrowf(iron_dtype_t dt, conv_nf_t *f) {
  conv_nf_t tmp;
  if (!f) f = &tmp;
  return iron_cuda_nf_format(dt, &f->eb, &f->mb, &f->bias, &f->kind);
}
// f8E8M0FNU operands and results: read as f32 by their bits (2^-127 as 0
// when denormals are flushed), results from the f32 sum by its bits (a
// denormal sum flushed first): XLA:CPU's converts around an f32 conv (the
// host's iron_ew_narrow_dot_load/store).
static bool conv_e8m0(iron_dtype_t dt) { return dt == IRON_DTYPE_F8E8M0FNU; }
// iron_cuda_type_plain, with narrow floats stored as bytes.
static iron_cuda_type_t conv_type(iron_dtype_t dt) {
  if (conv_narrowf(dt, NULL) || conv_e8m0(dt)) {
    iron_cuda_type_t t = iron_cuda_type_plain(IRON_DTYPE_U8);
    return t;
  }
  return iron_cuda_type_plain(dt);
}

static bool is_realf(iron_dtype_t dt) {
  return dt == IRON_DTYPE_F16 || dt == IRON_DTYPE_BF16 ||
         dt == IRON_DTYPE_F32 || dt == IRON_DTYPE_F64;
}
static bool is_cplx(iron_dtype_t dt) {
  return dt == IRON_DTYPE_C64 || dt == IRON_DTYPE_C128;
}

static void row_major_strides(const iron_ir_type_t *t, int64_t *s) {
  int64_t acc = 1;
  for (int32_t d = t->rank - 1; d >= 0; --d) {
    s[d] = acc;
    acc *= t->dims[d];
  }
}

iron_status_t iron_cuda_conv_plan(const iron_ir_op_t *op,
                                  iron_cuda_conv_t *out) {
  memset(out, 0, sizeof(*out));
  // The host's checks (conv_plan.h), with this device's refusals between
  // its steps so that every program gets the status it got before.
  iron_conv_plan_t cp;
  memset(&cp, 0, sizeof(cp));
  IRON_RETURN_IF_ERROR_PLAIN(iron_conv_plan_check_types(op, &cp));
  const iron_ir_type_t *lt = cp.lhs, *rt = cp.rhs, *ot = cp.out;
  const iron_ir_type_t *ts[3] = {lt, rt, ot};
  const iron_dtype_t comp = cp.comp_dtype;
  // f8/f4 operands of a complex accumulation: the host takes them, the
  // generated loads (emit_load) do not.
  if (is_cplx(comp) && (conv_narrowf(lt->dtype, NULL) ||
                        conv_e8m0(lt->dtype) || conv_narrowf(rt->dtype, NULL) ||
                        conv_e8m0(rt->dtype)))
    return iron_ir_op_unimplemented(
        op, "for %s x %s -> %s", iron_dtype_name(lt->dtype),
        iron_dtype_name(rt->dtype), iron_dtype_name(ot->dtype));
  for (int i = 0; i < 3; ++i)
    if (!conv_type(ts[i]->dtype).store)
      return iron_ir_op_unimplemented(op, "on cuda for dtype %s",
                                      iron_dtype_name(ts[i]->dtype));
  IRON_RETURN_IF_ERROR_PLAIN(iron_conv_plan_read_attrs(op, &cp));
  const int32_t rank = cp.rank, nsp = cp.nsp;
  const int64_t ib = cp.in_batch_dim, ifd = cp.in_feature_dim;
  const int64_t kif = cp.k_in_feature_dim, kof = cp.k_out_feature_dim;
  const int64_t ob = cp.out_batch_dim, ofd = cp.out_feature_dim;
  const int64_t *isp = cp.in_sp_dim, *ksp = cp.k_sp_dim, *osp = cp.out_sp_dim;
  const int64_t *strides = cp.stride, *pad = cp.pad, *ldil = cp.lhs_dil,
                *rdil = cp.rhs_dil, *rev = cp.reversal;
  // The shared size checks first: window sizes that overflow are
  // INVALID_ARGUMENT on every device.
  IRON_RETURN_IF_ERROR_PLAIN(iron_conv_plan_check_sizes(op, &cp));
  // Generated code holds every index in 64 bits. The plan bounds the
  // dilated input and window, each padding and the stride by 2^60, so the
  // window arithmetic o * stride + k * rhs_dilation - pad_lo (o * stride <=
  // padded span <= 3 * 2^60, k * rhs_dilation < 2^60) stays below 5 * 2^60
  // < 2^63; the lhs dilation only divides.

  int64_t ls[IRON_MAX_RANK], ks[IRON_MAX_RANK];
  row_major_strides(lt, ls);
  row_major_strides(rt, ks);
  out->lhs_dtype = lt->dtype;
  out->rhs_dtype = rt->dtype;
  out->out_dtype = ot->dtype;
  out->comp_dtype = comp;
  out->rank = rank;
  out->nsp = nsp;
  memcpy(out->out_dims, ot->dims, sizeof(int64_t) * (size_t)rank);
  out->out_batch_dim = (int32_t)ob;
  out->out_feature_dim = (int32_t)ofd;
  out->batch_groups = cp.batch_group_count > 1;
  out->groups = cp.groups;
  out->n_out = cp.n_out;
  out->c_in_g = cp.c_in_g;
  out->c_out_g = cp.c_out_g;
  out->in_bs = ls[ib];
  out->in_fs = ls[ifd];
  out->k_is = ks[kif];
  out->k_os = ks[kof];
  out->out_count = iron_ir_type_num_elements(ot);
  for (int32_t d = 0; d < nsp; ++d) {
    // Result spatial sizes checked by iron_conv_plan_check_sizes.
    int64_t in = lt->dims[isp[d]], k = rt->dims[ksp[d]];
    out->out_sp_dim[d] = (int32_t)osp[d];
    out->in_sp[d] = in;
    out->in_ss[d] = ls[isp[d]];
    out->k_sp[d] = k;
    out->k_ss[d] = ks[ksp[d]];
    out->stride[d] = strides[d];
    out->pad_lo[d] = pad[2 * d];
    out->lhs_dil[d] = ldil[d];
    out->rhs_dil[d] = rdil[d];
    out->reversed[d] = rev[d] != 0;
  }
  // 32-bit indices when every offset the kernel forms stays below 2^30
  // (lhs/rhs/result offsets, and o * stride + k * dilation + |padding|).
  const int64_t lim = (int64_t)1 << 30;
  bool wide = iron_ir_type_num_elements(lt) > lim ||
              iron_ir_type_num_elements(rt) > lim || out->out_count > lim;
  for (int32_t d = 0; d < nsp && !wide; ++d) {
    int64_t o = ot->dims[osp[d]], k = out->k_sp[d];
    wide =
        o > lim / out->stride[d] || k > lim / out->rhs_dil[d] ||
        o * out->stride[d] + k * out->rhs_dil[d] + llabs(out->pad_lo[d]) > lim;
  }
  out->wide_index = wide;
  return IRON_OK;
}

// Appends `(COMP)(v)` for a value `v` of operand dtype `dt` (its store type)
// converted to the accumulation dtype as the host's load_elem does (integers
// through double for float accumulation, real -> complex with im = 0).
static void emit_load(iron_cuda_text_t *t, iron_dtype_t dt, iron_dtype_t comp,
                      const char *v) {
  const char *real =
      comp == IRON_DTYPE_C64 || comp == IRON_DTYPE_F32 ? "float" : "double";
  if (comp == IRON_DTYPE_S64) {
    iron_cuda_text_printf(t, "(uint64_t)(%s)", v);
    return;
  }
  if (is_cplx(dt)) {  // comp is complex too
    if (dt == comp)
      iron_cuda_text_printf(t, "%s", v);
    else
      iron_cuda_text_printf(t, "iron_mk_%s((%s)(%s).re, (%s)(%s).im)",
                            comp == IRON_DTYPE_C64 ? "c64" : "c128", real, v,
                            real, v);
    return;
  }
  bool cplx = is_cplx(comp);
  if (cplx)
    iron_cuda_text_printf(t, "iron_mk_%s(",
                          comp == IRON_DTYPE_C64 ? "c64" : "c128");
  conv_nf_t nf;
  if (conv_narrowf(dt, &nf))
    iron_cuda_text_printf(t, "(%s)iron_nf_decode(%s, %d, %d, %d, %d)", real,
                          v, nf.eb, nf.mb, nf.bias, nf.kind);
  else if (conv_e8m0(dt) && iron_cuda_flush_denormals())
    iron_cuda_text_printf(t, "(%s)((%s) == 0 ? 0.0f : iron_e8m0_ld(%s))", real,
                          v, v);
  else if (conv_e8m0(dt))
    iron_cuda_text_printf(t, "(%s)iron_e8m0_ld(%s)", real, v);
  else if (dt == IRON_DTYPE_F16 || dt == IRON_DTYPE_BF16)
    iron_cuda_text_printf(t, "(%s)iron_ld_%s(%s)", real,
                          dt == IRON_DTYPE_F16 ? "f16" : "bf16", v);
  else if (is_realf(dt))
    iron_cuda_text_printf(t, "(%s)(%s)", real, v);
  else  // integers: exactly the host's (T)(double)iv
    iron_cuda_text_printf(t, "(%s)(double)(%s)", real, v);
  if (cplx) iron_cuda_text_printf(t, ", (%s)0)", real);
}

iron_status_t iron_cuda_gen_conv(const char *name, const iron_cuda_conv_t *c,
                                 char **out_src, unsigned *out_grid) {
  iron_cuda_type_t tl = conv_type(c->lhs_dtype);
  iron_cuda_type_t tr = conv_type(c->rhs_dtype);
  iron_cuda_type_t to = conv_type(c->out_dtype);
  if (!tl.store || !tr.store || !to.store)
    return IRON_ERR(UNIMPLEMENTED, "cuda convolution %s x %s -> %s",
                    iron_dtype_name(c->lhs_dtype),
                    iron_dtype_name(c->rhs_dtype),
                    iron_dtype_name(c->out_dtype));
  if (c->nsp < 0 || c->nsp > IRON_CUDA_CONV_MAX_SP || c->rank != c->nsp + 2)
    return IRON_ERR(INVALID_ARGUMENT, "cuda convolution: bad rank %d", c->rank);
  const char *comp;
  switch (c->comp_dtype) {
    case IRON_DTYPE_F32:
      comp = "float";
      break;
    case IRON_DTYPE_F64:
      comp = "double";
      break;
    case IRON_DTYPE_C64:
      comp = "iron_c64";
      break;
    case IRON_DTYPE_C128:
      comp = "iron_c128";
      break;
    case IRON_DTYPE_S64:
      comp = "uint64_t";
      break;
    default:
      return IRON_ERR(UNIMPLEMENTED, "cuda convolution accumulating in %s",
                      iron_dtype_name(c->comp_dtype));
  }
  bool cplx = is_cplx(c->comp_dtype);
  iron_cuda_text_t t;
  iron_cuda_text_init(&t);
  iron_cuda_text_printf(&t, "%s", iron_cuda_prelude());
  iron_cuda_text_printf(
      &t,
      "__device__ __forceinline__ iron_c64 iron_mk_c64(float re, float im) {\n"
      "  iron_c64 r; r.re = re; r.im = im; return r;\n}\n"
      "__device__ __forceinline__ iron_c128 iron_mk_c128(double re, double im) "
      "{\n  iron_c128 r; r.re = re; r.im = im; return r;\n}\n");
  // Indices in 32 bits when every offset fits (64-bit division and
  // multiplication are several instructions each on the GPU).
  iron_cuda_text_printf(&t,
                        "typedef %s ix_t;\n"
                        "#define IX(v) ((ix_t)(v))\n",
                        c->wide_index ? "int64_t" : "int32_t");
  iron_cuda_text_printf(&t,
                        "extern \"C\" __global__ void __launch_bounds__(256) "
                        "%s(const %s *__restrict__ lhs, const %s *__restrict__ "
                        "rhs, %s *__restrict__ out) {\n",
                        name, tl.store, tr.store, to.store);
  iron_cuda_text_printf(
      &t,
      "for (ix_t o = (ix_t)blockIdx.x * blockDim.x + threadIdx.x; o < "
      "IX(%lld); o += (ix_t)gridDim.x * blockDim.x) {\n"
      "ix_t rem = o;\n",
      (long long)c->out_count);
  for (int32_t d = c->rank - 1; d >= 0; --d)
    iron_cuda_text_printf(
        &t, "const ix_t oc%d = rem %% IX(%lld); rem /= IX(%lld);\n", d,
        (long long)c->out_dims[d], (long long)c->out_dims[d]);
  iron_cuda_text_printf(&t,
                        "const ix_t b = oc%d, f = oc%d;\n"
                        "const ix_t g = f / IX(%lld);\n",
                        c->out_batch_dim, c->out_feature_dim,
                        (long long)c->c_out_g);
  if (c->batch_groups)
    iron_cuda_text_printf(&t,
                          "const ix_t xo_ = (g * IX(%lld) + b) * IX(%lld);\n",
                          (long long)c->n_out, (long long)c->in_bs);
  else
    iron_cuda_text_printf(&t, "const ix_t xo_ = b * IX(%lld) + g * IX(%lld);\n",
                          (long long)c->in_bs,
                          (long long)(c->c_in_g * c->in_fs));
  iron_cuda_text_printf(&t, "const ix_t wo_ = f * IX(%lld);\n",
                        (long long)c->k_os);
  if (cplx)
    iron_cuda_text_printf(&t, "%s acc = iron_mk_%s(0, 0);\n", comp,
                          c->comp_dtype == IRON_DTYPE_C64 ? "c64" : "c128");
  else
    iron_cuda_text_printf(&t, "%s acc = 0;\n", comp);
  // One loop per spatial dim; `continue` skips the whole kernel position
  // (and all inner ones) when this dim lands on padding or a hole.
  for (int32_t d = 0; d < c->nsp; ++d) {
    const char *xp = d == 0 ? "xo_" : NULL, *wp = d == 0 ? "wo_" : NULL;
    char xprev[16], wprev[16];
    if (!xp) {
      snprintf(xprev, sizeof(xprev), "x%d", d - 1);
      snprintf(wprev, sizeof(wprev), "w%d", d - 1);
      xp = xprev;
      wp = wprev;
    }
    iron_cuda_text_printf(&t, "for (ix_t k%d = 0; k%d < IX(%lld); ++k%d) {\n",
                          d, d, (long long)c->k_sp[d], d);
    if (c->reversed[d])
      iron_cuda_text_printf(&t, "const ix_t kw%d = IX(%lld) - k%d;\n", d,
                            (long long)(c->k_sp[d] - 1), d);
    else
      iron_cuda_text_printf(&t, "const ix_t kw%d = k%d;\n", d, d);
    iron_cuda_text_printf(
        &t,
        "const ix_t p%d = oc%d * IX(%lld) + kw%d * IX(%lld) - (IX(%lld));\n", d,
        c->out_sp_dim[d], (long long)c->stride[d], d, (long long)c->rhs_dil[d],
        (long long)c->pad_lo[d]);
    if (c->lhs_dil[d] > 1)
      iron_cuda_text_printf(&t,
                            "if (p%d < 0 || p%d %% IX(%lld) != 0) continue;\n"
                            "const ix_t i%d = p%d / IX(%lld);\n",
                            d, d, (long long)c->lhs_dil[d], d, d,
                            (long long)c->lhs_dil[d]);
    else
      iron_cuda_text_printf(
          &t, "if (p%d < 0) continue;\nconst ix_t i%d = p%d;\n", d, d, d);
    iron_cuda_text_printf(&t,
                          "if (i%d >= IX(%lld)) continue;\n"
                          "const ix_t x%d = %s + i%d * IX(%lld);\n"
                          "const ix_t w%d = %s + k%d * IX(%lld);\n",
                          d, (long long)c->in_sp[d], d, xp, d,
                          (long long)c->in_ss[d], d, wp, d,
                          (long long)c->k_ss[d]);
  }
  char xl[16], wl[16];
  if (c->nsp > 0) {
    snprintf(xl, sizeof(xl), "x%d", c->nsp - 1);
    snprintf(wl, sizeof(wl), "w%d", c->nsp - 1);
  } else {
    snprintf(xl, sizeof(xl), "xo_");
    snprintf(wl, sizeof(wl), "wo_");
  }
  iron_cuda_text_printf(&t, "for (ix_t c = 0; c < IX(%lld); ++c) {\n",
                        (long long)c->c_in_g);
  char v[96];
  snprintf(v, sizeof(v), "lhs[%s + c * IX(%lld)]", xl, (long long)c->in_fs);
  iron_cuda_text_printf(&t, "const %s a = ", comp);
  emit_load(&t, c->lhs_dtype, c->comp_dtype, v);
  snprintf(v, sizeof(v), "rhs[%s + c * IX(%lld)]", wl, (long long)c->k_is);
  iron_cuda_text_printf(&t, ";\nconst %s w = ", comp);
  emit_load(&t, c->rhs_dtype, c->comp_dtype, v);
  iron_cuda_text_printf(&t, ";\n");
  if (cplx)
    iron_cuda_text_printf(&t,
                          "acc.re += a.re * w.re - a.im * w.im;\n"
                          "acc.im += a.re * w.im + a.im * w.re;\n");
  else
    iron_cuda_text_printf(&t, "acc += a * w;\n");
  iron_cuda_text_printf(&t, "}\n");
  for (int32_t d = 0; d < c->nsp; ++d) iron_cuda_text_printf(&t, "}\n");
  conv_nf_t onf;
  bool onarrow = conv_narrowf(c->out_dtype, &onf);
  switch (onarrow ? IRON_DTYPE_INVALID : c->out_dtype) {
    case IRON_DTYPE_F8E8M0FNU:
      iron_cuda_text_printf(&t, "out[o] = iron_e8m0_st(%s(acc));\n",
                            iron_cuda_flush_denormals() ? "iron_daz" : "");
      break;
    case IRON_DTYPE_INVALID:  // f8/f4: f32 -> f16 -> narrow
      iron_cuda_text_printf(
          &t,
          "out[o] = %siron_nf_encode((double)iron_ld_f16(iron_st_f16(acc)), "
          "%d, %d, %d, %d);\n",
          c->out_dtype == IRON_DTYPE_F8E5M2 ? "acc != acc ? (uint8_t)0x7f : "
                                            : "",
          onf.eb, onf.mb, onf.bias, onf.kind);
      break;
    case IRON_DTYPE_F16:
      iron_cuda_text_printf(&t, "out[o] = iron_st_f16(acc);\n");
      break;
    case IRON_DTYPE_BF16:
      iron_cuda_text_printf(&t, "out[o] = iron_st_bf16(acc);\n");
      break;
    case IRON_DTYPE_PRED:
      iron_cuda_text_printf(&t, "out[o] = acc != 0;\n");
      break;
    default:
      if (c->comp_dtype == IRON_DTYPE_S64)  // the low bits (wrap around)
        iron_cuda_text_printf(&t, "out[o] = (%s)acc;\n", to.store);
      else
        iron_cuda_text_printf(&t, "out[o] = acc;\n");
      break;
  }
  iron_cuda_text_printf(&t, "}\n}\n");
  int64_t g = (c->out_count + 255) / 256;
  if (g < 1) g = 1;
  if (g > (1 << 20)) g = 1 << 20;
  *out_grid = (unsigned)g;
  return iron_cuda_text_finish(&t, out_src);
}

// --- im2col + GEMM
// -------------------------------------------------------------

void iron_cuda_conv_gemm_dims(const iron_cuda_conv_t *c, int64_t *out_m,
                              int64_t *out_n, int64_t *out_k) {
  int64_t os = 1, ks = 1;
  for (int32_t d = 0; d < c->nsp; ++d) {
    os *= c->out_dims[c->out_sp_dim[d]];
    ks *= c->k_sp[d];
  }
  *out_m = c->n_out * os;
  *out_n = c->c_out_g;
  *out_k = ks * c->c_in_g;
}

static unsigned grid_for(int64_t count) {
  int64_t g = (count + 255) / 256;
  if (g < 1) g = 1;
  if (g > (1 << 20)) g = 1 << 20;
  return (unsigned)g;
}

// Opens the kernel and its grid-stride loop over `count` elements `e`.
static void open_kernel(iron_cuda_text_t *t, const char *name, const char *in_t,
                        const char *out_t, int64_t count) {
  iron_cuda_text_printf(t, "%s", iron_cuda_prelude());
  iron_cuda_text_printf(t,
                        "extern \"C\" __global__ void __launch_bounds__(256) "
                        "%s(const %s *__restrict__ src, %s *__restrict__ dst) "
                        "{\n"
                        "for (int64_t e = (int64_t)blockIdx.x * blockDim.x + "
                        "threadIdx.x; e < %lldLL; e += (int64_t)gridDim.x * "
                        "blockDim.x) {\n",
                        name, in_t, out_t, (long long)count);
}

// Declares k<d> (kernel position coordinates) from `kpos`, row-major.
static void emit_kpos(iron_cuda_text_t *t, const iron_cuda_conv_t *c,
                      const char *kpos) {
  iron_cuda_text_printf(t, "int64_t kr_ = %s;\n", kpos);
  for (int32_t d = c->nsp - 1; d >= 0; --d)
    iron_cuda_text_printf(t,
                          "const int64_t k%d = kr_ %% %lldLL; kr_ /= %lldLL;\n",
                          d, (long long)c->k_sp[d], (long long)c->k_sp[d]);
}

iron_status_t iron_cuda_gen_conv_im2col(const char *name,
                                        const iron_cuda_conv_t *c,
                                        char **out_src, unsigned *out_grid) {
  iron_cuda_type_t tl = iron_cuda_type_plain(c->lhs_dtype);
  if (!tl.store || is_cplx(c->lhs_dtype))
    return IRON_ERR(UNIMPLEMENTED, "cuda conv im2col for %s",
                    iron_dtype_name(c->lhs_dtype));
  int64_t m, n, k;
  iron_cuda_conv_gemm_dims(c, &m, &n, &k);
  (void)n;
  iron_cuda_text_t t;
  iron_cuda_text_init(&t);
  iron_cuda_text_printf(&t, "%s", iron_cuda_prelude());
  iron_cuda_text_printf(&t,
                        "extern \"C\" __global__ void __launch_bounds__(256) "
                        "%s(const %s *__restrict__ src, %s *__restrict__ dst, "
                        "int64_t row0, int64_t rows) {\n"
                        "const int64_t count = %lldLL * rows * %lldLL;\n"
                        "for (int64_t e = (int64_t)blockIdx.x * blockDim.x + "
                        "threadIdx.x; e < count; e += (int64_t)gridDim.x * "
                        "blockDim.x) {\n",
                        name, tl.store, tl.store, (long long)c->groups,
                        (long long)k);
  iron_cuda_text_printf(&t,
                        "const int64_t kk = e %% %lldLL, gm = e / %lldLL;\n"
                        "const int64_t m = row0 + gm %% rows, g = gm / rows;\n"
                        "const int64_t c = kk %% %lldLL;\n"
                        "const int64_t kpos = kk / %lldLL;\n",
                        (long long)k, (long long)k, (long long)c->c_in_g,
                        (long long)c->c_in_g);
  emit_kpos(&t, c, "kpos");
  iron_cuda_text_printf(&t, "int64_t mr_ = m;\n");
  for (int32_t d = c->nsp - 1; d >= 0; --d) {
    int64_t od = c->out_dims[c->out_sp_dim[d]];
    iron_cuda_text_printf(&t,
                          "const int64_t o%d = mr_ %% %lldLL; mr_ /= %lldLL;\n",
                          d, (long long)od, (long long)od);
  }
  iron_cuda_text_printf(&t, "const int64_t b = mr_;\n");
  if (c->batch_groups)
    iron_cuda_text_printf(&t, "int64_t x = (g * %lldLL + b) * %lldLL;\n",
                          (long long)c->n_out, (long long)c->in_bs);
  else
    iron_cuda_text_printf(&t, "int64_t x = b * %lldLL + g * %lldLL;\n",
                          (long long)c->in_bs,
                          (long long)(c->c_in_g * c->in_fs));
  iron_cuda_text_printf(&t, "x += c * %lldLL;\nbool ok = true;\n",
                        (long long)c->in_fs);
  for (int32_t d = 0; d < c->nsp; ++d) {
    iron_cuda_text_printf(&t, "{ const int64_t p = o%d * %lldLL + ", d,
                          (long long)c->stride[d]);
    if (c->reversed[d])
      iron_cuda_text_printf(&t, "(%lldLL - k%d)", (long long)(c->k_sp[d] - 1),
                            d);
    else
      iron_cuda_text_printf(&t, "k%d", d);
    iron_cuda_text_printf(&t,
                          " * %lldLL - (%lldLL);\n"
                          "  const int64_t i = p / %lldLL;\n"
                          "  ok = ok && p >= 0 && p %% %lldLL == 0 && i < "
                          "%lldLL;\n"
                          "  x += i * %lldLL; }\n",
                          (long long)c->rhs_dil[d], (long long)c->pad_lo[d],
                          (long long)c->lhs_dil[d], (long long)c->lhs_dil[d],
                          (long long)c->in_sp[d], (long long)c->in_ss[d]);
  }
  iron_cuda_text_printf(&t, "dst[e] = ok ? src[x] : (%s)0;\n}\n}\n", tl.store);
  *out_grid = grid_for(c->groups * m * k);
  return iron_cuda_text_finish(&t, out_src);
}

iron_status_t iron_cuda_gen_conv_wpack(const char *name,
                                       const iron_cuda_conv_t *c,
                                       char **out_src, unsigned *out_grid) {
  iron_cuda_type_t tr = iron_cuda_type_plain(c->rhs_dtype);
  if (!tr.store || is_cplx(c->rhs_dtype))
    return IRON_ERR(UNIMPLEMENTED, "cuda conv kernel pack for %s",
                    iron_dtype_name(c->rhs_dtype));
  int64_t m, n, k;
  iron_cuda_conv_gemm_dims(c, &m, &n, &k);
  (void)m;
  const int64_t count = c->groups * k * n;
  iron_cuda_text_t t;
  iron_cuda_text_init(&t);
  open_kernel(&t, name, tr.store, tr.store, count);
  iron_cuda_text_printf(&t,
                        "const int64_t nn = e %% %lldLL, gk = e / %lldLL;\n"
                        "const int64_t kk = gk %% %lldLL, g = gk / %lldLL;\n"
                        "const int64_t c = kk %% %lldLL;\n"
                        "const int64_t kpos = kk / %lldLL;\n",
                        (long long)n, (long long)n, (long long)k, (long long)k,
                        (long long)c->c_in_g, (long long)c->c_in_g);
  emit_kpos(&t, c, "kpos");
  iron_cuda_text_printf(
      &t, "int64_t w = (g * %lldLL + nn) * %lldLL + c * %lldLL;\n",
      (long long)c->c_out_g, (long long)c->k_os, (long long)c->k_is);
  for (int32_t d = 0; d < c->nsp; ++d)
    iron_cuda_text_printf(&t, "w += k%d * %lldLL;\n", d, (long long)c->k_ss[d]);
  iron_cuda_text_printf(&t, "dst[e] = src[w];\n}\n}\n");
  *out_grid = grid_for(count);
  return iron_cuda_text_finish(&t, out_src);
}

iron_status_t iron_cuda_gen_conv_unpack(const char *name,
                                        const iron_cuda_conv_t *c,
                                        char **out_src, unsigned *out_grid) {
  iron_cuda_type_t to = iron_cuda_type_plain(c->out_dtype);
  if (!to.store)
    return IRON_ERR(UNIMPLEMENTED, "cuda conv unpack for %s",
                    iron_dtype_name(c->out_dtype));
  int64_t m, n, k;
  iron_cuda_conv_gemm_dims(c, &m, &n, &k);
  (void)k;
  iron_cuda_text_t t;
  iron_cuda_text_init(&t);
  open_kernel(&t, name, to.store, to.store, c->out_count);
  iron_cuda_text_printf(&t, "int64_t rem = e;\n");
  for (int32_t d = c->rank - 1; d >= 0; --d)
    iron_cuda_text_printf(
        &t, "const int64_t oc%d = rem %% %lldLL; rem /= %lldLL;\n", d,
        (long long)c->out_dims[d], (long long)c->out_dims[d]);
  iron_cuda_text_printf(&t, "int64_t m = oc%d;\n", c->out_batch_dim);
  for (int32_t d = 0; d < c->nsp; ++d)
    iron_cuda_text_printf(&t, "m = m * %lldLL + oc%d;\n",
                          (long long)c->out_dims[c->out_sp_dim[d]],
                          c->out_sp_dim[d]);
  iron_cuda_text_printf(&t,
                        "const int64_t f = oc%d, g = f / %lldLL, nn = f %% "
                        "%lldLL;\n"
                        "dst[e] = src[(g * %lldLL + m) * %lldLL + nn];\n}\n}\n",
                        c->out_feature_dim, (long long)n, (long long)n,
                        (long long)m, (long long)n);
  *out_grid = grid_for(c->out_count);
  return iron_cuda_text_finish(&t, out_src);
}
