// stablehlo.rng_bit_generator on the host, bit-exact with XLA:CPU.
//
// XLA:CPU expands rng_bit_generator into plain HLO (RngBitGeneratorExpander
// over xla/hlo/builder/lib/prng.cc); the results are defined by that
// expansion, not by the Random123 reference layouts, so everything below
// follows it: how the u64 state splits into key and counter, how counters
// are laid out over the output shape, how 64-bit values are formed from
// 32-bit words and how much the counter advances. Verified bit for bit
// against jax 0.10.2's CPU backend by tests/gen_rng_vectors.py and
// tests/c/test_host_rng.c.
//
//   state[0] is the key (two u32 words: low, high) for every algorithm.
//   THREE_FRY: state is u64[2]; state[1] is a 64-bit counter.
//   PHILOX:    state u64[2]: the 128-bit counter is (low = state[1],
//              high = state[0]) and only its low word is written back;
//              state u64[3]: the counter is (low = state[1], high = state[2]).
//   DEFAULT:   PHILOX on XLA:CPU.
//   Outputs: any 8/16/32/64-bit integer or float type; narrower than 32 bits
//   takes the low bits of the 32-bit stream, floats are raw bits.
#include <stdlib.h>
#include <string.h>

#include "device/host/host_kernel.h"
#include "device/plans/rng_plan.h"

typedef struct rng_params {
  int32_t algorithm;  // THREE_FRY or PHILOX (DEFAULT resolved)
  int32_t state_len;  // 2 or 3
  int32_t out_bytes;  // 1, 2, 4 or 8
  int64_t count;      // output elements
  // THREE_FRY with <= 32-bit outputs generates pairs of words over a "half"
  // shape that splits one dimension: element (o, 2h + w, i) of the output
  // takes word w of the pair at half index (o, h, i).
  int64_t outer, split, half, inner;
} rng_params_t;

// ---------------------------------------------------------------------------
// The two block functions (Salmon et al., SC 2011), with XLA's round counts
// (Threefry-2x32: 20 rounds; Philox-4x32: 10 rounds).

static inline uint32_t rotl32(uint32_t v, int d) {
  return (v << d) | (v >> (32 - d));
}

