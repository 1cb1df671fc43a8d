// The plan walker. Ownership rule: every slot holds one reference on its
// storage (or none for borrowed/0-byte tensors); copying a value into
// another slot retains, a free releases and clears. Every step's outputs are
// fresh slots; liveness lists release values at their last use.
#include "runtime/executor.h"

#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static alignas(64) char g_empty[64];
void *iron_exec_empty_data(void) { return g_empty; }

typedef struct frame {
  iron_slot_t *slots;
  uint32_t num_slots;
  int64_t ew_count;  // > 1: element-wise region mode with this count
  char *scratch;     // region mode: small outputs live here (no storage)
  size_t scratch_left;
  // Values live in device memory the CPU cannot read (CUDA): predicates
  // and case indices are copied back through the device.
  bool device_mem;
} frame_t;

// What a kernel's ctx->runtime points at: the frame running the op, so that
// call_region can bind the values its region captures.
typedef struct exec_call {
  const iron_exec_ctx_t *ctx;
  const frame_t *frame;
} exec_call_t;

static inline void slot_clear(iron_slot_t *s) {
  iron_storage_release(s->s);
  s->s = NULL;
  s->t.data = NULL;
}

static void frame_sweep(frame_t *fr) {
  for (uint32_t i = 0; i < fr->num_slots; ++i)
    if (fr->slots[i].s) slot_clear(&fr->slots[i]);
}

static inline void slot_copy(iron_slot_t *dst, const iron_slot_t *src) {
  if (dst->s) slot_clear(dst);
  *dst = *src;
  iron_storage_retain(dst->s);
}

static inline void slot_move(iron_slot_t *dst, iron_slot_t *src) {
  if (dst->s) slot_clear(dst);
  *dst = *src;
  src->s = NULL;
  src->t.data = NULL;
}

static iron_status_t step_error(iron_status_t st, const iron_plan_step_t *s) {
  char loc[256];
  iron_ir_loc_format(&s->op->loc, loc, sizeof(loc));
  return iron_status_annotate(st, "while running %s (%s) in %s", s->op->name,
                              loc, s->func_name ? s->func_name : "?");
}

static iron_status_t alloc_output(const iron_exec_ctx_t *ctx, frame_t *fr,
                                  const iron_tensor_t *type,
                                  iron_slot_t *dst) {
  if (dst->s) slot_clear(dst);
  dst->t = *type;
  if (fr->ew_count > 1) {
    // Element-wise region mode: every value is a vector of ew_count.
    dst->t.rank = 1;
    dst->t.dims[0] = fr->ew_count;
    dst->t.count = fr->ew_count;
    dst->t.nbytes = (size_t)fr->ew_count * iron_dtype_size(type->dtype);
  }
  size_t n = dst->t.nbytes;
  if (n == 0) {
    dst->t.data = g_empty;
    dst->s = NULL;
    return IRON_OK;
  }
  if (fr->scratch) {
    size_t need = (n + 63) & ~(size_t)63;
    if (need <= fr->scratch_left) {
      dst->t.data = fr->scratch;
      fr->scratch += need;
      fr->scratch_left -= need;
      dst->s = NULL;
      return IRON_OK;
    }
  }
  iron_storage_t *s;
  IRON_RETURN_IF_ERROR_PLAIN(iron_storage_allocate(ctx->dev, n, &s));
  dst->t.data = s->data;
  dst->s = s;
  return IRON_OK;
}

static iron_status_t run_steps(const iron_exec_ctx_t *ctx, frame_t *fr,
                               const iron_plan_block_t *b);

static inline void do_frees(frame_t *fr, const uint32_t *frees, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) slot_clear(&fr->slots[frees[i]]);
}

// Binds block arguments from `src` slots (of frame `sfr`), moving or
// retaining, then releases unused arguments.
static void enter_block(frame_t *fr, const iron_plan_block_t *b,
                        frame_t *sfr, const uint32_t *src, bool move) {
  for (uint32_t i = 0; i < b->num_args; ++i) {
    iron_slot_t *from = &sfr->slots[src[i]];
    if (move)
      slot_move(&fr->slots[b->args[i]], from);
    else
      slot_copy(&fr->slots[b->args[i]], from);
  }
  do_frees(fr, b->entry_frees, b->num_entry_frees);
}

// Copies the block's results to `dst` slots of `dfr`, then releases the
// values that die at the terminator.
static void leave_block(frame_t *fr, const iron_plan_block_t *b, frame_t *dfr,
                        const uint32_t *dst) {
  if (dst)
    for (uint32_t i = 0; i < b->num_results; ++i)
      slot_copy(&dfr->slots[dst[i]], &fr->slots[b->results[i]]);
  do_frees(fr, b->exit_frees, b->num_exit_frees);
}

// The first element of a scalar control value, as host bytes in *buf
// (zero-filled when the value is empty). On devices with their own memory
// this waits for the value (a copy back; loops pay it per iteration).
static iron_status_t read_scalar(const iron_exec_ctx_t *ctx, const frame_t *fr,
                                 const iron_slot_t *s, uint64_t *buf) {
  const iron_tensor_t *t = &s->t;
  *buf = 0;
  size_t n = iron_dtype_size(t->dtype);
  if (!t->data || t->nbytes == 0 || n == 0) return IRON_OK;
  if (n > sizeof(*buf)) n = sizeof(*buf);
  if (fr->device_mem)
    return ctx->dev->vtable->memcpy(ctx->dev, buf, t->data, n,
                                    IRON_COPY_DEVICE_TO_HOST);
  memcpy(buf, t->data, n);
  return IRON_OK;
}

