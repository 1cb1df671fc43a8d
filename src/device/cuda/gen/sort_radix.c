// The CUDA sort's LSD radix sort (cuda_sort_program.h, "radix"): kernels
// as CUDA C text and the launches that run them.
//
// Scratch: two key buffers (the widest key's bytes per element), two
// payload buffers (the values of a single operand, else row-local u32
// indices) and the digit counts, rows x 256 digits x chunks (u32,
// [row][digit][chunk] so that a row's exclusive scan gives each chunk's
// first position per digit). Per key, least significant first: `init`
// computes the key of every element in the current order (the first key
// sorted skips it: its first pass reads the operand itself), then per byte
// of the key: `hist` counts the
// chunk's digits (shared-memory atomics: order-free), `scan` turns a row's
// counts into positions, `scat` moves each 2048-element tile: every warp
// ranks its 8 x 32 elements in order (__match_any_sync finds the lanes
// with the same digit; per-warp counters in shared memory keep the earlier
// items' counts), the block combines the warps' counts per digit and the
// digits' totals, places the tile digit-sorted in shared memory and writes
// it out in order (consecutive threads write consecutive positions of a
// digit). The ranks follow element order, so each pass is stable and the
// whole sort is. The last pass (`fin`) writes the results: every operand
// gathered through the index.
#include <stdio.h>
#include <string.h>

#include "device/cuda/gen/ops.h"
#include "device/cuda/cuda_sort_program.h"

#define T IRON_CUDA_SORT_TILE
#define B IRON_CUDA_SORT_THREADS

// Enough chunks for about 1024 blocks per pass, at least one tile each; a
// chunk never spans two rows.
int64_t iron_cuda_sort_radix_chunk(int64_t rows, int64_t n) {
  int64_t tpr = (n + T - 1) / T;
  int64_t tpc = rows * tpr / 1024;
  if (tpc < 1) tpc = 1;
  if (tpc > tpr) tpc = tpr;
  return tpc * T;
}

// The element offset of position 0 of row `r` in an operand.
// (Inside printf formats: hence %%.)
#define ROW_BASE(r) "((" r ") / inner) * (n * inner) + (" r ") %% inner"
// The same as plain text (a printf argument).
#define ROW_BASE_TEXT(r) "((" r ") / inner) * (n * inner) + (" r ") % inner"

static int key_bytes(const iron_sort_key_t *k) { return (int)k->part_size; }

// What moves with the keys: the operand's values when it is the only one
// (jnp.sort: nothing to gather at the end), else row-local indices.
static bool value_payload(const iron_cuda_sort_shape_t *s) {
  return s->num == 1 && iron_dtype_size(s->dtypes[0]) <= 8;
}
static const char *payload_type(const iron_cuda_sort_shape_t *s) {
  return value_payload(s) ? s->ty[0].store : "uint32_t";
}
static int64_t payload_bytes(const iron_cuda_sort_shape_t *s) {
  return value_payload(s) ? (int64_t)iron_dtype_size(s->dtypes[0]) : 4;
}

// Exclusive scan of one value per thread over the 256 threads of a block
// (8 warps); *total gets the sum. Every thread must call it.
static const char kBlockScan[] =
    "__device__ __forceinline__ uint32_t %s_bscan(uint32_t v, uint32_t *ws, "
    "uint32_t *total) {\n"
    "  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;\n"
    "  uint32_t x = v;\n"
    "  for (int o = 1; o < 32; o <<= 1) {\n"
    "    uint32_t y = __shfl_up_sync(0xffffffffu, x, o);\n"
    "    if (lane >= o) x += y;\n"
    "  }\n"
    "  if (lane == 31) ws[w] = x;\n"
    "  __syncthreads();\n"
    "  uint32_t wo = 0, tot = 0;\n"
    "  for (int i = 0; i < 8; ++i) {\n"
    "    uint32_t s = ws[i];\n"
    "    if (i < w) wo += s;\n"
    "    tot += s;\n"
    "  }\n"
    "  __syncthreads();\n"
    "  *total = tot;\n"
    "  return wo + x - v;\n"
    "}\n";

