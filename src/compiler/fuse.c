// Element-wise fusion; see fuse.h for the contract.
#include "compiler/fuse.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  const iron_ir_type_t *shape;  // result type of the members
  int32_t parent;               // union-find: merged into this group
  bool closed;                  // a value was used outside: cannot grow
  uint32_t size, non_broadcast;
  uint32_t reduces;  // a reduce ends the group (at most one)
  uint32_t dus;      // dynamic_update_slice roots
  // Transposes of member values (pivots): members before them have the
  // pivots' operand shape, members after the result's (the group's shape).
  // All pivots of a group transpose one operand shape by one permutation.
  uint32_t pivots;
  const iron_ir_op_t *pivot;  // one of them (shape and permutation)
  uint32_t last;     // index (in the block) of the last member
  // Bound on the fusion's operands plus results: per member, its results
  // and its operands from outside the group when it joined.
  uint32_t io;
  // Uses of the members' results (anywhere in the function), and how many
  // of them are by members.
  uint32_t uses, inner;
} group_t;

typedef struct {
  iron_ir_module_t *m;
  iron_ir_func_t *f;
  iron_fuse_predicate_t can_fuse;
  iron_fuse_predicate_t can_pivot;  // may be NULL
  int fusions;
} fuse_ctx_t;

static iron_status_t oom(void) {
  return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory while fusing");
}

static int32_t find(group_t *g, int32_t i) {
  while (g[i].parent != i) i = g[i].parent = g[g[i].parent].parent;
  return i;
}

// Whether a group whose bound is `io` can take `more` operands and results
// (IRON_FUSE_MAX_OPERANDS).
static bool io_fits(uint32_t io, uint32_t more) {
  return io + more <= IRON_FUSE_MAX_OPERANDS;
}

// Merges group h into g.
static void merge_into(group_t *groups, int32_t g, int32_t h) {
  groups[h].parent = g;
  groups[g].size += groups[h].size;
  groups[g].non_broadcast += groups[h].non_broadcast;
  groups[g].reduces += groups[h].reduces;
  groups[g].dus += groups[h].dus;
  groups[g].pivots += groups[h].pivots;
  if (!groups[g].pivot) groups[g].pivot = groups[h].pivot;
  groups[g].io += groups[h].io;
  groups[g].uses += groups[h].uses;
  groups[g].inner += groups[h].inner;
}

bool iron_fuse_enters_regions(const iron_ir_op_t *op,
                              iron_fuse_predicate_t can_fuse) {
  return (op->kind == IRON_OP_WHILE || op->kind == IRON_OP_IF ||
          op->kind == IRON_OP_CASE) &&
         !can_fuse(op);
}

iron_status_t iron_fuse_walk_blocks(iron_ir_block_t *blk,
                                    iron_fuse_predicate_t can_fuse,
                                    iron_fuse_block_fn_t fn, void *arg) {
  for (uint32_t i = 0; i < blk->num_ops; ++i) {
    iron_ir_op_t *op = blk->ops[i];
    if (!iron_fuse_enters_regions(op, can_fuse)) continue;
    for (uint32_t r = 0; r < op->num_regions; ++r)
      for (uint32_t b = 0; b < op->regions[r].num_blocks; ++b)
        IRON_RETURN_IF_ERROR_PLAIN(iron_fuse_walk_blocks(
            &op->regions[r].blocks[b], can_fuse, fn, arg));
  }
  return fn(arg, blk);
}

// Calls `fn` on every operand of `op` and of the ops nested in its regions
// (a use inside a region counts as a use by `op`), except inside fusions.
typedef void (*operand_fn_t)(iron_ir_value_t **slot, void *arg);
static void each_operand(iron_ir_op_t *op, operand_fn_t fn, void *arg) {
  for (uint32_t i = 0; i < op->num_operands; ++i) fn(&op->operands[i], arg);
  if (op->kind == IRON_OP_FUSION) return;
  for (uint32_t r = 0; r < op->num_regions; ++r)
    for (uint32_t b = 0; b < op->regions[r].num_blocks; ++b) {
      iron_ir_block_t *blk = &op->regions[r].blocks[b];
      for (uint32_t k = 0; k < blk->num_ops; ++k)
        each_operand(blk->ops[k], fn, arg);
    }
}

typedef struct {
  const int32_t *val_group;  // by value id (-1: none), ids < num_ids
  uint32_t num_ids;
  group_t *groups;
  int32_t self;  // group of the op being visited (-1: none)
  bool *escapes;  // by value id
  const uint32_t *uses;  // by value id: operand slots that name it
} use_ctx_t;

typedef struct {
  uint32_t *uses;
  uint32_t num_ids;
} count_ctx_t;

static void count_use(iron_ir_value_t **slot, void *arg) {
  count_ctx_t *cc = arg;
  if (*slot && (*slot)->id < cc->num_ids) cc->uses[(*slot)->id]++;
}