static iron_status_t read_pred(const iron_exec_ctx_t *ctx, const frame_t *fr,
                               const iron_slot_t *s, bool *out) {
  uint64_t v;
  IRON_RETURN_IF_ERROR_PLAIN(read_scalar(ctx, fr, s, &v));
  *out = v != 0;  // the bytes past the element are zero
  return IRON_OK;
}

static iron_status_t read_index(const iron_exec_ctx_t *ctx, const frame_t *fr,
                                const iron_slot_t *s, int64_t *out) {
  uint64_t v;
  IRON_RETURN_IF_ERROR_PLAIN(read_scalar(ctx, fr, s, &v));
  const void *p = &v;
  switch (s->t.dtype) {
    case IRON_DTYPE_S8: *out = *(const int8_t *)p; break;
    case IRON_DTYPE_U8:
    case IRON_DTYPE_PRED: *out = *(const uint8_t *)p; break;
    case IRON_DTYPE_S16: *out = *(const int16_t *)p; break;
    case IRON_DTYPE_U16: *out = *(const uint16_t *)p; break;
    case IRON_DTYPE_S32: *out = *(const int32_t *)p; break;
    case IRON_DTYPE_U32: *out = *(const uint32_t *)p; break;
    case IRON_DTYPE_U64: *out = v > INT64_MAX ? INT64_MAX : (int64_t)v; break;
    default: *out = (int64_t)v; break;
  }
  return IRON_OK;
}

#define SMALL 16

_Thread_local uint64_t iron_exec_kernel_steps = 0;
_Thread_local uint64_t iron_exec_graph_launches = 0;
_Thread_local uint64_t iron_exec_graph_discards = 0;

// Tells the device which step it is about to be given, so that a fault it
// sees later (CUDA reports kernel faults at the next wait) names the op,
// its source line and function (device.h, iron_device_t.recent).
static inline void note_step(const iron_exec_ctx_t *ctx,
                             const iron_plan_step_t *s) {
  if (ctx->dev) iron_device_note_step(ctx->dev, s->op, s->func_name);
}

static iron_status_t run_kernel(const iron_exec_ctx_t *ctx, frame_t *fr,
                                const iron_plan_step_t *s) {
  iron_exec_kernel_steps++;
  note_step(ctx, s);
  const iron_tensor_t *in_small[SMALL];
  iron_tensor_t *out_small[SMALL];
  const iron_tensor_t **in = in_small;
  iron_tensor_t **out = out_small;
  if (s->num_inputs > SMALL || s->num_outputs > SMALL) {
    in = malloc(sizeof(*in) * (s->num_inputs + 1));
    out = malloc(sizeof(*out) * (s->num_outputs + 1));
    if (!in || !out) {
      if (in != in_small) free(in);
      if (out != out_small) free(out);
      return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for kernel args");
    }
  }
  for (uint32_t k = 0; k < s->num_inputs; ++k)
    in[k] = &fr->slots[s->inputs[k]].t;
  iron_status_t st = IRON_OK;
  for (uint32_t o = 0; o < s->num_outputs && !st; ++o) {
    iron_slot_t *dst = &fr->slots[s->outputs[o]];
    if (s->inplace && s->inplace[o] >= 0) {
      const iron_slot_t *src = &fr->slots[s->inputs[s->inplace[o]]];
      size_t want = fr->ew_count > 1 ? (size_t)fr->ew_count *
                                           iron_dtype_size(s->out_types[o].dtype)
                                     : s->out_types[o].nbytes;
      if (src->s && iron_storage_refcount(src->s) == 1 &&
          src->t.nbytes == want) {
        // The input dies here and nobody else holds it: write over it.
        iron_slot_t tmp = *src;
        if (dst->s) slot_clear(dst);
        dst->t = s->out_types[o];
        dst->t.data = tmp.t.data;
        if (fr->ew_count > 1) {
          dst->t.rank = 1;
          dst->t.dims[0] = dst->t.count = fr->ew_count;
          dst->t.nbytes = want;
        }
        dst->s = tmp.s;
        iron_storage_retain(dst->s);
        out[o] = &dst->t;
        continue;
      }
    }
    st = alloc_output(ctx, fr, &s->out_types[o], dst);
    out[o] = &dst->t;
  }
  exec_call_t call = {ctx, fr};
  iron_kernel_ctx_t host = ctx->host;
  host.runtime = &call;
  if (!st)
    st = s->kernel->run(&host, s->params,
                        (const iron_tensor_t *const *)in,
                        (iron_tensor_t *const *)out);
  if (in != in_small) free(in);
  if (out != out_small) free(out);
  return st;
}

// --- counted loops as device graphs ---------------------------------------
//
// A counted loop whose body only runs kernels that merely enqueue device
// work (graph_capturable) is recorded once as a device graph (a CUDA graph)
// and replayed for the remaining iterations: one launch per iteration
// instead of one host round trip per kernel (measured: ~10 us of host time
// per kernel step on the GRU benchmark, the GPU mostly idle).
//
// Every loop-carried value gets a fixed "home" buffer that holds it between
// iterations: the carry's own storage when the loop holds the only
// reference, else a copy. The recorded iteration starts with the carries in
// their homes and ends by copying each result into its home, unless the
// result already is its home (an in-place update, e.g. the scan's stacked
// outputs written by dynamic_update_slice). Homes are pinned while
// recording: the body's liveness frees must not give them back (they are
// revived afterwards). Anything the recording cannot express safely (a
// result living in another carry's home, graph memory left allocated, a
// free of memory from outside the body, a step that asks the device for a
// copy to or from the host or a wait: the device refuses those while
// recording, device.h) discards the recording, and the loop continues the
// ordinary way from the same state: nothing recorded has run. The device
// ends the capture whatever happened, so its stream takes ordinary work
// again; only a sticky fault seen meanwhile retires it.

