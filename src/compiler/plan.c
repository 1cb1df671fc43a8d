// Planner: IR module -> iron_plan_t (see plan.h). One pass per block:
//  1. liveness: the last op (at this block's level) that uses each value,
//     counting uses inside nested regions as uses by the op that holds them,
//     so a value captured by a loop body lives through the whole loop;
//  2. steps: slots for every value, kernels prepared, constants materialized,
//     control-flow regions planned recursively in the same slot space
//     (value ids are per function), kernel regions in their own space.
#include "compiler/plan.h"

#include "compiler/counted_loop.h"

#include "base/compile_memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct iron_plan_owned {
  const iron_kernel_t *kernel;  // params owner, or NULL
  void *params;
  iron_storage_t *storage;  // constant, or NULL
  iron_plan_owned_t *next;
};

static iron_plan_kernel_lookup_fn_t g_lookup_override = NULL;

void iron_plan_set_kernel_lookup_for_testing(iron_plan_kernel_lookup_fn_t fn) {
  g_lookup_override = fn;
}

// The kernel for `kind` on `dev` (NULL: the host). Regions of kernel ops
// (reduce bodies, comparators) always get host kernels: the host runs them
// through call_region, and other devices generate code from their IR.
static const iron_kernel_t *lookup_kernel_on(const iron_device_t *dev,
                                                  iron_op_kind_t kind) {
  if (g_lookup_override) return g_lookup_override(kind);
  if (dev && dev->vtable->kernel_lookup) return dev->vtable->kernel_lookup(kind);
  return iron_reference_kernel_lookup(kind);
}

// Per-function analysis state (value-id indexed arrays).
typedef struct {
  iron_plan_t *plan;
  const iron_ir_func_t *func;
  uint32_t num_values;
  uint32_t *last_use;
  uint32_t *stamp;
  uint32_t next_stamp;
} func_ctx_t;

// A slot space: a function frame or a kernel region's private frame.
typedef struct scope {
  func_ctx_t *fc;
  uint32_t *slot_of;  // per value id; UINT32_MAX: not defined yet
  uint32_t num_slots;
  bool is_region;  // a kernel region's private frame
  struct scope *parent;  // kernel region: the scope that runs the op
  // Kernel region: pairs (parent slot, local slot) of captured values.
  uint32_t num_captures, cap_captures;
  uint32_t *captures;
} scope_t;

#define NO_SLOT UINT32_MAX

// The device the ops of scope `sc` run on: NULL (host) inside kernel
// regions.
static iron_device_t *scope_device(const scope_t *sc) {
  return sc->is_region ? NULL : sc->fc->plan->dev;
}

static iron_status_t oom(void) {
  return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory while planning");
}

static const char *loc_str(const iron_ir_op_t *op, char *buf, size_t cap) {
  return iron_ir_loc_format(&op->loc, buf, cap);
}

static iron_status_t own(iron_plan_t *plan, const iron_kernel_t *kernel,
                         void *params, iron_storage_t *storage) {
  iron_plan_owned_t *o = malloc(sizeof(*o));
  if (!o) {
    if (kernel && params) {
      if (kernel->destroy)
        kernel->destroy(params);
      else
        free(params);
    }
    iron_storage_release(storage);
    return oom();
  }
  o->kernel = kernel;
  o->params = params;
  o->storage = storage;
  o->next = plan->owned;
  plan->owned = o;
  return IRON_OK;
}

static iron_status_t value_id(const func_ctx_t *fc, const iron_ir_value_t *v,
                              uint32_t *out) {
  if (v->id >= fc->num_values)
    return IRON_ERR(INTERNAL, "value id %u out of range (%u values)", v->id,
                    fc->num_values);
  *out = v->id;
  return IRON_OK;
}

static iron_status_t define(scope_t *sc, const iron_ir_value_t *v,
                            uint32_t *out_slot) {
  uint32_t id = 0;
  IRON_RETURN_IF_ERROR_PLAIN(value_id(sc->fc, v, &id));
  if (sc->slot_of[id] == NO_SLOT) sc->slot_of[id] = sc->num_slots++;
  *out_slot = sc->slot_of[id];
  return IRON_OK;
}

static iron_status_t use(scope_t *sc, const iron_ir_op_t *op,
                         const iron_ir_value_t *v, uint32_t *out_slot) {
  uint32_t id = 0;
  IRON_RETURN_IF_ERROR_PLAIN(value_id(sc->fc, v, &id));
  if (sc->slot_of[id] == NO_SLOT && sc->is_region && sc->parent) {
    // A capture: borrow the value from the frame that runs the op.
    uint32_t pslot;
    IRON_RETURN_IF_ERROR_PLAIN(use(sc->parent, op, v, &pslot));
    if (sc->num_captures == sc->cap_captures) {
      uint32_t cap = sc->cap_captures ? sc->cap_captures * 2 : 8;
      uint32_t *c = realloc(sc->captures, sizeof(uint32_t) * 2 * cap);
      if (!c) return oom();
      sc->captures = c;
      sc->cap_captures = cap;
    }
    sc->slot_of[id] = sc->num_slots++;
    sc->captures[2 * sc->num_captures] = pslot;
    sc->captures[2 * sc->num_captures + 1] = sc->slot_of[id];
    sc->num_captures++;
  }
  if (sc->slot_of[id] == NO_SLOT) {
    char loc[256];
    return IRON_ERR(INVALID_ARGUMENT,
                    "%s (%s) uses a value before it is defined", op->name,
                    loc_str(op, loc, sizeof(loc)));
  }
  *out_slot = sc->slot_of[id];
  return IRON_OK;
}

