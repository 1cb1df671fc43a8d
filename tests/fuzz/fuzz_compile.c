// libFuzzer target for the whole host pipeline: read, verify and plan any
// byte string as a StableHLO artifact, and run the programs whose declared
// sizes are small on the host device with synthetic inputs, twice.
//
// What must hold (any violation traps, so libFuzzer keeps the input):
// - no crash, leak, sanitizer report, hang (-timeout) or memory blow-up
//   (-rss_limit_mb / -malloc_limit_mb);
// - compile fails only with a status (never INTERNAL: bad input must be
//   refused by a check that says what is wrong), and a failed compile hands
//   back no executable;
// - a run fails only with a status (never INTERNAL), and two runs of the same
//   program on the same inputs give the same bytes (catches reads of
//   uninitialized or stale memory that ASan does not see);
// - every buffer and constant is given back: the device's bytes in use are 0
//   once the executable and the buffers are released.
//
// Bounds per input, so that a run costs milliseconds: programs run only when
// every value has at most kMaxRunElements elements, loops nest at most
// kMaxLoopDepth deep (each capped at IRON_MAX_WHILE_ITERATIONS iterations),
// calls nest at most kMaxCallDepth deep, and windows have at most
// kMaxRunElements elements. Everything is compiled regardless: compile-time
// work must be bounded by the program's real sizes. Device memory is capped
// by IRON_HOST_MEMORY_LIMIT (a refused allocation is RESOURCE_EXHAUSTED).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bc_mutator.h"
#include "iron/iron.h"
#include "ir/ir.h"
#include "runtime/executable.h"
#include "stablehlo/reader.h"

enum {
  kMaxRunElements = 1 << 14,
  kMaxLoopDepth = 2,
  kMaxCallDepth = 16,
};

// Two runtimes: the plain host device, and one whose host device runs the
// fusion pass (IRON_HOST_TEST_FUSION=1), so fuse.c and the host fusion
// kernel see fuzzed programs too.
static iron_runtime_t *g_rt[2];
// IRON_FUZZ_VERBOSE=1: one line per input and stage (for triage and for
// measuring how far inputs get).
static bool g_verbose;

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  setenv("IRON_DEVICE", "host", 1);
  // Runs on the fuzzer's thread: deterministic and one core.
  setenv("IRON_SYNC", "1", 1);
  setenv("IRON_NUM_THREADS", "1", 1);
  // 32 MiB of device buffers (constants included) per runtime: far more
  // than programs small enough to run need, and filling a refused constant
  // stays fast.
  setenv("IRON_HOST_MEMORY_LIMIT", "33554432", 1);
  setenv("IRON_MAX_WHILE_ITERATIONS", "64", 1);
  const char *v = getenv("IRON_FUZZ_VERBOSE");
  g_verbose = v && v[0] == '1';
  iron_runtime_options_t opts = {1};
  for (int i = 0; i < 2; ++i) {
    if (i == 1) setenv("IRON_HOST_TEST_FUSION", "1", 1);
    iron_status_t st = iron_runtime_create(&opts, &g_rt[i]);
    if (st) {
      fprintf(stderr, "fuzz_compile: %s\n", iron_status_message(st));
      abort();
    }
  }
  unsetenv("IRON_HOST_TEST_FUSION");
  return 0;
}

// Half of the mutations are structural (bc_mutator.c), the rest libFuzzer's
// byte-level ones (with the op-name dictionary, fuzz_compile.dict).
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size,
                               unsigned int seed) {
  if (seed & 1) {
    size_t n = iron_fuzz_bc_mutate(data, size, max_size, seed >> 1);
    if (n) return n;
  }
  return LLVMFuzzerMutate(data, size, max_size);
}

