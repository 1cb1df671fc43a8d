// Call inlining (src/compiler/inline.c) on the program corpus: every artifact
// that holds a func.call runs on the host device as it is and with every
// private function inlined (IRON_INLINE_CALLS=all), on the same synthetic
// inputs; the outputs must be identical to the byte. Also checks the pass's
// own contract on a module: calls gone, value ids unique and in range, every
// operand defined before its use.
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/inline.h"
#include "corpus_files.h"
#include "iron/iron.h"
#include "stablehlo/reader.h"
#include "test.h"

static bool has_call(const iron_ir_block_t *b) {
  for (uint32_t i = 0; i < b->num_ops; ++i) {
    const iron_ir_op_t *op = b->ops[i];
    if (op->kind == IRON_OP_FUNC_CALL) return true;
    for (uint32_t r = 0; r < op->num_regions; ++r)
      for (uint32_t k = 0; k < op->regions[r].num_blocks; ++k)
        if (has_call(&op->regions[r].blocks[k])) return true;
  }
  return false;
}

// Marks the values of `b` (and nested blocks) defined, in order, checking
// that every operand is defined first and that ids are unique and in range.
static bool check_block(const iron_ir_block_t *b, uint8_t *defined,
                        uint32_t num_values) {
  for (uint32_t a = 0; a < b->num_args; ++a) {
    uint32_t id = b->args[a].id;
    if (id >= num_values || defined[id]) return false;
    defined[id] = 1;
  }
  for (uint32_t i = 0; i < b->num_ops; ++i) {
    const iron_ir_op_t *op = b->ops[i];
    if (op->parent != b) return false;
    for (uint32_t k = 0; k < op->num_operands; ++k) {
      uint32_t id = op->operands[k]->id;
      if (id >= num_values || !defined[id]) return false;
    }
    for (uint32_t r = 0; r < op->num_regions; ++r)
      for (uint32_t k = 0; k < op->regions[r].num_blocks; ++k)
        if (!check_block(&op->regions[r].blocks[k], defined, num_values))
          return false;
    for (uint32_t r = 0; r < op->num_results; ++r) {
      uint32_t id = op->results[r].id;
      if (id >= num_values || defined[id] || op->results[r].def_op != op)
        return false;
      defined[id] = 1;
    }
  }
  return true;
}

// Runs the artifact on the host with IRON_INLINE_CALLS=`mode`; returns the
// concatenated output bytes (malloc'ed) or NULL when it does not compile.
static uint8_t *run(iron_runtime_t *rt, const char *bytes, size_t size,
                    const char *mode, size_t *out_len, const char *name) {
  setenv("IRON_INLINE_CALLS", mode, 1);
  iron_device_t *dev = iron_runtime_device(rt, 0);
  iron_executable_t *exe = NULL;
  iron_status_t st = iron_executable_compile(rt, bytes, size, NULL, &exe);
  unsetenv("IRON_INLINE_CALLS");
  if (st) {
    iron_status_free(st);
    return NULL;
  }
  uint32_t ni = iron_executable_num_inputs(exe);
  uint32_t no = iron_executable_num_outputs(exe);
  iron_buffer_t **args = calloc(ni + 1, sizeof(*args));
  iron_buffer_t **outs = calloc(no + 1, sizeof(*outs));
  uint8_t *res = NULL;
  size_t len = 0;
  bool ok = args && outs;
  for (uint32_t i = 0; i < ni && ok; ++i) {
    iron_dtype_t dt;
    int32_t rank;
    const int64_t *dims;
    iron_executable_input_type(exe, i, &dt, &rank, &dims);
    int64_t count = 1;
    for (int32_t k = 0; k < rank; ++k) count *= dims[k];
    size_t es = iron_dtype_size(dt);
    void *data = calloc((size_t)count + 1, es ? es : 1);
    test_fill_synthetic(data, dt, count);
    st =
        iron_buffer_create_from_host(dev, dt, rank, dims, data, NULL, &args[i]);
    free(data);
    if (st) {
      iron_status_free(st);
      ok = false;
    }
  }
  if (ok) {
    iron_event_t *done = NULL;
    st = iron_executable_execute(exe, args, ni, NULL, outs, &done);
    if (!st) {
      st = iron_event_wait(done);
      iron_event_release(done);
    }
    if (st) {
      fprintf(stderr, "%s (%s): run: %s\n", name, mode,
              iron_status_message(st));
      iron_status_free(st);
      ok = false;
    }
  }
  for (uint32_t j = 0; j < no && ok; ++j)
    len += iron_buffer_size_in_bytes(outs[j]);
  if (ok) res = malloc(len + 1);
  size_t at = 0;
  for (uint32_t j = 0; j < no && res; ++j) {
    size_t n = iron_buffer_size_in_bytes(outs[j]);
    iron_event_t *done = NULL;
    st = iron_buffer_to_host(outs[j], res + at, n, &done);
    if (!st) {
      st = iron_event_wait(done);
      iron_event_release(done);
    }
    CHECK_OK(st);
    at += n;
  }
  for (uint32_t j = 0; j < no && outs; ++j)
    if (outs[j]) iron_buffer_release(outs[j]);
  for (uint32_t i = 0; i < ni && args; ++i)
    if (args[i]) iron_buffer_release(args[i]);
  free(args);
  free(outs);
  iron_executable_release(exe);
  *out_len = len;
  return res;
}