// IRON_GRAPH_DEBUG=1: say on stderr why a recording was discarded.
static bool graph_debug(void) {
  static _Atomic int v = -1;
  if (v < 0) {
    const char *e = getenv("IRON_GRAPH_DEBUG");
    v = e && e[0] && e[0] != '0';
  }
  return v;
}

// Whether every step of `b` can be recorded; *out_why names the first that
// cannot (for IRON_GRAPH_DEBUG).
// Calls are followed (jax's scan bodies call the step function) up to a
// depth that no real program reaches; recursion is not recorded.
static bool block_capturable(const iron_plan_block_t *b, int depth,
                             const iron_plan_step_t **out_why) {
  for (uint32_t i = 0; i < b->num_steps; ++i) {
    const iron_plan_step_t *s = &b->steps[i];
    *out_why = s;
    switch (s->kind) {
      case IRON_STEP_CONSTANT:
      case IRON_STEP_ALIAS:
        break;
      case IRON_STEP_CALL:
        if (depth >= 16 || !s->callee ||
            !block_capturable(&s->callee->body, depth + 1, out_why))
          return false;
        break;
      case IRON_STEP_KERNEL:
        if (!s->kernel->graph_capturable) return false;
        break;
      default:
        return false;
    }
  }
  *out_why = NULL;
  return true;
}

bool iron_exec_block_capturable(const iron_plan_block_t *b,
                                const iron_plan_step_t **out_why) {
  return block_capturable(b, 0, out_why);
}

// Iterations of a counted loop from `init` to `limit` by `step` (> 0).
static int64_t counted_trips(int64_t init, int64_t limit, int64_t step) {
  if (init >= limit) return 0;
  // (limit - init) without overflow: both fit the counter's type.
  uint64_t span = (uint64_t)limit - (uint64_t)init;
  return (int64_t)((span + (uint64_t)step - 1) / (uint64_t)step);
}

// The trip count of a counted loop known at compile time, else -1.
static int64_t static_trips(const iron_plan_step_t *s) {
  if (!s->counted || !s->counted_init_known || s->counted_limit_index >= 0)
    return -1;
  return counted_trips(s->counted_init, s->counted_limit, s->counted_step);
}

static int64_t block_graph_steps(const iron_plan_block_t *b, int depth,
                                 int64_t max_steps, int64_t loop_graph_trips,
                                 int64_t *io_saved,
                                 const iron_plan_step_t **out_why) {
  int64_t n = 0;
  for (uint32_t i = 0; i < b->num_steps; ++i) {
    const iron_plan_step_t *s = &b->steps[i];
    *out_why = s;
    int64_t add = 0;
    switch (s->kind) {
      case IRON_STEP_CONSTANT:
      case IRON_STEP_ALIAS:
        break;
      case IRON_STEP_CALL:
        if (depth >= 16 || !s->callee) return -1;
        add = block_graph_steps(&s->callee->body, depth + 1, max_steps,
                                loop_graph_trips, io_saved, out_why);
        if (add < 0) return -1;
        break;
      case IRON_STEP_KERNEL:
        if (!s->kernel->graph_capturable) return -1;
        add = 1;
        ++*io_saved;
        break;
      case IRON_STEP_WHILE: {
        // The limit a loop could exceed at run time is not recorded.
        int64_t trips = static_trips(s);
        if (depth >= 16 || trips < 0 ||
            (s->max_iterations > 0 && trips > s->max_iterations))
          return -1;
        int64_t body_saved = 0;
        int64_t body = block_graph_steps(&s->blocks[1], depth + 1, max_steps,
                                         loop_graph_trips, &body_saved,
                                         out_why);
        if (body < 0) return -1;
        *out_why = s;
        if (body && trips > max_steps / body) return -1;
        add = body * trips;
        // A loop that records its own body graph otherwise costs its
        // first iteration and the recording per call (about twice the
        // body's steps), not every iteration.
        *io_saved += loop_graph_trips > 0 && trips >= loop_graph_trips
                         ? 2 * body_saved
                         : body_saved * trips;
        break;
      }
      default:
        return -1;
    }
    if (add > max_steps - n) return -1;
    n += add;
  }
  *out_why = NULL;
  return n;
}

int64_t iron_exec_block_graph_steps(const iron_plan_block_t *b,
                                    int64_t max_steps,
                                    int64_t loop_graph_trips,
                                    int64_t *out_saved,
                                    const iron_plan_step_t **out_why) {
  *out_saved = 0;
  return block_graph_steps(b, 0, max_steps, loop_graph_trips, out_saved,
                           out_why);
}

bool iron_exec_graph_debug(void) { return graph_debug(); }