static uint64_t fnv1a(const uint8_t *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// ---------------------------------------------------------------------------
// Whether a program is small enough to run.

typedef struct {
  const iron_ir_module_t *m;
  bool too_big;
} scan_t;

static void scan_type(scan_t *s, const iron_ir_type_t *t, int depth) {
  if (!t || depth > 8) {
    s->too_big = true;
    return;
  }
  if (t->kind == IRON_TYPE_TENSOR) {
    int64_t n = iron_ir_type_num_elements(t);
    if (n < 0 || n > kMaxRunElements) s->too_big = true;
  } else if (t->kind == IRON_TYPE_TUPLE) {
    for (uint32_t i = 0; i < t->num_elements; ++i)
      scan_type(s, t->elements[i], depth + 1);
  }
}

static void scan_block(scan_t *s, const iron_ir_block_t *b, int loops,
                       int calls);

static void scan_func(scan_t *s, const iron_ir_func_t *f, int loops,
                      int calls) {
  if (calls > kMaxCallDepth) {
    s->too_big = true;
    return;
  }
  for (uint32_t i = 0; i < f->body.num_blocks && !s->too_big; ++i)
    scan_block(s, &f->body.blocks[i], loops, calls);
}

static void scan_op(scan_t *s, const iron_ir_op_t *op, int loops, int calls) {
  for (uint32_t i = 0; i < op->num_results; ++i)
    scan_type(s, op->results[i].type, 0);
  if (op->kind == IRON_OP_WHILE && ++loops > kMaxLoopDepth) s->too_big = true;
  if (op->kind == IRON_OP_REDUCE_WINDOW ||
      op->kind == IRON_OP_SELECT_AND_SCATTER) {
    int64_t w[IRON_MAX_RANK + 1];
    uint32_t n = 0;
    iron_status_t st = iron_ir_op_i64_list(op, "window_dimensions", w,
                                           IRON_MAX_RANK + 1, &n);
    iron_status_free(st);
    int64_t prod = 1;
    for (uint32_t i = 0; i < n; ++i) {
      if (w[i] < 0 || w[i] > kMaxRunElements) s->too_big = true;
      else prod *= w[i];
      if (prod > kMaxRunElements) s->too_big = true;
    }
  }
  if (op->kind == IRON_OP_FUNC_CALL || op->kind == IRON_OP_COMPOSITE) {
    const char *callee = iron_ir_op_string(
        op, op->kind == IRON_OP_FUNC_CALL ? "callee" : "decomposition");
    const iron_ir_func_t *f =
        callee ? iron_ir_module_lookup(s->m, callee) : NULL;
    if (f) scan_func(s, f, loops, calls + 1);
  }
  for (uint32_t r = 0; r < op->num_regions && !s->too_big; ++r)
    for (uint32_t b = 0; b < op->regions[r].num_blocks && !s->too_big; ++b)
      scan_block(s, &op->regions[r].blocks[b], loops, calls);
}

static void scan_block(scan_t *s, const iron_ir_block_t *b, int loops,
                       int calls) {
  for (uint32_t i = 0; i < b->num_args; ++i) scan_type(s, b->args[i].type, 0);
  for (uint32_t i = 0; i < b->num_ops && !s->too_big; ++i)
    scan_op(s, b->ops[i], loops, calls);
}

static bool small_enough_to_run(const iron_ir_module_t *m) {
  const iron_ir_func_t *main_fn = iron_ir_module_main(m);
  if (!main_fn) return false;
  scan_t s = {m, false};
  scan_func(&s, main_fn, 0, 0);
  return !s.too_big;
}

// ---------------------------------------------------------------------------
// Inputs: ordinary values most of the time, edge values (NaN, infinities,
// -0, extreme integers, out-of-range indices) where the input's hash says.

static void fill_input(uint8_t *dst, iron_dtype_t dt, int64_t count,
                       uint64_t seed) {
  size_t es = iron_dtype_size(dt);
  for (int64_t i = 0; i < count; ++i) {
    uint64_t h = (seed + (uint64_t)i) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    bool edge = (h & 15) == 0;
    uint8_t *p = dst + (size_t)i * es;
    switch (dt) {
      case IRON_DTYPE_F32: {
        static const float kEdge[] = {0.0f / 0.0f, 1.0f / 0.0f, -1.0f / 0.0f,
                                      -0.0f, 1e-40f, 3.4e38f};
        float v = edge ? kEdge[(h >> 4) % 6] : 0.25f * (float)(i % 7) - 0.5f;
        memcpy(p, &v, 4);
        break;
      }
      case IRON_DTYPE_F64: {
        static const double kEdge[] = {0.0 / 0.0, 1.0 / 0.0, -1.0 / 0.0,
                                       -0.0, 1e-310, 1.7e308};
        double v = edge ? kEdge[(h >> 4) % 6] : 0.25 * (double)(i % 7) - 0.5;
        memcpy(p, &v, 8);
        break;
      }
      case IRON_DTYPE_PRED: *p = (uint8_t)((h >> 8) & 1); break;
      default: {
        // Integers: small values (valid indices), sometimes extreme bits;
        // other floats: a byte pattern.
        uint64_t v = edge ? (h >> 8) : (uint64_t)(i % 5);
        if (edge && (h & 16)) v = ~0ull;
        if (iron_dtype_is_int(dt))
          memcpy(p, &v, es);  // little-endian low bytes
        else
          memset(p, (int)(edge ? (h >> 8) : (uint64_t)(i % 3)), es);
      }
    }
  }
}

static void check_status(iron_status_t st) {
  if (!st) return;
  iron_status_code_t code = iron_status_code(st);
  if (g_verbose)
    fprintf(stderr, "  %s: %.300s\n", iron_status_code_name(code),
            iron_status_message(st));
  if (code == IRON_STATUS_INTERNAL || code == IRON_STATUS_UNKNOWN ||
      code == IRON_STATUS_OK) {
    fprintf(stderr, "fuzz_compile: unexpected %s: %s\n",
            iron_status_code_name(code), iron_status_message(st));
    __builtin_trap();
  }
  iron_status_free(st);
}

// Runs exe once; on success returns the outputs' bytes (malloc'ed,
// concatenated) in *out_bytes. Returns false when the run failed.
static bool run_once(iron_executable_t *exe, iron_device_t *dev,
                     uint64_t seed, uint8_t **out_bytes, size_t *out_size) {
  uint32_t ni = iron_executable_num_inputs(exe);
  uint32_t no = iron_executable_num_outputs(exe);
  iron_buffer_t **args = calloc(ni + 1, sizeof(*args));
  iron_buffer_t **outs = calloc(no + 1, sizeof(*outs));
  bool ok = args && outs;
  for (uint32_t i = 0; i < ni && ok; ++i) {
    iron_dtype_t dt;
    int32_t rank;
    const int64_t *dims;
    iron_executable_input_type(exe, i, &dt, &rank, &dims);
    int64_t count = 1;
    for (int32_t k = 0; k < rank; ++k) count *= dims[k];
    size_t es = iron_dtype_size(dt);
    uint8_t *data = calloc((size_t)count + 1, es ? es : 1);
    if (!data) __builtin_trap();
    fill_input(data, dt, count, seed + i);
    iron_status_t st = iron_buffer_create_from_host(dev, dt, rank, dims, data,
                                                    NULL, &args[i]);
    free(data);
    if (st) {
      check_status(st);
      ok = false;
    }
  }
  if (ok) {
    iron_event_t *done = NULL;
    iron_status_t st = iron_executable_execute(exe, args, ni, NULL, outs,
                                               &done);
    if (!st) {
      st = iron_event_wait(done);
      iron_event_release(done);
    } else {
      for (uint32_t i = 0; i < no; ++i) outs[i] = NULL;
    }
    if (st) {
      check_status(st);
      ok = false;
    }
  }
  if (ok) {
    size_t total = 0;
    for (uint32_t i = 0; i < no; ++i)
      total += iron_buffer_size_in_bytes(outs[i]);
    uint8_t *bytes = malloc(total + 1);
    if (!bytes) __builtin_trap();
    size_t pos = 0;
    for (uint32_t i = 0; i < no && ok; ++i) {
      size_t n = iron_buffer_size_in_bytes(outs[i]);
      iron_event_t *done = NULL;
      iron_status_t st = iron_buffer_to_host(outs[i], bytes + pos, n, &done);
      if (!st) {
        st = iron_event_wait(done);
        iron_event_release(done);
      }
      if (st) {
        check_status(st);
        ok = false;
      }
      pos += n;
    }
    *out_bytes = bytes;
    *out_size = total;
    if (!ok) {
      free(bytes);
      *out_bytes = NULL;
    }
  }
  for (uint32_t i = 0; i < no; ++i) iron_buffer_release(outs[i]);
  for (uint32_t i = 0; i < ni; ++i) iron_buffer_release(args[i]);
  free(args);
  free(outs);
  return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint64_t hash = fnv1a(data, size);
  iron_runtime_t *rt = g_rt[hash & 1];
  iron_device_t *dev = iron_runtime_device(rt, 0);

  iron_ir_module_t *m = NULL;
  iron_status_t st = iron_stablehlo_read(data, size, &m);
  if (st) {
    if (m) __builtin_trap();
    check_status(st);
    return 0;
  }
  bool run = small_enough_to_run(m);
  iron_executable_t *exe = NULL;
  st = iron_executable_compile_module(rt, m, data, size, NULL, &exe);
  if (st) {
    if (exe) __builtin_trap();
    check_status(st);
  } else {
    if ((hash >> 1) % 16 == 0) free(iron_executable_text(exe));
    if (g_verbose)
      fprintf(stderr, "  compiled; %s\n", run ? "running" : "too big to run");
    if (run && !iron_executable_has_host_callbacks(exe)) {
      uint8_t *a = NULL, *b = NULL;
      size_t na = 0, nb = 0;
      bool ok_a = run_once(exe, dev, hash, &a, &na);
      bool ok_b = run_once(exe, dev, hash, &b, &nb);
      // Same program, same inputs: same outcome, same bytes.
      if (ok_a != ok_b || na != nb || (ok_a && memcmp(a, b, na) != 0)) {
        fprintf(stderr, "fuzz_compile: two runs differ (%d/%d, %zu/%zu)\n",
                ok_a, ok_b, na, nb);
        __builtin_trap();
      }
      free(a);
      free(b);
    }
    iron_executable_release(exe);
  }
  if (iron_device_bytes_in_use(dev) != 0) {
    fprintf(stderr, "fuzz_compile: %lld device bytes still in use\n",
            (long long)iron_device_bytes_in_use(dev));
    __builtin_trap();
  }
  return 0;
}
