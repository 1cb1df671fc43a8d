// The structure-aware mutator (bc_mutator.c) over the corpus:
// - rewriting an artifact from its parse gives it back byte for byte (the
//   serializer is faithful, so a mutant differs only where it was mutated);
// - mutants differ from their input and most of them still read (the point
//   of mutating entries instead of bytes: they get past the reader);
// - every kind of mutation happens (checked through the read IR: some mutant
//   changes a dimension, some an element type, some an op kind);
// - they make more new programs that get through the planner (other op
//   kinds, dims or dtypes, and compiled) than byte-level mutants (one
//   random byte changed, as a baseline) do.
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bc_mutator.h"
#include "iron/iron.h"
#include "ir/ir.h"
#include "stablehlo/reader.h"

static int g_failures;
#define EXPECT(cond, ...)                                 \
  do {                                                    \
    if (!(cond)) {                                        \
      fprintf(stderr, "FAILED %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                       \
      fprintf(stderr, "\n");                              \
      g_failures++;                                       \
    }                                                     \
  } while (0)

static uint8_t *read_file(const char *path, size_t *out_n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *out_n = (size_t)n;
  return buf;
}

// A summary of a module's main function: op kinds, result dims, dtypes.
typedef struct {
  uint64_t kinds, dims, dtypes;
} sig_t;

static void sig_block(const iron_ir_block_t *b, sig_t *s) {
  for (uint32_t i = 0; i < b->num_ops; ++i) {
    const iron_ir_op_t *op = b->ops[i];
    s->kinds = s->kinds * 31 + (uint64_t)op->kind;
    for (uint32_t r = 0; r < op->num_results; ++r) {
      const iron_ir_type_t *t = op->results[r].type;
      s->dtypes = s->dtypes * 31 + (uint64_t)t->dtype;
      s->dims = s->dims * 31 + (uint64_t)t->rank;
      for (int32_t k = 0; k < t->rank && t->kind == IRON_TYPE_TENSOR; ++k)
        s->dims = s->dims * 31 + (uint64_t)t->dims[k];
    }
    for (uint32_t r = 0; r < op->num_regions; ++r)
      for (uint32_t k = 0; k < op->regions[r].num_blocks; ++k)
        sig_block(&op->regions[r].blocks[k], s);
  }
}

static sig_t module_sig(const iron_ir_module_t *m) {
  sig_t s = {0, 0, 0};
  for (uint32_t f = 0; f < m->num_funcs; ++f)
    for (uint32_t b = 0; b < m->funcs[f].body.num_blocks; ++b)
      sig_block(&m->funcs[f].body.blocks[b], &s);
  return s;
}

// Whether the artifact compiles for the host device.
static int compiles(iron_runtime_t *rt, const uint8_t *p, size_t n) {
  iron_executable_t *exe = NULL;
  iron_status_t st = iron_executable_compile(rt, p, n, NULL, &exe);
  if (st) {
    iron_status_free(st);
    return 0;
  }
  iron_executable_release(exe);
  return 1;
}

int main(void) {
  const char *dir = IRON_TEST_DATA_DIR "/corpus";
  DIR *d = opendir(dir);
  if (!d) {
    fprintf(stderr, "cannot open %s\n", dir);
    return 1;
  }
  setenv("IRON_DEVICE", "host", 1);
  iron_runtime_t *rt = NULL;
  iron_status_t rst = iron_runtime_create(NULL, &rt);
  if (rst) {
    fprintf(stderr, "runtime: %s\n", iron_status_message(rst));
    return 1;
  }
  int files = 0, mutants = 0, changed = 0, read_ok = 0, compiled = 0;
  int flip_read = 0, flip_compiled = 0;
  // Compiled programs that differ from their input in op kinds, dims or
  // dtypes: new programs for the planner and kernels.
  int compiled_other = 0, flip_compiled_other = 0;
  uint64_t rng = 88172645463325252ull;
  int dims_changed = 0, dtypes_changed = 0, kinds_changed = 0;
  struct dirent *e;
  enum { kCap = 1 << 16, kSeeds = 24 };
  uint8_t *buf = malloc(kCap);
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    if (len < 8 || strcmp(e->d_name + len - 7, ".mlirbc") != 0) continue;
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    size_t n;
    uint8_t *data = read_file(path, &n);
    if (!data || n > kCap) {
      free(data);
      continue;
    }
    files++;
    size_t rn = iron_fuzz_bc_rewrite(data, n, buf, kCap);
    EXPECT(rn == n && memcmp(buf, data, n) == 0,
           "%s: rewrite gives %zu bytes for %zu (or other bytes)", e->d_name,
           rn, n);
    iron_ir_module_t *orig = NULL;
    iron_status_t st = iron_stablehlo_read(data, n, &orig);
    if (st) {
      iron_status_free(st);
      free(data);
      continue;
    }
    sig_t os = module_sig(orig);
    iron_ir_module_destroy(orig);
    for (unsigned seed = 0; seed < kSeeds; ++seed) {
      memcpy(buf, data, n);
      size_t mn = iron_fuzz_bc_mutate(buf, n, kCap, seed * 7919u + 1);
      if (!mn) continue;
      mutants++;
      if (mn != n || memcmp(buf, data, n) != 0) changed++;
      iron_ir_module_t *m = NULL;
      st = iron_stablehlo_read(buf, mn, &m);
      if (st) {
        iron_status_free(st);
        continue;
      }
      read_ok++;
      sig_t ms = module_sig(m);
      dims_changed += ms.dims != os.dims;
      dtypes_changed += ms.dtypes != os.dtypes;
      kinds_changed += ms.kinds != os.kinds;
      bool other = ms.dims != os.dims || ms.dtypes != os.dtypes ||
                   ms.kinds != os.kinds;
      iron_ir_module_destroy(m);
      int c = compiles(rt, buf, mn);
      compiled += c;
      compiled_other += c && other;
    }
    // Baseline: one random byte of the input replaced, as often.
    for (unsigned seed = 0; seed < kSeeds; ++seed) {
      memcpy(buf, data, n);
      rng ^= rng << 13;
      rng ^= rng >> 7;
      rng ^= rng << 17;
      buf[rng % n] = (uint8_t)(rng >> 32);
      iron_ir_module_t *m = NULL;
      st = iron_stablehlo_read(buf, n, &m);
      if (st) {
        iron_status_free(st);
        continue;
      }
      flip_read++;
      sig_t ms = module_sig(m);
      bool other = ms.dims != os.dims || ms.dtypes != os.dtypes ||
                   ms.kinds != os.kinds;
      iron_ir_module_destroy(m);
      int c = compiles(rt, buf, n);
      flip_compiled += c;
      flip_compiled_other += c && other;
    }
    free(data);
  }
  closedir(d);
  free(buf);
  iron_runtime_release(rt);
  fprintf(stderr,
          "bc_mutator: %d artifacts, %d mutants, %d changed, %d read, "
          "%d compiled (%d of them another program), %d with other dims, "
          "%d other dtypes, %d other op kinds; one-byte mutants: %d read, "
          "%d compiled (%d another program)\n",
          files, mutants, changed, read_ok, compiled, compiled_other,
          dims_changed, dtypes_changed, kinds_changed, flip_read,
          flip_compiled, flip_compiled_other);
  EXPECT(files > 100, "corpus too small (%d)", files);
  EXPECT(mutants > files * kSeeds * 9 / 10, "too few mutations applied");
  EXPECT(changed > mutants * 95 / 100, "mutants equal to their input");
  EXPECT(read_ok > mutants / 2, "fewer than half of the mutants read");
  EXPECT(dims_changed > mutants / 20, "few dimension changes");
  EXPECT(dtypes_changed > mutants / 20, "few element type changes");
  EXPECT(kinds_changed > mutants / 50, "few op kind changes");
  EXPECT(compiled > mutants / 4, "fewer than a quarter of the mutants compile");
  EXPECT(compiled_other > 2 * flip_compiled_other,
         "structural mutants make no more new programs than byte flips");
  return g_failures ? 1 : 0;
}
