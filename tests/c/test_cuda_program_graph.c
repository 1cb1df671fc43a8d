// GPU-free tests of whole programs recorded as CUDA graphs
// (src/runtime/exec_graph.c): the real cuda_device.c, executor and
// executable run on the fake driver (fake_cuda.h), whose graphs replay the
// recorded nodes at the recorded addresses.
//
// - the decision: the first call runs the ordinary way, the second records,
//   the later ones replay; programs below the rule, with a step a graph
//   cannot record or on the host device get no graph; the rule's constants;
// - results equal the ordinary run's over many calls with changing inputs,
//   also with an argument returned as a result, a constant result, a 0-byte
//   argument/result and a result returned twice; donated arguments;
// - the arena: accounted in the device's bytes in use, given back when the
//   executable is destroyed, under memory pressure (a failing call, reclaim);
// - errors: a failing replay fails that call only, the next works and
//   records again; a recording the device refuses runs the ordinary way, and
//   after a few such the executable stops trying;
// - 8 threads executing one program at once.
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_test_nvrtc.h"
#include "device/cuda/cuda_compile.h"
#include "device/cuda/cuda_device.h"
#include "fake_cuda.h"
#include "fake_cuda_device.h"
#include "iron/iron.h"
#include "ir/builder.h"
#include "runtime/exec_graph.h"
#include "runtime/executable.h"
#include "runtime/runtime_internal.h"
#include "test.h"

static iron_cuda_api_t g_api;

// --- fake kernels (as test_cuda_faults.c) -----------------------------------

// args: lhs, rhs, out, count, op (0 add, 1 multiply, 2 s32 add).
static void k_binary(const uint64_t *a) {
  for (int64_t i = 0; i < (int64_t)a[3]; ++i) {
    if (a[4] == 2) {
      ((int32_t *)(uintptr_t)a[2])[i] = ((const int32_t *)(uintptr_t)a[0])[i] +
                                        ((const int32_t *)(uintptr_t)a[1])[i];
      continue;
    }
    float x = ((const float *)(uintptr_t)a[0])[i];
    float y = ((const float *)(uintptr_t)a[1])[i];
    ((float *)(uintptr_t)a[2])[i] = a[4] == 0 ? x + y : x * y;
  }
}
static const fake_kernel_t kBinaryK = {"fake_binary", k_binary, 5, false};
static const iron_cuda_function_t kBinaryFn = {(CUfunction)&kBinaryK,
                                               "fake_binary_kernel"};

static iron_status_t fake_prepare(const iron_ir_op_t *op,
                                  iron_region_t *const *regions,
                                  void **out_params) {
  (void)regions;
  iron_dtype_t dt = op->operands[0]->type->dtype;
  if (dt != IRON_DTYPE_F32 && !(dt == IRON_DTYPE_S32 && op->kind == IRON_OP_ADD))
    return iron_ir_op_unimplemented(op, "on the fake device");
  *out_params = NULL;
  return IRON_OK;
}

static iron_status_t launch_binary(const iron_kernel_ctx_t *ctx, int op,
                                   const iron_tensor_t *const *in,
                                   iron_tensor_t *const *out) {
  uint64_t a[5] = {(uint64_t)(uintptr_t)in[0]->data,
                   (uint64_t)(uintptr_t)in[1]->data,
                   (uint64_t)(uintptr_t)out[0]->data, (uint64_t)out[0]->count,
                   (uint64_t)op};
  void *params[5];
  for (int i = 0; i < 5; ++i) params[i] = &a[i];
  return iron_cuda_launch(iron_cuda_device_cast(ctx->dev), &kBinaryFn, 1, 1,
                          1, 32, 0, params);
}

// Set: the next add run while recording makes the recording's next
// allocation fail in the driver.
static atomic_int g_fail_alloc_when_recording;

static iron_status_t fake_add_run(const iron_kernel_ctx_t *ctx,
                                  const void *params,
                                  const iron_tensor_t *const *in,
                                  iron_tensor_t *const *out) {
  (void)params;
  (void)in;
  if (fake_cuda_capturing(iron_cuda_device_cast(ctx->dev)->stream) &&
      atomic_exchange(&g_fail_alloc_when_recording, 0))
    fake_cuda.fail_alloc_async = IRON_CU_ERROR_INVALID_VALUE;
  return launch_binary(ctx, in[0]->dtype == IRON_DTYPE_S32 ? 2 : 0, in, out);
}

// Marked graph_capturable, yet it reads device memory back: the device
// refuses that while recording, which spoils the recording.
static iron_status_t fake_readback_mul_run(const iron_kernel_ctx_t *ctx,
                                           const void *params,
                                           const iron_tensor_t *const *in,
                                           iron_tensor_t *const *out) {
  (void)params;
  uint32_t first = 0;
  IRON_RETURN_IF_ERROR_PLAIN(ctx->dev->vtable->memcpy(
      ctx->dev, &first, in[0]->data, 4, IRON_COPY_DEVICE_TO_HOST));
  return launch_binary(ctx, 1, in, out);
}

// The batched copy kernel (cuda_device.c's iron_copy_batch): args table, n.
static void k_copy_batch(const uint64_t *a) {
  const iron_copy_entry_t *t = (const iron_copy_entry_t *)(uintptr_t)a[0];
  for (uint64_t e = 0; e < a[1]; ++e)
    memcpy((void *)(uintptr_t)t[e].dst, (const void *)(uintptr_t)t[e].src,
           t[e].n);
}
static const fake_kernel_t kCopyBatchK = {"fake_copy_batch", k_copy_batch, 2,
                                          false};
