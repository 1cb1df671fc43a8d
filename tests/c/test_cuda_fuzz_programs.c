// The harness of the random-program fuzzer (tests/fuzz_programs.py): every
// artifact of a directory is compiled twice, on a plain host runtime and
// as the CUDA device plans it, and both run on the same inputs; every
// result must be the same bit for bit (NaN payloads aside).
//
// The CUDA side is, by default, the CPU emulation of cuda_emu_exec.h (CUDA
// fusion, the CUDA device's generated kernels compiled as C++ and run on
// the CPU; GPU-free); with IRON_TEST_FUZZ_DEVICE=cuda it is the real CUDA
// device (a GPU machine). On the GPU, programs that the generator's
// manifest (DIR/manifest.txt) marks "inexact" (transcendental functions,
// float sums: libdevice and a parallel order are not the host's libm and
// sequential order) compare floats within a tolerance and may differ in a
// few elements of other outputs (a comparison or conversion of such a
// value); everything else is exact. The emulation calls the host's libm,
// so it is exact everywhere but for complex tan/tanh (glibc's on the host,
// Kahan's formula in CUDA's prelude) and float sums and products of fused
// reduce kernels (their own order): half of the programs (by name) fuse
// every reduce with its producers (IRON_CUDA_FUSE_REDUCE=all), run on the
// kernel's real grid by cuda_emu.h's multi-thread shim, as are kernels of
// a fixed grid (tiled transposes); those programs compare as inexact ones.
//
// Inputs: four seeds per program (IRON_TEST_SEEDS): 0 the corpus'
// synthetic values, 1-2 cuda_emu_fill's (small values; scalar integers,
// i.e. start indices and such, far out of range), 3+ special values
// (signed zeros, infinities, NaN, extremes of each integer type, values
// that overflow narrower types, denormals).
//
// Directory: IRON_TEST_CORPUS_DIR (default: the corpus' fz_* regression
// programs). One line per failing program, "FAIL <name>: <why>", then a
// summary line "fuzz programs: ..."; "@ <name> <phase>" lines before each
// compile/run (IRON_TEST_TRACE=1) name the program a crash happened in.
//
// IRON_TEST_PLANT=<name> (emulation only) plants a bug into the generated
// source of every fused kernel before it is built, to show the fuzzer
// finds it (tests/fuzz_programs.py run --plant NAME --expect-fail):
//   sub_for_add  the first sum of a fused kernel's element statements
//                becomes a difference;
//   index_off    the first coordinate-indexed access (an indexed load:
//                slice, transpose, dynamic_slice, broadcast; or a
//                dynamic_update_slice root's store) is one element off;
//   start_clamp  the first start-index clamp (dynamic_slice loads,
//                dynamic_update_slice roots) sends negative starts to
//                the largest start instead of 0;
//   iota_off     the first iota of a fusion counts from 1.
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus_files.h"
#include "cuda_emu_exec.h"
#include "test.h"

typedef struct prog {
  char name[160];
  // Floats compared within a tolerance: on the GPU, programs of inexact
  // ops; in the emulation, float sums and products that a fused reduce
  // kernel adds in its own order.
  bool inexact;
  iron_executable_t *ref, *emu;
} prog_t;

// Refusals that mean fuse.c formed a group the generator cannot generate
// (as test_cuda_fusion_corpus.c).
static bool fusion_shape_refusal(const char *msg) {
  static const char *const kPhrases[] = {
      "in this CUDA fusion",     "in a CUDA fusion of another shape",
      "in a CUDA fusion of a computed", "elements in a fusion of",
      "CUDA fusion:",            "fusion block",
      "operands and results on the CUDA device",
  };
  for (size_t i = 0; i < sizeof(kPhrases) / sizeof(kPhrases[0]); ++i)
    if (strstr(msg, kPhrases[i])) return true;
  return false;
}

// ---------------------------------------------------------------------------
// Special-value inputs (seeds >= 3).

