// Scalar while loops as one CUDA kernel (cuda_while.c), GPU-free: every
// program of tests/data/device_loops (tests/gen_device_loops.py) is a main
// whose body is one stablehlo.while over its arguments. The test generates
// the device-loop kernel for that while, runs it on the CPU through
// cuda_emu.h, and compares every result bit for bit with the host device
// running the whole program on the same inputs. It also checks which
// loops the CUDA device accepts (scalars only) and that
// IRON_CUDA_DEVICE_LOOPS=0 turns it off.
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "corpus_files.h"
#include "compiler/inline.h"
#include "cuda_emu.h"
#include "device/cuda/gen/ops.h"
#include "device/cuda/cuda_ops_internal.h"
#include "iron/iron.h"
#include "ir/ir.h"
#include "stablehlo/reader.h"
#include "test.h"

typedef void (*k_t)(void *, void *, void *, void *, void *, void *, void *,
                    void *, void *, void *, void *, void *);

// One scalar of dtype `dt` from text.
static bool parse_scalar(const char *text, iron_dtype_t dt, uint64_t *out) {
  char *end;
  double v = strtod(text, &end);
  if (end == text) return false;
  *out = 0;
  switch (dt) {
    case IRON_DTYPE_F32: {
      float f = (float)v;
      memcpy(out, &f, 4);
      return true;
    }
    case IRON_DTYPE_F64: memcpy(out, &v, 8); return true;
    case IRON_DTYPE_BF16: {
      uint16_t h = iron_f32_to_bf16((float)v);
      memcpy(out, &h, 2);
      return true;
    }
    case IRON_DTYPE_S32: {
      int32_t i = (int32_t)v;
      memcpy(out, &i, 4);
      return true;
    }
    case IRON_DTYPE_U32: {
      uint32_t i = (uint32_t)v;
      memcpy(out, &i, 4);
      return true;
    }
    case IRON_DTYPE_U64: {
      uint64_t i = (uint64_t)v;
      memcpy(out, &i, 8);
      return true;
    }
    case IRON_DTYPE_S64: {
      int64_t i = (int64_t)v;
      memcpy(out, &i, 8);
      return true;
    }
    case IRON_DTYPE_PRED: *(uint8_t *)out = v != 0; return true;
    default: return false;
  }
}

static const iron_ir_op_t *main_while(const iron_ir_module_t *m) {
  for (uint32_t f = 0; f < m->num_funcs; ++f) {
    const iron_ir_func_t *fn = &m->funcs[f];
    if (strcmp(fn->name, "main") != 0 || fn->body.num_blocks != 1) continue;
    const iron_ir_block_t *b = &fn->body.blocks[0];
    for (uint32_t i = 0; i < b->num_ops; ++i)
      if (b->ops[i]->kind == IRON_OP_WHILE) return b->ops[i];
  }
  return NULL;
}

// Runs main on the host device with `vals` (one scalar per argument);
// results into `out`.
static bool run_host(iron_runtime_t *rt, const char *bytes, size_t size,
                     const iron_ir_op_t *w, const uint64_t *vals,
                     uint64_t *out) {
  iron_device_t *dev = iron_runtime_device(rt, 0);
  iron_executable_t *exe = NULL;
  iron_status_t st = iron_executable_compile(rt, bytes, size, NULL, &exe);
  CHECK_OK(st);
  if (st) return false;
  uint32_t n = w->num_operands;
  iron_buffer_t *args[16] = {0}, *outs[16] = {0};
  bool ok = true;
  for (uint32_t i = 0; i < n && ok; ++i) {
    st = iron_buffer_create_from_host(dev, w->operands[i]->type->dtype, 0,
                                      NULL, &vals[i], NULL, &args[i]);
    CHECK_OK(st);
    ok = !st;
  }
  if (ok) {
    iron_event_t *done = NULL;
    st = iron_executable_execute(exe, args, n, NULL, outs, &done);
    if (!st) {
      st = iron_event_wait(done);
      iron_event_release(done);
    }
    CHECK_OK(st);
    ok = !st;
  }
  for (uint32_t i = 0; i < n && ok; ++i) {
    out[i] = 0;
    st = iron_buffer_to_host(outs[i], &out[i],
                             iron_dtype_size(w->results[i].type->dtype), NULL);
    CHECK_OK(st);
    ok = !st;
  }
  for (uint32_t i = 0; i < n; ++i) {
    iron_buffer_release(args[i]);
    iron_buffer_release(outs[i]);
  }
  iron_executable_release(exe);
  return ok;
}