static iron_cuda_function_t g_copy_batch_fn = {(CUfunction)&kCopyBatchK,
                                               "iron_copy_batch"};

static const iron_kernel_t kAdd = {.name = "fake_add",
                                   .prepare = fake_prepare,
                                   .run = fake_add_run,
                                   .inplace_ok = true,
                                   .graph_capturable = true};
static const iron_kernel_t kReadbackMul = {.name = "fake_readback_mul",
                                           .prepare = fake_prepare,
                                           .run = fake_readback_mul_run,
                                           .graph_capturable = true};
// Not capturable (as a host-staged step): the program gets no graph.
static const iron_kernel_t kHostStagedAdd = {.name = "fake_staged_add",
                                             .prepare = fake_prepare,
                                             .run = fake_add_run,
                                             .graph_capturable = false};

// A counted loop's condition: compiled, never run (the trip count is
// known), so running it is an error.
static iron_status_t fake_prepare_any(const iron_ir_op_t *op,
                                      iron_region_t *const *regions,
                                      void **out_params) {
  (void)op;
  (void)regions;
  *out_params = NULL;
  return IRON_OK;
}
static iron_status_t fake_compare_run(const iron_kernel_ctx_t *ctx,
                                      const void *params,
                                      const iron_tensor_t *const *in,
                                      iron_tensor_t *const *out) {
  (void)ctx, (void)params, (void)in, (void)out;
  return IRON_ERR(INTERNAL, "a counted loop's condition ran");
}
static const iron_kernel_t kCompare = {.name = "fake_compare",
                                       .prepare = fake_prepare_any,
                                       .run = fake_compare_run,
                                       .graph_capturable = true};

static const iron_kernel_t *fake_lookup(iron_op_kind_t kind) {
  switch (kind) {
    case IRON_OP_COMPARE: return &kCompare;
    case IRON_OP_ADD: return &kAdd;
    case IRON_OP_MULTIPLY: return &kReadbackMul;
    case IRON_OP_SUBTRACT: return &kHostStagedAdd;
    default: return NULL;
  }
}

// --- a device on the fake driver -------------------------------------------

// Which copies the devices of the next tests use: batched (the fake
// iron_copy_batch kernel) or one stream copy per value.
static bool g_batch;

static fake_dev_t fake_dev_open(void) {
  fake_dev_t f = fake_dev_open_with(&g_api, fake_lookup);
  // The default of IRON_CUDA_PROGRAM_GRAPHS.
  CHECK_EQ_INT(f.dev->program_graph_min_steps, 8);
  f.dev->program_graph_min_steps = 4;
  f.cd->copy_batch_fn = g_batch ? &g_copy_batch_fn : NULL;
  atomic_store(&f.cd->copy_batch_state, g_batch ? 1 : -1);
  return f;
}

// --- the program ----------------------------------------------------------------

// main(x: 4xf32, y: 4xf32, e: 0xf32) -> (z, x, c, e, z1, z): z1 = x op y,
// then `steps - 1` more: z = z op (x or y, alternately); c = [10,20,30,40].
// `op` ADD (capturable), MULTIPLY (reads back), SUBTRACT (not capturable,
// the last step only).
static iron_ir_module_t *build_program(int steps, iron_op_kind_t last_op,
                                       iron_op_kind_t op) {
  iron_ir_module_t *m = iron_ir_builder_module_create("jit_chain", 2);
  int64_t d4[1] = {4}, d0[1] = {0};
  const iron_ir_type_t *tx =
      iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 1, d4);
  const iron_ir_type_t *te =
      iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 1, d0);
  const iron_ir_type_t *ins[3] = {tx, tx, te};
  const iron_ir_type_t *outs[6] = {tx, tx, tx, te, tx, tx};
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, 3, ins, 6, outs);
  iron_ir_block_t *b = iron_ir_builder_func_block(f);
  iron_ir_value_t *x = &b->args[0], *y = &b->args[1], *e = &b->args[2];
  iron_ir_value_t *xy[2] = {x, y};
  iron_ir_value_t *z1 =
      iron_ir_builder_op1(m, f, b, steps == 1 ? last_op : op, 2, xy, tx);
  iron_ir_builder_set_loc(m, z1->def_op, "prog.py", 1);
  iron_ir_value_t *z = z1;
  for (int k = 1; k < steps; ++k) {
    iron_ir_value_t *o[2] = {z, k % 2 ? x : y};
    z = iron_ir_builder_op1(m, f, b, k == steps - 1 ? last_op : op, 2, o, tx);
    iron_ir_builder_set_loc(m, z->def_op, "prog.py", 1 + k);
  }
  const float cv[4] = {10, 20, 30, 40};
  iron_ir_value_t *c = iron_ir_builder_constant(m, f, b, tx, cv, 16, false);
  iron_ir_value_t *r[6] = {z, x, c, e, z1, z};
  iron_ir_builder_return(m, f, b, IRON_OP_FUNC_RETURN, 6, r);
  return m;
}