// The keys of key k (not the first sorted) for the current order: from
// the payload when it is the value, else from the operand through the index.
static void gen_init(iron_cuda_text_t *t, const char *p,
                     const iron_cuda_sort_shape_t *s, int32_t k) {
  const iron_sort_key_t *key = &s->keys->keys[k];
  int32_t o = key->operand;
  const char *kt = iron_cuda_sort_key_type(key), *pt = payload_type(s);
  iron_cuda_text_printf(
      t,
      "extern \"C\" __global__ void __launch_bounds__(%d) %s_init%d(const %s "
      "*__restrict__ in, const %s *__restrict__ iin, %s *__restrict__ "
      "kout, %s *__restrict__ iout, int64_t n, int64_t rows, int64_t "
      "inner) {\n"
      "for (int64_t e = (int64_t)blockIdx.x * %d + threadIdx.x; e < rows * n; "
      "e += (int64_t)gridDim.x * %d) {\n",
      B, p, k, s->ty[o].store, pt, kt, pt, B, B);
  if (value_payload(s))
    iron_cuda_text_printf(t, "kout[e] = %s_key%d(iin[e]);\n}\n}\n", p, k);
  else
    iron_cuda_text_printf(t,
                          "const int64_t r = e / n;\n"
                          "kout[e] = %s_key%d(in[" ROW_BASE("r")
                          " + (int64_t)iin[e] * inner]);\n}\n}\n",
                          p, k);
}

// The digit histogram of one pass. `src` >= 0: the first pass of the first
// key, which reads key `src`'s operand directly (no key buffer yet).
static void gen_hist(iron_cuda_text_t *t, const char *p,
                     const iron_cuda_sort_shape_t *s, int bytes,
                     const char *kt, int32_t src) {
  if (src >= 0)
    iron_cuda_text_printf(
        t,
        "extern \"C\" __global__ void __launch_bounds__(%d) %s_hist_k%d("
        "const %s *__restrict__ in, uint32_t *__restrict__ counts, int64_t "
        "shift, int64_t n, int64_t chunk, int64_t nch, int64_t inner) {\n",
        B, p, src, s->ty[s->keys->keys[src].operand].store);
  else
    iron_cuda_text_printf(
        t,
        "extern \"C\" __global__ void __launch_bounds__(%d) %s_hist%d(const "
        "%s *__restrict__ keys, uint32_t *__restrict__ counts, int64_t shift, "
        "int64_t n, int64_t chunk, int64_t nch) {\n",
        B, p, bytes, kt);
  iron_cuda_text_printf(
      t,
      "__shared__ uint32_t h[256];\n"
      "h[threadIdx.x] = 0;\n"
      "__syncthreads();\n"
      "const int64_t row = (int64_t)blockIdx.x / nch, c = (int64_t)blockIdx.x "
      "- row * nch;\n"
      "const int64_t lo = c * chunk, hi = lo + chunk < n ? lo + chunk : n;\n");
  if (src >= 0)
    iron_cuda_text_printf(t,
                          "const int64_t rb = " ROW_BASE("row") ";\n"
                          "for (int64_t i = lo + threadIdx.x; i < hi; i += "
                          "%d) {\n"
                          "const %s kv = %s_key%d(in[rb + i * inner]);\n"
                          "atomicAdd(&h[(unsigned)(kv >> shift) & 255u], "
                          "1u);\n}\n",
                          B, kt, p, src);
  else
    iron_cuda_text_printf(t,
                          "const %s *kp = keys + row * n;\n"
                          "for (int64_t i = lo + threadIdx.x; i < hi; i += "
                          "%d)\n"
                          "  atomicAdd(&h[(unsigned)(kp[i] >> shift) & 255u], "
                          "1u);\n",
                          kt, B);
  iron_cuda_text_printf(
      t,
      "__syncthreads();\n"
      "counts[(row * 256 + threadIdx.x) * nch + c] = h[threadIdx.x];\n"
      "}\n");
}

static void gen_scan(iron_cuda_text_t *t, const char *p) {
  iron_cuda_text_printf(
      t,
      "extern \"C\" __global__ void __launch_bounds__(%d) %s_scan(uint32_t "
      "*__restrict__ counts, int64_t nch) {\n"
      "__shared__ uint32_t ws[8];\n"
      "uint32_t *cp = counts + (int64_t)blockIdx.x * 256 * nch;\n"
      "const int64_t lo = (int64_t)threadIdx.x * nch, hi = lo + nch;\n"
      "uint32_t s = 0;\n"
      "for (int64_t i = lo; i < hi; ++i) s += cp[i];\n"
      "uint32_t tot, acc = %s_bscan(s, ws, &tot);\n"
      "for (int64_t i = lo; i < hi; ++i) { uint32_t x = cp[i]; cp[i] = acc; "
      "acc += x; }\n"
      "}\n",
      B, p, p);
}

