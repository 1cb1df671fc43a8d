// stablehlo.rng_bit_generator as generated CUDA C, bit-exact with the host
// kernel (src/device/host/rng.c documents XLA:CPU's layout of keys,
// counters and words; this follows it line by line).
#include <stdio.h>

#include "device/cuda/cuda_ops_gen.h"
#include "device/plans/rng_plan.h"

static const char kBlocks[] =
    "__device__ __forceinline__ unsigned iop_rotl(unsigned v, int d) {\n"
    "  return (v << d) | (v >> (32 - d));\n}\n"
    "__device__ __forceinline__ void iop_threefry(unsigned k0, unsigned k1,\n"
    "    unsigned in0, unsigned in1, unsigned *o0, unsigned *o1) {\n"
    "  const int rot[8] = {13, 15, 26, 6, 17, 29, 16, 24};\n"
    "  unsigned ks[3] = {k0, k1, 0x1BD11BDAu ^ k0 ^ k1};\n"
    "  unsigned x0 = in0 + ks[0], x1 = in1 + ks[1];\n"
    "#pragma unroll\n"
    "  for (int g = 0; g < 5; ++g) {\n"
    "#pragma unroll\n"
    "    for (int j = 0; j < 4; ++j) {\n"
    "      x0 += x1; x1 = iop_rotl(x1, rot[(g & 1) * 4 + j]); x1 ^= x0;\n"
    "    }\n"
    "    x0 += ks[(g + 1) % 3];\n"
    "    x1 += ks[(g + 2) % 3] + (unsigned)(g + 1);\n"
    "  }\n"
    "  *o0 = x0; *o1 = x1;\n}\n"
    "__device__ __forceinline__ void iop_philox(unsigned k0, unsigned k1,\n"
    "    unsigned x0, unsigned x1, unsigned x2, unsigned x3, unsigned *w) {\n"
    "#pragma unroll\n"
    "  for (int r = 0; r < 10; ++r) {\n"
    "    iop_u64 p0 = (iop_u64)x0 * 0xD2511F53u;\n"
    "    iop_u64 p1 = (iop_u64)x2 * 0xCD9E8D57u;\n"
    "    unsigned y0 = (unsigned)(p1 >> 32) ^ x1 ^ k0, y1 = (unsigned)p1;\n"
    "    unsigned y2 = (unsigned)(p0 >> 32) ^ x3 ^ k1, y3 = (unsigned)p0;\n"
    "    x0 = y0; x1 = y1; x2 = y2; x3 = y3;\n"
    "    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;\n"
    "  }\n"
    "  w[0] = x0; w[1] = x1; w[2] = x2; w[3] = x3;\n}\n";

static int64_t blocks_for(int64_t n) {
  int64_t g = (n + 255) / 256;
  if (g < 1) g = 1;
  if (g > (1 << 20)) g = 1 << 20;
  return g;
}