// The carried values of a while keep their types: the operands, the
// results, both regions' block arguments and the body's returned values
// agree, and the condition returns one tensor<i1>. (A corrupted program
// whose body returned another type made the next iteration read a smaller
// buffer as the declared one: a fuzz_compile finding.)
static iron_status_t check_while_types(const iron_ir_op_t *op) {
  uint32_t n = op->num_operands;
  if (op->num_results != n)
    return IRON_ERR(INVALID_ARGUMENT, "%s: %u operands but %u results",
                    op->name, n, op->num_results);
  for (uint32_t i = 0; i < n; ++i)
    if (!iron_ir_type_equal(op->operands[i]->type, op->results[i].type))
      return IRON_ERR(INVALID_ARGUMENT,
                      "%s: operand %u and result %u differ in type",
                      op->name, i, i);
  for (uint32_t r = 0; r < 2; ++r) {
    const iron_ir_region_t *reg = &op->regions[r];
    if (reg->num_blocks != 1)
      return IRON_ERR(INVALID_ARGUMENT, "%s: region %u has %u blocks",
                      op->name, r, reg->num_blocks);
    const iron_ir_block_t *b = &reg->blocks[0];
    if (b->num_args != n || b->num_ops == 0)
      return IRON_ERR(INVALID_ARGUMENT,
                      "%s: region %u takes %u arguments for %u carried values",
                      op->name, r, b->num_args, n);
    for (uint32_t i = 0; i < n; ++i)
      if (!iron_ir_type_equal(b->args[i].type, op->operands[i]->type))
        return IRON_ERR(INVALID_ARGUMENT,
                        "%s: region %u argument %u differs in type from "
                        "the carried value",
                        op->name, r, i);
    const iron_ir_op_t *ret = b->ops[b->num_ops - 1];
    if (r == 1) {
      if (ret->num_operands != n)
        return IRON_ERR(INVALID_ARGUMENT,
                        "%s: the body returns %u values for %u carried",
                        op->name, ret->num_operands, n);
      for (uint32_t i = 0; i < n; ++i)
        if (!iron_ir_type_equal(ret->operands[i]->type,
                                op->operands[i]->type))
          return IRON_ERR(INVALID_ARGUMENT,
                          "%s: the body's returned value %u differs in type "
                          "from the carried value",
                          op->name, i);
    } else {
      const iron_ir_type_t *t =
          ret->num_operands == 1 ? ret->operands[0]->type : NULL;
      if (!t || t->kind != IRON_TYPE_TENSOR || t->dtype != IRON_DTYPE_PRED ||
          t->rank != 0)
        return IRON_ERR(INVALID_ARGUMENT,
                        "%s: the condition must return one tensor<i1>",
                        op->name);
    }
  }
  return IRON_OK;
}

static iron_status_t type_to_tensor(const iron_ir_op_t *op,
                                    const iron_ir_type_t *t,
                                    iron_tensor_t *out) {
  memset(out, 0, sizeof(*out));
  if (t->kind == IRON_TYPE_TOKEN) {
    out->dtype = IRON_DTYPE_TOKEN;
    out->count = 1;
    return IRON_OK;
  }
  size_t nbytes;
  if (t->kind != IRON_TYPE_TENSOR || !iron_ir_type_byte_size(t, &nbytes)) {
    char buf[128];
    iron_ir_type_format(t, buf, sizeof(buf));
    if (op) return iron_ir_op_unimplemented(op, "with type %s", buf);
    return IRON_ERR(UNIMPLEMENTED, "type %s is not supported yet", buf);
  }
  out->dtype = t->dtype;
  out->rank = t->rank;
  for (int32_t i = 0; i < t->rank; ++i) out->dims[i] = t->dims[i];
  out->count = iron_ir_type_num_elements(t);
  out->nbytes = nbytes;
  return IRON_OK;
}

static void mark_uses(func_ctx_t *fc, const iron_ir_op_t *op, uint32_t index,
                      uint32_t stamp) {
  for (uint32_t i = 0; i < op->num_operands; ++i) {
    uint32_t id = op->operands[i]->id;
    if (id < fc->num_values) {
      fc->last_use[id] = index;
      fc->stamp[id] = stamp;
    }
  }
  for (uint32_t r = 0; r < op->num_regions; ++r) {
    const iron_ir_region_t *reg = &op->regions[r];
    for (uint32_t b = 0; b < reg->num_blocks; ++b)
      for (uint32_t k = 0; k < reg->blocks[b].num_ops; ++k)
        mark_uses(fc, reg->blocks[b].ops[k], index, stamp);
  }
}

static bool is_terminator(iron_op_kind_t k) {
  return k == IRON_OP_RETURN || k == IRON_OP_FUNC_RETURN ||
         k == IRON_OP_SDY_RETURN;
}

static iron_status_t plan_block(scope_t *sc, const iron_ir_block_t *blk,
                                const char *func_name,
                                iron_plan_block_t *out);
static iron_status_t plan_func(iron_plan_t *plan, uint32_t index,
                               const iron_ir_op_t *caller);

static iron_status_t plan_region_block(scope_t *sc, const iron_ir_op_t *op,
                                       uint32_t r, const char *func_name,
                                       iron_plan_block_t *out) {
  const iron_ir_region_t *reg = &op->regions[r];
  if (reg->num_blocks != 1)
    return iron_ir_op_unimplemented(op, "with a region of %u blocks",
                                    reg->num_blocks);
  return plan_block(sc, &reg->blocks[0], func_name, out);
}

// A kernel op's region: its own slot space and frame.
static iron_status_t plan_host_region(scope_t *parent, const iron_ir_op_t *op,
                                      uint32_t r, const char *func_name,
                                      iron_region_t **out) {
  func_ctx_t *fc = parent->fc;
  iron_plan_t *plan = fc->plan;
  iron_plan_region_t *hr = iron_arena_alloc(&plan->arena, sizeof(*hr));
  uint32_t *map = malloc(sizeof(uint32_t) * (fc->num_values + 1));
  if (!hr || !map) {
    free(map);
    return oom();
  }
  memset(map, 0xff, sizeof(uint32_t) * (fc->num_values + 1));
  scope_t sc = {fc, map, 0, true, parent, 0, 0, NULL};
  hr->base.ir = &op->regions[r];
  hr->base.module = plan->module;
  iron_status_t st = plan_region_block(&sc, op, r, func_name, &hr->block);
  free(map);
  if (!st && sc.num_captures) {
    hr->captures = iron_arena_memdup(&plan->arena, sc.captures,
                                     sizeof(uint32_t) * 2 * sc.num_captures);
    if (!hr->captures) st = oom();
    hr->num_captures = sc.num_captures;
  }
  free(sc.captures);
  if (st) return st;
  hr->num_slots = sc.num_slots;
  // Element-wise: every step is an element-wise kernel or a constant.
  bool ew = true;
  for (uint32_t i = 0; i < hr->block.num_steps && ew; ++i) {
    const iron_plan_step_t *s = &hr->block.steps[i];
    if (s->kind == IRON_STEP_CONSTANT) {
      for (uint32_t o = 0; o < s->num_outputs; ++o)
        if (s->out_types[o].count != 1) ew = false;
      continue;
    }
    if (s->kind != IRON_STEP_KERNEL || !s->kernel->elementwise) ew = false;
  }
  hr->base.elementwise = ew;
  *out = &hr->base;
  return IRON_OK;
}

