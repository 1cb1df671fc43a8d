// Executables: compile (read + plan) and execute (validate synchronously,
// run asynchronously on the device's FIFO worker).
#include "runtime/executable.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/compile_memory.h"
#include "compiler/fusion_passes.h"
#include "compiler/inline.h"
#include "compiler/plan.h"
#include "compiler/scan_in_place.h"
#include "compiler/tuple_forward.h"
#include "runtime/exec_graph.h"
#include "runtime/executor.h"
#include "runtime/runtime_internal.h"
#include "stablehlo/reader.h"

struct iron_executable {
  atomic_int ref;
  iron_runtime_t *rt;  // retained
  iron_device_t *dev;
  iron_ir_module_t *module;  // owned; the plan borrows it
  iron_plan_t *plan;
  char *name;
  char fingerprint[33];
  uint32_t num_inputs, num_outputs;
  iron_tensor_t *in_types, *out_types;
  bool *donatable;
  int32_t *alias;
  // mhlo.memory_kind of each input/output (owned copies; NULL: none given).
  char **in_memory_kinds, **out_memory_kinds;
  // No loops and few bytes produced: may run on the caller's thread when the
  // device is idle (iron_device_enqueue).
  bool small;
  iron_exec_ctx_t ctx;
  // The program recorded as one device graph and replayed (exec_graph.h;
  // NULL: every call runs the ordinary way).
  iron_exec_graph_t *graph;
  // IRON_PROFILE=1: per-execution totals, printed to stderr when the
  // executable is destroyed (or at exit for live ones is not attempted).
  bool profile;
  _Atomic uint64_t prof_runs, prof_kernels, prof_host_ns, prof_total_ns;
  _Atomic uint64_t prof_graph_launches, prof_graph_discards;
};

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// Bytes produced by kernel steps of `block` and everything it calls, or -1
// when it holds a loop (whose cost is unknown before it runs) or the sum
// overflows.
static int64_t block_cost(const iron_plan_block_t *block, int depth) {
  if (depth > 32) return -1;
  int64_t bytes = 0;
  for (uint32_t i = 0; i < block->num_steps; ++i) {
    const iron_plan_step_t *s = &block->steps[i];
    int64_t c = 0;
    switch (s->kind) {
      case IRON_STEP_WHILE:
        return -1;
      case IRON_STEP_KERNEL:
        for (uint32_t o = 0; o < s->num_outputs; ++o)
          if (__builtin_add_overflow(c, (int64_t)s->out_types[o].nbytes, &c))
            return -1;  // declared sizes beyond int64: not small
        // Kernels with regions call back into the runtime per element.
        if (s->op && s->op->num_regions) return -1;
        break;
      case IRON_STEP_IF:
      case IRON_STEP_CASE:
        for (uint32_t b = 0; b < s->num_blocks; ++b) {
          int64_t bc = block_cost(&s->blocks[b], depth + 1);
          if (bc < 0 || __builtin_add_overflow(c, bc, &c)) return -1;
        }
        break;
      case IRON_STEP_CALL:
        c = block_cost(&s->callee->body, depth + 1);
        if (c < 0) return -1;
        break;
      default:
        break;
    }
    if (__builtin_add_overflow(bytes, c, &bytes)) return -1;
  }
  return bytes;
}

// Up to this many bytes written by kernels, a program costs less to run than
// a hand-off to the worker thread and back (~15 us here).
enum { IRON_SMALL_PROGRAM_BYTES = 64 * 1024 };

// 128-bit FNV-1a (two 64-bit lanes with different offsets): stable, not
// cryptographic; it keys caches, it does not authenticate.
static void fingerprint(const void *bytes, size_t n, char out[33]) {
  uint64_t h1 = 0xcbf29ce484222325ULL, h2 = 0x84222325cbf29ce4ULL;
  const unsigned char *p = bytes;
  for (size_t i = 0; i < n; ++i) {
    h1 = (h1 ^ p[i]) * 0x100000001b3ULL;
    h2 = (h2 ^ p[i]) * 0x100000001b3ULL;
    h2 ^= h2 >> 29;
  }
  snprintf(out, 33, "%016llx%016llx", (unsigned long long)h1,
           (unsigned long long)h2);
}