static void test_device_loops(void) {
  setenv("IRON_DEVICE", "host", 1);
  CHECK(cuda_emu_have_cxx());
  if (!cuda_emu_have_cxx()) return;
  const char *dir = IRON_TEST_DATA_DIR "/device_loops";
  DIR *d = opendir(dir);
  CHECK(d != NULL);
  if (!d) return;
  iron_runtime_t *rt;
  CHECK_OK(iron_runtime_create(NULL, &rt));
  int programs = 0, cases = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    if (len < 8 || strcmp(e->d_name + len - 7, ".mlirbc") != 0) continue;
    char path[1024], ipath[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    snprintf(ipath, sizeof(ipath), "%s/%.*s.inputs", dir, (int)(len - 7),
             e->d_name);
    size_t size = 0, isize = 0;
    char *bytes = test_read_file(path, &size);
    char *inputs = test_read_file(ipath, &isize);
    CHECK(bytes && inputs);
    if (inputs) inputs[isize] = 0;  // test_read_file leaves room for it
    iron_ir_module_t *m = NULL;
    if (bytes) CHECK_OK(iron_stablehlo_read(bytes, size, &m));
    // As the CUDA device compiles: private functions inlined first.
    if (m) CHECK_OK(iron_compiler_inline_for_compile(m, true));
    const iron_ir_op_t *w = m ? main_while(m) : NULL;
    CHECK(w != NULL);
    if (!w || !inputs) goto next;
    programs++;
    // The CUDA device takes the loop as a kernel.
    CHECK(iron_cuda_while_kernel(w) != NULL);
    setenv("IRON_CUDA_DEVICE_LOOPS", "0", 1);
    CHECK(iron_cuda_while_kernel(w) == NULL);
    unsetenv("IRON_CUDA_DEVICE_LOOPS");
    char *src = NULL;
    CHECK_OK(iron_cuda_gen_while("loop_kernel", w, NULL, &src));
    cuda_emu_lib_t lib;
    const char *srcs[1] = {src};
    bool built = src && cuda_emu_build(srcs, 1, NULL, &lib);
    CHECK(built);
    void *sym = built ? cuda_emu_sym(&lib, "loop_kernel") : NULL;
    CHECK(sym != NULL);
    uint32_t n = w->num_operands;
    CHECK(n <= 6);
    char *line = inputs;
    while (sym && n <= 6 && line && *line) {
      char *nl = strchr(line, '\n');
      if (nl) *nl = 0;
      uint64_t vals[6], host[6], dev[6];
      char *p = line;
      bool ok = true;
      for (uint32_t i = 0; i < n && ok; ++i) {
        ok = parse_scalar(p, w->operands[i]->type->dtype, &vals[i]);
        strtod(p, &p);
      }
      if (!ok) fprintf(stderr, "%s: cannot parse [%s]\n", e->d_name, line);
      CHECK(ok);
      if (ok && run_host(rt, bytes, size, w, vals, host)) {
        void *params[12] = {0};
        uint64_t in[6];
        for (uint32_t i = 0; i < n; ++i) {
          in[i] = vals[i];
          dev[i] = 0;
          params[i] = &in[i];
          params[n + i] = &dev[i];
        }
        k_t fn;
        memcpy(&fn, &sym, sizeof(fn));
        fn(params[0], params[1], params[2], params[3], params[4], params[5],
           params[6], params[7], params[8], params[9], params[10],
           params[11]);
        for (uint32_t i = 0; i < n; ++i) {
          size_t es = iron_dtype_size(w->results[i].type->dtype);
          if (memcmp(&dev[i], &host[i], es) != 0) {
            fprintf(stderr,
                    "%s [%s] result %u: device loop %016llx, host %016llx\n",
                    e->d_name, line, i, (unsigned long long)dev[i],
                    (unsigned long long)host[i]);
            CHECK(false);
          }
        }
        cases++;
      }
      line = nl ? nl + 1 : NULL;
    }
    if (built) cuda_emu_close(&lib);
    free(src);
  next:
    if (m) iron_ir_module_destroy(m);
    free(bytes);
    free(inputs);
  }
  closedir(d);
  iron_runtime_release(rt);
  fprintf(stderr, "device loops: %d programs, %d input sets\n", programs,
          cases);
  CHECK(programs >= 5 && cases >= 15);
}

// Loops over arrays stay step by step: the corpus's array-carrying while
// loops are refused, its scalar ones accepted.
static void test_acceptance(void) {
  const char *dir = IRON_TEST_DATA_DIR "/corpus";
  DIR *d = opendir(dir);
  CHECK(d != NULL);
  if (!d) return;
  int accepted = 0, refused = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    if (len < 8 || strcmp(e->d_name + len - 7, ".mlirbc") != 0) continue;
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    size_t size = 0;
    char *bytes = test_read_file(path, &size);
    iron_ir_module_t *m = NULL;
    if (bytes && !iron_stablehlo_read(bytes, size, &m) && m &&
        !iron_compiler_inline_for_compile(m, true)) {
      for (uint32_t f = 0; f < m->num_funcs; ++f) {
        const iron_ir_func_t *fn = &m->funcs[f];
        for (uint32_t b = 0; b < fn->body.num_blocks; ++b)
          for (uint32_t i = 0; i < fn->body.blocks[b].num_ops; ++i) {
            const iron_ir_op_t *op = fn->body.blocks[b].ops[i];
            if (op->kind != IRON_OP_WHILE) continue;
            bool scalars = true;
            for (uint32_t k = 0; k < op->num_operands; ++k)
              if (op->operands[k]->type->rank != 0) scalars = false;
            bool ok = iron_cuda_while_kernel(op) != NULL;
            if (!scalars) CHECK(!ok);
            if (ok) accepted++; else refused++;
          }
      }
    }
    if (m) iron_ir_module_destroy(m);
    free(bytes);
  }
  closedir(d);
  fprintf(stderr, "corpus while loops: %d as device loops, %d step by step\n",
          accepted, refused);
  CHECK(accepted >= 1 && refused >= 1);
}

static const iron_test_case_t kTests[] = {
    {"device_loops", test_device_loops},
    {"acceptance", test_acceptance},
};
IRON_TEST_MAIN(kTests)
