// stablehlo.rng_bit_generator as generated CUDA C, bit-exact with the host
// kernel (src/device/host/rng.c documents XLA:CPU's layout of keys,
// counters and words; this follows it line by line).
#include <stdio.h>

#include "device/cuda/gen/ops.h"
#include "device/plans/rng_plan.h"

static const char kBlocks[] =
    "__device__ __forceinline__ unsigned iron_rotl(unsigned v, int d) {\n"
    "  return (v << d) | (v >> (32 - d));\n}\n"
    "__device__ __forceinline__ void iron_threefry(unsigned k0, unsigned k1,\n"
    "    unsigned in0, unsigned in1, unsigned *o0, unsigned *o1) {\n"
    "  const int rot[8] = {13, 15, 26, 6, 17, 29, 16, 24};\n"
    "  unsigned ks[3] = {k0, k1, 0x1BD11BDAu ^ k0 ^ k1};\n"
    "  unsigned x0 = in0 + ks[0], x1 = in1 + ks[1];\n"
    "#pragma unroll\n"
    "  for (int g = 0; g < 5; ++g) {\n"
    "#pragma unroll\n"
    "    for (int j = 0; j < 4; ++j) {\n"
    "      x0 += x1; x1 = iron_rotl(x1, rot[(g & 1) * 4 + j]); x1 ^= x0;\n"
    "    }\n"
    "    x0 += ks[(g + 1) % 3];\n"
    "    x1 += ks[(g + 2) % 3] + (unsigned)(g + 1);\n"
    "  }\n"
    "  *o0 = x0; *o1 = x1;\n}\n"
    "__device__ __forceinline__ void iron_philox(unsigned k0, unsigned k1,\n"
    "    unsigned x0, unsigned x1, unsigned x2, unsigned x3, unsigned *w) {\n"
    "#pragma unroll\n"
    "  for (int r = 0; r < 10; ++r) {\n"
    "    uint64_t p0 = (uint64_t)x0 * 0xD2511F53u;\n"
    "    uint64_t p1 = (uint64_t)x2 * 0xCD9E8D57u;\n"
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
  const char *ot = out_bytes == 1   ? "uint8_t"
                   : out_bytes == 2 ? "uint16_t"
                   : out_bytes == 4 ? "uint32_t"
                                    : "uint64_t";
  iron_cuda_text_t t;
  iron_cuda_text_init(&t);
  iron_cuda_text_printf(&t, "%s%s", iron_cuda_prelude(), kBlocks);
  iron_cuda_text_printf(
      &t,
      "extern \"C\" __global__ void __launch_bounds__(256) %s(const uint64_t "
      "*__restrict__ state, uint64_t *__restrict__ new_state, %s "
      "*__restrict__ out) {\n"
      "const uint64_t key = state[0], s1 = state[1];\n"
      "const unsigned k0 = (unsigned)key, k1 = (unsigned)(key >> 32);\n"
      "const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
      "const int64_t nth = (int64_t)gridDim.x * blockDim.x;\n",
      name, ot);
  int64_t work;
  if (alg == IRON_RNG_THREE_FRY && out_bytes == 8) {
    work = count;
    iron_cuda_text_printf(
        &t,
        "for (int64_t e = tid; e < %lldLL; e += nth) {\n"
        "uint64_t c = s1 + (uint64_t)e; unsigned y0, y1;\n"
        "iron_threefry(k0, k1, (unsigned)c, (unsigned)(c >> 32), &y0, &y1);\n"
        "out[e] = (uint64_t)y0 | ((uint64_t)y1 << 32);\n}\n"
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
        "for (int64_t q = tid; q < %lldLL; q += nth) {\n"
        "int64_t row = q / %lldLL, i = q - row * %lldLL;\n"
        "int64_t o = row / %lldLL, h = row - o * %lldLL;\n"
        "int64_t base0 = (o * %lldLL + 2 * h) * %lldLL;\n"
        "uint64_t c = s1 + (uint64_t)q; unsigned y0, y1;\n"
        "iron_threefry(k0, k1, (unsigned)c, (unsigned)(c >> 32), &y0, &y1);\n"
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
        &t, "const uint64_t hi0 = %s;\n",
        state_words == 2 ? "key" : "state[2]");
    iron_cuda_text_printf(
        &t,
        "for (int64_t b = tid; b < %lldLL; b += nth) {\n"
        "uint64_t lo = s1 + (uint64_t)b, hi = hi0 + (lo < s1 ? 1 : 0);\n"
        "unsigned w[4];\n"
        "iron_philox(k0, k1, (unsigned)lo, (unsigned)(lo >> 32), "
        "(unsigned)hi, (unsigned)(hi >> 32), w);\n",
        (long long)blocks);
    if (out_bytes == 8)
      iron_cuda_text_printf(
          &t,
          "int64_t e = 2 * b;\n"
          "out[e] = (uint64_t)w[0] | ((uint64_t)w[1] << 32);\n"
          "if (e + 1 < %lldLL) out[e + 1] = (uint64_t)w[2] | ((uint64_t)w[3] "
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
        "uint64_t lo = s1 + %lluull, hi = hi0 + (lo < s1 ? 1 : 0);\n"
        "new_state[0] = key; new_state[1] = lo;\n%s}\n",
        (unsigned long long)blocks,
        state_words == 3 ? "new_state[2] = hi;\n" : "(void)hi;\n");
  }
  iron_cuda_text_printf(&t, "}\n");
  *out_grid = (unsigned)blocks_for(work);
  return iron_cuda_text_finish(&t, out_src);
}