static void count_uses(iron_ir_block_t *blk, count_ctx_t *cc) {
  for (uint32_t k = 0; k < blk->num_ops; ++k)
    each_operand(blk->ops[k], count_use, cc);
}

static int32_t group_of(const use_ctx_t *u, const iron_ir_value_t *v) {
  if (!v || v->id >= u->num_ids || u->val_group[v->id] < 0) return -1;
  return find(u->groups, u->val_group[v->id]);
}

static void close_used(iron_ir_value_t **slot, void *arg) {
  use_ctx_t *u = arg;
  int32_t g = group_of(u, *slot);
  if (g >= 0 && g != u->self) u->groups[g].closed = true;
}

static void mark_escape(iron_ir_value_t **slot, void *arg) {
  use_ctx_t *u = arg;
  int32_t g = group_of(u, *slot);
  if (g >= 0 && g != u->self) u->escapes[(*slot)->id] = true;
}

typedef struct {
  iron_ir_value_t **remap;  // by value id
  uint32_t num_ids;
} remap_ctx_t;

static void apply_remap(iron_ir_value_t **slot, void *arg) {
  remap_ctx_t *r = arg;
  if (*slot && (*slot)->id < r->num_ids && r->remap[(*slot)->id])
    *slot = r->remap[(*slot)->id];
}


// Builds the fusion op for group `g` (members: ops with op_group == g).
static iron_status_t make_fusion(fuse_ctx_t *c, iron_ir_block_t *blk,
                                 const int32_t *op_group, int32_t g,
                                 const use_ctx_t *u, iron_ir_value_t **remap,
                                 iron_ir_op_t **out_op) {
  iron_arena_t *a = &c->m->arena;
  uint32_t nmem = 0, nin = 0, nout = 0, max_out = 0;
  for (uint32_t i = 0; i < blk->num_ops; ++i)
    if (op_group[i] == g) {
      nmem++;
      max_out += blk->ops[i]->num_results;
    }
  // Upper bounds for inputs/outputs.
  uint32_t max_in = 0;
  for (uint32_t i = 0; i < blk->num_ops; ++i)
    if (op_group[i] == g) max_in += blk->ops[i]->num_operands;
  iron_ir_value_t **ins = calloc(max_in + 1, sizeof(*ins));
  iron_ir_value_t **outs = calloc(max_out + 1, sizeof(*outs));
  if (!ins || !outs) {
    free(ins);
    free(outs);
    return oom();
  }
  iron_ir_op_t *last = NULL;
  for (uint32_t i = 0; i < blk->num_ops; ++i) {
    if (op_group[i] != g) continue;
    iron_ir_op_t *op = blk->ops[i];
    last = op;
    for (uint32_t k = 0; k < op->num_operands; ++k) {
      iron_ir_value_t *v = op->operands[k];
      if (group_of(u, v) == g) continue;
      bool seen = false;
      for (uint32_t j = 0; j < nin && !seen; ++j) seen = ins[j] == v;
      if (!seen) ins[nin++] = v;
    }
    // A reduce's (or dynamic_update_slice root's) kernel writes all its
    // results: each is an output.
    for (uint32_t r = 0; r < op->num_results; ++r)
      if (op->kind == IRON_OP_REDUCE ||
          op->kind == IRON_OP_DYNAMIC_UPDATE_SLICE ||
          (op->results[r].id < u->num_ids && u->escapes[op->results[r].id]))
        outs[nout++] = &op->results[r];
  }
  iron_ir_op_t *fop = iron_arena_alloc(a, sizeof(*fop));
  iron_ir_value_t **operands =
      iron_arena_alloc_array(a, nin + 1, sizeof(iron_ir_value_t *));
  iron_ir_value_t *results =
      iron_arena_alloc_array(a, nout + 1, sizeof(iron_ir_value_t));
  iron_ir_region_t *region = iron_arena_alloc(a, sizeof(*region));
  iron_ir_block_t *body = iron_arena_alloc(a, sizeof(*body));
  iron_ir_value_t *args =
      iron_arena_alloc_array(a, nin + 1, sizeof(iron_ir_value_t));
  iron_ir_op_t **body_ops =
      iron_arena_alloc_array(a, nmem + 2, sizeof(iron_ir_op_t *));
  iron_ir_op_t *ret = iron_arena_alloc(a, sizeof(*ret));
  iron_ir_value_t **ret_operands =
      iron_arena_alloc_array(a, nout + 1, sizeof(iron_ir_value_t *));
  if (!fop || !operands || !results || !region || !body || !args ||
      !body_ops || !ret || !ret_operands) {
    free(ins);
    free(outs);
    return oom();
  }
  memset(fop, 0, sizeof(*fop));
  memset(region, 0, sizeof(*region));
  memset(body, 0, sizeof(*body));
  memset(ret, 0, sizeof(*ret));
  fop->kind = IRON_OP_FUSION;
  fop->name = iron_op_kind_name(IRON_OP_FUSION);
  fop->loc = last->loc;  // errors point at the group's last op
  fop->parent = blk;
  fop->num_operands = nin;
  fop->operands = operands;
  fop->num_results = nout;
  fop->results = results;
  fop->num_regions = 1;
  fop->regions = region;
  region->num_blocks = 1;
  region->blocks = body;
  region->parent = fop;
  body->parent = region;
  body->num_args = nin;
  body->args = args;
  // Block arguments stand for the inputs inside the region.
  iron_ir_value_t **local = calloc(u->num_ids + 1, sizeof(*local));
  if (!local) {
    free(ins);
    free(outs);
    return oom();
  }
  for (uint32_t j = 0; j < nin; ++j) {
    operands[j] = ins[j];
    memset(&args[j], 0, sizeof(args[j]));
    args[j].type = ins[j]->type;
    args[j].def_block = body;
    args[j].index = j;
    args[j].id = c->f->num_values++;
    if (ins[j]->id < u->num_ids) local[ins[j]->id] = &args[j];
  }
  uint32_t nb = 0;
  for (uint32_t i = 0; i < blk->num_ops; ++i) {
    if (op_group[i] != g) continue;
    iron_ir_op_t *op = blk->ops[i];
    for (uint32_t k = 0; k < op->num_operands; ++k) {
      iron_ir_value_t *v = op->operands[k];
      if (group_of(u, v) != g && v->id < u->num_ids && local[v->id])
        op->operands[k] = local[v->id];
    }
    op->parent = body;
    body_ops[nb++] = op;
  }
  free(local);
  for (uint32_t j = 0; j < nout; ++j) {
    memset(&results[j], 0, sizeof(results[j]));
    results[j].type = outs[j]->type;
    results[j].def_op = fop;
    results[j].index = j;
    results[j].id = c->f->num_values++;
    remap[outs[j]->id] = &results[j];
    ret_operands[j] = outs[j];
  }
  ret->kind = IRON_OP_RETURN;
  ret->name = iron_op_kind_name(IRON_OP_RETURN);
  ret->loc = last->loc;
  ret->parent = body;
  ret->num_operands = nout;
  ret->operands = ret_operands;
  ret->results = iron_arena_alloc(a, sizeof(iron_ir_value_t));
  ret->regions = iron_arena_alloc(a, sizeof(iron_ir_region_t));
  body_ops[nb++] = ret;
  body->num_ops = nb;
  body->ops = body_ops;
  free(ins);
  free(outs);
  c->fusions++;
  *out_op = fop;
  return IRON_OK;
}