static bool custom_call_is_identity(const char *t) {
  if (!t) return false;
  return strcmp(t, "Sharding") == 0 || strcmp(t, "SPMDFullToShardShape") == 0 ||
         strcmp(t, "SPMDShardToFullShape") == 0 ||
         strncmp(t, "xla.sdy.", 8) == 0 || strncmp(t, "sdy", 3) == 0 ||
         strcmp(t, "MoveToHost") == 0 || strcmp(t, "MoveToDevice") == 0 ||
         strcmp(t, "annotate_device_placement") == 0;
}

static bool env_flag(const char *name) {
  const char *v = getenv(name);
  return v && v[0] && strcmp(v, "0") != 0;
}

// A fusion whose result j is a dynamic_update_slice of its input k (a root
// that the device writes in place, fuse.c) may take input k's storage for
// result j when input k dies at this step and nothing else in the fusion
// reads it (the kernel writes it while other threads would read it).
static iron_status_t fusion_dus_inplace(iron_plan_t *plan,
                                        iron_plan_step_t *s) {
  const iron_ir_op_t *op = s->op;
  if (op->num_regions != 1 || op->regions[0].num_blocks != 1) return IRON_OK;
  const iron_ir_block_t *b = &op->regions[0].blocks[0];
  if (b->num_ops == 0 || b->num_args != s->num_inputs) return IRON_OK;
  const iron_ir_op_t *term = b->ops[b->num_ops - 1];
  if (term->num_operands != s->num_outputs) return IRON_OK;
  int32_t *ip = NULL;
  for (uint32_t o = 0; o < s->num_outputs; ++o) {
    const iron_ir_op_t *d = term->operands[o]->def_op;
    if (!d || d->kind != IRON_OP_DYNAMIC_UPDATE_SLICE || d->num_operands < 2)
      continue;
    const iron_ir_value_t *x = d->operands[0];
    if (x->def_op || x->def_block != b) continue;  // not a fusion input
    uint32_t k = x->index, uses = 0;
    for (uint32_t i = 0; i + 1 < b->num_ops; ++i)
      for (uint32_t a = 0; a < b->ops[i]->num_operands; ++a)
        if (b->ops[i]->operands[a] == x) uses++;
    for (uint32_t a = 0; a < term->num_operands; ++a)
      if (term->operands[a] == x) uses++;
    if (uses != 1 || k >= s->num_inputs) continue;
    bool dies = false, taken = false;
    for (uint32_t f = 0; f < s->num_frees; ++f)
      if (s->frees[f] == s->inputs[k]) dies = true;
    for (uint32_t i = 0; i < s->num_inputs; ++i)
      if (i != k && s->inputs[i] == s->inputs[k]) taken = true;  // passed twice
    if (!dies || taken) continue;
    if (!ip) {
      ip = iron_arena_alloc_array(&plan->arena, s->num_outputs + 1,
                                  sizeof(int32_t));
      if (!ip) return oom();
      for (uint32_t p = 0; p < s->num_outputs; ++p) ip[p] = -1;
    }
    for (uint32_t p = 0; p < o; ++p)
      if (ip[p] == (int32_t)k) taken = true;
    if (!taken) ip[o] = (int32_t)k;
  }
  if (ip) s->inplace = ip;
  return IRON_OK;
}

// Whether a step of `b` (nested blocks included) or its terminator reads
// `slot` directly.
static bool block_reads_slot(const iron_plan_block_t *b, uint32_t slot) {
  for (uint32_t i = 0; i < b->num_results; ++i)
    if (b->results[i] == slot) return true;
  for (uint32_t i = 0; i < b->num_steps; ++i) {
    const iron_plan_step_t *s = &b->steps[i];
    for (uint32_t k = 0; k < s->num_inputs; ++k)
      if (s->inputs[k] == slot) return true;
    for (uint32_t k = 0; k < s->num_blocks; ++k)
      if (block_reads_slot(&s->blocks[k], slot)) return true;
  }
  return false;
}

// iron_plan_step_t.carry_moves of while step `s`, once its frees are known.
static iron_status_t while_carry_moves(iron_plan_t *plan,
                                       iron_plan_step_t *s) {
  bool *mv = NULL;
  for (uint32_t i = 0; i < s->num_inputs && i < s->num_outputs; ++i) {
    uint32_t slot = s->inputs[i];
    bool dies = false, twice = false, read = false;
    for (uint32_t f = 0; f < s->num_frees; ++f) dies = dies || s->frees[f] == slot;
    for (uint32_t k = 0; k < s->num_inputs; ++k)
      twice = twice || (k != i && s->inputs[k] == slot);
    for (uint32_t b = 0; b < s->num_blocks && dies && !twice; ++b)
      read = read || block_reads_slot(&s->blocks[b], slot);
    if (!dies || twice || read) continue;
    if (!mv) {
      mv = iron_arena_alloc_array(&plan->arena, s->num_outputs + 1,
                                  sizeof(bool));
      if (!mv) return oom();
    }
    mv[i] = true;
  }
  s->carry_moves = mv;
  return IRON_OK;
}

static iron_status_t fill_constant(const iron_ir_op_t *op,
                                   const iron_tensor_t *type, void *data);

