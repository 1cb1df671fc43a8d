// Call inlining; see inline.h for the contract.
#include "compiler/inline.h"

#include <stdlib.h>
#include <string.h>

enum { kMaxDepth = 8 };

typedef struct {
  iron_ir_module_t *m;
  iron_ir_func_t *f;  // the function being rewritten
  uint32_t max_ops;
  int inlined;
  bool oom;
  // The call being inlined: its source position goes to the inlined ops
  // that have none of their own (jax wraps jnp functions in private
  // functions whose ops carry only a name, e.g. "sort"), so that errors
  // name the user's line.
  const iron_ir_loc_t *site;
} inl_ctx_t;

// Ops in `b` and every region nested in it.
static uint32_t count_ops(const iron_ir_block_t *b) {
  uint32_t n = b->num_ops;
  for (uint32_t i = 0; i < b->num_ops; ++i) {
    const iron_ir_op_t *op = b->ops[i];
    for (uint32_t r = 0; r < op->num_regions; ++r)
      for (uint32_t k = 0; k < op->regions[r].num_blocks; ++k)
        n += count_ops(&op->regions[r].blocks[k]);
  }
  return n;
}

// The private function `call` calls when it may be inlined into `caller`.
static iron_ir_func_t *inlinable_callee(const inl_ctx_t *c,
                                        const iron_ir_op_t *call) {
  if (call->kind != IRON_OP_FUNC_CALL) return NULL;
  const char *name = iron_ir_op_string(call, "callee");
  if (!name) return NULL;
  if (name[0] == '@') name++;
  for (uint32_t i = 0; i < c->m->num_funcs; ++i) {
    iron_ir_func_t *g = &c->m->funcs[i];
    if (!g->name || strcmp(g->name, name) != 0) continue;
    if (g == c->f || g->is_public || g->body.num_blocks != 1) return NULL;
    const iron_ir_block_t *b = &g->body.blocks[0];
    if (b->num_args != call->num_operands || b->num_ops == 0) return NULL;
    const iron_ir_op_t *ret = b->ops[b->num_ops - 1];
    if ((ret->kind != IRON_OP_FUNC_RETURN && ret->kind != IRON_OP_RETURN) ||
        ret->num_operands != call->num_results)
      return NULL;
    // A call whose types differ from the callee's stays a call (the planner
    // refuses it, naming both).
    for (uint32_t k = 0; k < call->num_operands; ++k)
      if (!iron_ir_type_equal(call->operands[k]->type, b->args[k].type))
        return NULL;
    for (uint32_t k = 0; k < call->num_results; ++k)
      if (!iron_ir_type_equal(call->results[k].type, ret->operands[k]->type))
        return NULL;
    return count_ops(b) <= c->max_ops ? g : NULL;
  }
  return NULL;
}

// map[id] for callee values (ids < nmap).
typedef struct {
  iron_ir_value_t **map;
  uint32_t nmap;
} vmap_t;

static iron_ir_value_t *mapped(const vmap_t *vm, iron_ir_value_t *v) {
  if (v && v->id < vm->nmap && vm->map[v->id]) return vm->map[v->id];
  return v;  // defined outside the callee (not produced by the reader)
}

static iron_ir_op_t *clone_op(inl_ctx_t *c, const iron_ir_op_t *src,
                              iron_ir_block_t *parent, vmap_t *vm);

static bool clone_block(inl_ctx_t *c, const iron_ir_block_t *src,
                        iron_ir_block_t *dst, iron_ir_region_t *parent,
                        vmap_t *vm) {
  iron_arena_t *a = &c->m->arena;
  memset(dst, 0, sizeof(*dst));
  dst->parent = parent;
  dst->num_args = src->num_args;
  dst->args =
      iron_arena_alloc_array(a, src->num_args + 1, sizeof(iron_ir_value_t));
  dst->ops =
      iron_arena_alloc_array(a, src->num_ops + 1, sizeof(iron_ir_op_t *));
  if (!dst->args || !dst->ops) return false;
  for (uint32_t i = 0; i < src->num_args; ++i) {
    iron_ir_value_t *v = &dst->args[i];
    *v = src->args[i];
    v->def_op = NULL;
    v->def_block = dst;
    v->id = c->f->num_values++;
    if (src->args[i].id < vm->nmap) vm->map[src->args[i].id] = v;
  }
  dst->num_ops = src->num_ops;
  for (uint32_t i = 0; i < src->num_ops; ++i) {
    dst->ops[i] = clone_op(c, src->ops[i], dst, vm);
    if (!dst->ops[i]) return false;
  }
  return true;
}