static void fill_special(void *data, iron_dtype_t dt, int32_t rank,
                         int64_t count, uint64_t seed, uint32_t arg) {
  static const double kF[] = {
      0.0,     -0.0,  1.0,       -1.0,      0.5,        -2.5,   3.0,
      7.25,    65504, 65520,     1e10,      -1e10,      2147483648.0,
      -2147483649.0,  9.3e18,    -9.3e18,   1e-3,       INFINITY,
      -INFINITY, NAN, 3.4e38,    1e300,     1e-40,      -1e-310,
      255.5,   -128.5, 4294967296.0, 0.25,  -0.75,      1.5e-5};
  static const int64_t kS[] = {0, 1, -1, 2, 7, 31, 32, 63, 64, -64, 100,
                               127, -128, 255, 32767, -32768, 65535,
                               INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN,
                               -1000, 1000};
  const size_t nf = sizeof(kF) / sizeof(kF[0]);
  const size_t ns = sizeof(kS) / sizeof(kS[0]);
  for (int64_t i = 0; i < count; ++i) {
    uint64_t r = cuda_emu_mix(seed * 0x51ed27ull + arg * 131u + (uint64_t)i);
    double f = kF[r % nf];
    if ((r >> 40) % 4 == 0) f = (double)((int64_t)((r >> 8) % 129) - 64) / 16.0;
    int64_t s = kS[(r >> 16) % ns];
    if (rank > 0 && (r >> 40) % 3 == 0) s = (int64_t)((r >> 8) % 21) - 9;
    switch (dt) {
      case IRON_DTYPE_F32: ((float *)data)[i] = (float)f; break;
      case IRON_DTYPE_F64: ((double *)data)[i] = f; break;
      case IRON_DTYPE_F16:
        ((uint16_t *)data)[i] = iron_f32_to_f16((float)f);
        break;
      case IRON_DTYPE_BF16:
        ((uint16_t *)data)[i] = iron_f32_to_bf16((float)f);
        break;
      case IRON_DTYPE_C64:
        ((float *)data)[2 * i] = (float)f;
        ((float *)data)[2 * i + 1] = (float)kF[(r >> 24) % nf];
        break;
      case IRON_DTYPE_C128:
        ((double *)data)[2 * i] = f;
        ((double *)data)[2 * i + 1] = kF[(r >> 24) % nf];
        break;
      case IRON_DTYPE_S8: ((int8_t *)data)[i] = (int8_t)s; break;
      case IRON_DTYPE_S16: ((int16_t *)data)[i] = (int16_t)s; break;
      case IRON_DTYPE_S32: ((int32_t *)data)[i] = (int32_t)s; break;
      case IRON_DTYPE_S64: ((int64_t *)data)[i] = s; break;
      case IRON_DTYPE_U8: ((uint8_t *)data)[i] = (uint8_t)s; break;
      case IRON_DTYPE_U16: ((uint16_t *)data)[i] = (uint16_t)s; break;
      case IRON_DTYPE_U32: ((uint32_t *)data)[i] = (uint32_t)s; break;
      case IRON_DTYPE_U64: ((uint64_t *)data)[i] = (uint64_t)s; break;
      case IRON_DTYPE_PRED: ((uint8_t *)data)[i] = (uint8_t)(r & 1); break;
      default:
        cuda_emu_fill((char *)data + (size_t)i * iron_dtype_size(dt), dt,
                      rank, 1, seed, arg + (uint32_t)i * 977u);
    }
  }
}

static void fill_any(void *data, iron_dtype_t dt, int32_t rank, int64_t count,
                     uint64_t seed, uint32_t arg) {
  if (seed >= 3)
    fill_special(data, dt, rank, count, seed, arg);
  else
    cuda_emu_fill(data, dt, rank, count, seed, arg);
}

// ---------------------------------------------------------------------------
// Planted bugs (IRON_TEST_PLANT): text mutations of fused kernels' sources.

static const char *g_plant;

// `src` with bytes [at, at + len) replaced by `rep` (malloc'ed).
static char *splice(const char *src, const char *at, size_t len,
                    const char *rep) {
  size_t rl = strlen(rep), n = strlen(src), head = (size_t)(at - src);
  char *out = malloc(n - len + rl + 1);
  if (!out) return NULL;
  memcpy(out, src, head);
  memcpy(out + head, rep, rl);
  memcpy(out + head + rl, at + len, n - head - len + 1);
  return out;
}

static bool is_ident(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_';
}

// The first element statement's sum: "iron_iadd(" (integers) or
// "(vA + vB)" / "(xA + ...)" (floats); becomes a difference.
static char *plant_sub_for_add(const char *src, const char *body) {
  const char *i = strstr(body, " = iron_iadd(");
  const char *f = body;
  while ((f = strstr(f, " + ")) != NULL) {
    // "(v3 + x1)": an identifier v/x-digits right before, '(' before it.
    const char *p = f;
    while (p > body && is_ident(p[-1])) --p;
    if (p > body && p[-1] == '(' && (p[0] == 'v' || p[0] == 'x') &&
        p[1] >= '0' && p[1] <= '9' && (f[3] == 'v' || f[3] == 'x'))
      break;
    f += 3;
  }
  if (i && (!f || i < f))
    return splice(src, i, strlen(" = iron_iadd("), " = iron_isub(");
  return f ? splice(src, f, 3, " - ") : NULL;
}