// Sets up the homes in `homes` (NULL for empty carries) and pins them. An
// error leaves nothing pinned or retained (the carries stay where they
// were, or in an equal copy).
static iron_status_t homes_setup(const iron_exec_ctx_t *ctx, frame_t *fr,
                                 const iron_plan_step_t *s,
                                 iron_storage_t **homes, bool *borrowed,
                                 iron_tensor_t *types) {
  iron_device_t *dev = ctx->dev;
  const iron_device_vtable_t *vt = dev->vtable;
  const iron_plan_block_t *body = &s->blocks[1];
  uint32_t n = s->num_outputs;
  for (uint32_t i = 0; i < n; ++i) {
    iron_slot_t *o = &fr->slots[s->outputs[i]];
    types[i] = o->t;
    homes[i] = NULL;
    borrowed[i] = false;
    if (o->t.nbytes == 0) continue;
    if (o->s && o->s->data == o->t.data &&
        body->results[i] == body->args[i]) {
      // Passed through unchanged (the scan's xs and weights): it stays
      // where it is. Nothing writes over it (in-place updates need a value
      // that dies, and this one lives to the end of the body); our
      // reference keeps it alive while the body's frees run.
      homes[i] = o->s;
      borrowed[i] = true;
      iron_storage_retain(o->s);
      continue;
    }
    if (o->s && o->s->dev == dev && !o->s->pinned &&
        iron_storage_refcount(o->s) == 1 && o->s->data == o->t.data) {
      homes[i] = o->s;
    } else {
      iron_storage_t *h = NULL;
      iron_status_t st = iron_storage_allocate(dev, o->t.nbytes, &h);
      if (!st)
        st = vt->memcpy(dev, h->data, o->t.data, o->t.nbytes,
                        IRON_COPY_DEVICE_TO_DEVICE);
      if (st) {
        if (h) iron_storage_release(h);
        for (uint32_t k = 0; k < i; ++k) {
          if (!homes[k]) continue;
          if (borrowed[k])
            iron_storage_release(homes[k]);
          else
            iron_storage_unpin(homes[k], true);
        }
        return st;
      }
      slot_clear(o);
      o->s = h;
      o->t.data = h->data;
      homes[i] = h;
    }
    homes[i]->pinned = true;
  }
  return IRON_OK;
}

// After a recorded body iteration: enqueues the copy of each result into
// its home (unless it is there already). False when the recording cannot
// express it (a result living in another carry's home, a size mismatch, a
// failed copy).
static bool homes_take_results(const iron_exec_ctx_t *ctx, frame_t *fr,
                               const iron_plan_block_t *body,
                               iron_storage_t **homes, uint32_t n) {
  iron_device_t *dev = ctx->dev;
  for (uint32_t i = 0; i < n; ++i) {
    if (!homes[i]) continue;
    const iron_slot_t *r = &fr->slots[body->results[i]];
    if (r->t.data == homes[i]->data) continue;  // updated in place
    for (uint32_t k = 0; k < n; ++k)
      if (homes[k] && r->t.data == homes[k]->data) return false;
    if (r->t.nbytes != homes[i]->nbytes) return false;
    iron_status_t st = dev->vtable->memcpy(dev, homes[i]->data, r->t.data,
                                           r->t.nbytes,
                                           IRON_COPY_DEVICE_TO_DEVICE);
    bool ok = st == IRON_OK;
    iron_status_free(st);
    if (!ok) return false;
  }
  return true;
}

// The carries are their homes again (s->outputs), whether or not a
// recording is kept (what was recorded has not run: the homes hold the
// values). `recording`: the body's arguments were taken from the outputs.
static void homes_restore(frame_t *fr, const iron_plan_step_t *s,
                          iron_storage_t **homes, const bool *borrowed,
                          const iron_tensor_t *types, bool recording) {
  uint32_t n = s->num_outputs;
  for (uint32_t i = 0; i < n; ++i) {
    iron_slot_t *o = &fr->slots[s->outputs[i]];
    if (!recording) {
      if (homes[i] && borrowed[i])
        iron_storage_release(homes[i]);
      else if (homes[i])
        iron_storage_unpin(homes[i], true);
      continue;
    }
    if (o->s) slot_clear(o);
    o->t = types[i];
    if (!homes[i]) continue;
    if (borrowed[i]) {  // our reference becomes the slot's
      o->s = homes[i];
      o->t.data = homes[i]->data;
      continue;
    }
    bool dead = iron_storage_refcount(homes[i]) == 0;
    iron_storage_unpin(homes[i], true);
    if (!dead) iron_storage_retain(homes[i]);
    o->s = homes[i];
    o->t.data = homes[i]->data;
  }
}

// Sets up the homes, then records one body iteration. On return the
// carries are back in s->outputs (in their homes) and *out_graph is the
// recorded iteration, or NULL when the loop must go on the ordinary way
// (nothing recorded has run then). An error is only returned when the
// state is unusable.
static iron_status_t record_body(const iron_exec_ctx_t *ctx, frame_t *fr,
                                 const iron_plan_step_t *s,
                                 iron_storage_t **homes, bool *borrowed,
                                 iron_tensor_t *types, void **out_graph) {
  iron_device_t *dev = ctx->dev;
  const iron_device_vtable_t *vt = dev->vtable;
  const iron_plan_block_t *body = &s->blocks[1];
  uint32_t n = s->num_outputs;
  *out_graph = NULL;
  if (body->num_args != n || body->num_results != n) return IRON_OK;
  IRON_RETURN_IF_ERROR_PLAIN(homes_setup(ctx, fr, s, homes, borrowed, types));
  iron_status_t st = vt->graph_begin(dev);
  bool recording = st == IRON_OK;
  if (st && graph_debug())
    fprintf(stderr, "iron: graph recording of %s not started: %s\n",
            s->op->name, iron_status_message(st));
  iron_status_free(st);
  if (recording) {
    enter_block(fr, body, fr, s->outputs, true);
    st = run_steps(ctx, fr, body);
    bool keep = st == IRON_OK;
    iron_status_free(st);
    keep = keep && homes_take_results(ctx, fr, body, homes, n);
    do_frees(fr, body->exit_frees, body->num_exit_frees);
    void *graph = NULL;
    st = vt->graph_end(dev, keep, &graph);
    if (!graph) {
      iron_exec_graph_discards++;
      if (st && graph_debug())
        fprintf(stderr, "iron: graph recording of %s discarded: %s\n",
                s->op->name, iron_status_message(st));
    }
    iron_status_free(st);  // a discarded recording: go on without it
    *out_graph = graph;
  }
  homes_restore(fr, s, homes, borrowed, types, recording);
  return IRON_OK;
}

