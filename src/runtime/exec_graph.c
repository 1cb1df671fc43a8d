// Whole programs as device graphs (exec_graph.h). The recording uses the
// executor unchanged: main runs between graph_begin and graph_end with its
// arguments in the input homes, and each result is copied into its output
// home inside the recording (a result may live in graph memory, which the
// graph frees before it ends, or be an input home, a constant or another
// result). What the device refuses while recording (copies to or from the
// host, waits) spoils the recording, which is then discarded: nothing
// recorded has run, and the call runs the ordinary way from its own
// arguments, which the recording never touched.
//
// Input homes are pinned while recording (as the counted loops' carries,
// executor.c): the program's liveness frees must not give them back, and a
// kernel may write over an argument that dies (in place), which is fine:
// every replay copies the arguments in again first.
//
// Borrowed arguments: a large argument that the caller passed at the same
// address in the call before the recording (the weights of a decode step or
// an inference loop) and did not donate gets no home: the recording reads
// it where it is, and a replay needs it at that address again. The
// recording holds an extra reference to it, so no kernel writes over it in
// place (the caller keeps it); a replay that finds it elsewhere runs the
// ordinary way, drops the graph, and the next recording copies that
// argument into a home (it is marked unstable for good).
//
// Counted loops with a trip count known at compile time are recorded
// iteration by iteration (executor.c, program_recording): the graph holds
// every iteration's kernels, up to kMaxGraphSteps in all.
#include "runtime/exec_graph.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// After this many discarded recordings or failed replays an executable
// stops recording (a program that keeps failing would pay for a recording
// every other call).
enum { kMaxFailures = 3 };
// At most this many kernel steps in one program graph (loops unrolled): a
// longer loop keeps its own body graph (executor.c).
enum { kMaxGraphSteps = 4096 };

struct iron_exec_graph {
  iron_device_t *dev;
  // Batched copies (vtable copy_batch): the arguments go into their homes
  // and the results straight into fresh storage through one launch each,
  // whose addresses come from `table` (uploaded per call from `entries`:
  // n_in_e input entries, then n_out_e output entries whose sources are
  // the recorded results' fixed addresses). No output homes then.
  bool batch;
  uint32_t n_in_e, n_out_e;  // n_in_e: the homed arguments of this recording
  uint32_t n_in_max;         // arguments with bytes (the table's room)
  uint64_t max_in, max_out;
  iron_copy_entry_t *entries;
  iron_storage_t *table;
  pthread_mutex_t mu;  // held by the call that records or replays
  uint32_t num_in, num_out;
  const iron_tensor_t *in_types, *out_types;  // the executable's
  iron_storage_t **in_home, **out_home;       // NULL: 0 bytes / not made
  // Borrowed arguments (see the top): per argument, borrowed in the
  // current recording, at which address, and never again (it moved).
  int64_t borrow_min;
  bool *borrowed, *unstable;
  void **borrow_addr;
  void **prev_addr;  // each argument's address in the last call
  void **cur_addr;   // ... in this call (prev_addr once it ends)
  void *exec;        // the recorded program (NULL: none now)
  uint64_t calls;    // calls since the graph was last dropped
  int failures;
  int64_t arena_bytes;
  const iron_ir_op_t *note_op;  // names replays in fault messages
  const char *note_func;
  iron_exec_graph_t *next;  // registry (reclaim)
};

// Every state, for reclaim under memory pressure.
static pthread_mutex_t g_registry_mu = PTHREAD_MUTEX_INITIALIZER;
static iron_exec_graph_t *g_registry;

// --- the rule -----------------------------------------------------------------
//
// docs/decisions.md ("Whole programs as CUDA graphs", 2026-12-03) has the
// measurements behind these constants and the GPU command that re-measures
// them (scripts/program_graphs_gpu.sh).