static iron_ir_op_t *clone_op(inl_ctx_t *c, const iron_ir_op_t *src,
                              iron_ir_block_t *parent, vmap_t *vm) {
  iron_arena_t *a = &c->m->arena;
  iron_ir_op_t *op = iron_arena_alloc(a, sizeof(*op));
  if (!op) return NULL;
  *op = *src;
  op->parent = parent;
  if (!op->loc.file && c->site && c->site->file) {
    op->loc.file = c->site->file;
    op->loc.line = c->site->line;
    op->loc.col = c->site->col;
  }
  op->operands = iron_arena_alloc_array(a, src->num_operands + 1,
                                        sizeof(iron_ir_value_t *));
  op->results =
      iron_arena_alloc_array(a, src->num_results + 1, sizeof(iron_ir_value_t));
  op->regions =
      iron_arena_alloc_array(a, src->num_regions + 1, sizeof(iron_ir_region_t));
  if (!op->operands || !op->results || !op->regions) return NULL;
  for (uint32_t i = 0; i < src->num_operands; ++i)
    op->operands[i] = mapped(vm, src->operands[i]);
  for (uint32_t i = 0; i < src->num_results; ++i) {
    iron_ir_value_t *v = &op->results[i];
    *v = src->results[i];
    v->def_op = op;
    v->def_block = NULL;
    v->id = c->f->num_values++;
    if (src->results[i].id < vm->nmap) vm->map[src->results[i].id] = v;
  }
  for (uint32_t r = 0; r < src->num_regions; ++r) {
    const iron_ir_region_t *sr = &src->regions[r];
    iron_ir_region_t *dr = &op->regions[r];
    dr->parent = op;
    dr->num_blocks = sr->num_blocks;
    dr->blocks =
        iron_arena_alloc_array(a, sr->num_blocks + 1, sizeof(iron_ir_block_t));
    if (!dr->blocks) return NULL;
    for (uint32_t k = 0; k < sr->num_blocks; ++k)
      if (!clone_block(c, &sr->blocks[k], &dr->blocks[k], dr, vm)) return NULL;
  }
  return op;
}

// Inlines the calls in `b` and in the regions nested in it; the call
// results' replacements go to remap[] (caller ids < nremap).
static void inline_block(inl_ctx_t *c, iron_ir_block_t *b,
                         iron_ir_value_t **remap, uint32_t nremap) {
  uint32_t n = b->num_ops, extra = 0;
  iron_ir_func_t **callee = calloc(n + 1, sizeof(*callee));
  if (!callee) {
    c->oom = true;
    return;
  }
  for (uint32_t i = 0; i < n; ++i) {
    iron_ir_op_t *op = b->ops[i];
    for (uint32_t r = 0; r < op->num_regions; ++r)
      for (uint32_t k = 0; k < op->regions[r].num_blocks; ++k)
        inline_block(c, &op->regions[r].blocks[k], remap, nremap);
    callee[i] = inlinable_callee(c, op);
    if (callee[i]) extra += callee[i]->body.blocks[0].num_ops;
  }
  if (extra == 0 || c->oom) {
    free(callee);
    return;
  }
  iron_ir_op_t **ops =
      iron_arena_alloc_array(&c->m->arena, n + extra + 1, sizeof(*ops));
  if (!ops) {
    c->oom = true;
    free(callee);
    return;
  }
  uint32_t no = 0;
  for (uint32_t i = 0; i < n && !c->oom; ++i) {
    iron_ir_op_t *call = b->ops[i];
    if (!callee[i]) {
      ops[no++] = call;
      continue;
    }
    const iron_ir_block_t *cb = &callee[i]->body.blocks[0];
    vmap_t vm = {calloc(callee[i]->num_values + 1, sizeof(iron_ir_value_t *)),
                 callee[i]->num_values};
    if (!vm.map) {
      c->oom = true;
      break;
    }
    for (uint32_t k = 0; k < cb->num_args; ++k)
      if (cb->args[k].id < vm.nmap) vm.map[cb->args[k].id] = call->operands[k];
    c->site = &call->loc;
    for (uint32_t k = 0; k + 1 < cb->num_ops && !c->oom; ++k) {
      iron_ir_op_t *op = clone_op(c, cb->ops[k], b, &vm);
      if (!op) c->oom = true;
      ops[no++] = op;
    }
    c->site = NULL;
    const iron_ir_op_t *ret = cb->ops[cb->num_ops - 1];
    for (uint32_t r = 0; r < call->num_results && !c->oom; ++r)
      if (call->results[r].id < nremap)
        remap[call->results[r].id] = mapped(&vm, ret->operands[r]);
    free(vm.map);
    c->inlined++;
  }
  free(callee);
  if (c->oom) return;
  b->ops = ops;
  b->num_ops = no;
}