// A constant's storage: host memory filled from the op, then (for devices
// with their own memory) uploaded once, at compile time. It counts against
// the device's memory limit (on the host device the host copy is the
// device's memory; on others the device copy is allocated before the host
// one is filled), so a splat constant of a huge declared shape is
// RESOURCE_EXHAUSTED, not a host allocation of that size.
static iron_status_t make_constant(iron_plan_t *plan, iron_device_t *dev,
                                   const iron_ir_op_t *op,
                                   const iron_tensor_t *type,
                                   iron_plan_step_t *s) {
  // A splat's bytes are not in the artifact: charge them to the compile
  // memory budget before they are built (base/compile_memory.h).
  const iron_ir_attr_t *va = iron_ir_op_attr(op, "value");
  size_t stored = va && va->kind == IRON_ATTR_DENSE ? va->dense.size : 0;
  if (type->nbytes > stored) {
    char what[96];
    snprintf(what, sizeof(what), "%s materialized to %zu bytes", op->name,
             type->nbytes);
    IRON_RETURN_IF_ERROR_PLAIN(iron_compile_memory_reserve(type->nbytes, what));
  }
  bool upload = dev && dev->vtable->mem_alloc && type->nbytes;
  iron_storage_t *d = NULL, *st;
  if (upload)
    IRON_RETURN_IF_ERROR_PLAIN(iron_storage_allocate(dev, type->nbytes, &d));
  iron_status_t status =
      iron_storage_allocate(plan->memory_dev, type->nbytes, &st);
  if (status) {
    iron_storage_release(d);
    return status;
  }
  status = fill_constant(op, type, st->data);
  if (!status && upload) {
    status = dev->vtable->memcpy(dev, d->data, st->data, type->nbytes,
                                 IRON_COPY_HOST_TO_DEVICE);
    iron_storage_release(st);
    st = d;
    d = NULL;
  }
  iron_storage_release(d);
  if (status) {
    iron_storage_release(st);
    return status;
  }
  IRON_RETURN_IF_ERROR_PLAIN(own(plan, NULL, NULL, st));
  s->constant = st;
  return IRON_OK;
}

// Sub-byte integers: the IR holds them sign- or zero-extended to a byte
// (stablehlo/attr_type.c), buffers hold their low bits, as ml_dtypes,
// XLA:CPU and every kernel (-1 in s4 is 0x0f; a constant stored as 0xff
// came back to jax as other bytes than XLA:CPU's).
static void low_bits(const iron_tensor_t *type, void *data) {
  int bits = iron_dtype_bits(type->dtype);
  if (!iron_dtype_is_int(type->dtype) || bits >= 8) return;
  uint8_t *d = data, mask = (uint8_t)((1u << bits) - 1u);
  for (int64_t i = 0; i < type->count; ++i) d[i] &= mask;
}

static iron_status_t fill_constant(const iron_ir_op_t *op,
                                   const iron_tensor_t *type, void *data) {
  if (type->nbytes == 0) return IRON_OK;
  if (op->kind == IRON_OP_REPLICA_ID || op->kind == IRON_OP_PARTITION_ID) {
    memset(data, 0, type->nbytes);
    return IRON_OK;
  }
  const iron_ir_attr_t *a = iron_ir_op_attr(op, "value");
  if (!a || a->kind != IRON_ATTR_DENSE)
    return iron_ir_op_unimplemented(op, "without a dense value");
  size_t esize = iron_dtype_size(type->dtype);
  if (a->dense.splat || (a->dense.size == esize && type->count != 1)) {
    if (a->dense.size < esize)
      return IRON_ERR(INVALID_ARGUMENT, "constant splat has %zu bytes",
                      a->dense.size);
    char *d = data;
    for (int64_t i = 0; i < type->count; ++i)
      memcpy(d + (size_t)i * esize, a->dense.data, esize);
    low_bits(type, data);
    return IRON_OK;
  }
  if (a->dense.size != type->nbytes) {
    char loc[256];
    return IRON_ERR(INVALID_ARGUMENT,
                    "constant (%s) has %zu bytes of data, its type %zu",
                    loc_str(op, loc, sizeof(loc)), a->dense.size,
                    type->nbytes);
  }
  memcpy(data, a->dense.data, type->nbytes);
  low_bits(type, data);
  return IRON_OK;
}

static iron_status_t find_callee(iron_plan_t *plan, const iron_ir_op_t *op,
                                 const char *attr,
                                 const iron_plan_func_t **out) {
  const char *name = iron_ir_op_string(op, attr);
  if (!name) return iron_ir_op_unimplemented(op, "without %s", attr);
  if (name[0] == '@') name++;
  const iron_ir_module_t *m = plan->module;
  for (uint32_t i = 0; i < m->num_funcs; ++i) {
    if (m->funcs[i].name && strcmp(m->funcs[i].name, name) == 0) {
      IRON_RETURN_IF_ERROR_PLAIN(plan_func(plan, i, op));
      const iron_plan_func_t *f = &plan->funcs[i];
      if (iron_ir_func_num_args(f->ir) != op->num_operands ||
          iron_ir_func_num_results(f->ir) != op->num_results)
        return IRON_ERR(INVALID_ARGUMENT,
                        "%s calls @%s with %u operands and %u results; it "
                        "takes %u and returns %u",
                        op->name, name, op->num_operands, op->num_results,
                        iron_ir_func_num_args(f->ir),
                        iron_ir_func_num_results(f->ir));
      // The callee's buffers are sized by its signature.
      for (uint32_t k = 0; k < op->num_operands + op->num_results; ++k) {
        bool in = k < op->num_operands;
        uint32_t j = in ? k : k - op->num_operands;
        const iron_ir_type_t *have =
            in ? op->operands[j]->type : op->results[j].type;
        const iron_ir_type_t *want = in ? iron_ir_func_arg_type(f->ir, j)
                                        : iron_ir_func_result_type(f->ir, j);
        if (!iron_ir_type_equal(have, want)) {
          char hb[128], wb[128], loc[256];
          iron_ir_type_format(have, hb, sizeof(hb));
          iron_ir_type_format(want, wb, sizeof(wb));
          return IRON_ERR(INVALID_ARGUMENT,
                          "%s (%s) calls @%s with %s %u of type %s; it "
                          "takes %s",
                          op->name, loc_str(op, loc, sizeof(loc)), name,
                          in ? "operand" : "result", j, hb, wb);
        }
      }
      *out = f;
      return IRON_OK;
    }
  }
  char loc[256];
  return IRON_ERR(NOT_FOUND, "%s (%s): no function named @%s", op->name,
                  loc_str(op, loc, sizeof(loc)), name);
}