// Host time the executor spends per kernel step (H200: 14.4 us on the CNN
// step, ~10 us on the GRU step; the lower one).
#define PG_STEP_NS 10000.0
// Host time of one device-to-device copy on the stream (a driver call).
#define PG_COPY_HOST_NS 3000.0
// GPU time of one small copy (a copy node or a stream copy).
#define PG_COPY_GPU_NS 2000.0
// Device-to-device copy rate (bytes copied per ns; H200 ~1.5 TB/s counted
// as bytes copied, each read and written once).
#define PG_COPY_BYTES_PER_NS 1500.0
// One graph launch (host).
#define PG_LAUNCH_NS 5000.0

// Host time per result of a replay with batched copies (its allocation).
#define PG_RESULT_HOST_NS 1000.0

bool iron_exec_graph_pays(int64_t kernel_steps, int64_t min_steps,
                          bool batched, uint32_t num_in, uint64_t in_bytes,
                          uint32_t num_out, uint64_t out_bytes) {
  if (min_steps <= 0 || kernel_steps < min_steps) return false;
  double saving = (double)kernel_steps * PG_STEP_NS;
  double cost;
  if (batched)  // one table upload, two copy launches, bytes copied once
    cost = PG_COPY_HOST_NS + (double)num_out * PG_RESULT_HOST_NS +
           2.0 * PG_COPY_GPU_NS +
           ((double)in_bytes + (double)out_bytes) / PG_COPY_BYTES_PER_NS +
           PG_LAUNCH_NS;
  else
    cost = (double)(num_in + num_out) * PG_COPY_HOST_NS +
           (double)(num_in + 2.0 * num_out) * PG_COPY_GPU_NS +
           ((double)in_bytes + 2.0 * (double)out_bytes) /
               PG_COPY_BYTES_PER_NS +
           PG_LAUNCH_NS;
  // Half the expected saving at most: the step cost is an average, and a
  // GPU-bound program saves less host time than it spends.
  return cost <= 0.5 * saving;
}

static const iron_plan_step_t *first_kernel_step(const iron_plan_block_t *b,
                                                 int depth) {
  for (uint32_t i = 0; i < b->num_steps && depth <= 16; ++i) {
    const iron_plan_step_t *s = &b->steps[i];
    if (s->kind == IRON_STEP_KERNEL) return s;
    if (s->kind == IRON_STEP_CALL && s->callee) {
      const iron_plan_step_t *k = first_kernel_step(&s->callee->body, depth + 1);
      if (k) return k;
    }
  }
  return NULL;
}