static void expected(int steps, iron_op_kind_t last_op, const float *x,
                     const float *y, float *z, float *z1) {
  for (int i = 0; i < 4; ++i) {
    float v = x[i] + y[i];
    if (steps == 1 && last_op == IRON_OP_MULTIPLY) v = x[i] * y[i];
    z1[i] = v;
    for (int k = 1; k < steps; ++k) {
      float o = k % 2 ? x[i] : y[i];
      v = (k == steps - 1 && last_op == IRON_OP_MULTIPLY) ? v * o : v + o;
    }
    z[i] = v;
  }
}

static iron_executable_t *compile_on(fake_dev_t *f, iron_device_t *dev,
                                     iron_ir_module_t *m) {
  iron_compile_options_t opts = {.device = dev};
  iron_executable_t *exe = NULL;
  CHECK_OK(iron_executable_compile_module(f->rt, m, NULL, 0, &opts, &exe));
  return exe;
}

// Runs the program once on inputs made from `seed` (x donated with
// `donate_x`) and checks every result. Returns the call's status.
static iron_status_t run_check(iron_device_t *dev, iron_executable_t *exe,
                               int steps, iron_op_kind_t last_op, int seed,
                               bool donate_x, int *bad) {
  float x[4], y[4];
  for (int i = 0; i < 4; ++i) {
    x[i] = (float)(seed * 4 + i) * 0.5f - 3.0f;
    y[i] = (float)((seed * 7 + i) % 11) + 0.25f;
  }
  int64_t d4[1] = {4}, d0[1] = {0};
  iron_buffer_t *args[3] = {NULL, NULL, NULL};
  iron_status_t st =
      iron_buffer_create_from_host(dev, IRON_DTYPE_F32, 1, d4, x, NULL, &args[0]);
  if (!st)
    st = iron_buffer_create_from_host(dev, IRON_DTYPE_F32, 1, d4, y, NULL,
                                      &args[1]);
  if (!st)
    st = iron_buffer_create_from_host(dev, IRON_DTYPE_F32, 1, d0, NULL, NULL,
                                      &args[2]);
  iron_buffer_t *res[6] = {0};
  iron_event_t *done = NULL;
  bool donate[3] = {donate_x, false, false};
  if (!st) st = iron_executable_execute(exe, args, 3, donate, res, &done);
  if (!st) {
    st = iron_event_wait(done);
    iron_event_release(done);
  }
  float got[6][4];
  for (int k = 0; k < 6 && !st; ++k)
    if (k != 3) st = test_read_buffer(res[k], got[k], 16);
  if (!st) {
    float z[4], z1[4];
    expected(steps, last_op, x, y, z, z1);
    const float cv[4] = {10, 20, 30, 40};
    bool ok = memcmp(got[0], z, 16) == 0 && memcmp(got[1], x, 16) == 0 &&
              memcmp(got[2], cv, 16) == 0 && memcmp(got[4], z1, 16) == 0 &&
              memcmp(got[5], z, 16) == 0 &&
              iron_buffer_size_in_bytes(res[3]) == 0;
    // No result is an argument's storage (z may be one buffer twice).
    for (int k = 0; k < 6 && ok; ++k) {
      void *p = iron_buffer_device_pointer(res[k]);
      if (k == 3 || !p) continue;
      if (p == iron_buffer_device_pointer(args[1])) ok = false;
      if (!donate_x && p == iron_buffer_device_pointer(args[0])) ok = false;
    }
    // A donated argument is gone.
    if (donate_x && iron_buffer_device_pointer(args[0]) != NULL) ok = false;
    if (!ok) {
      ++*bad;
      fprintf(stderr, "wrong results (seed %d): z %g vs %g, z1 %g vs %g, x %g vs %g, c %g\n",
              seed, got[0][0], z[0], got[4][0], z1[0], got[1][0], x[0], got[2][0]);
    }
  }
  for (int k = 0; k < 6; ++k) iron_buffer_release(res[k]);
  for (int k = 0; k < 3; ++k) iron_buffer_release(args[k]);
  return st;
}

// --- tests ------------------------------------------------------------------------

// The rule's constants (docs/decisions.md): the CNN training step pays,
// a short program or one that copies much per kernel step does not.
static void test_rule(void) {
  // CNN f32 (bench/kernels.py cnn_f32): 208 kernel steps, 63 arguments
  // (15.3 MB), 62 results (13.8 MB).
  for (int b = 0; b < 2; ++b) {
    CHECK(iron_exec_graph_pays(208, 8, b, 63, 15300000, 62, 13800000));
    CHECK(!iron_exec_graph_pays(7, 8, b, 1, 16, 1, 16));  // below min steps
    CHECK(iron_exec_graph_pays(8, 8, b, 1, 16, 1, 16));
    CHECK(!iron_exec_graph_pays(208, 0, b, 1, 16, 1, 16));  // off
    // 1 GB copied per call for 100 steps: no.
    CHECK(!iron_exec_graph_pays(100, 8, b, 2, 1u << 29, 1, 1u << 29));
  }
  // Few steps, many arguments: one copy each costs more than it saves;
  // batched, the count hardly matters.
  CHECK(!iron_exec_graph_pays(12, 8, false, 40, 640, 40, 640));
  CHECK(iron_exec_graph_pays(12, 8, true, 40, 640, 40, 640));
}

#define kArena (g_batch ? 2 * 64 + 192 : 7 * 64)