static void walk_func_remap(iron_ir_block_t *blk, remap_ctx_t *r) {
  for (uint32_t k = 0; k < blk->num_ops; ++k)
    each_operand(blk->ops[k], apply_remap, r);
}

static void walk_escapes(iron_ir_block_t *blk, use_ctx_t *u,
                         const iron_ir_block_t *target,
                         const int32_t *op_group) {
  for (uint32_t k = 0; k < blk->num_ops; ++k) {
    u->self = (blk == target && op_group[k] >= 0)
                  ? find(u->groups, op_group[k])
                  : -1;
    // Only the op's own operands are uses by a member; nested ops never are.
    iron_ir_op_t *op = blk->ops[k];
    for (uint32_t i = 0; i < op->num_operands; ++i)
      mark_escape(&op->operands[i], u);
    u->self = -1;
    if (op->kind == IRON_OP_FUSION) continue;
    for (uint32_t r = 0; r < op->num_regions; ++r)
      for (uint32_t b = 0; b < op->regions[r].num_blocks; ++b)
        walk_escapes(&op->regions[r].blocks[b], u, target, op_group);
  }
}

// Takes a member out of its group (the group's counts are the caller's).
static void drop_member(const iron_ir_op_t *op, int32_t *op_group,
                        int32_t *val_group, uint32_t ids) {
  *op_group = -1;
  for (uint32_t r = 0; r < op->num_results; ++r)
    if (op->results[r].id < ids) val_group[op->results[r].id] = -1;
}

