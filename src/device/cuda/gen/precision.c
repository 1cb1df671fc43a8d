// stablehlo.reduce_precision as generated CUDA C: the host's bit recipe
// (src/device/host/reduce_precision.c; formats from
// src/device/plans/precision_plan.c) with every mask computed here and
// baked in.
#include <stdio.h>

#include "device/cuda/gen/ops.h"
#include "device/plans/precision_plan.h"

iron_status_t iron_cuda_gen_reduce_precision(const char *name, iron_dtype_t dt,
                                             int64_t eb, int64_t mb,
                                             int64_t count, char **out_src) {
  int sm, se, nbits;
  if (!iron_precision_plan_format(dt, &sm, &se, &nbits))
    return IRON_ERR(UNIMPLEMENTED, "cuda reduce_precision for dtype %s",
                    iron_dtype_name(dt));
  if (eb < 1 || mb < 0)
    return IRON_ERR(INVALID_ARGUMENT, "reduce_precision: bad bit counts");
  const char *ut = nbits == 16 ? "uint16_t" : nbits == 32 ? "uint32_t" : "uint64_t";
  unsigned long long all = nbits == 64 ? ~0ull : ((1ull << nbits) - 1);
  unsigned long long sign_mask = 1ull << (nbits - 1);
  unsigned long long exp_mask = ((1ull << se) - 1) << sm;
  unsigned long long man_mask = (1ull << sm) - 1;
  iron_cuda_text_t t;
  iron_cuda_text_init(&t);
  iron_cuda_text_printf(&t, "%s", iron_cuda_prelude());
  iron_cuda_text_printf(
      &t,
      "extern \"C\" __global__ void __launch_bounds__(256) %s(const %s *in, "
      "%s *out) {\n"
      "for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < "
      "%lldLL; i += (int64_t)gridDim.x * blockDim.x) {\n"
      "const uint64_t x = in[i];\n"
      "const bool is_nan = (x & 0x%llxull) == 0x%llxull && (x & 0x%llxull) "
      "!= 0;\n"
      "uint64_t r = x;\n",
      name, ut, ut, (long long)count, exp_mask, exp_mask, man_mask);
  if (mb < sm) {
    int shift = sm - (int)mb;
    unsigned long long last_bit = 1ull << shift;
    unsigned long long base_bias = (last_bit >> 1) - 1;
    iron_cuda_text_printf(
        &t,
        "{ const uint64_t bias = ((r & 0x%llxull) >> %d) + 0x%llxull;\n"
        "r = ((r + bias) & ~0x%llxull) & 0x%llxull; }\n",
        last_bit, shift, base_bias, last_bit - 1, all);
  }
  if (eb < se) {
    unsigned long long exponent_bias = (1ull << (se - 1)) - 1;
    unsigned long long reduced_bias = (1ull << (eb - 1)) - 1;
    unsigned long long max_exp = exponent_bias + reduced_bias;
    unsigned long long min_exp = exponent_bias - reduced_bias;
    iron_cuda_text_printf(
        &t,
        "{ const uint64_t e = r & 0x%llxull, sz = r & 0x%llxull;\n"
        "if (e > 0x%llxull) r = sz | 0x%llxull;\n"
        "else if (e <= 0x%llxull) r = sz; }\n",
        exp_mask, sign_mask, max_exp << sm, exp_mask, min_exp << sm);
  }
  iron_cuda_text_printf(&t, "if (is_nan) r = x;\nout[i] = (%s)r;\n}\n}\n", ut);
  return iron_cuda_text_finish(&t, out_src);
}