iron_status_t iron_exec_graph_create(iron_device_t *dev,
                                     const iron_plan_func_t *main,
                                     const iron_tensor_t *in_types,
                                     uint32_t num_in,
                                     const iron_tensor_t *out_types,
                                     uint32_t num_out,
                                     iron_exec_graph_t **out_graph) {
  *out_graph = NULL;
  if (!dev || !main || dev->program_graph_min_steps <= 0 || dev->sync ||
      !dev->vtable->graph_begin || !dev->vtable->memcpy)
    return IRON_OK;
  const iron_plan_step_t *why = NULL;
  int64_t saved = 0;
  int64_t steps = iron_exec_block_graph_steps(
      &main->body, kMaxGraphSteps, dev->graph_min_trips, &saved, &why);
  bool capturable = steps >= 0;
  uint64_t in_bytes = 0, out_bytes = 0, max_in = 0, max_out = 0;
  uint32_t nin = 0, nout = 0;
  for (uint32_t i = 0; i < num_in; ++i) {
    if (!in_types[i].nbytes) continue;
    in_bytes += in_types[i].nbytes, nin++;
    if (in_types[i].nbytes > max_in) max_in = in_types[i].nbytes;
  }
  for (uint32_t i = 0; i < num_out; ++i) {
    if (!out_types[i].nbytes) continue;
    out_bytes += out_types[i].nbytes, nout++;
    if (out_types[i].nbytes > max_out) max_out = out_types[i].nbytes;
  }
  // Batched copies when the device has them (prepared here, at compile
  // time: the kernel must not be compiled while recording).
  bool batch = false;
  if (capturable && steps > 0 && dev->vtable->copy_batch &&
      nin < 65536 && nout < 65536) {
    iron_status_t bst = dev->vtable->copy_batch(dev, NULL, 0, 0);
    batch = bst == IRON_OK;
    iron_status_free(bst);
  }
  bool pays = capturable && steps > 0 &&
              (dev->program_graph_force
                   ? steps >= dev->program_graph_min_steps
                   : iron_exec_graph_pays(saved, dev->program_graph_min_steps,
                                          batch, nin, in_bytes, nout,
                                          out_bytes));
  if (iron_exec_graph_debug())
    fprintf(stderr,
            "iron: program %s: %lld kernel steps (%lld saved per call), %u "
            "arguments (%llu bytes), %u results (%llu bytes), %s copies: "
            "graph %s%s%s\n",
            main->ir && main->ir->name ? main->ir->name : "main",
            (long long)steps, (long long)saved, nin, (unsigned long long)in_bytes, nout,
            (unsigned long long)out_bytes, batch ? "batched" : "single",
            pays ? "yes" : "no",
            !capturable && why ? "; cannot record " : "",
            !capturable && why ? why->op->name : "");
  if (!pays) return IRON_OK;
  iron_exec_graph_t *g = calloc(1, sizeof(*g));
  if (!g) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  g->in_home = calloc(num_in + 1, sizeof(*g->in_home));
  g->out_home = calloc(num_out + 1, sizeof(*g->out_home));
  g->entries = calloc((size_t)nin + nout + 1, sizeof(*g->entries));
  g->borrowed = calloc(2 * (size_t)num_in + 1, sizeof(bool));
  g->borrow_addr = calloc(3 * (size_t)num_in + 1, sizeof(void *));
  if (!g->in_home || !g->out_home || !g->entries || !g->borrowed ||
      !g->borrow_addr) {
    free(g->in_home);
    free(g->out_home);
    free(g->entries);
    free(g->borrowed);
    free(g->borrow_addr);
    free(g);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  }
  g->unstable = g->borrowed + num_in;
  g->prev_addr = g->borrow_addr + num_in;
  g->cur_addr = g->borrow_addr + 2 * (size_t)num_in;
  g->borrow_min = dev->program_graph_borrow_min;
  pthread_mutex_init(&g->mu, NULL);
  g->dev = dev;
  g->num_in = num_in;
  g->num_out = num_out;
  g->in_types = in_types;
  g->out_types = out_types;
  g->batch = batch;
  g->n_in_e = g->n_in_max = nin;
  g->n_out_e = nout;
  g->max_in = max_in;
  g->max_out = max_out;
  const iron_plan_step_t *k = first_kernel_step(&main->body, 0);
  g->note_op = k ? k->op : NULL;
  g->note_func = k ? k->func_name : NULL;
  pthread_mutex_lock(&g_registry_mu);
  g->next = g_registry;
  g_registry = g;
  pthread_mutex_unlock(&g_registry_mu);
  *out_graph = g;
  return IRON_OK;
}

// Gives back the graph and the arena (g->mu held or the state unshared).
static void drop(iron_exec_graph_t *g) {
  if (g->exec) g->dev->vtable->graph_destroy(g->dev, g->exec);
  g->exec = NULL;
  // Frees are ordered after the work enqueued so far (a replay under way).
  for (uint32_t i = 0; i < g->num_in; ++i) {
    iron_storage_release(g->in_home[i]);
    g->in_home[i] = NULL;
  }
  for (uint32_t i = 0; i < g->num_out; ++i) {
    iron_storage_release(g->out_home[i]);
    g->out_home[i] = NULL;
  }
  iron_storage_release(g->table);
  g->table = NULL;
  __atomic_store_n(&g->arena_bytes, 0, __ATOMIC_RELAXED);
  g->calls = 0;
}

void iron_exec_graph_destroy(iron_exec_graph_t *g) {
  if (!g) return;
  pthread_mutex_lock(&g_registry_mu);
  for (iron_exec_graph_t **p = &g_registry; *p; p = &(*p)->next)
    if (*p == g) {
      *p = g->next;
      break;
    }
  pthread_mutex_unlock(&g_registry_mu);
  drop(g);
  pthread_mutex_destroy(&g->mu);
  free(g->in_home);
  free(g->out_home);
  free(g->entries);
  free(g->borrowed);
  free(g->borrow_addr);
  free(g);
}