static void test_corpus_inlined(void) {
  const char *dir = IRON_TEST_DATA_DIR "/corpus";
  DIR *d = opendir(dir);
  CHECK(d != NULL);
  if (!d) return;
  setenv("IRON_MAX_WHILE_ITERATIONS", "100000", 1);
  iron_runtime_t *rt;
  CHECK_OK(iron_runtime_create(NULL, &rt));
  int with_calls = 0, compared = 0, calls_inlined = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    if (len < 8 || strcmp(e->d_name + len - 7, ".mlirbc") != 0) continue;
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    size_t size;
    char *bytes = test_read_file(path, &size);
    CHECK(bytes != NULL);
    if (!bytes) continue;
    iron_ir_module_t *m = NULL;
    iron_status_t st = iron_stablehlo_read(bytes, size, &m);
    if (st) {  // the reader tests cover these
      iron_status_free(st);
      free(bytes);
      continue;
    }
    bool calls = false;
    for (uint32_t fi = 0; fi < m->num_funcs && !calls; ++fi)
      for (uint32_t k = 0; k < m->funcs[fi].body.num_blocks && !calls; ++k)
        calls = has_call(&m->funcs[fi].body.blocks[k]);
    if (!calls) {
      iron_ir_module_destroy(m);
      free(bytes);
      continue;
    }
    with_calls++;
    int n = 0;
    CHECK_OK(iron_compiler_inline_calls(m, IRON_INLINE_MAX_OPS, &n));
    calls_inlined += n;
    for (uint32_t fi = 0; fi < m->num_funcs; ++fi) {
      iron_ir_func_t *f = &m->funcs[fi];
      uint8_t *defined = calloc(f->num_values + 1, 1);
      bool ok = defined != NULL;
      for (uint32_t k = 0; k < f->body.num_blocks && ok; ++k)
        ok = check_block(&f->body.blocks[k], defined, f->num_values);
      free(defined);
      if (!ok)
        fprintf(stderr, "%s: @%s: bad IR after inlining\n", e->d_name,
                f->name ? f->name : "?");
      CHECK(ok);
    }
    // jnp.sort is a private function whose sort op has only a name; the
    // inlined op takes the call's source line (errors name the user's line).
    if (strcmp(e->d_name, "x_old_bytecode.mlirbc") == 0) {
      int sorts = 0;
      for (uint32_t fi = 0; fi < m->num_funcs; ++fi) {
        if (!m->funcs[fi].is_public) continue;
        const iron_ir_block_t *b0 = &m->funcs[fi].body.blocks[0];
        for (uint32_t i = 0; i < b0->num_ops; ++i) {
          const iron_ir_op_t *op = b0->ops[i];
          if (op->kind != IRON_OP_SORT) continue;
          sorts++;
          CHECK(op->loc.file && strstr(op->loc.file, "gen_corpus.py"));
          CHECK(op->loc.line > 0);
          CHECK(op->loc.name && strcmp(op->loc.name, "sort") == 0);
        }
      }
      CHECK_EQ_INT(sorts, 1);
    }
    iron_ir_module_destroy(m);
    size_t la = 0, lb = 0;
    uint8_t *a = run(rt, bytes, size, "0", &la, e->d_name);
    uint8_t *b = a ? run(rt, bytes, size, "all", &lb, e->d_name) : NULL;
    if (a) {
      CHECK(b != NULL);
      if (b) {
        compared++;
        bool same = la == lb && memcmp(a, b, la) == 0;
        if (!same)
          fprintf(stderr, "%s: outputs differ when inlined\n", e->d_name);
        CHECK(same);
      }
    }
    free(a);
    free(b);
    free(bytes);
  }
  closedir(d);
  fprintf(stderr,
          "inline: %d artifacts with calls, %d calls inlined, %d "
          "compared\n",
          with_calls, calls_inlined, compared);
  CHECK(with_calls > 20);
  CHECK(compared > 20);
  CHECK(calls_inlined >= with_calls);
  iron_runtime_release(rt);
}

static const iron_test_case_t kTests[] = {
    {"corpus_inlined", test_corpus_inlined},
};
IRON_TEST_MAIN(kTests)