// The scatter of one pass; `final` gathers the operands into the results
// instead of moving keys and indices.
static void gen_scatter(iron_cuda_text_t *t, const char *p,
                        const iron_cuda_sort_shape_t *s, int bytes,
                        const char *kt, bool final, int32_t src) {
  const char *pt = payload_type(s);
  if (src >= 0)  // the first pass: keys from the operand, see gen_hist
    iron_cuda_text_printf(t,
                          "extern \"C\" __global__ void __launch_bounds__(%d) "
                          "%s_%s_k%d(const %s *__restrict__ src, ",
                          B, p, final ? "fin" : "scat", src,
                          s->ty[s->keys->keys[src].operand].store);
  else
    iron_cuda_text_printf(t,
                          "extern \"C\" __global__ void __launch_bounds__(%d) "
                          "%s_%s%d(const %s *__restrict__ kin, const %s "
                          "*__restrict__ iin, ",
                          B, p, final ? "fin" : "scat", bytes, kt, pt);
  if (final) {
    iron_cuda_text_printf(t, "const uint32_t *__restrict__ counts, int64_t "
                          "shift, ");
    iron_cuda_sort_gen_params(t, s, "const %s *__restrict__ in%u");
    iron_cuda_text_printf(t, ", ");
    iron_cuda_sort_gen_params(t, s, "%s *__restrict__ out%u");
    iron_cuda_text_printf(t, ", int64_t inner");
  } else {
    iron_cuda_text_printf(t,
                          "%s *__restrict__ kout, %s *__restrict__ iout, "
                          "const uint32_t *__restrict__ counts, int64_t shift%s",
                          kt, pt, src >= 0 ? ", int64_t inner" : "");
  }
  char load[512];
  if (src < 0)
    snprintf(load, sizeof(load),
             "key[it] = v ? kin[base + t0 + q] : (%s)0;\n"
             "if (v) id[it] = iin[base + t0 + q];\n",
             kt);
  else
    snprintf(load, sizeof(load),
             "key[it] = 0;\n"
             "if (v) {\n"
             "const %s val = src[rb + (t0 + q) * inner];\n"
             "key[it] = %s_key%d(val);\n"
             "id[it] = %s;\n"
             "}\n",
             s->ty[s->keys->keys[src].operand].store, p, src,
             value_payload(s) ? "val" : "(uint32_t)(t0 + q)");
  iron_cuda_text_printf(
      t,
      ", int64_t n, int64_t chunk, int64_t nch) {\n"
      "__shared__ uint32_t whist[8][257];\n"
      "__shared__ uint32_t gofs[256], tex[256], tcnt[256], ws[8];\n"
      "__shared__ %s skey[%d];\n"
      "__shared__ %s sidx[%d];\n"
      "const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;\n"
      "const unsigned below = (1u << lane) - 1u;\n"
      "const int64_t row = (int64_t)blockIdx.x / nch, c = (int64_t)blockIdx.x "
      "- row * nch;\n"
      "const int64_t lo = c * chunk, hi = lo + chunk < n ? lo + chunk : n;\n"
      "const int64_t base = row * n;\n"
      "%s"
      "gofs[tid] = counts[(row * 256 + tid) * nch + c];\n"
      "for (int64_t t0 = lo; t0 < hi; t0 += %d) {\n"
      "const int cnt = (int)(hi - t0 < %d ? hi - t0 : %d);\n"
      "for (int d = lane; d < 257; d += 32) whist[w][d] = 0;\n"
      "__syncwarp();\n"
      "%s key[8];\n"
      "%s id[8];\n"
      "uint32_t rk[8];\n"
      "int dg[8];\n"
      "#pragma unroll\n"
      "for (int it = 0; it < 8; ++it) {\n"
      "const int q = w * 256 + it * 32 + lane;\n"
      "const bool v = q < cnt;\n"
      "%s"
      "const int d = v ? (int)((key[it] >> shift) & 255u) : 256;\n"
      "dg[it] = d;\n"
      "const unsigned peers = __match_any_sync(0xffffffffu, d);\n"
      "const uint32_t prev = whist[w][d];\n"
      "__syncwarp();\n"
      "if ((peers & below) == 0) whist[w][d] = prev + __popc(peers);\n"
      "__syncwarp();\n"
      "rk[it] = prev + __popc(peers & below);\n"
      "}\n"
      "__syncthreads();\n"
      "uint32_t sum = 0;\n"
      "for (int i = 0; i < 8; ++i) { const uint32_t x = whist[i][tid]; "
      "whist[i][tid] = sum; sum += x; }\n"
      "tcnt[tid] = sum;\n"
      "uint32_t tot;\n"
      "const uint32_t ex = %s_bscan(sum, ws, &tot);\n"
      "tex[tid] = ex;\n"
      "__syncthreads();\n"
      "#pragma unroll\n"
      "for (int it = 0; it < 8; ++it) {\n"
      "const int d = dg[it];\n"
      "if (d < 256) {\n"
      "const uint32_t r = tex[d] + whist[w][d] + rk[it];\n"
      "skey[r] = key[it];\n"
      "sidx[r] = id[it];\n"
      "}\n}\n"
      "__syncthreads();\n"
      "for (int j = tid; j < cnt; j += %d) {\n"
      "const %s k = skey[j];\n"
      "const int d = (int)((k >> shift) & 255u);\n"
      "const int64_t pos = (int64_t)gofs[d] + (int64_t)(j - (int)tex[d]);\n",
      kt, T, pt, T, src >= 0 ? "const int64_t rb = " ROW_BASE_TEXT("row") ";\n" : "",
      T, T, T, kt, pt, load, p, B, kt);
  if (final && value_payload(s)) {
    iron_cuda_text_printf(t,
                          "out0[" ROW_BASE("row") " + pos * inner] = "
                          "sidx[j];\n");
  } else if (final) {
    iron_cuda_text_printf(t,
                          "const int64_t rb = " ROW_BASE("row") ";\n"
                          "const int64_t src = rb + (int64_t)sidx[j] * inner, "
                          "dst = rb + pos * inner;\n");
    for (uint32_t i = 0; i < s->num; ++i) {
      if (s->iota[i])  // the position is the value
        iron_cuda_text_printf(t, "out%u[dst] = (%s)sidx[j];\n", i,
                              s->ty[i].store);
      else
        iron_cuda_text_printf(t, "out%u[dst] = in%u[src];\n", i, i);
    }
  } else {
    iron_cuda_text_printf(t,
                          "kout[base + pos] = k;\n"
                          "iout[base + pos] = sidx[j];\n");
  }
  iron_cuda_text_printf(t,
                        "}\n"
                        "__syncthreads();\n"
                        "gofs[tid] += tcnt[tid];\n"
                        "__syncthreads();\n"
                        "}\n}\n");
}