static void test_record_and_replay(void) {
  fake_dev_t f = fake_dev_open();
  int64_t base = atomic_load(&f.dev->bytes_in_use);
  iron_executable_t *exe =
      compile_on(&f, f.dev, build_program(12, IRON_OP_ADD, IRON_OP_ADD));
  int bad = 0;
  for (int call = 0; call < 20 && exe; ++call) {
    CHECK_OK(run_check(f.dev, exe, 12, IRON_OP_ADD, call, false, &bad));
    // Call 0 the ordinary way, call 1 records (and replays), then replays.
    CHECK_EQ_INT(atomic_load(&fake_cuda.captures_begun), call >= 1 ? 1 : 0);
    CHECK_EQ_INT(atomic_load(&fake_cuda.graph_launches),
                 call >= 1 ? call : 0);
    if (call >= 1) {
      // Arena: 2 input homes (x, y; e has no bytes) and 5 output homes of
      // 16 bytes (64 accounted each), in the device's bytes in use;
      // batched: the input homes and a table of 7 entries of 24 bytes.
      CHECK_EQ_INT(iron_exec_graph_arena_bytes(f.dev), kArena);
    }
  }
  CHECK_EQ_INT(bad, 0);
  CHECK_EQ_INT(atomic_load(&fake_cuda.capture_errors), 0);
  // The arena and the uploaded constant.
  CHECK_EQ_INT(atomic_load(&f.dev->bytes_in_use) - base, kArena + 64);
  iron_executable_release(exe);
  // Given back with the executable.
  CHECK_EQ_INT(iron_exec_graph_arena_bytes(f.dev), 0);
  for (int k = 0; k < 1000 && atomic_load(&f.dev->bytes_in_use) != base; ++k)
    fake_sleep_ms(1);
  CHECK_EQ_INT(atomic_load(&f.dev->bytes_in_use), base);
  fake_dev_close(&f);
}

static void test_donation(void) {
  fake_dev_t f = fake_dev_open();
  iron_executable_t *exe =
      compile_on(&f, f.dev, build_program(12, IRON_OP_ADD, IRON_OP_ADD));
  int bad = 0;
  for (int call = 0; call < 12 && exe; ++call)
    CHECK_OK(run_check(f.dev, exe, 12, IRON_OP_ADD, call + 100, call % 3 != 2,
                       &bad));
  CHECK_EQ_INT(bad, 0);
  CHECK_EQ_INT(atomic_load(&fake_cuda.captures_begun), 1);
  CHECK_EQ_INT(atomic_load(&fake_cuda.graph_launches), 11);
  iron_executable_release(exe);
  fake_dev_close(&f);
}

// No graph: below the minimum, a step a graph cannot record, the host
// device, IRON_CUDA_PROGRAM_GRAPHS=0.
static void test_no_graph(void) {
  fake_dev_t f = fake_dev_open();
  iron_executable_t *short_prog =
      compile_on(&f, f.dev, build_program(3, IRON_OP_ADD, IRON_OP_ADD));
  iron_executable_t *staged =
      compile_on(&f, f.dev, build_program(12, IRON_OP_SUBTRACT, IRON_OP_ADD));
  iron_device_t *host = iron_runtime_device(f.rt, 0);
  iron_executable_t *on_host =
      compile_on(&f, host, build_program(12, IRON_OP_ADD, IRON_OP_ADD));
  f.dev->program_graph_min_steps = 0;
  iron_executable_t *off =
      compile_on(&f, f.dev, build_program(12, IRON_OP_ADD, IRON_OP_ADD));
  int bad = 0;
  for (int call = 0; call < 5; ++call) {
    if (short_prog)
      CHECK_OK(run_check(f.dev, short_prog, 3, IRON_OP_ADD, call, false, &bad));
    if (on_host)
      CHECK_OK(run_check(host, on_host, 12, IRON_OP_ADD, call, call & 1, &bad));
    if (off) CHECK_OK(run_check(f.dev, off, 12, IRON_OP_ADD, call, false, &bad));
  }
  CHECK_EQ_INT(bad, 0);
  CHECK_EQ_INT(atomic_load(&fake_cuda.captures_begun), 0);
  CHECK_EQ_INT(iron_exec_graph_arena_bytes(f.dev), 0);
  iron_executable_release(short_prog);
  iron_executable_release(staged);
  iron_executable_release(on_host);
  iron_executable_release(off);
  fake_dev_close(&f);
}