int64_t iron_exec_graph_arena_bytes(const iron_device_t *dev) {
  int64_t n = 0;
  pthread_mutex_lock(&g_registry_mu);
  for (iron_exec_graph_t *g = g_registry; g; g = g->next)
    if (g->dev == dev) n += __atomic_load_n(&g->arena_bytes, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&g_registry_mu);
  return n;
}

void iron_exec_graph_reclaim(iron_device_t *dev) {
  pthread_mutex_lock(&g_registry_mu);
  for (iron_exec_graph_t *g = g_registry; g; g = g->next) {
    if (g->dev != dev || pthread_mutex_trylock(&g->mu) != 0) continue;
    drop(g);
    pthread_mutex_unlock(&g->mu);
  }
  pthread_mutex_unlock(&g_registry_mu);
  // The graphs' own memory (their intermediates) back to the device too.
  if (dev->vtable->graph_trim) dev->vtable->graph_trim(dev);
}

// Allocates the homes; false (nothing left allocated) when memory is short.
static bool arena_make(iron_exec_graph_t *g) {
  int64_t bytes = 0;
  // Batched: no output homes (results go straight to fresh storage), one
  // table.
  for (uint32_t pass = 0; pass < (g->batch ? 1u : 2u); ++pass) {
    bool in = pass == 0;
    uint32_t n = in ? g->num_in : g->num_out;
    for (uint32_t i = 0; i < n; ++i) {
      const iron_tensor_t *t = in ? &g->in_types[i] : &g->out_types[i];
      if (!t->nbytes || (in && g->borrowed[i])) continue;
      iron_storage_t *s = NULL;
      iron_status_t st = iron_storage_allocate(g->dev, t->nbytes, &s);
      if (st) {
        iron_status_free(st);
        drop(g);
        return false;
      }
      (in ? g->in_home : g->out_home)[i] = s;
      bytes += (int64_t)s->accounted;
    }
  }
  if (g->batch) {
    size_t tb = sizeof(iron_copy_entry_t) * ((size_t)g->n_in_max + g->n_out_e);
    iron_status_t st = iron_storage_allocate(g->dev, tb ? tb : 1, &g->table);
    if (st) {
      iron_status_free(st);
      drop(g);
      return false;
    }
    bytes += (int64_t)g->table->accounted;
  }
  __atomic_store_n(&g->arena_bytes, bytes, __ATOMIC_RELAXED);
  return true;
}

static void release_slots(iron_slot_t *slots, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    iron_storage_release(slots[i].s);
    slots[i].s = NULL;
    slots[i].t.data = NULL;
  }
}

// One call by replay: arguments in, the graph, results out. Consumes `args`
// on success; on failure they are left as they were (nothing writes over
// an argument: the graph reads them or their copies), so that the call can
// still run the ordinary way.
// Batched: fresh results, the table (argument sources, result
// destinations) uploaded, the graph launched.
static iron_status_t replay_batched(iron_exec_graph_t *g, iron_slot_t *args,
                                    iron_slot_t *results) {
  iron_device_t *dev = g->dev;
  const iron_device_vtable_t *vt = dev->vtable;
  iron_status_t st = IRON_OK;
  uint32_t e = 0;
  for (uint32_t i = 0; i < g->num_in; ++i)
    if (g->in_home[i]) g->entries[e++].src = (uint64_t)(uintptr_t)args[i].t.data;
  uint32_t made = 0;
  for (; made < g->num_out && !st; ++made) {
    iron_slot_t *r = &results[made];
    r->t = g->out_types[made];
    r->s = NULL;
    if (!r->t.nbytes) {
      r->t.data = iron_exec_empty_data();
      continue;
    }
    st = iron_storage_allocate(dev, r->t.nbytes, &r->s);
    if (st) break;
    r->t.data = r->s->data;
    g->entries[e++].dst = (uint64_t)(uintptr_t)r->s->data;
  }
  size_t tb = sizeof(iron_copy_entry_t) * ((size_t)g->n_in_e + g->n_out_e);
  if (!st && tb)
    st = vt->memcpy(dev, g->table->data, g->entries, tb,
                    IRON_COPY_HOST_TO_DEVICE);
  if (!st) {
    if (g->note_op) iron_device_note_step(dev, g->note_op, g->note_func);
    st = vt->graph_launch(dev, g->exec);
    iron_exec_graph_launches++;
  }
  if (st)
    release_slots(results, made);
  else
    release_slots(args, g->num_in);
  return st;
}