static void chunk_args(iron_cuda_sort_builder_t *b, int64_t n, int64_t chunk,
                       int64_t nch) {
  iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_I64, 0, n);
  iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_I64, 0, chunk);
  iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_I64, 0, nch);
}

iron_status_t iron_cuda_sort_gen_radix(iron_cuda_text_t *t,
                                       iron_cuda_sort_builder_t *b,
                                       const iron_cuda_sort_shape_t *s) {
  const iron_sort_keys_t *keys = s->keys;
  if (!keys || keys->num_keys == 0)
    return IRON_ERR(INTERNAL, "radix sort without keys");
  const char *p = b->prefix;
  int64_t n = s->n, rows = s->rows, total = rows * n;
  int64_t chunk = iron_cuda_sort_radix_chunk(rows, n);
  int64_t nch = (n + chunk - 1) / chunk;
  int kw = 1;
  bool width_done[9] = {false};
  for (int32_t k = 0; k < keys->num_keys; ++k)
    if (key_bytes(&keys->keys[k]) > kw) kw = key_bytes(&keys->keys[k]);
  iron_cuda_text_printf(t, kBlockScan, p);
  gen_scan(t, p);
  // The first key sorted (the least significant) starts from the operand:
  // its first histogram and scatter compute the keys (and the payload)
  // there, so no init pass reads and writes the whole array first.
  int32_t first = keys->num_keys - 1;
  const iron_sort_key_t *fk = &keys->keys[first];
  gen_hist(t, p, s, key_bytes(fk), iron_cuda_sort_key_type(fk), first);
  gen_scatter(t, p, s, key_bytes(fk), iron_cuda_sort_key_type(fk),
              first == 0 && key_bytes(fk) == 1, first);
  for (int32_t k = 0; k < keys->num_keys; ++k) {
    const iron_sort_key_t *key = &keys->keys[k];
    int by = key_bytes(key);
    if (k != first) gen_init(t, p, s, k);
    if (width_done[by]) continue;
    width_done[by] = true;
    const char *kt = iron_cuda_sort_key_type(key);
    gen_hist(t, p, s, by, kt, -1);
    gen_scatter(t, p, s, by, kt, false, -1);
  }
  // The final pass is a byte of key 0 (the most significant key).
  {
    const iron_sort_key_t *key = &keys->keys[0];
    gen_scatter(t, p, s, key_bytes(key), iron_cuda_sort_key_type(key), true,
                -1);
  }
  for (uint32_t i = 0; i < s->num; ++i) {
    bool key_operand = false;
    for (int32_t k = 0; k < keys->num_keys; ++k)
      key_operand |= keys->keys[k].operand == (int32_t)i;
    if (s->iota[i] && !key_operand && !value_payload(s))
      b->prog->unread_inputs |= 1ull << i;
  }
  int64_t keys_a = iron_cuda_sort_scratch(b, total * kw);
  int64_t keys_b = iron_cuda_sort_scratch(b, total * kw);
  int64_t idx_a = iron_cuda_sort_scratch(b, total * payload_bytes(s));
  int64_t idx_b = iron_cuda_sort_scratch(b, total * payload_bytes(s));
  int64_t counts = iron_cuda_sort_scratch(b, rows * 256 * nch * 4);
  int64_t blocks = rows * nch;
  int64_t egrid = (total + B - 1) / B;
  if (egrid > (1 << 20)) egrid = 1 << 20;
  int64_t icur = idx_a, inext = idx_b, kcur = keys_a, knext = keys_b;
  char name[32];
  uint32_t kscan = iron_cuda_sort_kernel(b, "scan");
  for (int32_t k = first; k >= 0; --k) {
    const iron_sort_key_t *key = &keys->keys[k];
    int by = key_bytes(key);
    if (k != first) {
      snprintf(name, sizeof(name), "init%d", k);
      iron_cuda_sort_launch(b, iron_cuda_sort_kernel(b, name), egrid, B);
      iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_INPUT, (uint32_t)key->operand,
                         0);
      iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_SCRATCH, 0, icur);
      iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_SCRATCH, 0, kcur);
      iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_SCRATCH, 0, icur);
      iron_cuda_sort_geometry(b, s);
    }
    for (int byte = 0; byte < by; ++byte) {
      bool src = k == first && byte == 0;
      bool last = k == 0 && byte == by - 1;
      if (src)
        snprintf(name, sizeof(name), "hist_k%d", k);
      else
        snprintf(name, sizeof(name), "hist%d", by);
      iron_cuda_sort_launch(b, iron_cuda_sort_kernel(b, name), blocks, B);
      if (src)
        iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_INPUT,
                           (uint32_t)key->operand, 0);
      else
        iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_SCRATCH, 0, kcur);
      iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_SCRATCH, 0, counts);
      iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_I64, 0, 8 * byte);
      chunk_args(b, n, chunk, nch);
      if (src) iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_I64, 0, s->inner);
      iron_cuda_sort_launch(b, kscan, rows, B);
      iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_SCRATCH, 0, counts);
      iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_I64, 0, nch);
      if (src)
        snprintf(name, sizeof(name), "%s_k%d", last ? "fin" : "scat", k);
      else
        snprintf(name, sizeof(name), "%s%d", last ? "fin" : "scat", by);
      iron_cuda_sort_launch(b, iron_cuda_sort_kernel(b, name), blocks, B);
      if (src) {
        iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_INPUT,
                           (uint32_t)key->operand, 0);
      } else {
        iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_SCRATCH, 0, kcur);
        iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_SCRATCH, 0, icur);
      }
      if (last) {
        iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_SCRATCH, 0, counts);
        iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_I64, 0, 8 * byte);
        for (uint32_t i = 0; i < s->num; ++i)
          iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_INPUT, i, 0);
        for (uint32_t i = 0; i < s->num; ++i)
          iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_OUTPUT, i, 0);
        iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_I64, 0, s->inner);
        chunk_args(b, n, chunk, nch);
      } else {
        iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_SCRATCH, 0, knext);
        iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_SCRATCH, 0, inext);
        iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_SCRATCH, 0, counts);
        iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_I64, 0, 8 * byte);
        if (src) iron_cuda_sort_arg(b, IRON_CUDA_SORT_ARG_I64, 0, s->inner);
        chunk_args(b, n, chunk, nch);
        int64_t x = kcur;
        kcur = knext;
        knext = x;
        x = icur;
        icur = inext;
        inext = x;
      }
    }
  }
  return IRON_OK;
}