// The first coordinate-indexed access "[0LL + (" (an indexed load or a
// dynamic_update_slice root's store) is one element off.
static char *plant_index_off(const char *src, const char *body) {
  const char *at = strstr(body, "[0LL + (");
  return at ? splice(src, at, 4, "[1LL") : NULL;
}

// The first clamp of a start index, "S = S < 0 ? 0 : S > K ? K : S;",
// sends negative starts to K instead of 0 (in bounds, wrong).
static char *plant_start_clamp(const char *src, const char *body) {
  for (const char *at = strstr(body, " < 0 ? 0 : "); at;
       at = strstr(at + 1, " < 0 ? 0 : ")) {
    const char *k = at + strlen(" < 0 ? 0 : ");
    const char *gt = strstr(k, " > ");
    const char *q = gt ? strstr(gt, " ? ") : NULL;
    if (!q || q - k > 80) continue;
    char bound[64];
    size_t bl = (size_t)(q - (gt + 3));
    if (bl == 0 || bl >= sizeof(bound)) continue;
    memcpy(bound, gt + 3, bl);
    bound[bl] = '\0';
    if (strcmp(bound, "0LL") == 0) continue;  // one start: no wrong one
    char rep[96];
    snprintf(rep, sizeof(rep), " < 0 ? %s : ", bound);
    return splice(src, at, strlen(" < 0 ? 0 : "), rep);
  }
  return NULL;
}

// The first iota of a fusion, "= (T)cN;" (a coordinate converted to the
// element type), counts from 1.
static char *plant_iota_off(const char *src, const char *body) {
  for (const char *at = strstr(body, ")c"); at; at = strstr(at + 1, ")c")) {
    if (at[2] < '0' || at[2] > '9') continue;
    const char *open = at;
    while (open > body && *open != '(') --open;
    if (strncmp(open, "(long long)", 11) == 0 || strncmp(open, "(int)", 5) == 0)
      continue;
    size_t dl = 1;
    while (at[2 + dl] >= '0' && at[2 + dl] <= '9') ++dl;
    char rep[32];
    snprintf(rep, sizeof(rep), ")(1 + c%.*s)", (int)dl, at + 2);
    return splice(src, at, 2 + dl, rep);
  }
  return NULL;
}

static char *plant_source(const char *name, const char *source, bool fused) {
  (void)name;
  if (!fused || !g_plant) return NULL;
  // Only the kernel's own text (after the shared prelude).
  size_t pl = strlen(iron_cuda_prelude());
  const char *body = strncmp(source, iron_cuda_prelude(), pl) == 0
                         ? source + pl
                         : source;
  if (strcmp(g_plant, "sub_for_add") == 0)
    return plant_sub_for_add(source, body);
  if (strcmp(g_plant, "index_off") == 0) return plant_index_off(source, body);
  if (strcmp(g_plant, "start_clamp") == 0)
    return plant_start_clamp(source, body);
  if (strcmp(g_plant, "iota_off") == 0) return plant_iota_off(source, body);
  return NULL;
}

// ---------------------------------------------------------------------------
// The manifest and the GPU tolerance.

// The manifest line of program `name` ("NAME exact|inexact INEXACT_OPS
// ALL_OPS"), empty when there is none.
static void manifest_line(const char *dir, const char *name, char *out,
                          size_t cap) {
  out[0] = '\0';
  char path[1024];
  snprintf(path, sizeof(path), "%s/manifest.txt", dir);
  FILE *f = fopen(path, "r");
  if (!f) return;
  char line[4096];
  size_t nl = strlen(name);
  while (fgets(line, sizeof(line), f)) {
    if (strncmp(line, name, nl) == 0 && line[nl] == ' ') {
      snprintf(out, cap, "%s", line);
      break;
    }
  }
  fclose(f);
}

// Whether the manifest line lists op tag `tag` among its inexact ops.
static bool manifest_has(const char *line, const char *tag) {
  const char *p = strchr(line, ' ');
  p = p ? strchr(p + 1, ' ') : NULL;  // the inexact-op list
  if (!p) return false;
  ++p;
  size_t tl = strlen(tag);
  while (*p && *p != ' ' && *p != '\n') {
    if (strncmp(p, tag, tl) == 0 && (p[tl] == ',' || p[tl] == ' ' ||
                                      p[tl] == '\n' || p[tl] == '\0'))
      return true;
    while (*p && *p != ',' && *p != ' ') ++p;
    if (*p == ',') ++p;
  }
  return false;
}