// Recognizes a counted while loop (see iron_plan_step_t.counted).
static void analyze_counted_loop(const iron_ir_op_t *op, iron_plan_step_t *s) {
  iron_counted_loop_t c;
  if (!iron_counted_loop(op, &c)) return;
  s->counted = true;
  s->counted_index = c.counter;
  s->counted_limit = c.limit;
  s->counted_limit_index = c.limit_index;
  s->counted_step = c.step;
  s->counted_init_known = c.init_known;
  s->counted_init = c.init;
}

// Fills the kind-specific part of step `s` for `op`.
static iron_status_t plan_op(scope_t *sc, const iron_ir_op_t *op,
                             const char *func_name, iron_plan_step_t *s) {
  iron_plan_t *plan = sc->fc->plan;
  const iron_kernel_t *custom_kernel = NULL;  // custom_call targets
  switch (op->kind) {
    case IRON_OP_CONSTANT:
    case IRON_OP_REPLICA_ID:
    case IRON_OP_PARTITION_ID:
    case IRON_OP_AFTER_ALL:
    case IRON_OP_CREATE_TOKEN:
      if (op->num_results != 1)
        return iron_ir_op_unimplemented(op, "with %u results",
                                        op->num_results);
      s->kind = IRON_STEP_CONSTANT;
      return make_constant(plan, scope_device(sc), op, &s->out_types[0], s);
    case IRON_OP_WHILE: {
      if (op->num_regions != 2)
        return iron_ir_op_unimplemented(op, "with %u regions",
                                        op->num_regions);
      IRON_RETURN_IF_ERROR_PLAIN(check_while_types(op));
      const char *cap = getenv("IRON_MAX_WHILE_ITERATIONS");
      s->max_iterations = cap ? atoll(cap) : 0;
      // A device may run the whole loop as one kernel (no host round trip
      // per iteration); a loop with an iteration cap keeps its steps, where
      // the executor counts them.
      iron_device_t *wdev = scope_device(sc);
      if (!s->max_iterations && wdev && wdev->vtable->while_kernel) {
        custom_kernel = wdev->vtable->while_kernel(op);
        if (custom_kernel) {
          s->kind = IRON_STEP_KERNEL;
          break;
        }
      }
      s->kind = IRON_STEP_WHILE;
      break;
    }
    case IRON_OP_IF:
      if (op->num_regions != 2 || op->num_operands != 1)
        return iron_ir_op_unimplemented(op, "with %u regions",
                                        op->num_regions);
      s->kind = IRON_STEP_IF;
      break;
    case IRON_OP_CASE:
      if (op->num_regions < 1 || op->num_operands != 1)
        return iron_ir_op_unimplemented(op, "with %u regions",
                                        op->num_regions);
      s->kind = IRON_STEP_CASE;
      break;
    case IRON_OP_FUNC_CALL:
      s->kind = IRON_STEP_CALL;
      return find_callee(plan, op, "callee", &s->callee);
    case IRON_OP_COMPOSITE:
      s->kind = IRON_STEP_CALL;
      return find_callee(plan, op, "decomposition", &s->callee);
    case IRON_OP_CUSTOM_CALL: {
      const char *target = iron_ir_op_string(op, "call_target_name");
      if (custom_call_is_identity(target)) {
        s->kind = IRON_STEP_ALIAS;
        break;
      }
      // Targets with a host kernel of their own (host callbacks).
      custom_kernel = iron_reference_callback_kernel(target);
      if (custom_kernel) {
        iron_device_t *cdev = scope_device(sc);
        if (cdev && cdev->vtable->mem_alloc) {
          // The host kernel cannot read device memory: such a device runs
          // callbacks with its own custom_call kernel (CUDA: a host-staged
          // step, cuda_host_staged.c), whose prepare may still refuse them.
          custom_kernel = NULL;
          if (!lookup_kernel_on(cdev, op->kind))
            return iron_ir_op_unimplemented(
                op, "for target \"%s\" on the %s device (host callbacks run "
                    "on the host device only)",
                target, cdev->vtable->kind);
        }
        plan->has_host_callbacks = true;
        s->kind = IRON_STEP_KERNEL;
        break;
      }
      // Other targets are the device's business (host: custom_call.c).
      if (!lookup_kernel_on(scope_device(sc), op->kind))
        return iron_ir_op_unimplemented(op, "for target \"%s\"",
                                        target ? target : "");
      s->kind = IRON_STEP_KERNEL;
      break;
    }
    case IRON_OP_OPTIMIZATION_BARRIER:
    case IRON_OP_UNREALIZED_CAST:
    case IRON_OP_SDY_SHARDING_CONSTRAINT:
    case IRON_OP_SDY_RESHARD:
      s->kind = IRON_STEP_ALIAS;
      break;
    case IRON_OP_SDY_SHARDING_GROUP:
      // Asks that its operand be sharded like the group's other members: on
      // one device there is nothing to do (an alias step with no outputs).
      s->kind = IRON_STEP_ALIAS;
      return IRON_OK;
    case IRON_OP_BROADCAST_IN_DIM:
      // A broadcast that only adds unit dims (jax writes one before every
      // dynamic_update_slice of a scan's stacked outputs) keeps the bytes
      // in place: a reshape. Others run their kernel.
      if (!iron_ir_broadcast_is_reshape(op) ||
          (env_flag("IRON_NO_ALIAS") &&
           lookup_kernel_on(scope_device(sc), op->kind))) {
        s->kind = IRON_STEP_KERNEL;
        break;
      }
      // fall through
    case IRON_OP_REDUCE:
    case IRON_OP_REDUCE_WINDOW:
      // A reduce that reduces only size-1 dims is its operands reshaped,
      // init values ignored; a reduce_window of one-element windows with an
      // identity init is its operand: as in XLA (ir.h).
      if (iron_ir_reduce_is_reshape(op) ||
          iron_ir_reduce_window_is_identity(op)) {
        s->kind = IRON_STEP_ALIAS;
        break;
      }
      s->kind = IRON_STEP_KERNEL;
      break;
    case IRON_OP_CONVERT:
      // A convert to its operand's own dtype is the operand (jax emits one
      // for a scalar constant's weak type): the bytes are shared as below.
      if (op->num_operands != 1 || op->num_results != 1 ||
          op->operands[0]->type->kind != IRON_TYPE_TENSOR ||
          op->operands[0]->type->dtype != op->results[0].type->dtype) {
        s->kind = IRON_STEP_KERNEL;
        break;
      }
      // fall through
    case IRON_OP_RESHAPE:
    case IRON_OP_BITCAST_CONVERT:
      // Same bytes, new type: share the storage (IRON_NO_ALIAS=1 runs the
      // kernel instead, when there is one).
      if (op->num_operands == 1 && op->num_results == 1 &&
          s->out_types[0].nbytes ==
              (op->operands[0]->type->kind == IRON_TYPE_TENSOR
                   ? (size_t)iron_ir_type_num_elements(op->operands[0]->type) *
                         iron_dtype_size(op->operands[0]->type->dtype)
                   : (size_t)-1) &&
          !(env_flag("IRON_NO_ALIAS") &&
            lookup_kernel_on(scope_device(sc), op->kind))) {
        s->kind = IRON_STEP_ALIAS;
        break;
      }
      s->kind = IRON_STEP_KERNEL;
      break;
    default:
      s->kind = IRON_STEP_KERNEL;
      break;
  }

  if (s->kind == IRON_STEP_ALIAS) {
    // Result i is operand i (a reduce's init values come after).
    if (op->num_operands != op->num_results &&
        !((op->kind == IRON_OP_REDUCE ||
           op->kind == IRON_OP_REDUCE_WINDOW) &&
          op->num_operands == 2 * op->num_results))
      return iron_ir_op_unimplemented(op, "with %u operands and %u results",
                                      op->num_operands, op->num_results);
    for (uint32_t i = 0; i < op->num_results; ++i) {
      iron_tensor_t in;
      IRON_RETURN_IF_ERROR_PLAIN(
          type_to_tensor(op, op->operands[i]->type, &in));
      if (in.nbytes != s->out_types[i].nbytes)
        return iron_ir_op_unimplemented(op, "changing the byte size");
    }
    return IRON_OK;
  }

  if (s->kind == IRON_STEP_WHILE || s->kind == IRON_STEP_IF ||
      s->kind == IRON_STEP_CASE) {
    s->num_blocks = op->num_regions;
    s->blocks = iron_arena_alloc_array(&plan->arena, op->num_regions,
                                       sizeof(iron_plan_block_t));
    if (!s->blocks) return oom();
    for (uint32_t r = 0; r < op->num_regions; ++r)
      IRON_RETURN_IF_ERROR_PLAIN(
          plan_region_block(sc, op, r, func_name, &s->blocks[r]));
    char loc[256];
    if (s->kind == IRON_STEP_WHILE && !env_flag("IRON_NO_COUNTED_LOOPS"))
      analyze_counted_loop(op, s);
    if (s->kind == IRON_STEP_WHILE) {
      if (s->blocks[0].num_results != 1 ||
          s->blocks[0].num_args != op->num_operands ||
          s->blocks[1].num_args != op->num_operands ||
          s->blocks[1].num_results != op->num_results ||
          op->num_results != op->num_operands)
        return IRON_ERR(INVALID_ARGUMENT,
                        "stablehlo.while (%s): regions do not match the "
                        "operands",
                        loc_str(op, loc, sizeof(loc)));
    } else {
      for (uint32_t r = 0; r < s->num_blocks; ++r)
        if (s->blocks[r].num_results != op->num_results)
          return IRON_ERR(INVALID_ARGUMENT,
                          "%s (%s): branch %u returns %u values, expected %u",
                          op->name, loc_str(op, loc, sizeof(loc)), r,
                          s->blocks[r].num_results, op->num_results);
    }
    return IRON_OK;
  }

  // Kernel.
  iron_device_t *dev = scope_device(sc);
  const iron_kernel_t *k =
      custom_kernel ? custom_kernel : lookup_kernel_on(dev, op->kind);
  if (!k) {
    if (dev)
      return iron_ir_op_unimplemented(op, "on the %s device",
                                      dev->vtable->kind);
    return iron_ir_op_unimplemented(op, NULL);
  }
  s->kernel = k;
  iron_region_t **regions = NULL;
  if (op->num_regions) {
    regions = iron_arena_alloc_array(&plan->arena, op->num_regions,
                                     sizeof(*regions));
    if (!regions) return oom();
    for (uint32_t r = 0; r < op->num_regions; ++r)
      IRON_RETURN_IF_ERROR_PLAIN(
          plan_host_region(sc, op, r, func_name, &regions[r]));
  }
  void *params = NULL;
  iron_status_t st = IRON_OK;
  if (k->prepare_on)
    st = k->prepare_on(dev, op, regions, &params);
  else if (k->prepare)
    st = k->prepare(op, regions, &params);
  if (st) {
    if (iron_status_code(st) == IRON_STATUS_UNIMPLEMENTED) return st;
    char loc[256];
    return iron_status_annotate(st, "preparing %s (%s)", op->name,
                                loc_str(op, loc, sizeof(loc)));
  }
  if (params) IRON_RETURN_IF_ERROR_PLAIN(own(plan, k, params, NULL));
  s->params = params;
  return IRON_OK;
}