// A data-dependent while loop on the device (CUDA: a graph whose WHILE
// conditional node repeats the body while a kernel of the body's last
// steps says the condition holds): the body, the copies of its results
// into the homes and then the condition are recorded once, and one launch
// runs every remaining iteration with no host round trip. The caller has
// run the condition on the host and seen it true. *out_done: the loop ran
// to its end (the carries are in s->outputs); false: nothing recorded ran
// and the loop goes on the ordinary way from the same state.
static iron_status_t run_device_loop(const iron_exec_ctx_t *ctx, frame_t *fr,
                                     const iron_plan_step_t *s,
                                     bool *out_done) {
  iron_device_t *dev = ctx->dev;
  const iron_device_vtable_t *vt = dev->vtable;
  const iron_plan_block_t *cond = &s->blocks[0], *body = &s->blocks[1];
  uint32_t n = s->num_outputs;
  *out_done = false;
  if (body->num_args != n || body->num_results != n || cond->num_args != n ||
      cond->num_results != 1)
    return IRON_OK;
  iron_storage_t *homes_small[SMALL];
  iron_tensor_t types_small[SMALL];
  bool borrowed_small[SMALL];
  iron_storage_t **homes = homes_small;
  iron_tensor_t *types = types_small;
  bool *borrowed = borrowed_small;
  if (n > SMALL) {
    homes = malloc(sizeof(*homes) * n);
    types = malloc(sizeof(*types) * n);
    borrowed = malloc(sizeof(*borrowed) * n);
    if (!homes || !types || !borrowed) {
      free(homes);
      free(types);
      free(borrowed);
      return IRON_OK;  // the ordinary way needs no memory
    }
  }
  iron_status_t st = homes_setup(ctx, fr, s, homes, borrowed, types);
  void *graph = NULL;
  if (!st) {
    st = vt->graph_while_begin(dev);
    bool recording = st == IRON_OK;
    if (st && graph_debug())
      fprintf(stderr, "iron: device loop of %s not started: %s\n",
              s->op->name, iron_status_message(st));
    iron_status_free(st);
    st = IRON_OK;
    if (recording) {
      enter_block(fr, body, fr, s->outputs, true);
      iron_status_t rs = run_steps(ctx, fr, body);
      bool keep = rs == IRON_OK;
      iron_status_free(rs);
      keep = keep && homes_take_results(ctx, fr, body, homes, n);
      do_frees(fr, body->exit_frees, body->num_exit_frees);
      // The condition reads the carries in their homes, pinned still (its
      // frees must not give them back).
      for (uint32_t i = 0; i < n; ++i) {
        iron_slot_t *o = &fr->slots[s->outputs[i]];
        if (o->s) slot_clear(o);
        o->t = types[i];
        if (homes[i]) o->t.data = homes[i]->data;
      }
      if (keep) {
        enter_block(fr, cond, fr, s->outputs, false);
        rs = run_steps(ctx, fr, cond);
        if (!rs)
          rs = vt->graph_while_condition(
              dev, fr->slots[cond->results[0]].t.data);
        keep = rs == IRON_OK;
        iron_status_free(rs);
        leave_block(fr, cond, fr, NULL);
      }
      rs = vt->graph_end(dev, keep, &graph);
      if (!graph) {
        iron_exec_graph_discards++;
        if (rs && graph_debug())
          fprintf(stderr, "iron: device loop of %s discarded: %s\n",
                  s->op->name, iron_status_message(rs));
      }
      iron_status_free(rs);
    }
    homes_restore(fr, s, homes, borrowed, types, recording);
  }
  if (!st && graph) {
    note_step(ctx, s);  // a fault inside the loop names it
    st = vt->graph_launch(dev, graph);
    iron_exec_graph_launches++;
    vt->graph_destroy(dev, graph);
    *out_done = st == IRON_OK;
  }
  if (homes != homes_small) free(homes);
  if (types != types_small) free(types);
  if (borrowed != borrowed_small) free(borrowed);
  return st;
}