// Every program's reduces fuse with their producers (IRON_CUDA_FUSE_REDUCE
// =all) in one of two programs (by name), so both the device's grouping
// and the fused reduce kernels (run on their grid by the multi-thread
// shim) are exercised; IRON_TEST_FUSE_REDUCE=all|none forces one.
static bool fuse_reduce_all(const char *name) {
  const char *e = getenv("IRON_TEST_FUSE_REDUCE");
  if (e && strcmp(e, "all") == 0) return true;
  if (e && strcmp(e, "none") == 0) return false;
  uint32_t h = 2166136261u;
  for (const char *c = name; *c; ++c) h = (h ^ (uint8_t)*c) * 16777619u;
  return (h >> 7) & 1u;
}

static bool close_enough(iron_dtype_t dt, double a, double b) {
  if (a != a || b != b) return a != a && b != b;
  if (a == b) return true;
  double rtol = dt == IRON_DTYPE_F64 ? 1e-9
                : dt == IRON_DTYPE_F32 ? 1e-4
                                       : 2e-2;
  double diff = fabs(a - b);
  return diff <= rtol * fmax(fabs(a), fabs(b)) || diff <= 1e-5;
}

// Inexact programs on the GPU: float elements within the tolerance; a few
// elements of any output (2% or 2 elements) may differ beyond it (a value
// that crossed a comparison, a rounding or a conversion). Returns the
// elements beyond that allowance.
static int64_t compare_tolerant(const iron_executable_t *exe,
                                uint8_t *const *want, uint8_t *const *got,
                                const char *what, int64_t *out_loose) {
  int64_t bad = 0;
  uint32_t no = iron_executable_num_outputs(exe);
  for (uint32_t j = 0; j < no; ++j) {
    iron_dtype_t dt;
    int32_t rank;
    const int64_t *dims;
    iron_executable_output_type(exe, j, &dt, &rank, &dims);
    int64_t count = 1;
    for (int32_t k = 0; k < rank; ++k) count *= dims[k];
    size_t es = iron_dtype_size(dt);
    bool cplx = dt == IRON_DTYPE_C64 || dt == IRON_DTYPE_C128;
    iron_dtype_t part = dt == IRON_DTYPE_C64    ? IRON_DTYPE_F32
                        : dt == IRON_DTYPE_C128 ? IRON_DTYPE_F64
                                                : dt;
    int64_t nbad = 0, first = -1;
    for (int64_t i = 0; i < count; ++i) {
      const uint8_t *a = want[j] + (size_t)i * es, *b = got[j] + (size_t)i * es;
      if (cuda_emu_same(dt, a, b)) continue;
      double x, y, x2 = 0, y2 = 0;
      bool ok = false;
      if (cuda_emu_elem_float(part, a, &x) && cuda_emu_elem_float(part, b, &y)) {
        ok = close_enough(part, x, y);
        if (ok && cplx && cuda_emu_elem_float(part, a + es / 2, &x2) &&
            cuda_emu_elem_float(part, b + es / 2, &y2))
          ok = close_enough(part, x2, y2);
      }
      if (ok) continue;
      if (first < 0) first = i;
      nbad++;
    }
    int64_t allow = count / 50 > 2 ? count / 50 : 2;
    *out_loose += nbad < allow ? nbad : allow;
    if (nbad > allow) {
      fprintf(stderr, "%s: output %u (%s, %lld elements): %lld beyond the "
              "tolerance; first at %lld\n", what, j, iron_dtype_name(dt),
              (long long)count, (long long)nbad, (long long)first);
      bad += nbad - allow;
    }
  }
  return bad;
}

// ---------------------------------------------------------------------------