static void type_text(const iron_tensor_t *t, char *buf, size_t cap) {
  size_t len = 0;
  len += (size_t)snprintf(buf, cap, "tensor<");
  for (int32_t i = 0; i < t->rank && len < cap; ++i)
    len += (size_t)snprintf(buf + len, cap - len, "%lldx",
                            (long long)t->dims[i]);
  if (len < cap)
    snprintf(buf + len, cap - len, "%s>", iron_dtype_name(t->dtype));
}

// Whether an mhlo.layout_mode value asks for the layout iron gives every
// array: "default", "auto" (ours to choose) or the row-major minor_to_major
// list "{n-1,...,1,0}". Anything else (column-major, tiled "{1,0:T(8,128)}")
// is a physical layout iron buffers do not have.
static bool layout_mode_is_row_major(const char *s, size_t len, int32_t rank) {
  if ((len == 7 && memcmp(s, "default", 7) == 0) ||
      (len == 4 && memcmp(s, "auto", 4) == 0))
    return true;
  if (len < 2 || s[0] != '{' || s[len - 1] != '}') return false;
  size_t i = 1;
  for (int32_t want = rank - 1; want >= 0; --want) {
    if (want != rank - 1) {
      if (i >= len - 1 || s[i] != ',') return false;
      ++i;
    }
    int64_t v = 0;
    size_t start = i;
    while (i < len - 1 && s[i] >= '0' && s[i] <= '9' && v < 1000000)
      v = v * 10 + (s[i++] - '0');
    if (i == start || v != want) return false;
  }
  return i == len - 1;
}

static void exe_destroy(iron_executable_t *exe) {
  uint64_t runs = atomic_load(&exe->prof_runs);
  if (exe->profile && runs) {
    // A diagnostic switch: stderr is the place for it.
    fprintf(stderr,
            "iron profile: %s on %s: %llu runs, %.1f kernel steps/run, "
            "host (enqueue) %.3f ms/run, total %.3f ms/run, %.1f graph "
            "replays/run, %llu graph recordings discarded\n",
            exe->name, exe->dev->vtable->kind, (unsigned long long)runs,
            (double)atomic_load(&exe->prof_kernels) / (double)runs,
            (double)atomic_load(&exe->prof_host_ns) / 1e6 / (double)runs,
            (double)atomic_load(&exe->prof_total_ns) / 1e6 / (double)runs,
            (double)atomic_load(&exe->prof_graph_launches) / (double)runs,
            (unsigned long long)atomic_load(&exe->prof_graph_discards));
  }
  iron_exec_graph_destroy(exe->graph);
  iron_plan_destroy(exe->plan);
  iron_ir_module_destroy(exe->module);
  free(exe->name);
  free(exe->in_types);
  free(exe->out_types);
  free(exe->donatable);
  free(exe->alias);
  for (uint32_t i = 0; exe->in_memory_kinds && i < exe->num_inputs; ++i)
    free(exe->in_memory_kinds[i]);
  for (uint32_t i = 0; exe->out_memory_kinds && i < exe->num_outputs; ++i)
    free(exe->out_memory_kinds[i]);
  free(exe->in_memory_kinds);
  free(exe->out_memory_kinds);
  iron_runtime_t *rt = exe->rt;
  free(exe);
  iron_runtime_release(rt);
}

static iron_status_t compile_module(iron_runtime_t *rt,
                                    iron_ir_module_t *module,
                                    const void *bytes, size_t size,
                                    const iron_compile_options_t *options,
                                    bool scan_in_place, int *out_scans,
                                    iron_executable_t **out_executable);

// Compiles run under a compile-memory budget (base/compile_memory.h:
// IRON_COMPILE_MEMORY_LIMIT).
//
// The scan-in-place rewrite is an optimization of a program the device
// runs as written: when a module it rewrote then fails to compile (a
// device refusing the rewritten loop's kernels), the module is read again
// and compiled as written. IRON_SCAN_IN_PLACE=1 (set explicitly) returns
// the rewritten module's error instead, to debug it.
iron_status_t iron_executable_compile_module(
    iron_runtime_t *rt, iron_ir_module_t *module, const void *bytes,
    size_t size, const iron_compile_options_t *options,
    iron_executable_t **out_executable) {
  iron_compile_memory_begin();
  int scans = 0;
  iron_status_t st = compile_module(rt, module, bytes, size, options, true,
                                    &scans, out_executable);
  const char *e = getenv("IRON_SCAN_IN_PLACE");
  bool forced = e && strcmp(e, "1") == 0;
  if (st && scans > 0 && bytes && !forced) {
    iron_ir_module_t *again = NULL;
    iron_status_t rd = iron_stablehlo_read(bytes, size, &again);
    if (!rd) {
      iron_status_free(st);
      st = compile_module(rt, again, bytes, size, options, false, NULL,
                          out_executable);
    }
    iron_status_free(rd);
  }
  iron_compile_memory_end();
  return st;
}