static iron_status_t replay(iron_exec_graph_t *g, iron_slot_t *args,
                            iron_slot_t *results) {
  if (g->batch) return replay_batched(g, args, results);
  iron_device_t *dev = g->dev;
  const iron_device_vtable_t *vt = dev->vtable;
  iron_status_t st = IRON_OK;
  for (uint32_t i = 0; i < g->num_in && !st; ++i)
    if (g->in_home[i])
      st = vt->memcpy(dev, g->in_home[i]->data, args[i].t.data,
                      g->in_types[i].nbytes, IRON_COPY_DEVICE_TO_DEVICE);
  if (!st) {
    if (g->note_op) iron_device_note_step(dev, g->note_op, g->note_func);
    st = vt->graph_launch(dev, g->exec);
    iron_exec_graph_launches++;
  }
  uint32_t made = 0;
  for (; made < g->num_out && !st; ++made) {
    iron_slot_t *r = &results[made];
    r->t = g->out_types[made];
    r->s = NULL;
    if (!g->out_home[made]) {
      r->t.data = iron_exec_empty_data();
      continue;
    }
    st = iron_storage_allocate(dev, r->t.nbytes, &r->s);
    if (st) break;
    r->t.data = r->s->data;
    st = vt->memcpy(dev, r->s->data, g->out_home[made]->data, r->t.nbytes,
                    IRON_COPY_DEVICE_TO_DEVICE);
    if (st) {
      ++made;
      break;
    }
  }
  // The copies in are ordered before the frees of the arguments.
  if (st)
    release_slots(results, made);
  else
    release_slots(args, g->num_in);
  return st;
}

// A replay of this call (replay's contract), or, when it is out of memory
// (a result, or the graph's own memory, which the driver reserves at the
// launch), the ordinary way after the graph, this arena and the idle ones
// went back: that may well fit. (g->exec is then NULL.)
static iron_status_t replay_or_run(iron_exec_graph_t *g,
                                   const iron_exec_ctx_t *ctx,
                                   const iron_plan_func_t *main,
                                   iron_slot_t *args, iron_slot_t *results) {
  iron_status_t st = replay(g, args, results);
  if (!st) return IRON_OK;
  if (iron_status_code(st) != IRON_STATUS_RESOURCE_EXHAUSTED) {
    release_slots(args, g->num_in);
    return st;
  }
  if (iron_exec_graph_debug())
    fprintf(stderr, "iron: program replay out of memory (%s); running it "
                    "the ordinary way\n", iron_status_message(st));
  iron_status_free(st);
  drop(g);
  // (Other executables' arenas; ours is trylocked by us and skipped.)
  iron_exec_graph_reclaim(g->dev);
  return iron_exec_run_func(ctx, main, args, results);
}