static void threefry2x32(uint32_t k0, uint32_t k1, uint32_t in0, uint32_t in1,
                         uint32_t *out0, uint32_t *out1) {
  static const int rot[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  uint32_t ks[3] = {k0, k1, 0x1BD11BDAu ^ k0 ^ k1};
  uint32_t x0 = in0 + ks[0], x1 = in1 + ks[1];
  for (int g = 0; g < 5; ++g) {
    const int *r = rot + (g & 1) * 4;
    for (int j = 0; j < 4; ++j) {
      x0 += x1;
      x1 = rotl32(x1, r[j]);
      x1 ^= x0;
    }
    // Key injection after every four rounds.
    x0 += ks[(g + 1) % 3];
    x1 += ks[(g + 2) % 3] + (uint32_t)(g + 1);
  }
  *out0 = x0;
  *out1 = x1;
}

static void philox4x32(uint32_t k0, uint32_t k1, const uint32_t in[4],
                       uint32_t out[4]) {
  uint32_t x0 = in[0], x1 = in[1], x2 = in[2], x3 = in[3];
  for (int r = 0; r < 10; ++r) {
    uint64_t p0 = (uint64_t)x0 * 0xD2511F53u;
    uint64_t p1 = (uint64_t)x2 * 0xCD9E8D57u;
    uint32_t y0 = (uint32_t)(p1 >> 32) ^ x1 ^ k0;
    uint32_t y1 = (uint32_t)p1;
    uint32_t y2 = (uint32_t)(p0 >> 32) ^ x3 ^ k1;
    uint32_t y3 = (uint32_t)p0;
    x0 = y0, x1 = y1, x2 = y2, x3 = y3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = x0, out[1] = x1, out[2] = x2, out[3] = x3;
}

// Stores the low `bytes` bytes of v (XLA converts u32 -> u8/u16 by
// truncation; signed outputs are the same bits).
static inline void store_bits(void *base, int32_t bytes, int64_t i,
                              uint64_t v) {
  switch (bytes) {
    case 1: ((uint8_t *)base)[i] = (uint8_t)v; break;
    case 2: ((uint16_t *)base)[i] = (uint16_t)v; break;
    case 4: ((uint32_t *)base)[i] = (uint32_t)v; break;
    default: ((uint64_t *)base)[i] = v; break;
  }
}

// ---------------------------------------------------------------------------
// Work items, split over the thread pool.

typedef struct rng_job {
  const rng_params_t *p;
  uint32_t k0, k1;
  uint64_t ctr_lo, ctr_hi;  // THREE_FRY uses ctr_lo only
  void *out;
} rng_job_t;

// THREE_FRY, <= 32-bit outputs: one index per (o, h) row of the half shape.
static void threefry32_rows(void *arg, int64_t begin, int64_t end) {
  const rng_job_t *j = (const rng_job_t *)arg;
  const rng_params_t *p = j->p;
  for (int64_t row = begin; row < end; ++row) {
    int64_t o = row / p->half, h = row % p->half;
    int64_t base0 = (o * p->split + 2 * h) * p->inner;
    bool has1 = 2 * h + 1 < p->split;
    for (int64_t i = 0; i < p->inner; ++i) {
      uint64_t c = j->ctr_lo + (uint64_t)(row * p->inner + i);
      uint32_t y0, y1;
      threefry2x32(j->k0, j->k1, (uint32_t)c, (uint32_t)(c >> 32), &y0, &y1);
      store_bits(j->out, p->out_bytes, base0 + i, y0);
      if (has1) store_bits(j->out, p->out_bytes, base0 + p->inner + i, y1);
    }
  }
}

// THREE_FRY, 64-bit outputs: one counter per element, words (low, high).
static void threefry64_elems(void *arg, int64_t begin, int64_t end) {
  const rng_job_t *j = (const rng_job_t *)arg;
  uint64_t *out = (uint64_t *)j->out;
  for (int64_t e = begin; e < end; ++e) {
    uint64_t c = j->ctr_lo + (uint64_t)e;
    uint32_t y0, y1;
    threefry2x32(j->k0, j->k1, (uint32_t)c, (uint32_t)(c >> 32), &y0, &y1);
    out[e] = (uint64_t)y0 | ((uint64_t)y1 << 32);
  }
}

// PHILOX: one index per 128-bit block (counter + block, with carry).
// 32-bit and narrower outputs take the four words in order; 64-bit outputs
// take (w0 | w1 << 32, w2 | w3 << 32).
static void philox_blocks(void *arg, int64_t begin, int64_t end) {
  const rng_job_t *j = (const rng_job_t *)arg;
  const rng_params_t *p = j->p;
  for (int64_t b = begin; b < end; ++b) {
    uint64_t lo = j->ctr_lo + (uint64_t)b;
    uint64_t hi = j->ctr_hi + (lo < j->ctr_lo ? 1 : 0);
    uint32_t in[4] = {(uint32_t)lo, (uint32_t)(lo >> 32), (uint32_t)hi,
                      (uint32_t)(hi >> 32)};
    uint32_t w[4];
    philox4x32(j->k0, j->k1, in, w);
    if (p->out_bytes == 8) {
      int64_t e = 2 * b;
      ((uint64_t *)j->out)[e] = (uint64_t)w[0] | ((uint64_t)w[1] << 32);
      if (e + 1 < p->count)
        ((uint64_t *)j->out)[e + 1] = (uint64_t)w[2] | ((uint64_t)w[3] << 32);
    } else {
      for (int k = 0; k < 4 && 4 * b + k < p->count; ++k)
        store_bits(j->out, p->out_bytes, 4 * b + k, w[k]);
    }
  }
}

static iron_status_t rng_prepare(const iron_ir_op_t *op,
                                 iron_region_t *const *regions,
                                 void **out_params) {
  (void)regions;
  *out_params = NULL;
  iron_rng_plan_t plan;
  IRON_RETURN_IF_ERROR_PLAIN(iron_rng_plan_read(op, &plan));
  rng_params_t *p = (rng_params_t *)calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  p->algorithm = plan.algorithm;
  p->state_len = plan.state_words;
  p->out_bytes = plan.out_bytes;
  p->count = plan.count;
  if (plan.algorithm == IRON_RNG_THREE_FRY && plan.out_bytes <= 4) {
    iron_rng_plan_threefry_split(plan.out->rank, plan.out->dims, &p->outer,
                                 &p->split, &p->inner);
    p->half = (p->split + 1) / 2;
  }
  *out_params = p;
  return IRON_OK;
}

static iron_status_t rng_run(const iron_kernel_ctx_t *ctx, const void *params,
                             const iron_tensor_t *const *inputs,
                             iron_tensor_t *const *outputs) {
  const rng_params_t *p = (const rng_params_t *)params;
  const uint64_t *state = (const uint64_t *)inputs[0]->data;
  uint64_t *new_state = (uint64_t *)outputs[0]->data;
  rng_job_t job = {.p = p,
                   .k0 = (uint32_t)state[0],
                   .k1 = (uint32_t)(state[0] >> 32),
                   .out = outputs[1]->data};
  iron_threadpool_t *pool = ctx ? ctx->pool : NULL;
  // Read the whole state before writing: the runtime may alias the state
  // output with the input.
  uint64_t key = state[0], s1 = state[1], s2 = p->state_len > 2 ? state[2] : 0;

  if (p->algorithm == IRON_RNG_THREE_FRY) {
    job.ctr_lo = s1;
    uint64_t used;
    if (p->out_bytes == 8) {
      used = (uint64_t)p->count;
      iron_threadpool_parallel_for(pool, p->count, 4096, threefry64_elems,
                                   &job);
    } else {
      int64_t rows = p->count ? p->outer * p->half : 0;
      used = (uint64_t)(rows * p->inner);
      int64_t grain = 4096 / (p->inner > 0 ? p->inner : 1);
      iron_threadpool_parallel_for(pool, rows, grain > 0 ? grain : 1,
                                   threefry32_rows, &job);
    }
    new_state[0] = key;
    new_state[1] = s1 + used;
    return IRON_OK;
  }

  // PHILOX.
  if (p->state_len == 2) {
    job.ctr_lo = s1;
    job.ctr_hi = key;
  } else {
    job.ctr_lo = s1;
    job.ctr_hi = s2;
  }
  int64_t words = p->out_bytes == 8 ? 2 * p->count : p->count;
  int64_t blocks = (words + 3) / 4;
  iron_threadpool_parallel_for(pool, blocks, 1024, philox_blocks, &job);
  uint64_t lo = job.ctr_lo + (uint64_t)blocks;
  uint64_t hi = job.ctr_hi + (lo < job.ctr_lo ? 1 : 0);
  new_state[0] = key;
  new_state[1] = lo;
  if (p->state_len == 3) new_state[2] = hi;
  return IRON_OK;
}

static const iron_kernel_t kRngBitGenerator = {
    /* .name = */ "rng_bit_generator",
    /* .prepare = */ rng_prepare,
    /* .run = */ rng_run,
    /* .destroy = */ NULL,
    /* .inplace_ok = */ true,
    /* .elementwise = */ false,
};

void iron_host_register_rng(iron_kernel_table_t table) {
  table[IRON_OP_RNG_BIT_GENERATOR] = &kRngBitGenerator;
}