// A replay that fails (cuGraphLaunch): that call fails, the next works and
// records again; a result allocation that fails (memory limit) the same,
// and the arena is given back.
static void test_replay_errors(void) {
  fake_dev_t f = fake_dev_open();
  iron_executable_t *exe =
      compile_on(&f, f.dev, build_program(12, IRON_OP_ADD, IRON_OP_ADD));
  if (!exe) return;
  int bad = 0;
  for (int call = 0; call < 3; ++call)
    CHECK_OK(run_check(f.dev, exe, 12, IRON_OP_ADD, call, false, &bad));
  CHECK_EQ_INT(atomic_load(&fake_cuda.captures_begun), 1);
  fake_cuda.fail_graph_launch = IRON_CU_ERROR_LAUNCH_OUT_OF_RESOURCES;
  iron_status_t st = run_check(f.dev, exe, 12, IRON_OP_ADD, 50, false, &bad);
  CHECK(st && strstr(iron_status_message(st), "cuGraphLaunch"));
  CHECK(st && !strstr(iron_status_message(st), "stays unusable"));
  iron_status_free(st);
  CHECK_EQ_INT(iron_exec_graph_arena_bytes(f.dev), 0);
  // The next call works (the ordinary way), the one after records again.
  CHECK_OK(run_check(f.dev, exe, 12, IRON_OP_ADD, 51, false, &bad));
  CHECK_EQ_INT(atomic_load(&fake_cuda.captures_begun), 1);
  CHECK_OK(run_check(f.dev, exe, 12, IRON_OP_ADD, 52, false, &bad));
  CHECK_EQ_INT(atomic_load(&fake_cuda.captures_begun), 2);
  // Out of memory for a result in a replay: the graph and the arena go
  // back (graph memory trimmed) and the call runs the ordinary way, which
  // fits then.
  int64_t in_use = atomic_load(&f.dev->bytes_in_use);
  int trims = atomic_load(&fake_cuda.graph_mem_trims);
  f.dev->memory_limit = in_use + 64 * 3;  // the args fit, not the results
  CHECK_OK(run_check(f.dev, exe, 12, IRON_OP_ADD, 53, false, &bad));
  CHECK_EQ_INT(iron_exec_graph_arena_bytes(f.dev), 0);
  CHECK(atomic_load(&fake_cuda.graph_mem_trims) > trims);
  f.dev->memory_limit = 0;
  for (int call = 0; call < 4; ++call)
    CHECK_OK(run_check(f.dev, exe, 12, IRON_OP_ADD, 60 + call, false, &bad));
  CHECK_EQ_INT(atomic_load(&fake_cuda.captures_begun), 3);
  CHECK_EQ_INT(iron_exec_graph_arena_bytes(f.dev), kArena);
  // Reclaim (memory pressure elsewhere): the idle arena goes back, and the
  // executable records again later.
  CHECK(iron_exec_graph_arena_bytes(f.dev) > 0);
  iron_exec_graph_reclaim(f.dev);
  CHECK_EQ_INT(iron_exec_graph_arena_bytes(f.dev), 0);
  for (int call = 0; call < 3; ++call)
    CHECK_OK(run_check(f.dev, exe, 12, IRON_OP_ADD, 70 + call, false, &bad));
  CHECK_EQ_INT(atomic_load(&fake_cuda.captures_begun), 4);
  // Failures so far: one (the launch; out of memory is not the graph's
  // fault); two more stop recording.
  for (int k = 0; k < 2; ++k) {
    fake_cuda.fail_graph_launch = IRON_CU_ERROR_INVALID_VALUE;
    st = run_check(f.dev, exe, 12, IRON_OP_ADD, 80 + 10 * k, false, &bad);
    CHECK(st != NULL);
    iron_status_free(st);
    for (int call = 0; call < 4; ++call)
      CHECK_OK(run_check(f.dev, exe, 12, IRON_OP_ADD, 81 + 10 * k + call,
                         false, &bad));
  }
  CHECK_EQ_INT(atomic_load(&fake_cuda.captures_begun), 5);
  CHECK_EQ_INT(iron_exec_graph_arena_bytes(f.dev), 0);
  CHECK_EQ_INT(bad, 0);
  CHECK(iron_cuda_device_sticky(f.cd) == NULL);
  iron_executable_release(exe);
  fake_dev_close(&f);
}

// A kernel marked capturable that reads back: the device refuses the copy
// while recording, the recording is discarded, the call runs the ordinary
// way and is right; after three such the executable stops recording.
static void test_recording_refused(void) {
  fake_dev_t f = fake_dev_open();
  iron_executable_t *exe =
      compile_on(&f, f.dev, build_program(12, IRON_OP_MULTIPLY, IRON_OP_ADD));
  int bad = 0;
  for (int call = 0; call < 10 && exe; ++call)
    CHECK_OK(run_check(f.dev, exe, 12, IRON_OP_MULTIPLY, call, call & 1, &bad));
  CHECK_EQ_INT(bad, 0);
  CHECK_EQ_INT(atomic_load(&fake_cuda.captures_begun), 3);
  CHECK_EQ_INT(atomic_load(&fake_cuda.graph_launches), 0);
  CHECK_EQ_INT(iron_exec_graph_arena_bytes(f.dev), 0);
  CHECK(iron_cuda_device_sticky(f.cd) == NULL);
  iron_executable_release(exe);
  fake_dev_close(&f);
}

// A driver error while recording (an allocation of the recording fails):
// the call runs the ordinary way, the next records.
static void test_recording_driver_error(void) {
  fake_dev_t f = fake_dev_open();
  iron_executable_t *exe =
      compile_on(&f, f.dev, build_program(12, IRON_OP_ADD, IRON_OP_ADD));
  if (!exe) return;
  int bad = 0;
  CHECK_OK(run_check(f.dev, exe, 12, IRON_OP_ADD, 0, false, &bad));
  atomic_store(&g_fail_alloc_when_recording, 1);
  CHECK_OK(run_check(f.dev, exe, 12, IRON_OP_ADD, 1, false, &bad));
  CHECK_EQ_INT(atomic_load(&g_fail_alloc_when_recording), 0);
  CHECK_EQ_INT(atomic_load(&fake_cuda.captures_begun), 1);
  CHECK_EQ_INT(atomic_load(&fake_cuda.graph_launches), 0);
  // The next call records again.
  for (int call = 2; call < 5; ++call)
    CHECK_OK(run_check(f.dev, exe, 12, IRON_OP_ADD, call, false, &bad));
  CHECK_EQ_INT(atomic_load(&fake_cuda.captures_begun), 2);
  CHECK_EQ_INT(atomic_load(&fake_cuda.graph_launches), 3);
  CHECK_EQ_INT(bad, 0);
  CHECK(!fake_cuda_capturing(f.cd->stream));
  CHECK(iron_cuda_device_sticky(f.cd) == NULL);
  iron_executable_release(exe);
  fake_dev_close(&f);
}