// The group a stablehlo.reduce joins as its last member, or -1: the device
// generates reduces with fused inputs, the reduced operands have one shape
// and at least one of them comes from an open group of that shape (several
// such groups merge), and no init value comes from that group.
static int32_t join_reduce(fuse_ctx_t *c, use_ctx_t *u,
                           const iron_ir_op_t *op) {
  if (op->num_operands == 0 || op->num_operands % 2 ||
      op->num_results != op->num_operands / 2 || !c->can_fuse(op) ||
      iron_ir_reduce_is_reshape(op))  // planned as a reshape
    return -1;
  uint32_t num = op->num_results;
  const iron_ir_type_t *shape = op->operands[0]->type;
  if (shape->kind != IRON_TYPE_TENSOR || !iron_ir_type_is_static(shape))
    return -1;
  int32_t feed[16];
  uint32_t nfeed = 0;
  for (uint32_t k = 0; k < num; ++k) {
    int32_t h = group_of(u, op->operands[k]);
    if (h < 0) continue;
    if (u->groups[h].closed || u->groups[h].dus || u->groups[h].pivots ||
        !iron_ir_type_same_dims(u->groups[h].shape, shape))
      return -1;
    bool seen = false;
    for (uint32_t j = 0; j < nfeed && !seen; ++j) seen = feed[j] == h;
    if (!seen && nfeed < 16) feed[nfeed++] = h;
  }
  if (nfeed == 0) return -1;
  for (uint32_t k = num; k < 2 * num; ++k) {
    int32_t h = group_of(u, op->operands[k]);
    for (uint32_t j = 0; j < nfeed; ++j)
      if (h == feed[j]) return -1;
  }
  uint32_t io = op->num_operands + op->num_results;
  for (uint32_t j = 0; j < nfeed; ++j) io += u->groups[feed[j]].io;
  if (!io_fits(io, 0)) return -1;
  int32_t g = feed[0];
  for (uint32_t j = 1; j < nfeed; ++j) merge_into(u->groups, g, feed[j]);
  return g;
}

// Accounts `op` joining group g: its results and its operands that no
// member of g defines add to the bound, its results' uses to the group's.
static void account_member(use_ctx_t *u, const iron_ir_op_t *op, int32_t g) {
  group_t *gr = &u->groups[g];
  gr->io += op->num_results;
  for (uint32_t k = 0; k < op->num_operands; ++k) {
    if (group_of(u, op->operands[k]) != g)
      gr->io++;
    else
      gr->inner++;
  }
  for (uint32_t r = 0; r < op->num_results; ++r)
    if (op->results[r].id < u->num_ids) gr->uses += u->uses[op->results[r].id];
}

enum { kMaxScalarFeed = 8 };

// Small groups of one element whose values only `op` reads (besides
// themselves) join op's group g: every thread of g's kernel computes them
// (start indices of jax's x[i] and dynamic_update_slice at i: `i < 0 ? i +
// n : i`), instead of a one-element kernel each. Only operands from `first`
// on (the start indices of loads and roots; any operand of other ops).
// IRON_FUSE_SCALARS=0 keeps them apart.
static bool fuse_scalars(void) {
  const char *e = getenv("IRON_FUSE_SCALARS");  // compile time only
  return !(e && strcmp(e, "0") == 0);
}

static void merge_scalar_feeds(use_ctx_t *u, const iron_ir_op_t *op,
                               uint32_t first, int32_t g) {
  if (!fuse_scalars()) return;
  for (uint32_t k = first; k < op->num_operands; ++k) {
    int32_t h = group_of(u, op->operands[k]);
    if (h < 0 || h == g) continue;
    group_t *hg = &u->groups[h];
    if (hg->closed || hg->reduces || hg->dus || hg->pivots ||
        hg->size > kMaxScalarFeed ||
        iron_ir_type_num_elements(hg->shape) != 1 ||
        !io_fits(u->groups[g].io + hg->io, op->num_operands + op->num_results))
      continue;
    uint32_t by_op = 0;
    for (uint32_t j = 0; j < op->num_operands; ++j)
      by_op += group_of(u, op->operands[j]) == h;
    if (hg->uses != hg->inner + by_op) continue;  // read elsewhere too
    merge_into(u->groups, g, h);
  }
}

// Whether a and b have the same dims once their size-1 dims are dropped.
static bool same_dims_but_units(const iron_ir_type_t *a,
                                const iron_ir_type_t *b) {
  if (a->kind != IRON_TYPE_TENSOR || b->kind != IRON_TYPE_TENSOR) return false;
  int32_t i = 0, j = 0;
  for (;;) {
    while (i < a->rank && a->dims[i] == 1) ++i;
    while (j < b->rank && b->dims[j] == 1) ++j;
    if (i == a->rank || j == b->rank) return i == a->rank && j == b->rank;
    if (a->dims[i++] != b->dims[j++]) return false;
  }
}

typedef struct {
  const iron_ir_value_t *v;
  const iron_ir_op_t *user;
  uint32_t n;
} user_ctx_t;

static void find_user(iron_ir_op_t *op, user_ctx_t *uc) {
  for (uint32_t i = 0; i < op->num_operands; ++i)
    if (op->operands[i] == uc->v) {
      uc->n++;
      uc->user = op;
    }
  for (uint32_t r = 0; r < op->num_regions; ++r)
    for (uint32_t b = 0; b < op->regions[r].num_blocks; ++b) {
      iron_ir_block_t *blk = &op->regions[r].blocks[b];
      for (uint32_t k = 0; k < blk->num_ops; ++k) find_user(blk->ops[k], uc);
    }
}