// Runs iterations [*io_it, trips) of a counted loop as graph replays when
// the device and the body allow it; *io_it is left where the ordinary loop
// must continue (trips when the graph ran them all).
static iron_status_t run_counted_graph(const iron_exec_ctx_t *ctx, frame_t *fr,
                                       const iron_plan_step_t *s,
                                       int64_t *io_it, int64_t trips) {
  uint32_t n = s->num_outputs;
  iron_storage_t *homes_small[SMALL];
  iron_tensor_t types_small[SMALL];
  bool borrowed_small[SMALL];
  iron_storage_t **homes = homes_small;
  iron_tensor_t *types = types_small;
  bool *borrowed = borrowed_small;
  if (n > SMALL) {
    homes = malloc(sizeof(*homes) * n);
    types = malloc(sizeof(*types) * n);
    borrowed = malloc(sizeof(*borrowed) * n);
    if (!homes || !types || !borrowed) {
      free(homes);
      free(types);
      free(borrowed);
      return IRON_OK;  // the ordinary way needs no memory
    }
  }
  void *graph = NULL;
  iron_status_t st = record_body(ctx, fr, s, homes, borrowed, types, &graph);
  if (!st && graph) {
    note_step(ctx, s);  // a fault in a replay names the loop
    for (int64_t it = *io_it; it < trips && !st; ++it) {
      st = ctx->dev->vtable->graph_launch(ctx->dev, graph);
      iron_exec_graph_launches++;
    }
    if (!st) *io_it = trips;
    ctx->dev->vtable->graph_destroy(ctx->dev, graph);
  }
  if (homes != homes_small) free(homes);
  if (types != types_small) free(types);
  if (borrowed != borrowed_small) free(borrowed);
  return st;
}

// Whether input `i` of step `s` is released right after it (in s->frees)
// and is not passed twice.
static bool arg_dies_here(const iron_plan_step_t *s, uint32_t i) {
  uint32_t slot = s->inputs[i];
  for (uint32_t k = 0; k < s->num_inputs; ++k)
    if (k != i && s->inputs[k] == slot) return false;
  for (uint32_t k = 0; k < s->num_frees; ++k)
    if (s->frees[k] == slot) return true;
  return false;
}

static iron_status_t run_call(const iron_exec_ctx_t *ctx, frame_t *fr,
                              const iron_plan_step_t *s) {
  const iron_plan_func_t *f = s->callee;
  iron_slot_t args_small[SMALL], res_small[SMALL];
  iron_slot_t *args = args_small, *res = res_small;
  if (s->num_inputs > SMALL || s->num_outputs > SMALL) {
    args = calloc(s->num_inputs + 1, sizeof(*args));
    res = calloc(s->num_outputs + 1, sizeof(*res));
    if (!args || !res) {
      if (args != args_small) free(args);
      if (res != res_small) free(res);
      return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for a call");
    }
  }
  for (uint32_t i = 0; i < s->num_inputs; ++i) {
    iron_slot_t *src = &fr->slots[s->inputs[i]];
    args[i] = *src;
    if (arg_dies_here(s, i)) {
      // Moved, not shared: the callee then holds the only reference and
      // may update the value in place (jax's scan bodies call
      // dynamic_update_index_in_dim on the stacked outputs: with a second
      // reference every iteration copied the whole stack).
      src->s = NULL;
      src->t.data = NULL;
    } else {
      iron_storage_retain(args[i].s);
    }
  }
  iron_status_t st = iron_exec_run_func(ctx, f, args, res);
  if (!st)
    for (uint32_t i = 0; i < s->num_outputs; ++i)
      slot_move(&fr->slots[s->outputs[i]], &res[i]);
  if (args != args_small) free(args);
  if (res != res_small) free(res);
  return st;
}