typedef struct {
  iron_device_t *dev;
  iron_executable_t *exe;
  int seed, bad, failed;
} worker_t;

static void *worker_main(void *arg) {
  worker_t *w = arg;
  for (int r = 0; r < 40; ++r) {
    iron_status_t st = run_check(w->dev, w->exe, 13, IRON_OP_ADD,
                                 w->seed * 1000 + r, r % 2, &w->bad);
    if (st) {
      fprintf(stderr, "thread run failed: %s\n", iron_status_message(st));
      iron_status_free(st);
      w->failed++;
    }
  }
  return NULL;
}

static void test_threads(void) {
  fake_dev_t f = fake_dev_open();
  iron_executable_t *exe =
      compile_on(&f, f.dev, build_program(13, IRON_OP_ADD, IRON_OP_ADD));
  if (!exe) return;
  pthread_t t[8];
  worker_t w[8];
  for (int k = 0; k < 8; ++k) {
    w[k] = (worker_t){f.dev, exe, k, 0, 0};
    pthread_create(&t[k], NULL, worker_main, &w[k]);
  }
  int bad = 0, failed = 0;
  for (int k = 0; k < 8; ++k) {
    pthread_join(t[k], NULL);
    bad += w[k].bad;
    failed += w[k].failed;
  }
  CHECK_EQ_INT(bad, 0);
  CHECK_EQ_INT(failed, 0);
  CHECK_EQ_INT(atomic_load(&fake_cuda.captures_begun), 1);
  CHECK_EQ_INT(atomic_load(&fake_cuda.graph_launches), 8 * 40 - 1);
  CHECK_EQ_INT(atomic_load(&fake_cuda.capture_errors), 0);
  iron_executable_release(exe);
  fake_dev_close(&f);
}


// --- counted loops and borrowed arguments ----------------------------------------

// main(x: 4xf32, w: 4xf32) -> (i, x'): for i in range(trips): x = x + w + w.
// Three kernel steps per iteration (two f32 adds, the counter's s32 add).
static iron_ir_module_t *build_loop_program(int32_t trips) {
  iron_ir_module_t *m = iron_ir_builder_module_create("jit_loop", 2);
  int64_t d4[1] = {4};
  const iron_ir_type_t *ti = iron_ir_builder_scalar_type(m, IRON_DTYPE_S32);
  const iron_ir_type_t *tx =
      iron_ir_builder_tensor_type(m, IRON_DTYPE_F32, 1, d4);
  const iron_ir_type_t *tp = iron_ir_builder_scalar_type(m, IRON_DTYPE_PRED);
  const iron_ir_type_t *ins[2] = {tx, tx}, *carry[3] = {ti, tx, tx};
  iron_ir_func_t *f = iron_ir_builder_func(m, "main", true, 2, ins, 2, carry);
  iron_ir_block_t *b = iron_ir_builder_func_block(f);
  int32_t zero = 0, one = 1;
  iron_ir_value_t *i0 = iron_ir_builder_constant(m, f, b, ti, &zero, 4, false);
  iron_ir_value_t *init[3] = {i0, &b->args[0], &b->args[1]};
  iron_ir_op_t *w =
      iron_ir_builder_op(m, f, b, IRON_OP_WHILE, 3, init, 3, carry, 2);
  iron_ir_builder_set_loc(m, w, "loop.py", 3);
  iron_ir_block_t *cb = iron_ir_builder_region_block(w, 0);
  for (int k = 0; k < 3; ++k) iron_ir_builder_block_arg(m, f, cb, carry[k]);
  iron_ir_value_t *lim =
      iron_ir_builder_constant(m, f, cb, ti, &trips, 4, false);
  iron_ir_value_t *cops[2] = {&cb->args[0], lim};
  iron_ir_value_t *lt =
      iron_ir_builder_op1(m, f, cb, IRON_OP_COMPARE, 2, cops, tp);
  iron_ir_builder_attr(m, lt->def_op, "comparison_direction",
                       iron_ir_builder_attr_enum(
                           m, IRON_ENUM_COMPARISON_DIRECTION, IRON_CMP_LT));
  iron_ir_builder_return(m, f, cb, IRON_OP_RETURN, 1, &lt);
  iron_ir_block_t *bb = iron_ir_builder_region_block(w, 1);
  for (int k = 0; k < 3; ++k) iron_ir_builder_block_arg(m, f, bb, carry[k]);
  iron_ir_value_t *bi = &bb->args[0], *bx = &bb->args[1], *bw = &bb->args[2];
  iron_ir_value_t *a[2] = {bx, bw};
  iron_ir_value_t *x1 = iron_ir_builder_op1(m, f, bb, IRON_OP_ADD, 2, a, tx);
  iron_ir_value_t *a2[2] = {x1, bw};
  iron_ir_value_t *x2 = iron_ir_builder_op1(m, f, bb, IRON_OP_ADD, 2, a2, tx);
  iron_ir_value_t *c1 = iron_ir_builder_constant(m, f, bb, ti, &one, 4, false);
  iron_ir_value_t *a3[2] = {bi, c1};
  iron_ir_value_t *ni = iron_ir_builder_op1(m, f, bb, IRON_OP_ADD, 2, a3, ti);
  iron_ir_value_t *r[3] = {ni, x2, bw};
  iron_ir_builder_return(m, f, bb, IRON_OP_RETURN, 3, r);
  iron_ir_value_t *res[2] = {&w->results[0], &w->results[1]};
  iron_ir_builder_return(m, f, b, IRON_OP_FUNC_RETURN, 2, res);
  return m;
}