// The op of `blk` that uses v, when v has exactly one use there (nested
// regions count as uses by their op), else NULL.
static const iron_ir_op_t *single_user(const iron_ir_block_t *blk,
                                       const iron_ir_value_t *v) {
  user_ctx_t uc = {v, NULL, 0};
  for (uint32_t i = 0; i < blk->num_ops && uc.n < 2; ++i) {
    user_ctx_t one = {v, NULL, 0};
    find_user(blk->ops[i], &one);
    if (one.n) {
      uc.n += one.n;
      uc.user = blk->ops[i];
    }
  }
  return uc.n == 1 ? uc.user : NULL;
}

// A reshape (or a broadcast_in_dim that only adds size-1 dims) fed by the
// one member of an open group that is a slice, transpose, dynamic_slice or
// iota used nowhere else (jax's x[i] is dynamic_slice to [1, ...] then
// such a reshape; a KV-cache write reshapes a slice of the qkv projection
// to [1, heads, dim]; a mask broadcasts an iota to [1, n]): the group
// takes the reshape's shape, so that the reshape and its consumers join
// the load (the device computes the load's coordinates from the element's
// linear index: a reshape keeps the order). A chain of such reshapes joins
// one by one. Returns the group, or -1.
static int32_t reshape_of_load_group(const iron_ir_block_t *blk, use_ctx_t *u,
                                     const iron_ir_op_t *op) {
  if ((op->kind != IRON_OP_RESHAPE && !iron_ir_broadcast_is_reshape(op)) ||
      op->num_operands != 1 || op->num_results != 1 ||
      op->operands[0]->type->dtype != op->results[0].type->dtype)
    return -1;
  const iron_ir_value_t *v = op->operands[0];
  int32_t h = group_of(u, v);
  if (h < 0 || u->groups[h].closed || !v->def_op ||
      v->def_op != blk->ops[u->groups[h].last])
    return -1;
  // The group may be the load and reshapes of it that joined this way
  // (a slab's [1, t, d] -> [t, d] -> [t, heads, dh]).
  uint32_t chain = 1;
  while (chain < 8 && v->def_op &&
         (v->def_op->kind == IRON_OP_RESHAPE ||
          iron_ir_broadcast_is_reshape(v->def_op))) {
    if (!single_user(blk, v)) return -1;
    v = v->def_op->operands[0];
    chain++;
  }
  if (u->groups[h].size != chain || group_of(u, v) != h || !v->def_op)
    return -1;
  iron_op_kind_t k = v->def_op->kind;
  if (k != IRON_OP_SLICE && k != IRON_OP_TRANSPOSE &&
      k != IRON_OP_DYNAMIC_SLICE && k != IRON_OP_IOTA)
    return -1;
  return single_user(blk, v) ? h : -1;
}

// Whether `op` keeps its operand's elements in order and only adds or drops
// size-1 dims: a reshape, or a broadcast_in_dim that maps the operand's
// dims in order onto equal result dims.
static bool is_unit_reshape(const iron_ir_op_t *op) {
  if (op->kind == IRON_OP_BROADCAST_IN_DIM)
    return iron_ir_broadcast_is_reshape(op);
  return op->kind == IRON_OP_RESHAPE && op->num_operands == 1 &&
         op->num_results == 1 &&
         op->operands[0]->type->dtype == op->results[0].type->dtype &&
         same_dims_but_units(op->operands[0]->type, op->results[0].type);
}

// Whether op is not a broadcast_in_dim, or one whose dims keep their
// order (so an operand of the result's shape is read at the element's own
// coordinates).
static bool broadcast_in_order(const iron_ir_op_t *op) {
  if (op->kind != IRON_OP_BROADCAST_IN_DIM) return true;
  int64_t bd[IRON_MAX_RANK];
  uint32_t nb = 0;
  iron_status_t st =
      iron_ir_op_i64_list(op, "broadcast_dimensions", bd, IRON_MAX_RANK, &nb);
  if (st) {  // the kernel's prepare reports the bad attribute
    iron_status_free(st);
    return false;
  }
  for (uint32_t i = 1; i < nb; ++i)
    if (bd[i] <= bd[i - 1]) return false;
  return true;
}

enum { kMaxDusRoots = 16 };

// A unit reshape of a value of open group h, whose only use is the update
// operand of a dynamic_update_slice the device fuses, joins h although its
// shape differs (jax writes a scan's per-step outputs through
// broadcast_in_dim to [1, ...] then dynamic_update_slice). Returns h or -1.
static int32_t unit_reshape_into_dus(fuse_ctx_t *c, const iron_ir_block_t *blk,
                                     use_ctx_t *u, const iron_ir_op_t *op) {
  if (!is_unit_reshape(op)) return -1;
  int32_t h = group_of(u, op->operands[0]);
  if (h < 0 || u->groups[h].closed || u->groups[h].reduces ||
      u->groups[h].pivots ||
      !iron_ir_type_same_dims(u->groups[h].shape, op->operands[0]->type) ||
      !io_fits(u->groups[h].io, 1))
    return -1;
  const iron_ir_op_t *user = single_user(blk, &op->results[0]);
  if (!user || user->kind != IRON_OP_DYNAMIC_UPDATE_SLICE ||
      user->num_operands < 2 || user->operands[1] != &op->results[0] ||
      user->operands[0] == &op->results[0] || !c->can_fuse(user))
    return -1;
  return h;
}