// Records the program and runs this call by replay; when the recording is
// not kept, runs the call the ordinary way (its arguments are untouched).
static iron_status_t record_and_run(iron_exec_graph_t *g,
                                    const iron_exec_ctx_t *ctx,
                                    const iron_plan_func_t *main,
                                    iron_slot_t *args, iron_slot_t *results) {
  iron_device_t *dev = g->dev;
  const iron_device_vtable_t *vt = dev->vtable;
  const char *name = main->ir && main->ir->name ? main->ir->name : "main";
  // Which arguments the recording reads where they are (see the top).
  g->n_in_e = 0;
  for (uint32_t i = 0; i < g->num_in; ++i) {
    const iron_slot_t *a = &args[i];
    g->borrowed[i] = g->borrow_min > 0 && a->s && a->s->dev == dev &&
                     g->in_types[i].nbytes >= (uint64_t)g->borrow_min &&
                     !g->unstable[i] && a->t.data == g->prev_addr[i] &&
                     iron_storage_refcount(a->s) > 1;
    g->borrow_addr[i] = g->borrowed[i] ? a->t.data : NULL;
    if (g->in_types[i].nbytes && !g->borrowed[i]) g->n_in_e++;
  }
  iron_slot_t *rec = calloc((size_t)g->num_in + g->num_out + 1, sizeof(*rec));
  if (!rec || !arena_make(g)) {
    free(rec);
    g->failures++;
    return iron_exec_run_func(ctx, main, args, results);
  }
  iron_slot_t *rec_res = rec + g->num_in;
  // The homes hold the arguments before the recording (the replay that
  // follows copies them again; the recording itself runs nothing).
  iron_status_t st = IRON_OK;
  uint32_t e = 0;
  for (uint32_t i = 0; i < g->num_in && !st; ++i) {
    rec[i].t = args[i].t;
    rec[i].s = NULL;  // 0 bytes: borrowed
    if (g->borrowed[i]) {
      // The caller's buffer itself; our reference (besides the caller's
      // args slot) keeps kernels from writing over it in place.
      rec[i].s = args[i].s;
      iron_storage_retain(rec[i].s);
      continue;
    }
    if (!g->in_home[i]) continue;
    if (g->batch)
      g->entries[e++] = (iron_copy_entry_t){
          (uint64_t)(uintptr_t)g->in_home[i]->data, 0, g->in_types[i].nbytes};
    else
      st = vt->memcpy(dev, g->in_home[i]->data, args[i].t.data,
                      g->in_types[i].nbytes, IRON_COPY_DEVICE_TO_DEVICE);
    // The arena's reference is lent to the recording's argument.
    rec[i].t.data = g->in_home[i]->data;
    rec[i].s = g->in_home[i];
    g->in_home[i]->pinned = true;
  }
  bool recording = false;
  if (!st) {
    st = vt->graph_begin(dev);
    recording = !st;
  }
  void *graph = NULL;
  if (recording) {
    // Batched: the arguments' copies into their homes are the graph's
    // first work.
    iron_status_t rst = IRON_OK;
    if (g->batch && g->n_in_e)
      rst = vt->copy_batch(dev, g->table->data, g->n_in_e, g->max_in);
    // Loops run their iterations into this recording (executor.c).
    iron_exec_ctx_t rctx = *ctx;
    rctx.program_recording = true;
    if (rst)
      release_slots(rec, g->num_in);  // the homes' counts drop to 0 (pinned)
    else
      rst = iron_exec_run_func(&rctx, main, rec, rec_res);
    bool keep = !rst;
    if (rst && iron_exec_graph_debug())
      fprintf(stderr, "iron: recording of program %s failed: %s\n", name,
                      iron_status_message(rst));
    iron_status_free(rst);
    for (uint32_t k = 0, oe = g->n_in_e; g->batch && k < g->num_out && keep;
         ++k) {
      if (!g->out_types[k].nbytes) continue;
      if (rec_res[k].t.nbytes != g->out_types[k].nbytes) keep = false;
      // The result's address is fixed in the graph: the replays copy from
      // it to wherever the table says.
      g->entries[oe++] = (iron_copy_entry_t){
          0, (uint64_t)(uintptr_t)rec_res[k].t.data, g->out_types[k].nbytes};
    }
    if (g->batch && keep && g->n_out_e) {
      iron_status_t cst = vt->copy_batch(
          dev, (char *)g->table->data + sizeof(iron_copy_entry_t) * g->n_in_e,
          g->n_out_e, g->max_out);
      keep = !cst;
      iron_status_free(cst);
    }
    for (uint32_t k = 0; !g->batch && k < g->num_out && keep; ++k) {
      if (!g->out_home[k]) continue;
      if (rec_res[k].t.nbytes != g->out_types[k].nbytes) {
        keep = false;
        break;
      }
      iron_status_t cst = vt->memcpy(dev, g->out_home[k]->data,
                                     rec_res[k].t.data, g->out_types[k].nbytes,
                                     IRON_COPY_DEVICE_TO_DEVICE);
      keep = !cst;
      iron_status_free(cst);
    }
    // Graph memory among the results is freed inside the recording (also
    // when it is discarded: graph_end refuses graph memory left allocated).
    release_slots(rec_res, g->num_out);
    st = vt->graph_end(dev, keep, &graph);
    if (st && iron_exec_graph_debug())
      fprintf(stderr, "iron: recording of program %s discarded: %s\n", name,
                      iron_status_message(st));
  } else {
    // Nothing ran: the lent references are still the recording's arguments
    // (the borrowed ones' go back here).
    for (uint32_t i = 0; i < g->num_in; ++i)
      if (g->borrowed[i]) {
        iron_storage_release(rec[i].s);
        rec[i].s = NULL;
      }
    if (st && iron_exec_graph_debug())
      fprintf(stderr, "iron: recording of program %s not started: %s\n",
              name, iron_status_message(st));
  }
  iron_status_free(st);
  // The input homes come back to the arena. Each reference the recording
  // held is gone by now (the frame was swept, the results released), so a
  // count above 0 means someone kept one: the home is then theirs, and the
  // graph is not used.
  bool homes_ok = true;
  for (uint32_t i = 0; i < g->num_in; ++i) {
    iron_storage_t *h = g->in_home[i];
    if (!h) continue;
    int want = recording ? 0 : 1;
    if (iron_storage_refcount(h) != want) {
      homes_ok = false;
      iron_storage_unpin(h, false);  // theirs now (never freed at count > 0)
      g->in_home[i] = NULL;
      continue;
    }
    iron_storage_unpin(h, true);
  }
  free(rec);
  if (graph && homes_ok) {
    g->exec = graph;
    return replay_or_run(g, ctx, main, args, results);
  }
  if (graph) vt->graph_destroy(dev, graph);
  drop(g);
  g->failures++;
  iron_exec_graph_discards++;
  return iron_exec_run_func(ctx, main, args, results);
}