static iron_status_t compile_module(iron_runtime_t *rt,
                                    iron_ir_module_t *module,
                                    const void *bytes, size_t size,
                                    const iron_compile_options_t *options,
                                    bool scan_in_place, int *out_scans,
                                    iron_executable_t **out_executable) {
  iron_executable_t *exe = calloc(1, sizeof(*exe));
  if (!exe) {
    iron_ir_module_destroy(module);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for an executable");
  }
  atomic_init(&exe->ref, 1);
  iron_runtime_retain(rt);
  exe->rt = rt;
  exe->dev = options && options->device ? options->device
                                         : iron_runtime_device(rt, 0);
  exe->module = module;
  const char *mname = module->name ? module->name : "module";
  exe->name = strdup(mname);
  if (bytes)
    fingerprint(bytes, size, exe->fingerprint);
  else
    fingerprint(mname, strlen(mname), exe->fingerprint);
  iron_status_t st = iron_compiler_tuple_forward(module);
  const char *nofuse = getenv("IRON_NO_FUSION");
  bool fusing = exe->dev->vtable->fusable &&
                !(nofuse && nofuse[0] && nofuse[0] != '0');
  // Private functions are inlined where they are called so that fusion
  // sees across them (inline.h: IRON_INLINE_CALLS).
  if (!st) st = iron_compiler_inline_for_compile(module, fusing);
  // Scans over stacked state write its rows in place instead of copying
  // each slab out and back (scan_in_place.h).
  if (!st && scan_in_place) st = iron_compiler_scan_in_place(module, out_scans);
  // The fusion passes (fusion_passes.h), with the device's predicates.
  if (!st && fusing) {
    const iron_device_vtable_t *vt = exe->dev->vtable;
    iron_fusion_predicates_t preds = {.fusable = vt->fusable,
                                      .row_fusable = vt->row_fusable,
                                      .pivot_fusable = vt->pivot_fusable,
                                      .vector_dot = vt->vector_dot};
    st = iron_compiler_fusion_passes(module, &preds, NULL);
  }
  if (!st) st = iron_plan_create_on(module, exe->dev, &exe->plan);
  if (st) {
    st = iron_status_annotate(st, "while compiling %s", mname);
    exe_destroy(exe);  // frees mname (module memory)
    return st;
  }
  const iron_ir_func_t *main_fn = exe->plan->main->ir;
  int64_t cost = block_cost(&exe->plan->main->body, 0);
  exe->small = cost >= 0 && cost <= IRON_SMALL_PROGRAM_BYTES;
  const char *prof = getenv("IRON_PROFILE");
  exe->profile = prof && prof[0] && prof[0] != '0';
  exe->num_inputs = iron_ir_func_num_args(main_fn);
  exe->num_outputs = iron_ir_func_num_results(main_fn);
  exe->in_types = calloc(exe->num_inputs + 1, sizeof(iron_tensor_t));
  exe->out_types = calloc(exe->num_outputs + 1, sizeof(iron_tensor_t));
  exe->donatable = calloc(exe->num_inputs + 1, sizeof(bool));
  exe->alias = calloc(exe->num_inputs + 1, sizeof(int32_t));
  exe->in_memory_kinds = calloc(exe->num_inputs + 1, sizeof(char *));
  exe->out_memory_kinds = calloc(exe->num_outputs + 1, sizeof(char *));
  if (!exe->name || !exe->in_types || !exe->out_types || !exe->donatable ||
      !exe->alias || !exe->in_memory_kinds || !exe->out_memory_kinds) {
    exe_destroy(exe);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for an executable");
  }
  for (uint32_t i = 0; i < exe->num_inputs + exe->num_outputs && !st; ++i) {
    bool is_in = i < exe->num_inputs;
    const iron_ir_type_t *t =
        is_in ? iron_ir_func_arg_type(main_fn, i)
              : iron_ir_func_result_type(main_fn, i - exe->num_inputs);
    iron_tensor_t *dst = is_in ? &exe->in_types[i]
                               : &exe->out_types[i - exe->num_inputs];
    size_t nbytes;
    if (t->kind == IRON_TYPE_TOKEN) {
      dst->dtype = IRON_DTYPE_TOKEN;
      dst->count = 1;
    } else if (t->kind == IRON_TYPE_TENSOR &&
               iron_ir_type_byte_size(t, &nbytes)) {
      dst->dtype = t->dtype;
      dst->rank = t->rank;
      memcpy(dst->dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
      dst->count = iron_ir_type_num_elements(t);
      dst->nbytes = nbytes;
    } else {
      char buf[128];
      iron_ir_type_format(t, buf, sizeof(buf));
      st = IRON_ERR(UNIMPLEMENTED, "main %s %u has type %s (not supported yet)",
                    is_in ? "argument" : "result",
                    is_in ? i : i - exe->num_inputs, buf);
    }
  }
  for (uint32_t i = 0; i < exe->num_inputs; ++i) {
    exe->alias[i] = -1;
    const iron_ir_attr_t *d = main_fn->arg_attrs ? main_fn->arg_attrs[i] : NULL;
    if (!d) continue;
    int64_t v;
    const iron_ir_attr_t *a = iron_ir_dict_get(d, "tf.aliasing_output");
    if (a && iron_ir_attr_as_i64(a, &v) && v >= 0 &&
        v < (int64_t)exe->num_outputs) {
      exe->alias[i] = (int32_t)v;
      exe->donatable[i] = true;
    }
    a = iron_ir_dict_get(d, "jax.buffer_donor");
    if (a && a->kind == IRON_ATTR_BOOL && a->b) exe->donatable[i] = true;
  }
  for (uint32_t i = 0; i < exe->num_inputs + exe->num_outputs && !st; ++i) {
    bool is_in = i < exe->num_inputs;
    uint32_t k = is_in ? i : i - exe->num_inputs;
    const iron_ir_attr_t *const *dicts =
        is_in ? main_fn->arg_attrs : main_fn->res_attrs;
    const iron_ir_attr_t *dict = dicts ? dicts[k] : NULL;
    if (!dict) continue;
    const iron_ir_attr_t *layout = iron_ir_dict_get(dict, "mhlo.layout_mode");
    const iron_tensor_t *t = is_in ? &exe->in_types[k] : &exe->out_types[k];
    if (layout && layout->kind == IRON_ATTR_STRING &&
        !layout_mode_is_row_major(layout->str, layout->str_len, t->rank)) {
      st = IRON_ERR(UNIMPLEMENTED,
                    "main %s %u asks for the layout %.*s (minor_to_major); "
                    "ironjax arrays have only the row-major layout",
                    is_in ? "argument" : "result", k,
                    (int)(layout->str_len > 64 ? 64 : layout->str_len),
                    layout->str);
      break;
    }
    const iron_ir_attr_t *a = iron_ir_dict_get(dict, "mhlo.memory_kind");
    if (!a || a->kind != IRON_ATTR_STRING) continue;
    char *kind = strndup(a->str, a->str_len);
    if (!kind) st = IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
    (is_in ? exe->in_memory_kinds : exe->out_memory_kinds)[k] = kind;
  }
  if (st) {
    st = iron_status_annotate(st, "while compiling %s", mname);
    exe_destroy(exe);
    return st;
  }
  iron_exec_ctx_init(&exe->ctx, exe->dev);
  st = iron_exec_graph_create(exe->dev, exe->plan->main, exe->in_types,
                              exe->num_inputs, exe->out_types,
                              exe->num_outputs, &exe->graph);
  if (st) {
    exe_destroy(exe);
    return st;
  }
  *out_executable = exe;
  return IRON_OK;
}

iron_status_t iron_executable_compile(iron_runtime_t *rt, const void *bytes,
                                      size_t size,
                                      const iron_compile_options_t *options,
                                      iron_executable_t **out_executable) {
  iron_ir_module_t *module = NULL;
  iron_compile_memory_begin();
  iron_status_t st = iron_stablehlo_read(bytes, size, &module);
  if (st)
    st = iron_status_annotate(st, "while reading the StableHLO artifact");
  else
    st = iron_executable_compile_module(rt, module, bytes, size, options,
                                        out_executable);
  iron_compile_memory_end();
  return st;
}

void iron_executable_retain(iron_executable_t *exe) {
  if (exe) atomic_fetch_add_explicit(&exe->ref, 1, memory_order_relaxed);
}

void iron_executable_release(iron_executable_t *exe) {
  if (!exe) return;
  if (atomic_fetch_sub_explicit(&exe->ref, 1, memory_order_acq_rel) != 1)
    return;
  exe_destroy(exe);
}

const char *iron_executable_name(const iron_executable_t *exe) {
  return exe->name;
}
const char *iron_executable_fingerprint(const iron_executable_t *exe) {
  return exe->fingerprint;
}
uint32_t iron_executable_num_inputs(const iron_executable_t *exe) {
  return exe->num_inputs;
}
uint32_t iron_executable_num_outputs(const iron_executable_t *exe) {
  return exe->num_outputs;
}

void iron_executable_input_type(const iron_executable_t *exe, uint32_t i,
                                iron_dtype_t *out_dtype, int32_t *out_rank,
                                const int64_t **out_dims) {
  const iron_tensor_t *t = &exe->in_types[i];
  if (out_dtype) *out_dtype = t->dtype;
  if (out_rank) *out_rank = t->rank;
  if (out_dims) *out_dims = t->dims;
}

void iron_executable_output_type(const iron_executable_t *exe, uint32_t i,
                                 iron_dtype_t *out_dtype, int32_t *out_rank,
                                 const int64_t **out_dims) {
  const iron_tensor_t *t = &exe->out_types[i];
  if (out_dtype) *out_dtype = t->dtype;
  if (out_rank) *out_rank = t->rank;
  if (out_dims) *out_dims = t->dims;
}

const char *iron_executable_input_memory_kind(const iron_executable_t *exe,
                                             uint32_t i) {
  return i < exe->num_inputs ? exe->in_memory_kinds[i] : NULL;
}

const char *iron_executable_output_memory_kind(const iron_executable_t *exe,
                                              uint32_t i) {
  return i < exe->num_outputs ? exe->out_memory_kinds[i] : NULL;
}

bool iron_executable_has_host_callbacks(const iron_executable_t *exe) {
  return exe->plan->has_host_callbacks;
}

bool iron_executable_input_donatable(const iron_executable_t *exe,
                                     uint32_t i) {
  return i < exe->num_inputs && exe->donatable[i];
}

int32_t iron_executable_input_alias(const iron_executable_t *exe,
                                    uint32_t i) {
  return i < exe->num_inputs ? exe->alias[i] : -1;
}

// Falls back to the signature when printing fails (out of memory).

char *iron_executable_text(const iron_executable_t *exe) {
  char *text = iron_ir_module_print_to_string(exe->module, NULL);
  if (text) return text;
  const iron_ir_func_t *f = exe->plan->main->ir;
  char sig[4096];
  iron_ir_type_format(f->type, sig, sizeof(sig));
  size_t n = strlen(sig) + strlen(exe->name) + 64;
  char *out = malloc(n);
  if (out) snprintf(out, n, "// %s\nfunc.func @%s%s\n", exe->name, f->name, sig);
  return out;
}

// --- execute ---------------------------------------------------------------

typedef struct exec_job {
  iron_job_t job;
  iron_executable_t *exe;
  iron_event_t *done;
  uint32_t num_args, num_results;
  iron_buffer_t **args;
  bool *donate;
  iron_buffer_t **results;
  iron_slot_t *slots;  // num_args + num_results
} exec_job_t;

// True when `s` is the storage of one of the job's argument buffers (one
// that was donated has none left, so donation still aliases).
static bool shares_argument_storage(exec_job_t *j, const iron_storage_t *s) {
  for (uint32_t k = 0; k < j->num_args; ++k) {
    iron_buffer_t *b = j->args[k];
    pthread_mutex_lock(&b->mu);
    bool same = b->storage == s;
    pthread_mutex_unlock(&b->mu);
    if (same) return true;
  }
  return false;
}

static iron_status_t run_job(exec_job_t *j) {
  iron_executable_t *exe = j->exe;
  iron_slot_t *args = j->slots, *res = j->slots + j->num_args;
  iron_status_t st = IRON_OK;
  // Donated arguments last: a buffer passed twice, once donated, is then
  // seen as shared and not stolen from under the other use.
  for (uint32_t pass = 0; pass < 2 && !st; ++pass) {
    for (uint32_t i = 0; i < j->num_args && !st; ++i) {
      bool take = j->donate && j->donate[i];
      if (take != (pass == 1)) continue;
      iron_storage_t *s;
      st = iron_buffer_acquire_storage(j->args[i], take, &s, NULL);
      if (st) {
        st = iron_status_annotate(st, "argument %u", i);
        break;
      }
      args[i].t = exe->in_types[i];
      args[i].t.data = s->data;
      args[i].s = s;
    }
  }
  if (st) {
    for (uint32_t i = 0; i < j->num_args; ++i) {
      iron_storage_release(args[i].s);
      args[i].s = NULL;
    }
    return st;
  }
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_exec_graph_run(exe->graph, &exe->ctx, exe->plan->main, args, res));
  for (uint32_t i = 0; i < j->num_results && !st; ++i) {
    iron_slot_t *r = &res[i];
    // Storage held by nothing but this result (ref 1) cannot be an
    // argument's: only shared storage pays for the argument scan.
    if (!r->s || r->s->dev != exe->dev ||
        (atomic_load(&r->s->ref) > 1 && shares_argument_storage(j, r->s))) {
      // A constant, a 0-byte value or a borrowed tensor: outputs own
      // accounted device storage. An output that is an argument's storage
      // (jit(lambda x: x), reshapes of an input) is copied too, as XLA
      // does: results never alias live, undonated inputs, so deleting the
      // input leaves the result intact and their addresses differ.
      iron_storage_t *s;
      st = iron_storage_allocate(exe->dev, r->t.nbytes, &s);
      if (st) break;
      st = iron_storage_copy(s->data, exe->dev, r->t.data, exe->dev,
                             r->t.nbytes);
      if (st) {
        iron_storage_release(s);
        break;
      }
      iron_storage_release(r->s);
      r->s = s;
    }
  }
  if (!st)
    for (uint32_t i = 0; i < j->num_results; ++i) {
      iron_buffer_set_storage(j->results[i], res[i].s);
      res[i].s = NULL;
    }
  for (uint32_t i = 0; i < j->num_results; ++i) {
    iron_storage_release(res[i].s);
    res[i].s = NULL;
  }
  return st;
}