static uint32_t *arena_u32(iron_plan_t *plan, uint32_t n) {
  return iron_arena_alloc_array(&plan->arena, n ? n : 1, sizeof(uint32_t));
}

static iron_status_t plan_block(scope_t *sc, const iron_ir_block_t *blk,
                                const char *func_name,
                                iron_plan_block_t *out) {
  func_ctx_t *fc = sc->fc;
  iron_plan_t *plan = fc->plan;
  memset(out, 0, sizeof(*out));
  uint32_t nops = blk->num_ops;
  const iron_ir_op_t *term = NULL;
  if (nops && is_terminator(blk->ops[nops - 1]->kind)) {
    term = blk->ops[nops - 1];
    nops--;
  }
  for (uint32_t i = 0; i < nops; ++i) {
    if (is_terminator(blk->ops[i]->kind))
      return IRON_ERR(INVALID_ARGUMENT, "%s in the middle of a block",
                      blk->ops[i]->name);
  }
  // 1. Liveness at this level. Index nops stands for the terminator.
  uint32_t stamp = ++fc->next_stamp;
  for (uint32_t i = 0; i < nops; ++i) mark_uses(fc, blk->ops[i], i, stamp);
  if (term) mark_uses(fc, term, nops, stamp);
  // dies_at[i]: count of values defined here whose last use is op i (or that
  // op i defines and nobody uses); index nops: at exit.
  // Build free lists as value ids first: every value defined in this block
  // is either unused (free at its definition / at entry) or dies at
  // last_use.
  uint32_t *nfree = calloc(nops + 1, sizeof(uint32_t));
  if (!nfree) return oom();
  uint32_t entry_n = 0;
#define DEATH_OF(id, def_index) \
  (fc->stamp[id] == stamp ? fc->last_use[id] : (def_index))
  for (uint32_t a = 0; a < blk->num_args; ++a) {
    uint32_t id = blk->args[a].id;
    if (id >= fc->num_values) continue;
    if (fc->stamp[id] == stamp)
      nfree[fc->last_use[id]]++;
    else
      entry_n++;
  }
  for (uint32_t i = 0; i < nops; ++i)
    for (uint32_t r = 0; r < blk->ops[i]->num_results; ++r) {
      uint32_t id = blk->ops[i]->results[r].id;
      if (id < fc->num_values) nfree[DEATH_OF(id, i)]++;
    }
  // Allocate lists.
  out->num_steps = nops;
  out->steps = iron_arena_alloc_array(&plan->arena, nops ? nops : 1,
                                      sizeof(iron_plan_step_t));
  uint32_t **lists = calloc(nops + 1, sizeof(uint32_t *));
  uint32_t *fill = calloc(nops + 1, sizeof(uint32_t));
  iron_status_t st = IRON_OK;
  if (!out->steps || !lists || !fill) {
    st = oom();
    goto done;
  }
  for (uint32_t i = 0; i <= nops; ++i) {
    lists[i] = arena_u32(plan, nfree[i]);
    if (!lists[i]) {
      st = oom();
      goto done;
    }
  }
  out->entry_frees = arena_u32(plan, entry_n);
  out->args = arena_u32(plan, blk->num_args);
  if (!out->entry_frees || !out->args) {
    st = oom();
    goto done;
  }
  // 2. Slots and steps.
  out->num_args = blk->num_args;
  uint32_t *args = (uint32_t *)out->args;
  uint32_t *entry = (uint32_t *)out->entry_frees;
  for (uint32_t a = 0; a < blk->num_args; ++a) {
    uint32_t slot;
    st = define(sc, &blk->args[a], &slot);
    if (st) goto done;
    args[a] = slot;
    uint32_t id = blk->args[a].id;
    if (fc->stamp[id] == stamp) {
      uint32_t d = fc->last_use[id];
      lists[d][fill[d]++] = slot;
    } else {
      entry[out->num_entry_frees++] = slot;
    }
  }
  for (uint32_t i = 0; i < nops; ++i) {
    const iron_ir_op_t *op = blk->ops[i];
    iron_plan_step_t *s = &out->steps[i];
    s->op = op;
    s->func_name = func_name;
    s->num_inputs = op->num_operands;
    s->num_outputs = op->num_results;
    uint32_t *in = arena_u32(plan, op->num_operands);
    uint32_t *outs = arena_u32(plan, op->num_results);
    iron_tensor_t *types = iron_arena_alloc_array(
        &plan->arena, op->num_results ? op->num_results : 1,
        sizeof(iron_tensor_t));
    if (!in || !outs || !types) {
      st = oom();
      goto done;
    }
    for (uint32_t k = 0; k < op->num_operands; ++k) {
      st = use(sc, op, op->operands[k], &in[k]);
      if (st) goto done;
    }
    for (uint32_t r = 0; r < op->num_results; ++r) {
      st = type_to_tensor(op, op->results[r].type, &types[r]);
      if (st) goto done;
    }
    s->inputs = in;
    s->out_types = types;
    st = plan_op(sc, op, func_name, s);
    if (st) goto done;
    // Results are defined after the op's regions were planned (regions
    // cannot see them).
    for (uint32_t r = 0; r < op->num_results; ++r) {
      st = define(sc, &op->results[r], &outs[r]);
      if (st) goto done;
      uint32_t id = op->results[r].id;
      uint32_t d = DEATH_OF(id, i);
      lists[d][fill[d]++] = outs[r];
    }
    s->outputs = outs;
  }
  // Free lists, now that every slot is known. A value dying at step i is
  // defined at or before i, so its slot was filled above.
  for (uint32_t i = 0; i < nops; ++i) {
    iron_plan_step_t *s = &out->steps[i];
    s->frees = lists[i];
    s->num_frees = fill[i];
    if (s->kind == IRON_STEP_KERNEL && s->kernel->inplace_ok &&
        !env_flag("IRON_NO_INPLACE")) {
      int32_t *ip = iron_arena_alloc_array(&plan->arena, s->num_outputs + 1,
                                           sizeof(int32_t));
      if (!ip) {
        st = oom();
        goto done;
      }
      for (uint32_t o = 0; o < s->num_outputs; ++o) {
        ip[o] = -1;
        // dynamic_update_slice and scatter write into their operands:
        // result o may take operand o only. An update, index or other
        // operand of the same byte size is still to be read when the
        // operand is copied into the result (a CUDA scatter whose result
        // took its updates' storage combined the operand with itself).
        bool own = s->op->kind == IRON_OP_DYNAMIC_UPDATE_SLICE ||
                   s->op->kind == IRON_OP_SCATTER;
        uint32_t k0 = own ? o : 0;
        uint32_t nk = own ? (o < s->num_inputs ? o + 1 : o) : s->num_inputs;
        for (uint32_t k = k0; k < nk && ip[o] < 0; ++k) {
          bool dies = false, taken = false;
          for (uint32_t f = 0; f < s->num_frees; ++f)
            if (s->frees[f] == s->inputs[k]) dies = true;
          for (uint32_t p = 0; p < o; ++p)
            if (ip[p] >= 0 && s->inputs[ip[p]] == s->inputs[k]) taken = true;
          if (!dies || taken) continue;
          iron_tensor_t in;
          // An operand type with no tensor form cannot take the result.
          iron_status_t tst = type_to_tensor(NULL, s->op->operands[k]->type, &in);
          if (tst) {
            iron_status_free(tst);
            continue;
          }
          if (in.nbytes == s->out_types[o].nbytes) ip[o] = (int32_t)k;
        }
      }
      s->inplace = ip;
    } else if (s->kind == IRON_STEP_KERNEL &&
               s->op->kind == IRON_OP_FUSION && !env_flag("IRON_NO_INPLACE")) {
      st = fusion_dus_inplace(plan, s);
      if (st) goto done;
    } else if (s->kind == IRON_STEP_WHILE) {
      st = while_carry_moves(plan, s);
      if (st) goto done;
    }
  }
  out->exit_frees = lists[nops];
  out->num_exit_frees = fill[nops];
  if (term) {
    uint32_t *res = arena_u32(plan, term->num_operands);
    if (!res) {
      st = oom();
      goto done;
    }
    for (uint32_t k = 0; k < term->num_operands; ++k) {
      st = use(sc, term, term->operands[k], &res[k]);
      if (st) goto done;
    }
    out->results = res;
    out->num_results = term->num_operands;
  }
#undef DEATH_OF
done:
  free(nfree);
  free(lists);
  free(fill);
  return st;
}