// The group a dynamic_update_slice joins as a root (the fused kernel writes
// the update into the operand in place), or -1: the update comes from an
// open group of its shape (directly or through a unit reshape that joined
// it), and the operand and start indices from outside the group.
static int32_t join_dus(fuse_ctx_t *c, use_ctx_t *u, const iron_ir_op_t *op) {
  if (op->num_operands < 2 || op->num_results != 1 || !c->can_fuse(op))
    return -1;
  const iron_ir_value_t *upd = op->operands[1];
  int32_t h = group_of(u, upd);
  if (h < 0 || u->groups[h].closed || u->groups[h].reduces ||
      u->groups[h].pivots || u->groups[h].dus >= kMaxDusRoots ||
      !io_fits(u->groups[h].io, op->num_operands + op->num_results))
    return -1;
  if (!iron_ir_type_same_dims(u->groups[h].shape, upd->type) &&
      !(upd->def_op && is_unit_reshape(upd->def_op)))
    return -1;
  for (uint32_t k = 0; k < op->num_operands; ++k)
    if (k != 1 && group_of(u, op->operands[k]) == h) return -1;
  return h;
}

enum { kMaxPivots = 4 };

// Whether transposes a and b permute one operand shape the same way.
static bool same_transpose(const iron_ir_op_t *a, const iron_ir_op_t *b) {
  if (!iron_ir_type_same_dims(a->operands[0]->type, b->operands[0]->type))
    return false;
  int64_t pa[IRON_MAX_RANK], pb[IRON_MAX_RANK];
  uint32_t na = 0, nb = 0;
  iron_status_t st =
      iron_ir_op_i64_list(a, "permutation", pa, IRON_MAX_RANK, &na);
  if (!st) st = iron_ir_op_i64_list(b, "permutation", pb, IRON_MAX_RANK, &nb);
  if (st) {  // the kernel's prepare reports the bad attribute
    iron_status_free(st);
    return false;
  }
  return na == nb && memcmp(pa, pb, sizeof(int64_t) * na) == 0;
}

// Whether groups g and h may merge: their pivots (if any) transpose alike
// and are few enough (each takes a shared-memory tile on CUDA).
static bool pivots_merge(const group_t *g, const group_t *h) {
  if (!g->pivots || !h->pivots) return true;
  return g->pivots + h->pivots <= kMaxPivots &&
         same_transpose(g->pivot, h->pivot);
}

// The group a transpose joins as a pivot, or -1: its operand is a value of
// an open group of the operand's shape (no reduce or root, no pivot yet);
// the group then takes the transpose's shape, so its consumers join too,
// and the device computes the members before it at the operand's
// coordinates (CUDA: a tiled transpose whose loads run the producers and
// whose stores run the consumers).
static int32_t join_pivot(fuse_ctx_t *c, use_ctx_t *u,
                          const iron_ir_op_t *op) {
  if (op->kind != IRON_OP_TRANSPOSE || op->num_operands != 1 ||
      op->num_results != 1 || !c->can_pivot || !c->can_pivot(op))
    return -1;
  int32_t h = group_of(u, op->operands[0]);
  if (h < 0) return -1;
  const group_t *gr = &u->groups[h];
  if (gr->closed || gr->reduces || gr->dus || gr->pivots ||
      !iron_ir_type_same_dims(gr->shape, op->operands[0]->type) ||
      !io_fits(gr->io, 1))
    return -1;
  return h;
}