static void test_fuzz_programs(void) {
  setenv("IRON_DEVICE", "host", 1);
  // Random loops (scans) are bounded; synthetic inputs never loop long.
  setenv("IRON_MAX_WHILE_ITERATIONS", "20000", 1);
  // The emulation calls libm's expf, as the host does with this switch.
  setenv("IRON_HOST_LIBM_EXP", "1", 1);
  const char *target = getenv("IRON_TEST_FUZZ_DEVICE");
  bool gpu = target && strcmp(target, "cuda") == 0;
  bool verbose = getenv("IRON_TEST_VERBOSE") != NULL;
  bool trace = getenv("IRON_TEST_TRACE") != NULL;
  const char *only = getenv("IRON_TEST_ONLY");
  const char *seeds_env = getenv("IRON_TEST_SEEDS");
  int num_seeds = seeds_env ? atoi(seeds_env) : 4;
  if (num_seeds < 1) num_seeds = 1;
  g_plant = getenv("IRON_TEST_PLANT");
  if (g_plant && *g_plant == '\0') g_plant = NULL;
  if (!gpu) {
    CHECK(cuda_emu_have_cxx());
    if (!cuda_emu_have_cxx()) return;
  }
  iron_runtime_t *rt_ref = NULL, *rt_emu = NULL;
  CHECK_OK(iron_runtime_create(NULL, &rt_ref));
  if (gpu) {
    setenv("IRON_DEVICE", "cuda", 1);
    CHECK_OK(iron_runtime_create(NULL, &rt_emu));
    setenv("IRON_DEVICE", "host", 1);
  } else {
    CHECK_OK(cuda_emu_exec_runtime(&rt_emu));
    g_cuda_emu.plant = plant_source;
    g_cuda_emu.multi_thread = true;
  }
  if (!rt_ref || !rt_emu) return;
  iron_device_t *dev_ref = iron_runtime_device(rt_ref, 0);
  iron_device_t *dev_emu = iron_runtime_device(rt_emu, 0);

  const char *dir = getenv("IRON_TEST_CORPUS_DIR");
  const char *prefix = NULL;
  if (!dir) {  // the regression programs the fuzzer found
    dir = IRON_TEST_DATA_DIR "/corpus";
    prefix = "fz_";
  }
  struct dirent **ents = NULL;
  int nents = scandir(dir, &ents, NULL, alphasort);
  CHECK(nents > 0);
  prog_t *progs = calloc((size_t)(nents > 0 ? nents : 1), sizeof(*progs));
  int nprogs = 0, host_refused = 0, cuda_refused = 0, not_emulable = 0;
  int failing = 0;
  for (int e = 0; e < nents; ++e) {
    const char *fn = ents[e]->d_name;
    size_t len = strlen(fn);
    if (len < 8 || strcmp(fn + len - 7, ".mlirbc") != 0) continue;
    if (prefix && strncmp(fn, prefix, strlen(prefix)) != 0) continue;
    if (only && !strstr(fn, only)) continue;
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, fn);
    size_t size;
    char *bytes = test_read_file(path, &size);
    CHECK(bytes != NULL);
    if (!bytes) continue;
    prog_t *p = &progs[nprogs];
    snprintf(p->name, sizeof(p->name), "%.*s", (int)(len - 7), fn);
    char line[4096];
    manifest_line(dir, p->name, line, sizeof(line));
    bool fuse_all = fuse_reduce_all(p->name);
    if (gpu)
      p->inexact = strstr(line, " inexact ") != NULL;
    else
      p->inexact = (fuse_all && (manifest_has(line, "reduce_add_float") ||
                                 manifest_has(line, "reduce_mul_float") ||
                                 manifest_has(line, "log_softmax"))) ||
                   // The host's complex tan/tanh are glibc's ctan/ctanh;
                   // CUDA's, Kahan's formula (1 ulp apart).
                   manifest_has(line, "ctan") || manifest_has(line, "ctanh") ||
                   // Float sums of 16384 elements or more: the host
                   // splits them over its threads (gen/row.h), the
                   // kernels follow the one-thread order (fz_1800652).
                   manifest_has(line, "long_float_sum");
    // Read when the CUDA side compiles (cuda_kernel.c reduce_fusable).
    if (fuse_all)
      setenv("IRON_CUDA_FUSE_REDUCE", "all", 1);
    else
      unsetenv("IRON_CUDA_FUSE_REDUCE");
    if (trace) fprintf(stderr, "@ %s compile\n", p->name);
    iron_status_t st =
        iron_executable_compile(rt_ref, bytes, size, NULL, &p->ref);
    if (st) {  // the host refuses it: nothing to compare with
      host_refused++;
      if (verbose)
        fprintf(stderr, "%s: host refuses: %s\n", p->name,
                iron_status_message(st));
      iron_status_free(st);
      free(bytes);
      continue;
    }
    st = iron_executable_compile(rt_emu, bytes, size, NULL, &p->emu);
    free(bytes);
    if (st) {
      const char *msg = iron_status_message(st);
      iron_status_code_t code = iron_status_code(st);
      if (!gpu && code == IRON_STATUS_FAILED_PRECONDITION &&
          strstr(msg, "cuda_emu")) {
        not_emulable++;
        if (verbose) fprintf(stderr, "%s: not emulable: %s\n", p->name, msg);
      } else if (code == IRON_STATUS_UNIMPLEMENTED &&
                 !fusion_shape_refusal(msg)) {
        cuda_refused++;
        if (verbose) fprintf(stderr, "%s: CUDA refuses: %s\n", p->name, msg);
      } else {
        printf("FAIL %s: CUDA compile: %s: %s\n", p->name,
               iron_status_code_name(code), msg);
        failing++;
      }
      iron_status_free(st);
      iron_executable_release(p->ref);
      p->ref = NULL;
      continue;
    }
    nprogs++;
  }
  for (int e = 0; e < nents; ++e) free(ents[e]);
  free(ents);
  bool built = gpu || cuda_emu_exec_build();
  CHECK(built);
  int ran = 0, differ = 0, failed = 0, inexact_progs = 0;
  int64_t loose = 0;
  for (int i = 0; i < nprogs && built; ++i) {
    prog_t *p = &progs[i];
    if (trace) fprintf(stderr, "@ %s run\n", p->name);
    if (verbose) fprintf(stderr, "%s\n", p->name);
    inexact_progs += p->inexact;
    bool bad = false;
    uint32_t no = iron_executable_num_outputs(p->ref);
    for (uint64_t seed = 0; seed < (uint64_t)num_seeds && !bad; ++seed) {
      uint8_t **want = NULL, **got = NULL;
      iron_status_t sr = cuda_emu_run_program_with(
          p->ref, dev_ref, seed, test_fill_synthetic, fill_any, &want);
      iron_status_t se = cuda_emu_run_program_with(
          p->emu, dev_emu, seed, test_fill_synthetic, fill_any, &got);
      if (sr || se) {
        // Both may fail alike (a loop bound hit by synthetic inputs).
        bool same = sr && se && iron_status_code(sr) == iron_status_code(se);
        if (!same) {
          printf("FAIL %s: seed %llu: host: %s; CUDA: %s\n", p->name,
                 (unsigned long long)seed,
                 sr ? iron_status_message(sr) : "ok",
                 se ? iron_status_message(se) : "ok");
          failed++;
          bad = true;
        }
        iron_status_free(sr);
        iron_status_free(se);
      } else {
        char what[200];
        snprintf(what, sizeof(what), "%s (seed %llu)", p->name,
                 (unsigned long long)seed);
        int64_t nd = p->inexact
                         ? compare_tolerant(p->ref, want, got, what, &loose)
                         : cuda_emu_compare(p->ref, want, got, what);
        if (nd) {
          printf("FAIL %s: seed %llu: %lld elements differ\n", p->name,
                 (unsigned long long)seed, (long long)nd);
          differ++;
          bad = true;
        }
        ran++;
      }
      cuda_emu_free_results(want, no);
      cuda_emu_free_results(got, no);
    }
    failing += bad;
  }
  printf("fuzz programs: %d compared (%d inexact), %d failing; %d refused "
         "by the host, %d by CUDA, %d not emulable; %d runs, %d differ, %d "
         "failed; %s: %zu kernels, %lld launches (%lld fused, %lld on a "
         "grid, %lld row fusions), %lld planted\n",
         nprogs, inexact_progs, failing, host_refused, cuda_refused,
         not_emulable, ran, differ, failed, gpu ? "GPU" : "emulated",
         g_cuda_emu.num_k, (long long)g_cuda_emu.launches,
         (long long)g_cuda_emu.fused_launches,
         (long long)g_cuda_emu.mt_launches,
         (long long)g_cuda_emu.row_launches, (long long)g_cuda_emu.planted);
  if (loose)
    printf("fuzz programs: %lld elements of inexact programs differed "
           "within the allowance\n", (long long)loose);
  CHECK_EQ_INT(failing, 0);
  for (int i = 0; i < nprogs; ++i) {
    iron_executable_release(progs[i].ref);
    iron_executable_release(progs[i].emu);
  }
  free(progs);
  iron_runtime_release(rt_ref);
  iron_runtime_release(rt_emu);
  if (!gpu) cuda_emu_exec_shutdown();
}

static const iron_test_case_t kTests[] = {
    {"fuzz_programs", test_fuzz_programs},
};
IRON_TEST_MAIN(kTests)