static iron_status_t plan_func(iron_plan_t *plan, uint32_t index,
                               const iron_ir_op_t *caller) {
  iron_plan_func_t *pf = &plan->funcs[index];
  const iron_ir_func_t *f = &plan->module->funcs[index];
  if (pf->state == 2) return IRON_OK;
  if (pf->state == 1)
    return IRON_ERR(UNIMPLEMENTED, "recursive call of @%s", f->name);
  pf->state = 1;
  pf->ir = f;
  func_ctx_t fc = {plan, f, f->num_values, NULL, NULL, 0};
  uint32_t n = f->num_values + 1;
  fc.last_use = calloc(n, sizeof(uint32_t));
  fc.stamp = calloc(n, sizeof(uint32_t));
  uint32_t *map = malloc(n * sizeof(uint32_t));
  iron_status_t st = IRON_OK;
  if (!fc.last_use || !fc.stamp || !map) {
    st = oom();
  } else if (f->body.num_blocks != 1) {
    st = IRON_ERR(UNIMPLEMENTED, "function with %u blocks",
                  f->body.num_blocks);
  } else {
    memset(map, 0xff, n * sizeof(uint32_t));
    scope_t sc = {&fc, map, 0, false, NULL, 0, 0, NULL};
    st = plan_block(&sc, &f->body.blocks[0], f->name, &pf->body);
    pf->num_slots = sc.num_slots;
    if (!st && pf->body.num_results != iron_ir_func_num_results(f))
      st = IRON_ERR(INVALID_ARGUMENT,
                    "function returns %u values, its type says %u",
                    pf->body.num_results, iron_ir_func_num_results(f));
  }
  free(fc.last_use);
  free(fc.stamp);
  free(map);
  if (st) {
    // Ops inside called functions often carry only a name location; the
    // call site has the user's file:line.
    if (caller && caller->loc.file) {
      char loc[256];
      return iron_status_annotate(st, "in function %s (called at %s)",
                                  f->name, loc_str(caller, loc, sizeof(loc)));
    }
    return iron_status_annotate(st, "in function %s", f->name);
  }
  pf->state = 2;
  return IRON_OK;
}