// One block (its inner blocks are done first: iron_fuse_walk_blocks).
static iron_status_t fuse_block(void *arg, iron_ir_block_t *blk) {
  fuse_ctx_t *c = arg;
  uint32_t n = blk->num_ops, ids = c->f->num_values;
  if (n < 2) return IRON_OK;
  int32_t *op_group = malloc(sizeof(int32_t) * n);
  int32_t *val_group = malloc(sizeof(int32_t) * (ids + 1));
  group_t *groups = calloc(n, sizeof(group_t));
  bool *escapes = calloc(ids + 1, sizeof(bool));
  uint32_t *uses = calloc(ids + 1, sizeof(uint32_t));
  iron_ir_value_t **remap = calloc(ids + 1, sizeof(*remap));
  iron_ir_op_t **new_ops = NULL;
  iron_status_t st = IRON_OK;
  if (!op_group || !val_group || !groups || !escapes || !remap || !uses) {
    st = oom();
    goto done;
  }
  for (uint32_t i = 0; i < n; ++i) op_group[i] = -1;
  for (uint32_t i = 0; i <= ids; ++i) val_group[i] = -1;
  count_ctx_t cc = {uses, ids};
  for (uint32_t b = 0; b < c->f->body.num_blocks; ++b)
    count_uses(&c->f->body.blocks[b], &cc);
  use_ctx_t u = {val_group, ids, groups, -1, escapes, uses};
  int32_t ngroups = 0;
  for (uint32_t i = 0; i < n; ++i) {
    iron_ir_op_t *op = blk->ops[i];
    bool fusable = op->num_results == 1 && op->num_regions == 0 &&
                   op->results[0].type->kind == IRON_TYPE_TENSOR &&
                   iron_ir_type_is_static(op->results[0].type) &&
                   c->can_fuse(op);
    int32_t g = -1;
    if (op->kind == IRON_OP_DYNAMIC_UPDATE_SLICE) {
      g = join_dus(c, &u, op);
      if (g >= 0) {
        merge_scalar_feeds(&u, op, 2, g);
        account_member(&u, op, g);
        groups[g].size++;
        groups[g].non_broadcast++;
        groups[g].dus++;
        groups[g].last = i;
        op_group[i] = g;
        if (op->results[0].id < ids) val_group[op->results[0].id] = g;
      }
    } else if (op->kind == IRON_OP_REDUCE) {
      g = join_reduce(c, &u, op);
      if (g >= 0) {
        account_member(&u, op, g);
        groups[g].size++;
        groups[g].reduces++;
        groups[g].last = i;
        groups[g].closed = true;  // other shapes follow: nothing joins
        op_group[i] = g;
        for (uint32_t r = 0; r < op->num_results; ++r)
          if (op->results[r].id < ids) val_group[op->results[r].id] = g;
      }
    } else if (fusable && op->kind == IRON_OP_TRANSPOSE) {
      // A transpose never joins a group as an element-wise op (a square
      // one has its operand's shape): it pivots its operand's group, or
      // starts a group of its own (a load of its operand from memory).
      g = join_pivot(c, &u, op);
      if (g >= 0) {
        groups[g].shape = op->results[0].type;
        groups[g].pivots++;
        groups[g].pivot = op;
      } else {
        g = ngroups++;
        groups[g].shape = op->results[0].type;
        groups[g].parent = g;
      }
      account_member(&u, op, g);
      groups[g].size++;
      // Where the device pivots transposes (tiles them inside fusions), a
      // transpose is worth fusing with any other member: the fused kernel
      // moves the data once where two kernels would move it twice.
      if (c->can_pivot && c->can_pivot(op)) groups[g].non_broadcast++;
      groups[g].last = i;
      op_group[i] = g;
      if (op->results[0].id < ids) val_group[op->results[0].id] = g;
    } else if (fusable) {
      const iron_ir_type_t *shape = op->results[0].type;
      int32_t lh = reshape_of_load_group(blk, &u, op);
      if (lh >= 0) groups[lh].shape = shape;  // joined below
      int32_t dh = lh < 0 ? unit_reshape_into_dus(c, blk, &u, op) : -1;
      if (dh >= 0) g = dh;  // joins without taking the shape
      // Join (and merge) every open group of this shape that feeds the op.
      for (uint32_t k = 0; k < op->num_operands; ++k) {
        int32_t h = group_of(&u, op->operands[k]);
        if (h < 0 || groups[h].closed ||
            !iron_ir_type_same_dims(groups[h].shape, shape))
          continue;
        // A member value of another shape (a dynamic_update_slice root's
        // result, a unit reshape feeding one) is not readable inside the
        // group: the op reads it from memory instead.
        if (h != lh &&
            !iron_ir_type_same_dims(op->operands[k]->type, groups[h].shape))
          continue;
        // A member value is computed at the element's own coordinates:
        // a broadcast that reads it at others (permuted dims) reads it
        // from memory instead.
        if (!broadcast_in_order(op)) continue;
        // A group that would outgrow one kernel's parameters stays apart
        // (it is closed below: the op reads its value from memory).
        uint32_t more = op->num_operands + op->num_results;
        if (g < 0) {
          if (io_fits(groups[h].io, more)) g = h;
        } else if (h != g && io_fits(groups[g].io + groups[h].io, more) &&
                   pivots_merge(&groups[g], &groups[h])) {
          merge_into(groups, g, h);
        }
      }
      if (lh >= 0 && g != lh) groups[lh].shape = op->operands[0]->type;
      if (g < 0) {
        g = ngroups++;
        groups[g].shape = shape;
        groups[g].parent = g;
      }
      bool load = op->kind == IRON_OP_SLICE || op->kind == IRON_OP_DYNAMIC_SLICE;
      merge_scalar_feeds(&u, op, load ? 1 : 0, g);
      account_member(&u, op, g);
      groups[g].size++;
      // Moving data alone (broadcasts, converts, slices) is not worth a
      // fused kernel: the device's own kernels do it.
      if (op->kind != IRON_OP_BROADCAST_IN_DIM && op->kind != IRON_OP_CONVERT &&
          op->kind != IRON_OP_SLICE && op->kind != IRON_OP_DYNAMIC_SLICE)
        groups[g].non_broadcast++;
      groups[g].last = i;
      op_group[i] = g;
      if (op->results[0].id < ids) val_group[op->results[0].id] = g;
    }
    // Other groups this op reads from can no longer grow past it.
    u.self = g;
    each_operand(op, close_used, &u);
    u.self = -1;
  }
  // Canonical group per op.
  for (uint32_t i = 0; i < n; ++i)
    if (op_group[i] >= 0) op_group[i] = find(groups, op_group[i]);
  // Which member values are used outside their group (anywhere in the
  // function)?
  for (uint32_t b = 0; b < c->f->body.num_blocks; ++b)
    walk_escapes(&c->f->body.blocks[b], &u, blk, op_group);
  // A reduce takes its inputs from registers, so a group that ends in one
  // writes nothing else: when another member's value is used outside, the
  // reduce leaves the group (and reads the group's output from memory).
  bool rewalk = false;
  for (uint32_t i = 0; i < n; ++i) {
    int32_t g = op_group[i];
    if (g < 0 || blk->ops[i]->kind != IRON_OP_REDUCE) continue;
    bool other_escapes = false;
    for (uint32_t k = 0; k < n && !other_escapes; ++k) {
      if (op_group[k] != g || k == i) continue;
      const iron_ir_op_t *m = blk->ops[k];
      for (uint32_t r = 0; r < m->num_results; ++r)
        if (m->results[r].id < ids && escapes[m->results[r].id])
          other_escapes = true;
    }
    if (!other_escapes) continue;
    drop_member(blk->ops[i], &op_group[i], val_group, ids);
    groups[g].size--;
    groups[g].reduces--;
    rewalk = true;
  }
  // Groups worth a kernel: two ops or more, one of them doing arithmetic
  // or a reduce.
  bool any = false;
  for (uint32_t i = 0; i < n; ++i) {
    int32_t g = op_group[i];
    if (g < 0) continue;
    if (groups[g].size < 2 ||
        (groups[g].non_broadcast < 1 && groups[g].reduces < 1)) {
      drop_member(blk->ops[i], &op_group[i], val_group, ids);
    } else {
      any = true;
    }
  }
  if (!any) goto done;
  if (rewalk) {
    memset(escapes, 0, sizeof(bool) * (ids + 1));
    for (uint32_t b = 0; b < c->f->body.num_blocks; ++b)
      walk_escapes(&c->f->body.blocks[b], &u, blk, op_group);
  }
  // The last member of each group: where its fusion goes.
  for (uint32_t i = 0; i < n; ++i)
    if (op_group[i] >= 0) groups[op_group[i]].last = i;
  new_ops = iron_arena_alloc_array(&c->m->arena, n + 1, sizeof(*new_ops));
  if (!new_ops) {
    st = oom();
    goto done;
  }
  uint32_t nn = 0;
  for (uint32_t i = 0; i < n && !st; ++i) {
    int32_t g = op_group[i];
    if (g < 0) {
      new_ops[nn++] = blk->ops[i];
      continue;
    }
    if (groups[g].last != i) continue;
    iron_ir_op_t *fop = NULL;
    st = make_fusion(c, blk, op_group, g, &u, remap, &fop);
    // A group none of whose values is used (dead code left by inlining a
    // function whose results are not all used) disappears: its members
    // compute nothing else (reduce and dynamic_update_slice results are
    // always outputs).
    if (!st && fop && fop->num_results == 0) continue;
    if (!st) new_ops[nn++] = fop;
  }
  if (st) goto done;
  blk->ops = new_ops;
  blk->num_ops = nn;
  remap_ctx_t r = {remap, ids};
  for (uint32_t b = 0; b < c->f->body.num_blocks; ++b)
    walk_func_remap(&c->f->body.blocks[b], &r);
done:
  free(op_group);
  free(val_group);
  free(groups);
  free(escapes);
  free(uses);
  free(remap);
  return st;
}

iron_status_t iron_compiler_fuse(iron_ir_module_t *m,
                                 iron_fuse_predicate_t can_fuse,
                                 int *out_num_fusions) {
  return iron_compiler_fuse_pivots(m, can_fuse, NULL, out_num_fusions);
}

iron_status_t iron_compiler_fuse_pivots(iron_ir_module_t *m,
                                        iron_fuse_predicate_t can_fuse,
                                        iron_fuse_predicate_t can_pivot,
                                        int *out_num_fusions) {
  fuse_ctx_t c = {m, NULL, can_fuse, can_pivot, 0};
  for (uint32_t i = 0; i < m->num_funcs; ++i) {
    c.f = &m->funcs[i];
    for (uint32_t b = 0; b < c.f->body.num_blocks; ++b)
      IRON_RETURN_IF_ERROR_PLAIN(iron_fuse_walk_blocks(
          &c.f->body.blocks[b], can_fuse, fuse_block, &c));
  }
  if (out_num_fusions) *out_num_fusions = c.fusions;
  return IRON_OK;
}