static void exec_job_run(iron_job_t *job) {
  exec_job_t *j = (exec_job_t *)job;
  bool prof = j->exe->profile;
  uint64_t t0 = prof ? now_ns() : 0, k0 = iron_exec_kernel_steps;
  uint64_t g0 = iron_exec_graph_launches, d0 = iron_exec_graph_discards;
  iron_status_t st = run_job(j);
  uint64_t t1 = prof ? now_ns() : 0;
  // Devices that run work asynchronously (CUDA): the results are ready
  // once the device has finished what the job enqueued.
  iron_device_t *dev = j->exe->dev;
  if (dev->vtable->job_sync) {
    iron_status_t sync = dev->vtable->job_sync(dev);
    if (!st)
      st = sync;
    else
      iron_status_free(sync);
  }
  if (prof) {
    iron_executable_t *e = j->exe;
    atomic_fetch_add(&e->prof_runs, 1);
    atomic_fetch_add(&e->prof_kernels, iron_exec_kernel_steps - k0);
    atomic_fetch_add(&e->prof_graph_launches, iron_exec_graph_launches - g0);
    atomic_fetch_add(&e->prof_graph_discards, iron_exec_graph_discards - d0);
    atomic_fetch_add(&e->prof_host_ns, t1 - t0);
    atomic_fetch_add(&e->prof_total_ns, now_ns() - t0);
  }
  if (st)
    st = iron_status_annotate(st, "while executing %s", j->exe->name);
  // Drop our references before completing, so that whoever waits on `done`
  // sees the memory of dead arguments already returned.
  for (uint32_t i = 0; i < j->num_args; ++i) iron_buffer_release(j->args[i]);
  for (uint32_t i = 0; i < j->num_results; ++i)
    iron_buffer_release(j->results[i]);
  iron_event_complete(j->done, st);
  iron_event_release(j->done);
  iron_executable_t *exe = j->exe;
  free(j);
  iron_executable_release(exe);
}