static iron_status_t run_step(const iron_exec_ctx_t *ctx, frame_t *fr,
                              const iron_plan_step_t *s) {
  iron_status_t st = IRON_OK;
  switch (s->kind) {
    case IRON_STEP_KERNEL:
      st = run_kernel(ctx, fr, s);
      if (st) return step_error(st, s);
      break;
    case IRON_STEP_CONSTANT: {
      iron_slot_t *dst = &fr->slots[s->outputs[0]];
      if (dst->s) slot_clear(dst);
      dst->t = s->out_types[0];
      dst->t.data = s->constant->data;
      dst->s = s->constant;
      iron_storage_retain(dst->s);
      break;
    }
    case IRON_STEP_ALIAS:
      for (uint32_t i = 0; i < s->num_outputs; ++i) {
        iron_slot_t *src = &fr->slots[s->inputs[i]];
        iron_slot_t *dst = &fr->slots[s->outputs[i]];
        iron_slot_t tmp = *src;
        iron_storage_retain(tmp.s);
        if (dst->s) slot_clear(dst);
        dst->t = s->out_types[i];
        dst->t.data = tmp.t.data;
        dst->s = tmp.s;
      }
      break;
    case IRON_STEP_WHILE: {
      const iron_plan_block_t *cond = &s->blocks[0], *body = &s->blocks[1];
      // The carried values live in the output slots: moved there when the
      // plan says the input dies at this step (carry_moves), so that the
      // loop holds the only reference and the body may update it in place
      // from iteration 0 on (a scan's stacked state, scan_in_place.h; with
      // a second reference the first iteration copied the whole array).
      for (uint32_t i = 0; i < s->num_outputs; ++i) {
        if (s->carry_moves && s->carry_moves[i])
          slot_move(&fr->slots[s->outputs[i]], &fr->slots[s->inputs[i]]);
        else
          slot_copy(&fr->slots[s->outputs[i]], &fr->slots[s->inputs[i]]);
      }
      // Counted loops: the trip count up front, the condition never run
      // (read from the carries: an input may have been moved).
      int64_t trips = -1;
      if (s->counted) {
        int64_t init = s->counted_init;
        if (!s->counted_init_known) {
          st = read_index(ctx, fr, &fr->slots[s->outputs[s->counted_index]],
                          &init);
          if (st) return step_error(st, s);
        }
        int64_t limit = s->counted_limit;
        if (s->counted_limit_index >= 0) {
          st = read_index(ctx, fr,
                          &fr->slots[s->outputs[s->counted_limit_index]],
                          &limit);
          if (st) return step_error(st, s);
        }
        trips = counted_trips(init, limit, s->counted_step);
      }
      if (trips >= 0 && s->max_iterations > 0 && trips > s->max_iterations)
        return step_error(IRON_ERR(ABORTED,
                                   "loop would run %lld iterations "
                                   "(IRON_MAX_WHILE_ITERATIONS)",
                                   (long long)trips),
                          s);
      // Graph mode: iteration 0 runs the ordinary way (first-use set-up in
      // kernels happens outside the recording), the rest as replays.
      // (A program being recorded as one graph records the loop's
      // iterations as they run.)
      bool graph_mode = false;
      if (trips >= 2 && ctx->dev && !ctx->program_recording &&
          (graph_debug() || (ctx->dev->graph_min_trips > 0 &&
                             trips >= ctx->dev->graph_min_trips))) {
        const iron_plan_step_t *why = NULL;
        bool capturable = block_capturable(body, 0, &why);
        // Not in sync mode (IRON_SYNC=1): jobs of several threads then run
        // at once, and another job's work would join the recording.
        graph_mode = capturable && ctx->dev->graph_min_trips > 0 &&
                     trips >= ctx->dev->graph_min_trips &&
                     ctx->dev->vtable->graph_begin && fr->device_mem &&
                     !fr->scratch && fr->ew_count <= 1 && !ctx->dev->sync;
        if (graph_debug())
          fprintf(stderr,
                  "iron: %s of %lld iterations: graph %s (%u body steps%s%s%s)\n",
                  s->op->name, (long long)trips, graph_mode ? "yes" : "no",
                  body->num_steps, why ? "; cannot record " : "",
                  why ? why->op->name : "",
                  why && why->kind == IRON_STEP_KERNEL ? " (kernel)" : "");
      }
      // Device loop: a data-dependent loop whose condition and body only
      // enqueue device work runs iteration 0 the ordinary way the first
      // time (first-use set-up in kernels happens outside the recording),
      // then, once the host has seen the predicate true again, every
      // remaining iteration in one device graph (run_device_loop); later
      // executions record from iteration 0 on (one predicate read back).
      bool device_loop = false;
      if (trips < 0 && ctx->dev && !ctx->program_recording &&
          ctx->dev->graph_while &&
          ctx->dev->vtable->graph_while_begin &&
          fr->device_mem && !fr->scratch && fr->ew_count <= 1 &&
          !ctx->dev->sync && s->max_iterations <= 0) {
        const iron_plan_step_t *why = NULL;
        device_loop = block_capturable(cond, 0, &why) &&
                      block_capturable(body, 0, &why);
        if (graph_debug())
          fprintf(stderr, "iron: %s (data-dependent): device loop %s%s%s%s\n",
                  s->op->name, device_loop ? "yes" : "no",
                  why ? "; cannot record " : "", why ? why->op->name : "",
                  why && why->kind == IRON_STEP_KERNEL ? " (kernel)" : "");
      }
      for (int64_t it = 0;; ++it) {
        if (graph_mode && it == 1) {
          st = run_counted_graph(ctx, fr, s, &it, trips);
          if (st) return step_error(st, s);
        }
        if (trips >= 0) {
          if (it >= trips) break;
        } else {
          if (s->max_iterations > 0 && it >= s->max_iterations)
            return step_error(
                IRON_ERR(ABORTED,
                         "loop ran %lld iterations "
                         "(IRON_MAX_WHILE_ITERATIONS)",
                         (long long)it),
                s);
          enter_block(fr, cond, fr, s->outputs, false);
          st = run_steps(ctx, fr, cond);
          if (st) return st;
          bool go;
          st = read_pred(ctx, fr, &fr->slots[cond->results[0]], &go);
          if (st) return step_error(st, s);
          leave_block(fr, cond, fr, NULL);
          if (!go) break;
          if (device_loop &&
              (it == 1 || (it == 0 && atomic_load_explicit(
                                          &s->device_loop_warm,
                                          memory_order_relaxed)))) {
            atomic_store_explicit(
                &((iron_plan_step_t *)s)->device_loop_warm, true,
                memory_order_relaxed);
            bool done = false;
            st = run_device_loop(ctx, fr, s, &done);
            if (st) return step_error(st, s);
            if (done) break;
            device_loop = false;  // discarded: on the ordinary way
          }
        }
        enter_block(fr, body, fr, s->outputs, true);
        st = run_steps(ctx, fr, body);
        if (st) return st;
        leave_block(fr, body, fr, s->outputs);
      }
      break;
    }
    case IRON_STEP_IF:
    case IRON_STEP_CASE: {
      int64_t idx;
      const iron_slot_t *sel = &fr->slots[s->inputs[0]];
      if (s->kind == IRON_STEP_IF) {
        bool p;
        st = read_pred(ctx, fr, sel, &p);
        if (st) return step_error(st, s);
        idx = p ? 0 : 1;
      } else {
        st = read_index(ctx, fr, sel, &idx);
        if (st) return step_error(st, s);
        // Out of range runs the last branch (XLA semantics).
        if (idx < 0 || idx >= (int64_t)s->num_blocks)
          idx = (int64_t)s->num_blocks - 1;
      }
      const iron_plan_block_t *b = &s->blocks[idx];
      enter_block(fr, b, fr, NULL, false);
      st = run_steps(ctx, fr, b);
      if (st) return st;
      leave_block(fr, b, fr, s->outputs);
      break;
    }
    case IRON_STEP_CALL:
      st = run_call(ctx, fr, s);
      if (st) return st;
      break;
  }
  do_frees(fr, s->frees, s->num_frees);
  return IRON_OK;
}