iron_status_t iron_cuda_gen_rng(const char *name, int32_t alg,
                                int32_t state_words, int32_t out_bytes,
                                int32_t rank, const int64_t *dims,
                                char **out_src, unsigned *out_grid) {
  if ((alg != IRON_RNG_THREE_FRY && alg != IRON_RNG_PHILOX) ||
      !(state_words == 2 || (state_words == 3 && alg == IRON_RNG_PHILOX)) ||
      !(out_bytes == 1 || out_bytes == 2 || out_bytes == 4 || out_bytes == 8))
    return IRON_ERR(UNIMPLEMENTED, "cuda rng_bit_generator variant");
  int64_t count = 1;
  for (int32_t i = 0; i < rank; ++i) count *= dims[i];
  const char *ot = out_bytes == 1   ? "iop_u8"
                   : out_bytes == 2 ? "iop_u16"
                   : out_bytes == 4 ? "iop_u32"
                                    : "iop_u64";
  iron_cuda_text_t t;
  iron_cuda_text_init(&t);
  iron_cuda_text_printf(&t, "%s%s", iron_cuda_ops_prelude(), kBlocks);
  iron_cuda_text_printf(
      &t,
      "extern \"C\" __global__ void __launch_bounds__(256) %s(const iop_u64 "
      "*__restrict__ state, iop_u64 *__restrict__ new_state, %s "
      "*__restrict__ out) {\n"
      "const iop_u64 key = state[0], s1 = state[1];\n"
      "const unsigned k0 = (unsigned)key, k1 = (unsigned)(key >> 32);\n"
      "const iop_s64 tid = (iop_s64)blockIdx.x * blockDim.x + threadIdx.x;\n"
      "const iop_s64 nth = (iop_s64)gridDim.x * blockDim.x;\n",
      name, ot);
  int64_t work;
  if (alg == IRON_RNG_THREE_FRY && out_bytes == 8) {
    work = count;
    iron_cuda_text_printf(
        &t,
        "for (iop_s64 e = tid; e < %lldLL; e += nth) {\n"
        "iop_u64 c = s1 + (iop_u64)e; unsigned y0, y1;\n"
        "iop_threefry(k0, k1, (unsigned)c, (unsigned)(c >> 32), &y0, &y1);\n"
        "out[e] = (iop_u64)y0 | ((iop_u64)y1 << 32);\n}\n"
        "if (tid == 0) { new_state[0] = key; new_state[1] = s1 + %lluull; }\n",
        (long long)count, (unsigned long long)count);
  } else if (alg == IRON_RNG_THREE_FRY) {
    int64_t outer, split, inner;
    iron_rng_plan_threefry_split(rank, dims, &outer, &split, &inner);
    int64_t half = (split + 1) / 2;
    int64_t rows = count ? outer * half : 0;
    work = rows * inner;
    iron_cuda_text_printf(
        &t,
        "for (iop_s64 q = tid; q < %lldLL; q += nth) {\n"
        "iop_s64 row = q / %lldLL, i = q - row * %lldLL;\n"
        "iop_s64 o = row / %lldLL, h = row - o * %lldLL;\n"
        "iop_s64 base0 = (o * %lldLL + 2 * h) * %lldLL;\n"
        "iop_u64 c = s1 + (iop_u64)q; unsigned y0, y1;\n"
        "iop_threefry(k0, k1, (unsigned)c, (unsigned)(c >> 32), &y0, &y1);\n"
        "out[base0 + i] = (%s)y0;\n"
        "if (2 * h + 1 < %lldLL) out[base0 + %lldLL + i] = (%s)y1;\n}\n"
        "if (tid == 0) { new_state[0] = key; new_state[1] = s1 + %lluull; }\n",
        (long long)work, (long long)(inner ? inner : 1),
        (long long)(inner ? inner : 1), (long long)half, (long long)half,
        (long long)split, (long long)inner, ot, (long long)split,
        (long long)inner, ot, (unsigned long long)work);
  } else {
    int64_t words = out_bytes == 8 ? 2 * count : count;
    int64_t blocks = (words + 3) / 4;
    work = blocks;
    iron_cuda_text_printf(
        &t, "const iop_u64 hi0 = %s;\n",
        state_words == 2 ? "key" : "state[2]");
    iron_cuda_text_printf(
        &t,
        "for (iop_s64 b = tid; b < %lldLL; b += nth) {\n"
        "iop_u64 lo = s1 + (iop_u64)b, hi = hi0 + (lo < s1 ? 1 : 0);\n"
        "unsigned w[4];\n"
        "iop_philox(k0, k1, (unsigned)lo, (unsigned)(lo >> 32), "
        "(unsigned)hi, (unsigned)(hi >> 32), w);\n",
        (long long)blocks);
    if (out_bytes == 8)
      iron_cuda_text_printf(
          &t,
          "iop_s64 e = 2 * b;\n"
          "out[e] = (iop_u64)w[0] | ((iop_u64)w[1] << 32);\n"
          "if (e + 1 < %lldLL) out[e + 1] = (iop_u64)w[2] | ((iop_u64)w[3] "
          "<< 32);\n}\n",
          (long long)count);
    else
      iron_cuda_text_printf(
          &t,
          "for (int k = 0; k < 4; ++k) if (4 * b + k < %lldLL) out[4 * b + "
          "k] = (%s)w[k];\n}\n",
          (long long)count, ot);
    iron_cuda_text_printf(
        &t,
        "if (tid == 0) {\n"
        "iop_u64 lo = s1 + %lluull, hi = hi0 + (lo < s1 ? 1 : 0);\n"
        "new_state[0] = key; new_state[1] = lo;\n%s}\n",
        (unsigned long long)blocks,
        state_words == 3 ? "new_state[2] = hi;\n" : "(void)hi;\n");
  }
  iron_cuda_text_printf(&t, "}\n");
  *out_grid = (unsigned)blocks_for(work);
  return iron_cuda_text_finish(&t, out_src);
}