iron_status_t iron_exec_graph_run(iron_exec_graph_t *g,
                                  const iron_exec_ctx_t *ctx,
                                  const iron_plan_func_t *main,
                                  iron_slot_t *args, iron_slot_t *results) {
  if (!g || pthread_mutex_trylock(&g->mu) != 0)
    return iron_exec_run_func(ctx, main, args, results);
  iron_status_t st;
  // A borrowed argument elsewhere than recorded: this call runs the
  // ordinary way and the next recording copies that argument.
  bool moved = false;
  for (uint32_t i = 0; g->exec && i < g->num_in; ++i)
    if (g->borrowed[i] && args[i].t.data != g->borrow_addr[i]) {
      g->unstable[i] = true;
      moved = true;
      if (iron_exec_graph_debug())
        fprintf(stderr,
                "iron: program %s: borrowed argument %u moved; recording "
                "again with it copied\n",
                main->ir && main->ir->name ? main->ir->name : "main", i);
    }
  if (moved) drop(g);
  // The arguments' addresses, for the next recording's choice.
  for (uint32_t i = 0; i < g->num_in; ++i) g->cur_addr[i] = args[i].t.data;
  if (g->exec)
    st = replay_or_run(g, ctx, main, args, results);
  else if (g->calls >= 1 && g->failures < kMaxFailures && !g->dev->sync)
    st = record_and_run(g, ctx, main, args, results);
  else
    st = iron_exec_run_func(ctx, main, args, results);
  // A graph now means the call was a replay (maybe right after recording).
  bool replayed = g->exec != NULL;
  g->calls++;
  memcpy(g->prev_addr, g->cur_addr, sizeof(void *) * g->num_in);
  bool oom = st && iron_status_code(st) == IRON_STATUS_RESOURCE_EXHAUSTED;
  if (st && (replayed || oom)) {
    // The call fails; the next one runs the ordinary way (and records
    // again): whatever went wrong, the graph and its arena are not trusted
    // (and out of memory wants the arena back).
    drop(g);
    g->failures++;
  }
  pthread_mutex_unlock(&g->mu);
  // Out of memory: the other executables' arenas go back too, so that the
  // next call finds the memory (docs/robustness.md).
  if (oom) iron_exec_graph_reclaim(g->dev);
  return st;
}