iron_status_t iron_plan_create(const iron_ir_module_t *module,
                               iron_plan_t **out_plan) {
  return iron_plan_create_on(module, NULL, out_plan);
}

iron_status_t iron_plan_create_on(const iron_ir_module_t *module,
                                  iron_device_t *dev, iron_plan_t **out_plan) {
  const iron_ir_func_t *main_fn = iron_ir_module_main(module);
  if (!main_fn)
    return IRON_ERR(INVALID_ARGUMENT,
                    "module has no main function (public \"main\" or a "
                    "single public function)");
  iron_plan_t *plan = calloc(1, sizeof(*plan));
  if (!plan) return oom();
  iron_arena_init(&plan->arena);
  plan->module = module;
  plan->dev = dev && (dev->vtable->kernel_lookup || dev->vtable->mem_alloc)
                  ? dev
                  : NULL;
  plan->memory_dev = dev && !dev->vtable->mem_alloc ? dev : NULL;
  plan->funcs = iron_arena_alloc_array(&plan->arena, module->num_funcs + 1,
                                       sizeof(iron_plan_func_t));
  if (!plan->funcs) {
    iron_plan_destroy(plan);
    return oom();
  }
  uint32_t main_index = (uint32_t)(main_fn - module->funcs);
  iron_status_t st = plan_func(plan, main_index, NULL);
  // Devices that generate code compile the plan's kernels in one batch.
  if (!st && plan->dev && plan->dev->vtable->plan_finish)
    st = plan->dev->vtable->plan_finish(plan->dev);
  if (st) {
    iron_plan_destroy(plan);
    return st;
  }
  plan->main = &plan->funcs[main_index];
  *out_plan = plan;
  return IRON_OK;
}

void iron_plan_destroy(iron_plan_t *plan) {
  if (!plan) return;
  iron_plan_owned_t *o = plan->owned;
  while (o) {
    iron_plan_owned_t *next = o->next;
    if (o->kernel && o->params) {
      if (o->kernel->destroy)
        o->kernel->destroy(o->params);
      else
        free(o->params);
    }
    iron_storage_release(o->storage);
    free(o);
    o = next;
  }
  iron_arena_deinit(&plan->arena);
  free(plan);
}