// The value v stands for after inlining: remaps chain (a call result
// stands for its callee's returned value, which may be an earlier call's
// result: a value passed through 65 inlined calls is 65 hops, a
// lax_control_flow_test scan of 75), so they are followed to their end
// and the chain is shortened to one hop on the way back. A chain is
// acyclic (a result maps to a value defined before it); the bound only
// guards a corrupted one.
static iron_ir_value_t *resolve(iron_ir_value_t *v, iron_ir_value_t **remap,
                                uint32_t nremap) {
  iron_ir_value_t *end = v;
  for (uint32_t hops = 0;
       end && end->id < nremap && remap[end->id] && hops <= nremap; ++hops)
    end = remap[end->id];
  while (v && v != end && v->id < nremap && remap[v->id]) {
    iron_ir_value_t *next = remap[v->id];
    remap[v->id] = end;
    v = next;
  }
  return end;
}

static void apply_remap(iron_ir_block_t *b, iron_ir_value_t **remap,
                        uint32_t nremap) {
  for (uint32_t i = 0; i < b->num_ops; ++i) {
    iron_ir_op_t *op = b->ops[i];
    for (uint32_t k = 0; k < op->num_operands; ++k)
      op->operands[k] = resolve(op->operands[k], remap, nremap);
    for (uint32_t r = 0; r < op->num_regions; ++r)
      for (uint32_t k = 0; k < op->regions[r].num_blocks; ++k)
        apply_remap(&op->regions[r].blocks[k], remap, nremap);
  }
}

iron_status_t iron_compiler_inline_calls(iron_ir_module_t *module,
                                         uint32_t max_ops,
                                         int *out_num_inlined) {
  inl_ctx_t c = {.m = module, .max_ops = max_ops};
  for (uint32_t fi = 0; fi < module->num_funcs; ++fi) {
    c.f = &module->funcs[fi];
    for (int depth = 0; depth < kMaxDepth; ++depth) {
      uint32_t nremap = c.f->num_values;
      iron_ir_value_t **remap = calloc(nremap + 1, sizeof(*remap));
      if (!remap) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (inline)");
      int before = c.inlined;
      for (uint32_t k = 0; k < c.f->body.num_blocks; ++k)
        inline_block(&c, &c.f->body.blocks[k], remap, nremap);
      if (!c.oom)
        for (uint32_t k = 0; k < c.f->body.num_blocks; ++k)
          apply_remap(&c.f->body.blocks[k], remap, nremap);
      free(remap);
      if (c.oom)
        return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory while inlining");
      if (c.inlined == before) break;
    }
  }
  if (out_num_inlined) *out_num_inlined = c.inlined;
  return IRON_OK;
}

iron_status_t iron_compiler_inline_for_compile(iron_ir_module_t *module,
                                               bool fusing) {
  const char *e = getenv("IRON_INLINE_CALLS");
  bool all = e && strcmp(e, "all") == 0;
  if (!all && (!fusing || (e && e[0] == '0'))) return IRON_OK;
  return iron_compiler_inline_calls(module, IRON_INLINE_MAX_OPS, NULL);
}