// Runs the loop program on x made from `seed` and `w` (made from `seed`
// when NULL; else the caller's buffer, donated when `donate_w`) and checks
// both results.
static iron_status_t run_loop_check(iron_device_t *dev, iron_executable_t *exe,
                                    int32_t trips, int seed, iron_buffer_t *w,
                                    bool donate_w, int *bad) {
  float x[4], wv[4];
  for (int i = 0; i < 4; ++i) {
    x[i] = (float)(seed * 4 + i) * 0.5f - 3.0f;
    wv[i] = (float)((seed * 7 + i) % 11) + 0.25f;
  }
  int64_t d4[1] = {4};
  iron_buffer_t *args[2] = {NULL, w};
  iron_status_t st =
      iron_buffer_create_from_host(dev, IRON_DTYPE_F32, 1, d4, x, NULL, &args[0]);
  if (!st && w) st = test_read_buffer(w, wv, 16);
  if (!st && !w)
    st = iron_buffer_create_from_host(dev, IRON_DTYPE_F32, 1, d4, wv, NULL,
                                      &args[1]);
  iron_buffer_t *res[2] = {0};
  iron_event_t *done = NULL;
  bool donate[2] = {seed & 1, donate_w};
  if (!st) st = iron_executable_execute(exe, args, 2, donate, res, &done);
  if (!st) {
    st = iron_event_wait(done);
    iron_event_release(done);
  }
  int32_t gi = -1;
  float gx[4];
  if (!st) st = test_read_buffer(res[0], &gi, 4);
  if (!st) st = test_read_buffer(res[1], gx, 16);
  if (!st) {
    bool ok = gi == trips;
    for (int i = 0; i < 4; ++i) {
      float want = x[i];
      for (int32_t k = 0; k < trips; ++k) want = want + wv[i] + wv[i];
      ok = ok && gx[i] == want;
    }
    if (!ok) {
      ++*bad;
      fprintf(stderr, "loop: wrong results (seed %d): i %d, x %g\n", seed, gi,
              gx[0]);
    }
  }
  for (int k = 0; k < 2; ++k) iron_buffer_release(res[k]);
  iron_buffer_release(args[0]);
  if (!w) iron_buffer_release(args[1]);
  return st;
}

// A counted loop of a known trip count is recorded into the program graph
// iteration by iteration: one launch per call, no loop recording of its
// own; past the step cap the loop keeps its body graph, recorded per call.
static void test_counted_loop(void) {
  fake_dev_t f = fake_dev_open();
  f.dev->program_graph_borrow_min = 0;
  iron_executable_t *exe = compile_on(&f, f.dev, build_loop_program(6));
  int bad = 0;
  for (int call = 0; call < 8 && exe; ++call) {
    int caps = atomic_load(&fake_cuda.captures_begun);
    int launches = atomic_load(&fake_cuda.graph_launches);
    CHECK_OK(run_loop_check(f.dev, exe, 6, call, NULL, false, &bad));
    int dc = atomic_load(&fake_cuda.captures_begun) - caps;
    int dl = atomic_load(&fake_cuda.graph_launches) - launches;
    // Call 0: the loop's body graph (6 trips >= 4); call 1: the program's
    // recording; then one program launch per call.
    CHECK_EQ_INT(dc, call <= 1 ? 1 : 0);
    if (call >= 1) CHECK_EQ_INT(dl, 1);
  }
  iron_executable_release(exe);
  // 2000 trips x 3 steps > 4096: no program graph.
  exe = compile_on(&f, f.dev, build_loop_program(2000));
  for (int call = 0; call < 4 && exe; ++call) {
    int caps = atomic_load(&fake_cuda.captures_begun);
    CHECK_OK(run_loop_check(f.dev, exe, 2000, call, NULL, false, &bad));
    CHECK_EQ_INT(atomic_load(&fake_cuda.captures_begun) - caps, 1);
  }
  CHECK_EQ_INT(iron_exec_graph_arena_bytes(f.dev), 0);
  CHECK_EQ_INT(bad, 0);
  CHECK_EQ_INT(atomic_load(&fake_cuda.capture_errors), 0);
  iron_executable_release(exe);
  fake_dev_close(&f);
}

