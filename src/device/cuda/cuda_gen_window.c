// stablehlo.reduce_window as generated CUDA C: one thread per output
// element, nested loops over the window dims wider than 1 (all bounds baked
// in), padding and dilation holes skipped as on the host (window.c).
#include <stdio.h>

#include "device/cuda/cuda_ops_gen.h"

iron_status_t iron_cuda_gen_reduce_window(const char *name,
                                          const iron_cuda_window_t *w,
                                          uint32_t num,
                                          const iron_dtype_t *dtypes,
                                          const iron_ir_region_t *body,
                                          char **out_src, unsigned *out_grid) {
  if (num == 0 || num > 8)
    return IRON_ERR(UNIMPLEMENTED, "cuda reduce_window of %u operands", num);
  iron_cuda_gen_type_t ty[8];
  for (uint32_t i = 0; i < num; ++i) {
    ty[i] = iron_cuda_gen_type(dtypes[i]);
    if (!ty[i].store || ty[i].is_complex)
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
  iron_cuda_text_printf(&t, "%s", iron_cuda_ops_prelude());
  iron_status_t st = iron_cuda_gen_region_fn(&t, "iop_body", body);
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
      "for (iop_s64 o = (iop_s64)blockIdx.x * blockDim.x + threadIdx.x; o < "
      "%lldLL; o += (iop_s64)gridDim.x * blockDim.x) {\n"
      "iop_s64 rem = o;\n",
      (long long)nout);
  for (int32_t d = w->rank - 1; d >= 0; --d)
    iron_cuda_text_printf(&t,
                          "const iop_s64 oc%d = rem %% %lldLL; rem /= %lldLL;\n",
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
      iron_cuda_text_printf(&t, "for (iop_s64 k%d = 0; k%d < %lldLL; ++k%d) {\n",
                            d, d, (long long)w->wdims[d], d);
    else
      iron_cuda_text_printf(&t, "{ const iop_s64 k%d = 0;\n", d);
    iron_cuda_text_printf(
        &t,
        "const iop_s64 p%d = oc%d * %lldLL + k%d * %lldLL - (%lldLL);\n"
        "if (p%d < 0 || p%d >= %lldLL",
        d, d, (long long)w->strides[d], d, (long long)w->win_dil[d],
        (long long)w->pad_lo[d], d, d, (long long)dil_in);
    if (w->base_dil[d] > 1)
      iron_cuda_text_printf(&t, " || p%d %% %lldLL != 0", d,
                            (long long)w->base_dil[d]);
    iron_cuda_text_printf(&t, ") continue;\n");
    iron_cuda_text_printf(&t, "const iop_s64 f%d = %s + (p%d / %lldLL) * %lldLL;\n",
                          d, d == 0 ? "0" : "f_prev", d,
                          (long long)w->base_dil[d], (long long)in_strides[d]);
    iron_cuda_text_printf(&t, "{ const iop_s64 f_prev = f%d; (void)f_prev;\n",
                          d);
  }
  if (w->rank > 0)
    iron_cuda_text_printf(&t, "const iop_s64 off = f%d;\n", w->rank - 1);
  else
    iron_cuda_text_printf(&t, "const iop_s64 off = 0;\n");
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(&t, "%s x%u = %s(in%u[off]);\n", ty[i].comp, i,
                          ty[i].ld, i);
  iron_cuda_text_printf(&t, "{ ");
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(&t, "%s n%u_; ", ty[i].comp, i);
  iron_cuda_text_printf(&t, "iop_body(");
  for (uint32_t i = 0; i < num; ++i) iron_cuda_text_printf(&t, "acc%u, ", i);
  for (uint32_t i = 0; i < num; ++i) iron_cuda_text_printf(&t, "x%u, ", i);
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(&t, "&n%u_%s", i, i + 1 < num ? ", " : ");");
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(&t, " acc%u = n%u_;", i, i);
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