iron_status_t iron_executable_execute(iron_executable_t *exe,
                                      iron_buffer_t *const *args,
                                      uint32_t num_args, const bool *donate,
                                      iron_buffer_t **out_results,
                                      iron_event_t **out_done) {
  if (num_args != exe->num_inputs)
    return IRON_ERR(INVALID_ARGUMENT, "%s takes %u arguments, got %u",
                    exe->name, exe->num_inputs, num_args);
  for (uint32_t i = 0; i < num_args; ++i) {
    const iron_buffer_t *b = args[i];
    const iron_tensor_t *t = &exe->in_types[i];
    if (!b) return IRON_ERR(INVALID_ARGUMENT, "argument %u is NULL", i);
    bool ok = b->dtype == t->dtype && b->rank == t->rank;
    for (int32_t d = 0; ok && d < t->rank; ++d) ok = b->dims[d] == t->dims[d];
    // jax passes a token argument as an empty bool array.
    if (t->dtype == IRON_DTYPE_TOKEN) ok = b->nbytes == 0;
    if (!ok) {
      char want[256], got[256];
      iron_tensor_t bt = {0};
      bt.dtype = b->dtype;
      bt.rank = b->rank;
      memcpy(bt.dims, b->dims, sizeof(int64_t) * (size_t)b->rank);
      type_text(t, want, sizeof(want));
      type_text(&bt, got, sizeof(got));
      return IRON_ERR(INVALID_ARGUMENT,
                      "argument %u of %s: expected %s, got %s", i, exe->name,
                      want, got);
    }
    if (b->dev != exe->dev)
      return IRON_ERR(INVALID_ARGUMENT,
                      "argument %u of %s is on device %d, the executable "
                      "runs on device %d",
                      i, exe->name, b->dev->id, exe->dev->id);
    if (b->space == IRON_MEMORY_HOST && iron_device_has_host_memory(b->dev))
      return IRON_ERR(INVALID_ARGUMENT,
                      "argument %u of %s is in the host memory of device "
                      "%d; programs read only its device memory (copy it "
                      "there first)",
                      i, exe->name, b->dev->id);
  }
  // One allocation for the job and its arrays.
  size_t na = num_args, nr = exe->num_outputs;
  size_t size = sizeof(exec_job_t) + sizeof(iron_buffer_t *) * (na + nr) +
                sizeof(iron_slot_t) * (na + nr) + sizeof(bool) * na + 16;
  exec_job_t *j = malloc(size);
  iron_event_t *done = iron_event_new();
  if (!j || !done) {
    free(j);
    iron_event_release(done);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory in execute");
  }
  char *p = (char *)(j + 1);
  j->slots = (iron_slot_t *)p;
  p += sizeof(iron_slot_t) * (na + nr);
  j->args = (iron_buffer_t **)p;
  p += sizeof(iron_buffer_t *) * na;
  j->results = (iron_buffer_t **)p;
  p += sizeof(iron_buffer_t *) * nr;
  j->donate = donate ? (bool *)p : NULL;
  if (donate) memcpy(j->donate, donate, na);
  for (size_t i = 0; i < na + nr; ++i) j->slots[i].s = NULL;
  j->num_args = num_args;
  j->num_results = exe->num_outputs;
  j->done = done;
  for (uint32_t i = 0; i < nr; ++i) {
    const iron_tensor_t *t = &exe->out_types[i];
    iron_status_t st = iron_buffer_create_pending(exe->dev, t->dtype, t->rank,
                                                  t->dims, done,
                                                  &j->results[i]);
    if (st) {
      for (uint32_t k = 0; k < i; ++k) iron_buffer_release(j->results[k]);
      free(j);
      iron_event_release(done);
      return st;
    }
  }
  for (uint32_t i = 0; i < na; ++i) {
    iron_buffer_retain(args[i]);
    j->args[i] = args[i];
  }
  for (uint32_t i = 0; i < nr; ++i) {
    iron_buffer_retain(j->results[i]);
    out_results[i] = j->results[i];
  }
  iron_executable_retain(exe);
  j->exe = exe;
  if (out_done) {
    iron_event_retain(done);
    *out_done = done;
  }
  j->job.run = exec_job_run;
  iron_device_enqueue(exe->dev, &j->job, exe->small);
  return IRON_OK;
}