// w passed as one buffer call after call is read where it is (no home);
// when another buffer comes, that call runs the ordinary way and the next
// recording copies w; a donated w is never borrowed.
static void test_borrowed_argument(void) {
  fake_dev_t f = fake_dev_open();
  int64_t d4[1] = {4};
  const float w0[4] = {1, 2, 3, 4}, w1[4] = {0.5f, -1, 8, 2};
  // Arena without borrowing: homes for x and w.
  f.dev->program_graph_borrow_min = 0;
  iron_executable_t *exe = compile_on(&f, f.dev, build_loop_program(6));
  iron_buffer_t *w = NULL;
  CHECK_OK(iron_buffer_create_from_host(f.dev, IRON_DTYPE_F32, 1, d4, w0, NULL,
                                        &w));
  int bad = 0;
  for (int call = 0; call < 3 && exe; ++call)
    CHECK_OK(run_loop_check(f.dev, exe, 6, call, w, false, &bad));
  int64_t full = iron_exec_graph_arena_bytes(f.dev);
  CHECK(full > 0);
  iron_executable_release(exe);
  f.dev->program_graph_borrow_min = 16;
  exe = compile_on(&f, f.dev, build_loop_program(6));
  int caps0 = atomic_load(&fake_cuda.captures_begun);
  for (int call = 0; call < 6 && exe; ++call)
    CHECK_OK(run_loop_check(f.dev, exe, 6, 10 + call, w, false, &bad));
  // Recorded once (call 1), w without a home: one 16-byte home less.
  CHECK_EQ_INT(atomic_load(&fake_cuda.captures_begun) - caps0, 2);
  CHECK_EQ_INT(iron_exec_graph_arena_bytes(f.dev), full - 64);
  // Another w (the first still alive: another address): right results,
  // the graph dropped, recorded again with w copied.
  iron_buffer_t *w2 = NULL;
  CHECK_OK(iron_buffer_create_from_host(f.dev, IRON_DTYPE_F32, 1, d4, w1, NULL,
                                        &w2));
  int launches = atomic_load(&fake_cuda.graph_launches);
  CHECK_OK(run_loop_check(f.dev, exe, 6, 20, w2, false, &bad));
  CHECK_EQ_INT(iron_exec_graph_arena_bytes(f.dev), 0);
  for (int call = 0; call < 5 && exe; ++call)
    CHECK_OK(run_loop_check(f.dev, exe, 6, 21 + call, call & 1 ? w : w2,
                            false, &bad));
  CHECK_EQ_INT(iron_exec_graph_arena_bytes(f.dev), full);
  CHECK(atomic_load(&fake_cuda.graph_launches) - launches >= 3);
  iron_executable_release(exe);
  // Donated: never borrowed (the program may write over it).
  exe = compile_on(&f, f.dev, build_loop_program(6));
  for (int call = 0; call < 4 && exe; ++call) {
    iron_buffer_t *wd = NULL;
    CHECK_OK(iron_buffer_create_from_host(f.dev, IRON_DTYPE_F32, 1, d4, w0,
                                          NULL, &wd));
    CHECK_OK(run_loop_check(f.dev, exe, 6, 30 + call, wd, true, &bad));
    iron_buffer_release(wd);
    if (call >= 1) CHECK_EQ_INT(iron_exec_graph_arena_bytes(f.dev), full);
  }
  CHECK_EQ_INT(bad, 0);
  CHECK_EQ_INT(atomic_load(&fake_cuda.capture_errors), 0);
  iron_executable_release(exe);
  iron_buffer_release(w);
  iron_buffer_release(w2);
  fake_dev_close(&f);
}

static void setup(void) { fake_cuda_api(&g_api); }
static void batched(void) { g_batch = true; }

// The batched copy kernel compiles (NVRTC, no GPU needed).
static void test_copy_batch_kernel_compiles(void) {
  iron_cuda_api_t api;
  memset(&api, 0, sizeof(api));
  if (!cuda_test_load_nvrtc(&api)) {
    fprintf(stderr, "no NVRTC: the copy kernel is not compiled here\n");
    return;
  }
  void *cubin = NULL;
  size_t size = 0;
  CHECK_OK(iron_cuda_nvrtc_compile(&api, iron_cuda_device_copy_batch_source(),
                                   "sm_90a", &cubin, &size));
  CHECK(cubin != NULL && size > 0);
  free(cubin);
}

static const iron_test_case_t kTests[] = {
    {"setup", setup},
    {"rule", test_rule},
    {"record_and_replay", test_record_and_replay},
    {"donation", test_donation},
    {"no_graph", test_no_graph},
    {"replay_errors", test_replay_errors},
    {"recording_refused", test_recording_refused},
    {"recording_driver_error", test_recording_driver_error},
    {"threads", test_threads},
    {"counted_loop", test_counted_loop},
    {"borrowed_argument", test_borrowed_argument},
    // The same with batched copies.
    {"batched", batched},
    {"record_and_replay_batched", test_record_and_replay},
    {"donation_batched", test_donation},
    {"replay_errors_batched", test_replay_errors},
    {"recording_refused_batched", test_recording_refused},
    {"recording_driver_error_batched", test_recording_driver_error},
    {"threads_batched", test_threads},
    {"counted_loop_batched", test_counted_loop},
    {"borrowed_argument_batched", test_borrowed_argument},
    {"copy_batch_kernel_compiles", test_copy_batch_kernel_compiles},
};
IRON_TEST_MAIN(kTests)