static iron_status_t run_steps(const iron_exec_ctx_t *ctx, frame_t *fr,
                               const iron_plan_block_t *b) {
  for (uint32_t i = 0; i < b->num_steps; ++i)
    IRON_RETURN_IF_ERROR_PLAIN(run_step(ctx, fr, &b->steps[i]));
  return IRON_OK;
}

iron_status_t iron_exec_run_func(const iron_exec_ctx_t *ctx,
                                 const iron_plan_func_t *f, iron_slot_t *args,
                                 iron_slot_t *results) {
  iron_slot_t small[32];
  uint32_t n = f->num_slots;
  iron_slot_t *slots = small;
  if (n > 32) {
    slots = malloc(sizeof(iron_slot_t) * n);
    if (!slots) {
      const iron_plan_block_t *b = &f->body;
      for (uint32_t i = 0; i < b->num_args; ++i) slot_clear(&args[i]);
      return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for a frame");
    }
  }
  // Only .s must start clear (a slot is written before it is read).
  for (uint32_t i = 0; i < n; ++i) slots[i].s = NULL;
  frame_t fr = {slots, n, 0, NULL, 0,
                ctx->dev && ctx->dev->vtable->memcpy != NULL};
  const iron_plan_block_t *b = &f->body;
  for (uint32_t i = 0; i < b->num_args; ++i) {
    slots[b->args[i]] = args[i];
    args[i].s = NULL;
  }
  do_frees(&fr, b->entry_frees, b->num_entry_frees);
  iron_status_t st = run_steps(ctx, &fr, b);
  if (!st) {
    for (uint32_t i = 0; i < b->num_results; ++i) {
      results[i] = slots[b->results[i]];
      iron_storage_retain(results[i].s);
    }
    do_frees(&fr, b->exit_frees, b->num_exit_frees);
  }
  frame_sweep(&fr);
  if (slots != small) free(slots);
  return st;
}

// --- call_region ---------------------------------------------------------

static void fill_broadcast(void *dst, const void *src, size_t esize,
                           int64_t count) {
  char *d = dst;
  for (int64_t i = 0; i < count; ++i) memcpy(d + (size_t)i * esize, src, esize);
}

static iron_status_t call_region(const iron_kernel_ctx_t *hctx,
                                 const iron_region_t *region,
                                 const iron_tensor_t *const *inputs,
                                 iron_tensor_t *const *outputs) {
  const iron_plan_region_t *r = iron_plan_region_of(region);
  const exec_call_t *call = (const exec_call_t *)hctx->runtime;
  const iron_exec_ctx_t *ctx = call->ctx;
  const iron_plan_block_t *b = &r->block;
  int64_t count = 1;
  for (uint32_t i = 0; i < b->num_args; ++i)
    if (inputs[i]->count > count) count = inputs[i]->count;
  for (uint32_t i = 0; i < b->num_results; ++i)
    if (outputs[i]->count > count) count = outputs[i]->count;
  if (count > 1 && !region->elementwise)
    return IRON_ERR(INVALID_ARGUMENT,
                    "call_region: vector inputs for a region that is not "
                    "element-wise");
  iron_slot_t small[32];
  iron_slot_t *slots = small;
  if (r->num_slots > 32) {
    slots = malloc(sizeof(iron_slot_t) * r->num_slots);
    if (!slots) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  }
  for (uint32_t i = 0; i < r->num_slots; ++i) slots[i].s = NULL;
  // Small intermediate values (scalars, short vectors) live on the stack:
  // comparators and reduce bodies run without touching the allocator.
  alignas(64) char scratch[2048];
  frame_t fr = {slots, r->num_slots, count > 1 ? count : 0, scratch,
                sizeof(scratch), false};
  for (uint32_t i = 0; i < b->num_args; ++i) {
    slots[b->args[i]].t = *inputs[i];
    slots[b->args[i]].s = NULL;  // borrowed
  }
  for (uint32_t k = 0; k < r->num_captures; ++k) {
    iron_slot_t *dst = &slots[r->captures[2 * k + 1]];
    dst->t = call->frame->slots[r->captures[2 * k]].t;
    dst->s = NULL;  // borrowed from the frame that runs the op
  }
  iron_status_t st = run_steps(ctx, &fr, b);
  for (uint32_t i = 0; i < b->num_results && !st; ++i) {
    const iron_tensor_t *src = &slots[b->results[i]].t;
    iron_tensor_t *dst = outputs[i];
    size_t esize = iron_dtype_size(dst->dtype);
    if (src->count == dst->count) {
      if (src->data != dst->data && dst->nbytes)
        memcpy(dst->data, src->data, dst->nbytes);
    } else if (src->count == 1) {
      fill_broadcast(dst->data, src->data, esize, dst->count);
    } else {
      st = IRON_ERR(INVALID_ARGUMENT,
                    "call_region: result %u has %lld elements, output %lld",
                    i, (long long)src->count, (long long)dst->count);
    }
  }
  frame_sweep(&fr);
  if (slots != small) free(slots);
  return st;
}

void iron_exec_ctx_init(iron_exec_ctx_t *ctx, iron_device_t *dev) {
  ctx->host.pool = dev->pool;
  ctx->host.call_region = call_region;
  ctx->host.runtime = NULL;  // set per kernel call (exec_call_t)
  ctx->host.dev = dev;
  ctx->dev = dev;
  ctx->program_recording = false;
}
