// Row fusion; see fuse_rows.h for the contract.
//
// Per block, ops are visited in order and grouped with union-find, as in
// fuse.c, with two kinds of groups: "plain" groups (element-wise ops of one
// shape, of any dtypes, that no row reduce joined yet: the x * x before rms
// norm's sum) and "row" groups (a row shape, from their first row reduce).
// An op joins the groups of its operands when its result and operands have
// the roles the row shape allows (iron_row_role) and the merged group stays
// acyclic.
//
// Acyclic: unlike fuse.c, a group keeps growing after one of its values is
// used outside it; the op that used it (and everything that depends on it)
// is then moved after the fusion. So every op (and group) records the
// groups it depends on through ops outside them (`deps`, transitive), and
// an op never joins a group it depends on that way (the fusion would have
// to run both before and after that outside op). Only pure ops move; any
// other op (a callback, a loop, the terminator) that depends on a group
// ends that group's growth, so it stays before the op. At the end the
// block is ordered again by a topological sort in which every node keeps
// its place as far as the dependencies allow (a fusion sits where its last
// member was), which leaves impure ops in their order.
#include "compiler/fuse_rows.h"

#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Row shapes (shared with the device generators).

static bool tensor_static(const iron_ir_type_t *t) {
  return t && t->kind == IRON_TYPE_TENSOR && iron_ir_type_is_static(t);
}

bool iron_row_dtype_ok(iron_dtype_t dt) {
  switch (dt) {
    case IRON_DTYPE_PRED:
    case IRON_DTYPE_S8: case IRON_DTYPE_S16: case IRON_DTYPE_S32:
    case IRON_DTYPE_S64: case IRON_DTYPE_U8: case IRON_DTYPE_U16:
    case IRON_DTYPE_U32: case IRON_DTYPE_U64:
    case IRON_DTYPE_F16: case IRON_DTYPE_BF16: case IRON_DTYPE_F32:
    case IRON_DTYPE_F64:
      return true;
    default:
      return false;
  }
}

// The reduce's flags over its operand's dims; false when malformed.
static bool reduce_flags(const iron_ir_op_t *op, bool *reduced) {
  if (op->kind != IRON_OP_REDUCE || op->num_operands != 2 ||
      op->num_results != 1 || op->num_regions != 1)
    return false;
  const iron_ir_type_t *t = op->operands[0]->type;
  if (!tensor_static(t) || !tensor_static(op->operands[1]->type) ||
      op->operands[1]->type->rank != 0)
    return false;
  int64_t dims[IRON_MAX_RANK];
  uint32_t nd = 0;
  iron_status_t st =
      iron_ir_op_i64_list(op, "dimensions", dims, IRON_MAX_RANK, &nd);
  if (st) {  // the kernel's prepare reports the bad attribute
    iron_status_free(st);
    return false;
  }
  for (int32_t d = 0; d < t->rank; ++d) reduced[d] = false;
  for (uint32_t k = 0; k < nd; ++k) {
    if (dims[k] < 0 || dims[k] >= t->rank || reduced[dims[k]]) return false;
    reduced[dims[k]] = true;
  }
  // The result has the kept dims (the plan checks the rest at prepare).
  const iron_ir_type_t *rt = op->results[0].type;
  if (!tensor_static(rt) || rt->rank != t->rank - (int32_t)nd) return false;
  return true;
}

bool iron_row_shape_of_reduce(const iron_ir_op_t *op, iron_row_shape_t *out) {
  bool reduced[IRON_MAX_RANK];
  if (!reduce_flags(op, reduced)) return false;
  const iron_ir_type_t *t = op->operands[0]->type;
  int64_t rows = 1, n = 1;
  bool seen_reduced = false;
  for (int32_t d = 0; d < t->rank; ++d) {
    if (t->dims[d] <= 0) return false;  // zero-size: nothing to fuse
    if (reduced[d]) {
      n *= t->dims[d];
      if (t->dims[d] != 1) seen_reduced = true;
    } else {
      rows *= t->dims[d];
      // A kept dim after a reduced one: rows are not contiguous.
      if (t->dims[d] != 1 && seen_reduced) return false;
    }
    if (n >= ((int64_t)1 << 31) || rows >= ((int64_t)1 << 40)) return false;
  }
  if (n < 2) return false;
  memset(out, 0, sizeof(*out));
  out->rank = t->rank;
  for (int32_t d = 0; d < t->rank; ++d) {
    out->dims[d] = t->dims[d];
    out->reduced[d] = reduced[d];
  }
  out->rows = rows;
  out->n = n;
  return true;
}

bool iron_row_reduce_is_trivial(const iron_ir_op_t *op) {
  bool reduced[IRON_MAX_RANK];
  if (!reduce_flags(op, reduced)) return false;
  const iron_ir_type_t *t = op->operands[0]->type;
  for (int32_t d = 0; d < t->rank; ++d)
    if (reduced[d] && t->dims[d] != 1) return false;
  return true;
}

bool iron_row_shape_equal(const iron_row_shape_t *a,
                          const iron_row_shape_t *b) {
  if (a->rank != b->rank) return false;
  for (int32_t d = 0; d < a->rank; ++d)
    if (a->dims[d] != b->dims[d] || a->reduced[d] != b->reduced[d])
      return false;
  return true;
}

iron_row_role_t iron_row_role(const iron_row_shape_t *rs,
                              const iron_ir_type_t *t) {
  if (!tensor_static(t)) return IRON_ROW_OTHER;
  if (t->rank == rs->rank) {
    bool same = true;
    for (int32_t d = 0; d < t->rank && same; ++d)
      same = t->dims[d] == rs->dims[d];
    if (same) return IRON_ROW_FULL;
  }
  int64_t count = iron_ir_type_num_elements(t);
  if (count == rs->rows) {
    // Non-unit dims equal to S's non-unit kept dims, in order.
    int32_t j = 0;
    bool ok = true;
    for (int32_t d = 0; d < t->rank && ok; ++d) {
      if (t->dims[d] == 1) continue;
      while (j < rs->rank && (rs->reduced[j] || rs->dims[j] == 1)) ++j;
      ok = j < rs->rank && rs->dims[j] == t->dims[d];
      ++j;
    }
    while (ok && j < rs->rank && (rs->reduced[j] || rs->dims[j] == 1)) ++j;
    if (ok && j == rs->rank) return IRON_ROW_ROW;
  }
  return count == 1 ? IRON_ROW_ONE : IRON_ROW_OTHER;
}

bool iron_row_bcast_row_to_full(const iron_row_shape_t *rs,
                                const iron_ir_op_t *op) {
  if (op->kind != IRON_OP_BROADCAST_IN_DIM || op->num_operands != 1)
    return false;
  const iron_ir_type_t *st = op->operands[0]->type;
  if (iron_row_role(rs, st) != IRON_ROW_ROW ||
      iron_row_role(rs, op->results[0].type) != IRON_ROW_FULL)
    return false;
  int64_t bd[IRON_MAX_RANK];
  uint32_t nb = 0;
  iron_status_t s =
      iron_ir_op_i64_list(op, "broadcast_dimensions", bd, IRON_MAX_RANK, &nb);
  if (s) {
    iron_status_free(s);
    return false;
  }
  if ((int32_t)nb != st->rank) return false;
  // The k-th non-unit operand dim goes to the k-th non-unit kept dim.
  int32_t j = 0;
  for (int32_t d = 0; d < st->rank; ++d) {
    if (bd[d] < 0 || bd[d] >= rs->rank) return false;
    if (st->dims[d] == 1) continue;
    while (j < rs->rank && (rs->reduced[j] || rs->dims[j] == 1)) ++j;
    if (j == rs->rank || bd[d] != j) return false;
    ++j;
  }
  return true;
}

// ---------------------------------------------------------------------------
// The pass.

// 8 was too few: a decode layer (weights and cache slices, the cache
// writes, a dot, a mask) gave the scores more than 8 upstream groups, the
// set became `all`, and the softmax's max could not join its row group
// (tests/data/rowfuse/whole_softmax_decode_layer_f32).
enum { kMaxDeps = 32 };

// Groups something depends on through ops outside them: the groups
// listed (representatives when written; find() them when read) and, once
// the list overflowed, every group whose first part was created before
// group number `below` (all groups that existed then; groups are numbered
// in the order the block's ops create them, so a value cannot depend on a
// group created after it). A deep network's residual stream depends on
// more groups than the list holds; the groups created after it (a later
// layer's norm) stay distinguishable.
typedef struct depset {
  int32_t g[kMaxDeps];
  uint8_t n;
  int32_t below;  // 0: the list is all
} depset_t;

typedef struct rgroup {
  int32_t parent;
  bool closed;  // an impure op depends on it: it cannot grow
  bool is_row;
  iron_row_shape_t rs;            // is_row
  const iron_ir_type_t *plain;    // !is_row: a member's result type (all
                                  // have its dims, dtypes may differ)
  uint32_t iota_dims;             // bit d: a member iota along dim d
  uint32_t size, reduces, io;
  int32_t first;  // the lowest number of the groups merged into it
  depset_t deps;
} rgroup_t;

typedef struct rctx {
  iron_ir_module_t *m;
  iron_ir_func_t *f;
  iron_fuse_predicate_t can_fuse;
  iron_row_fuse_predicate_t row_fusable;
  int fusions;
} rctx_t;

typedef struct rblock {
  rctx_t *c;
  iron_ir_block_t *blk;
  uint32_t n, ids;
  int32_t *op_group;  // by op index
  int32_t *val_op;    // by value id: index of the op of blk defining it, -1
  rgroup_t *groups;
  depset_t *op_deps;  // by op index (non-members)
  int32_t ngroups;
} rblock_t;

static iron_status_t oom(void) {
  return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory while fusing rows");
}

static int32_t gfind(rgroup_t *g, int32_t i) {
  while (g[i].parent != i) i = g[i].parent = g[g[i].parent].parent;
  return i;
}

// Whether d covers representative g through `below`.
static bool dep_covered(rblock_t *b, const depset_t *d, int32_t g) {
  return d->below > 0 && b->groups[g].first < d->below;
}

static void dep_add(rblock_t *b, depset_t *d, int32_t g) {
  g = gfind(b->groups, g);
  if (dep_covered(b, d, g)) return;
  for (uint8_t i = 0; i < d->n; ++i)
    if (gfind(b->groups, d->g[i]) == g) return;
  if (d->n == kMaxDeps) {  // every group so far, g included
    d->below = b->ngroups;
    d->n = 0;
    return;
  }
  d->g[d->n++] = g;
}

static void dep_union(rblock_t *b, depset_t *d, const depset_t *e) {
  if (e->below > d->below) d->below = e->below;
  for (uint8_t i = 0; i < e->n; ++i) dep_add(b, d, e->g[i]);
}

static bool dep_has(rblock_t *b, const depset_t *d, int32_t g) {
  g = gfind(b->groups, g);
  if (dep_covered(b, d, g)) return true;
  for (uint8_t i = 0; i < d->n; ++i)
    if (gfind(b->groups, d->g[i]) == g) return true;
  return false;
}

// The member group of v's defining op (a representative), or -1.
static int32_t vgroup(rblock_t *b, const iron_ir_value_t *v) {
  if (!v || v->id >= b->ids) return -1;
  int32_t i = b->val_op[v->id];
  if (i < 0 || b->op_group[i] < 0) return -1;
  return gfind(b->groups, b->op_group[i]);
}

// The groups that using v makes one depend on: v's group and what it
// depends on, or what v's (non-member) defining op depends on.
static void vdeps(rblock_t *b, const iron_ir_value_t *v, depset_t *out) {
  memset(out, 0, sizeof(*out));
  if (!v || v->id >= b->ids) return;
  int32_t i = b->val_op[v->id];
  if (i < 0) return;
  if (b->op_group[i] >= 0) {
    int32_t g = gfind(b->groups, b->op_group[i]);
    dep_add(b, out, g);
    dep_union(b, out, &b->groups[g].deps);
  } else {
    dep_union(b, out, &b->op_deps[i]);
  }
}

// Ops that may move after a fusion: no effects, no tokens.
static bool is_pure(const iron_ir_op_t *op) {
  iron_op_class_t c = iron_op_kind_class(op->kind);
  if (c == IRON_OP_CLASS_UNARY || c == IRON_OP_CLASS_BINARY) return true;
  switch (op->kind) {
    case IRON_OP_COMPARE: case IRON_OP_SELECT: case IRON_OP_CLAMP:
    case IRON_OP_CONVERT: case IRON_OP_BITCAST_CONVERT:
    case IRON_OP_BROADCAST_IN_DIM: case IRON_OP_BROADCAST:
    case IRON_OP_RESHAPE: case IRON_OP_TRANSPOSE: case IRON_OP_SLICE:
    case IRON_OP_DYNAMIC_SLICE: case IRON_OP_DYNAMIC_UPDATE_SLICE:
    case IRON_OP_CONCATENATE: case IRON_OP_PAD: case IRON_OP_REVERSE:
    case IRON_OP_IOTA: case IRON_OP_CONSTANT: case IRON_OP_REDUCE:
    case IRON_OP_REDUCE_WINDOW: case IRON_OP_SELECT_AND_SCATTER:
    case IRON_OP_DOT: case IRON_OP_DOT_GENERAL: case IRON_OP_CONVOLUTION:
    case IRON_OP_GATHER: case IRON_OP_SCATTER: case IRON_OP_SORT:
    case IRON_OP_REDUCE_PRECISION: case IRON_OP_FUSION:
      return true;
    default:
      return false;
  }
}

// Calls fn on every operand of op and of the ops nested in its regions
// (a use inside a region counts as a use by op).
typedef void (*operand_fn_t)(const iron_ir_value_t *v, void *arg);
static void each_use(const iron_ir_op_t *op, operand_fn_t fn, void *arg) {
  for (uint32_t i = 0; i < op->num_operands; ++i) fn(op->operands[i], arg);
  for (uint32_t r = 0; r < op->num_regions; ++r)
    for (uint32_t k = 0; k < op->regions[r].num_blocks; ++k) {
      const iron_ir_block_t *blk = &op->regions[r].blocks[k];
      for (uint32_t j = 0; j < blk->num_ops; ++j) each_use(blk->ops[j], fn, arg);
    }
}

typedef struct dep_acc {
  rblock_t *b;
  depset_t *d;
} dep_acc_t;

static void acc_dep(const iron_ir_value_t *v, void *arg) {
  dep_acc_t *a = arg;
  depset_t e;
  vdeps(a->b, v, &e);
  dep_union(a->b, a->d, &e);
}

// Ops that can be members besides reduces (roles checked by the caller).
static bool member_kind(rctx_t *c, const iron_ir_op_t *op) {
  if (op->num_results != 1 || op->num_regions != 0 ||
      !tensor_static(op->results[0].type) ||
      !iron_row_dtype_ok(op->results[0].type->dtype))
    return false;
  for (uint32_t i = 0; i < op->num_operands; ++i)
    if (!tensor_static(op->operands[i]->type) ||
        !iron_row_dtype_ok(op->operands[i]->type->dtype))
      return false;
  iron_op_class_t cls = iron_op_kind_class(op->kind);
  bool ok = cls == IRON_OP_CLASS_UNARY || cls == IRON_OP_CLASS_BINARY;
  switch (op->kind) {
    case IRON_OP_COMPARE: case IRON_OP_SELECT: case IRON_OP_CLAMP:
    case IRON_OP_CONVERT: case IRON_OP_BROADCAST_IN_DIM:
    case IRON_OP_RESHAPE: case IRON_OP_CONSTANT: case IRON_OP_IOTA:
      ok = true;
      break;
    default:
      break;
  }
  return ok && c->can_fuse(op);
}

static int64_t iota_dim(const iron_ir_op_t *op) {
  int64_t d = -1;
  uint32_t n = 0;
  iron_status_t st = iron_ir_op_i64_list(op, "iota_dimension", &d, 1, &n);
  if (st) {
    iron_status_free(st);
    return -1;
  }
  return n == 1 ? d : -1;
}

// Whether op (a member_kind) fits a row group of shape rs with these
// operands, member or not: the result's role and each operand's role for
// that kind of op. `member[k]`: operand k is a member value.
static bool fits_row(const iron_row_shape_t *rs, const iron_ir_op_t *op,
                     const bool *member) {
  iron_row_role_t res = iron_row_role(rs, op->results[0].type);
  if (res != IRON_ROW_FULL && res != IRON_ROW_ROW) return false;
  switch (op->kind) {
    case IRON_OP_CONSTANT:
      return true;
    case IRON_OP_IOTA: {
      int64_t d = iota_dim(op);
      return res == IRON_ROW_FULL && d >= 0 && d < rs->rank && rs->reduced[d];
    }
    case IRON_OP_RESHAPE: {
      // Same elements in the same order: a member of the result's role,
      // or an input of as many elements (read by linear index).
      iron_row_role_t o = iron_row_role(rs, op->operands[0]->type);
      if (member[0]) return o == res;
      return iron_ir_type_num_elements(op->operands[0]->type) ==
             iron_ir_type_num_elements(op->results[0].type);
    }
    case IRON_OP_BROADCAST_IN_DIM: {
      iron_row_role_t o = iron_row_role(rs, op->operands[0]->type);
      if (o == IRON_ROW_ONE) return true;
      if (!member[0]) return true;  // an input read at mapped coordinates
      if (res == IRON_ROW_FULL && o == IRON_ROW_ROW)
        return iron_row_bcast_row_to_full(rs, op);
      // FULL -> FULL and ROW -> ROW: the same value, in order.
      return o == res && iron_ir_broadcast_is_reshape(op);
    }
    default: {  // element-wise
      for (uint32_t i = 0; i < op->num_operands; ++i) {
        iron_row_role_t o = iron_row_role(rs, op->operands[i]->type);
        if (o != res && o != IRON_ROW_ONE) return false;
        if (member[i] && o != res) return false;
      }
      return true;
    }
  }
}

// Whether a plain group's members fit a row group of shape rs (their type
// has a role there; iotas run along reduced dims).
static bool plain_fits(const rgroup_t *p, const iron_row_shape_t *rs) {
  iron_row_role_t r = iron_row_role(rs, p->plain);
  if (r != IRON_ROW_FULL && r != IRON_ROW_ROW) return false;
  if (r != IRON_ROW_FULL && p->iota_dims) return false;
  for (int32_t d = 0; d < rs->rank; ++d)
    if ((p->iota_dims >> d & 1u) && !rs->reduced[d]) return false;
  return true;
}

static int32_t new_group(rblock_t *b) {
  int32_t g = b->ngroups++;
  memset(&b->groups[g], 0, sizeof(b->groups[g]));
  b->groups[g].parent = g;
  b->groups[g].first = g;
  return g;
}

static void merge_into(rblock_t *b, int32_t g, int32_t h) {
  rgroup_t *G = &b->groups[g], *H = &b->groups[h];
  H->parent = g;
  G->size += H->size;
  G->reduces += H->reduces;
  G->io += H->io;
  G->iota_dims |= H->iota_dims;
  G->closed = G->closed || H->closed;
  if (H->first < G->first) G->first = H->first;
  dep_union(b, &G->deps, &H->deps);
}

// Whether op may join (and merge) the groups J: none of them is closed,
// none depends (through outside ops) on another, and no operand of op from
// outside them depends on one of them; and the io bound holds.
static bool can_join(rblock_t *b, const iron_ir_op_t *op, const int32_t *J,
                     uint32_t nj) {
  uint32_t io = op->num_operands + op->num_results;
  for (uint32_t a = 0; a < nj; ++a) {
    if (b->groups[J[a]].closed) return false;
    io += b->groups[J[a]].io;
    for (uint32_t c = 0; c < nj; ++c)
      if (a != c && dep_has(b, &b->groups[J[a]].deps, J[c]))
        return false;
  }
  if (io > IRON_FUSE_MAX_OPERANDS) return false;
  for (uint32_t k = 0; k < op->num_operands; ++k) {
    int32_t h = vgroup(b, op->operands[k]);
    bool inside = false;
    for (uint32_t a = 0; a < nj && !inside; ++a) inside = h == J[a];
    if (inside) continue;
    depset_t d;
    vdeps(b, op->operands[k], &d);
    for (uint32_t a = 0; a < nj; ++a)
      if (dep_has(b, &d, J[a])) return false;
  }
  return true;
}

// Makes op i a member of group g (after merging J into g).
static void join(rblock_t *b, uint32_t i, int32_t g, const int32_t *J,
                 uint32_t nj) {
  for (uint32_t a = 0; a < nj; ++a)
    if (J[a] != g) merge_into(b, g, J[a]);
  const iron_ir_op_t *op = b->blk->ops[i];
  rgroup_t *G = &b->groups[g];
  G->size++;
  G->io += op->num_results;
  for (uint32_t k = 0; k < op->num_operands; ++k) {
    if (vgroup(b, op->operands[k]) == g) continue;
    G->io++;
    depset_t d;
    vdeps(b, op->operands[k], &d);
    dep_union(b, &G->deps, &d);
  }
  b->op_group[i] = g;
}

static void add_unique(int32_t *J, uint32_t *nj, int32_t g) {
  for (uint32_t a = 0; a < *nj; ++a)
    if (J[a] == g) return;
  J[(*nj)++] = g;
}

// Visits op i: joins a group or stays outside (recording its deps).
static void visit(rblock_t *b, uint32_t i) {
  rctx_t *c = b->c;
  iron_ir_op_t *op = b->blk->ops[i];
  int32_t J[IRON_FUSE_MAX_OPERANDS + 1];
  uint32_t nj = 0;
  bool done = false;
  iron_row_shape_t rs;
  if (op->kind == IRON_OP_REDUCE && iron_row_shape_of_reduce(op, &rs) &&
      iron_row_dtype_ok(op->operands[0]->type->dtype) && c->row_fusable(op) &&
      vgroup(b, op->operands[1]) < 0) {
    // A row reduce joins the group computing its operand when that group
    // has its row shape (or is a plain group of S), else starts one.
    int32_t h = vgroup(b, op->operands[0]);
    if (h >= 0) {
      rgroup_t *H = &b->groups[h];
      bool fits = H->is_row ? iron_row_shape_equal(&H->rs, &rs)
                            : plain_fits(H, &rs) &&
                                  iron_row_role(&rs, H->plain) ==
                                      IRON_ROW_FULL;
      if (fits) add_unique(J, &nj, h);
    }
    if (nj && !can_join(b, op, J, nj)) nj = 0;
    // Otherwise a new group, reading the operand from memory.
    int32_t g = nj ? J[0] : new_group(b);
    join(b, i, g, J, nj);
    b->groups[g].is_row = true;
    b->groups[g].rs = rs;
    b->groups[g].reduces++;
    done = true;
  } else if (op->kind == IRON_OP_REDUCE && iron_row_reduce_is_trivial(op) &&
             iron_row_dtype_ok(op->operands[0]->type->dtype) &&
             c->row_fusable(op)) {
    // body(init, x) per row, for a ROW member x of an open row group.
    int32_t h = vgroup(b, op->operands[0]);
    if (h >= 0 && b->groups[h].is_row && vgroup(b, op->operands[1]) < 0 &&
        iron_row_role(&b->groups[h].rs, op->operands[0]->type) ==
            IRON_ROW_ROW &&
        iron_row_role(&b->groups[h].rs, op->results[0].type) ==
            IRON_ROW_ROW) {
      J[nj++] = h;
      if (can_join(b, op, J, nj)) {
        join(b, i, h, J, nj);
        done = true;
      }
    }
  } else if (member_kind(c, op)) {
    // The row shape of the first operand's row group, if any.
    const iron_row_shape_t *ctx = NULL;
    for (uint32_t k = 0; k < op->num_operands && !ctx; ++k) {
      int32_t h = vgroup(b, op->operands[k]);
      if (h >= 0 && b->groups[h].is_row && !b->groups[h].closed)
        ctx = &b->groups[h].rs;
    }
    bool member[IRON_FUSE_MAX_OPERANDS];
    uint32_t nops = op->num_operands < IRON_FUSE_MAX_OPERANDS
                        ? op->num_operands
                        : IRON_FUSE_MAX_OPERANDS;
    if (ctx) {
      rs = *ctx;
      // Operands from groups that can merge: open row groups of rs and
      // plain groups that fit it; others are read from memory.
      for (uint32_t k = 0; k < nops; ++k) {
        int32_t h = vgroup(b, op->operands[k]);
        member[k] = false;
        if (h < 0 || b->groups[h].closed) continue;
        rgroup_t *H = &b->groups[h];
        bool ok = H->is_row ? iron_row_shape_equal(&H->rs, &rs)
                            : plain_fits(H, &rs);
        if (!ok) continue;
        member[k] = true;
        add_unique(J, &nj, h);
      }
      if (nops == op->num_operands && fits_row(&rs, op, member) &&
          can_join(b, op, J, nj)) {
        int32_t g = J[0];
        for (uint32_t a = 0; a < nj; ++a)
          if (b->groups[J[a]].is_row) g = J[a];
        join(b, i, g, J, nj);
        rgroup_t *G = &b->groups[g];
        if (op->kind == IRON_OP_IOTA) G->iota_dims |= 1u << iota_dim(op);
        done = true;
      }
      nj = 0;
    }
    // Not in a row group (none among its operands' groups, or one it
    // cannot join: a residual add reading an earlier norm's group and a
    // dot that depends on it starts the next norm's group). A broadcast
    // that could not join its row group stays outside: a later row group
    // takes it where it reads it.
    if (!done && iron_ir_type_num_elements(op->results[0].type) >= 2 &&
        !(ctx && op->kind == IRON_OP_BROADCAST_IN_DIM)) {
      // A plain group: members of one shape (a mask's pred beside the
      // scores' f32); an operand of another shape is read from memory.
      const iron_ir_type_t *t = op->results[0].type;
      for (uint32_t k = 0; k < nops; ++k) {
        int32_t h = vgroup(b, op->operands[k]);
        if (h < 0 || b->groups[h].closed || b->groups[h].is_row) continue;
        if (!iron_ir_type_same_dims(b->groups[h].plain, t) ||
            !iron_ir_type_same_dims(op->operands[k]->type, t))
          continue;
        add_unique(J, &nj, h);
      }
      if (nj && !can_join(b, op, J, nj)) nj = 0;
      int32_t g = nj ? J[0] : new_group(b);
      if (nj == 0) {
        b->groups[g].plain = t;
        if (!can_join(b, op, NULL, 0)) {
          b->ngroups--;
          g = -1;
        }
      }
      if (g >= 0) {
        join(b, i, g, J, nj);
        if (op->kind == IRON_OP_IOTA) {
          int64_t d = iota_dim(op);
          b->groups[g].iota_dims |= d >= 0 && d < 32 ? 1u << d : ~0u;
        }
        done = true;
      }
    }
  }
  if (done) return;
  // Outside: what it depends on; an impure op freezes those groups.
  depset_t *d = &b->op_deps[i];
  memset(d, 0, sizeof(*d));
  dep_acc_t a = {b, d};
  each_use(op, acc_dep, &a);
  if (!is_pure(op)) {
    for (int32_t g = 0; d->below > 0 && g < b->ngroups; ++g)
      if (b->groups[g].parent == g && dep_covered(b, d, g))
        b->groups[g].closed = true;
    for (uint8_t k = 0; k < d->n; ++k)
      b->groups[gfind(b->groups, d->g[k])].closed = true;
  }
}

// Which groups are worth a row kernel (keep[g] for representatives): row
// groups in which some member depends on one of its row reduces
// (otherwise a group is a lone fused reduce, fuse.c's business, or
// element-wise work). One pass over the block: after_reduce[i] says that
// member i depends, inside its group, on a row reduce of the group.
static void valid_groups(rblock_t *b, bool *after_reduce, bool *keep) {
  for (uint32_t i = 0; i < b->n; ++i) {
    after_reduce[i] = false;
    if (b->op_group[i] < 0) continue;
    int32_t g = gfind(b->groups, b->op_group[i]);
    const iron_ir_op_t *op = b->blk->ops[i];
    for (uint32_t k = 0; k < op->num_operands; ++k) {
      const iron_ir_value_t *v = op->operands[k];
      if (v->id >= b->ids || b->val_op[v->id] < 0) continue;
      int32_t p = b->val_op[v->id];
      if (b->op_group[p] < 0 || gfind(b->groups, b->op_group[p]) != g)
        continue;
      const iron_ir_op_t *po = b->blk->ops[p];
      if (after_reduce[p] || (po->kind == IRON_OP_REDUCE &&
                              !iron_row_reduce_is_trivial(po)))
        after_reduce[i] = true;
    }
    if (after_reduce[i] && b->groups[g].is_row && b->groups[g].size >= 2)
      keep[g] = true;
  }
}

// --- building the fusions ----------------------------------------------------

typedef struct escape_ctx {
  rblock_t *b;
  bool *escapes;     // by value id
  int32_t self;      // group of the op being walked, -1
} escape_ctx_t;

static void mark_escape(const iron_ir_value_t *v, void *arg) {
  escape_ctx_t *e = arg;
  int32_t g = vgroup(e->b, v);
  if (g >= 0 && g != e->self) e->escapes[v->id] = true;
}

static void walk_escapes(escape_ctx_t *e, const iron_ir_block_t *blk) {
  for (uint32_t k = 0; k < blk->num_ops; ++k) {
    const iron_ir_op_t *op = blk->ops[k];
    int32_t self = -1;
    if (blk == e->b->blk && e->b->op_group[k] >= 0)
      self = gfind(e->b->groups, e->b->op_group[k]);
    e->self = self;
    for (uint32_t i = 0; i < op->num_operands; ++i)
      mark_escape(op->operands[i], e);
    e->self = -1;
    for (uint32_t r = 0; r < op->num_regions; ++r)
      for (uint32_t q = 0; q < op->regions[r].num_blocks; ++q)
        walk_escapes(e, &op->regions[r].blocks[q]);
  }
}

// The fusion op of group g (members: ops whose group is g, in block
// order); member results in `escapes` become its results, remap[id] the
// fusion result that replaces value id.
static iron_status_t make_fusion(rblock_t *b, int32_t g, const bool *escapes,
                                 iron_ir_value_t **remap,
                                 iron_ir_op_t **out_op) {
  rctx_t *c = b->c;
  iron_arena_t *a = &c->m->arena;
  uint32_t nmem = 0, max_in = 0, max_out = 0;
  for (uint32_t i = 0; i < b->n; ++i) {
    if (b->op_group[i] < 0 || gfind(b->groups, b->op_group[i]) != g) continue;
    nmem++;
    max_in += b->blk->ops[i]->num_operands;
    max_out += b->blk->ops[i]->num_results;
  }
  const iron_ir_value_t **ins = calloc(max_in + 1, sizeof(*ins));
  iron_ir_value_t **outs = calloc(max_out + 1, sizeof(*outs));
  iron_ir_value_t **local = calloc(b->ids + 1, sizeof(*local));
  if (!ins || !outs || !local) {
    free(ins);
    free(outs);
    free(local);
    return oom();
  }
  uint32_t nin = 0, nout = 0;
  iron_ir_op_t *last = NULL;
  for (uint32_t i = 0; i < b->n; ++i) {
    if (b->op_group[i] < 0 || gfind(b->groups, b->op_group[i]) != g) continue;
    iron_ir_op_t *op = b->blk->ops[i];
    last = op;
    for (uint32_t k = 0; k < op->num_operands; ++k) {
      const iron_ir_value_t *v = op->operands[k];
      if (vgroup(b, v) == g) continue;
      bool seen = false;
      for (uint32_t j = 0; j < nin && !seen; ++j) seen = ins[j] == v;
      if (!seen) ins[nin++] = v;
    }
    for (uint32_t r = 0; r < op->num_results; ++r)
      if (op->results[r].id < b->ids && escapes[op->results[r].id])
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
  iron_ir_value_t *ret_results = iron_arena_alloc(a, sizeof(iron_ir_value_t));
  iron_ir_region_t *ret_regions = iron_arena_alloc(a, sizeof(iron_ir_region_t));
  if (!fop || !operands || !results || !region || !body || !args ||
      !body_ops || !ret || !ret_operands || !ret_results || !ret_regions) {
    free(ins);
    free(outs);
    free(local);
    return oom();
  }
  memset(fop, 0, sizeof(*fop));
  memset(region, 0, sizeof(*region));
  memset(body, 0, sizeof(*body));
  memset(ret, 0, sizeof(*ret));
  fop->kind = IRON_OP_FUSION;
  fop->name = iron_op_kind_name(IRON_OP_FUSION);
  fop->loc = last->loc;  // errors point at the group's last op
  fop->parent = b->blk;
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
  for (uint32_t j = 0; j < nin; ++j) {
    operands[j] = (iron_ir_value_t *)ins[j];
    memset(&args[j], 0, sizeof(args[j]));
    args[j].type = ins[j]->type;
    args[j].def_block = body;
    args[j].index = j;
    args[j].id = c->f->num_values++;
    if (ins[j]->id < b->ids) local[ins[j]->id] = &args[j];
  }
  uint32_t nb = 0;
  for (uint32_t i = 0; i < b->n; ++i) {
    if (b->op_group[i] < 0 || gfind(b->groups, b->op_group[i]) != g) continue;
    iron_ir_op_t *op = b->blk->ops[i];
    for (uint32_t k = 0; k < op->num_operands; ++k) {
      iron_ir_value_t *v = op->operands[k];
      if (vgroup(b, v) != g && v->id < b->ids && local[v->id])
        op->operands[k] = local[v->id];
    }
    op->parent = body;
    body_ops[nb++] = op;
  }
  for (uint32_t j = 0; j < nout; ++j) {
    memset(&results[j], 0, sizeof(results[j]));
    results[j].type = outs[j]->type;
    results[j].def_op = fop;
    results[j].index = j;
    results[j].id = c->f->num_values++;
    remap[outs[j]->id] = &results[j];
    ret_operands[j] = outs[j];
  }
  memset(ret_results, 0, sizeof(*ret_results));
  memset(ret_regions, 0, sizeof(*ret_regions));
  ret->kind = IRON_OP_RETURN;
  ret->name = iron_op_kind_name(IRON_OP_RETURN);
  ret->loc = last->loc;
  ret->parent = body;
  ret->num_operands = nout;
  ret->operands = ret_operands;
  ret->results = ret_results;
  ret->regions = ret_regions;
  body_ops[nb++] = ret;
  body->num_ops = nb;
  body->ops = body_ops;
  free(ins);
  free(outs);
  free(local);
  c->fusions++;
  *out_op = fop;
  return IRON_OK;
}

typedef struct remap_ctx {
  iron_ir_value_t **remap;
  uint32_t ids;
} remap_ctx_t;

static void remap_block(iron_ir_block_t *blk, const remap_ctx_t *r) {
  for (uint32_t k = 0; k < blk->num_ops; ++k) {
    iron_ir_op_t *op = blk->ops[k];
    for (uint32_t i = 0; i < op->num_operands; ++i) {
      iron_ir_value_t *v = op->operands[i];
      if (v && v->id < r->ids && r->remap[v->id])
        op->operands[i] = r->remap[v->id];
    }
    if (op->kind == IRON_OP_FUSION) {
      // Only a fusion's operands name outer values.
      continue;
    }
    for (uint32_t q = 0; q < op->num_regions; ++q)
      for (uint32_t s = 0; s < op->regions[q].num_blocks; ++s)
        remap_block(&op->regions[q].blocks[s], r);
  }
}

// --- ordering -----------------------------------------------------------------

// Nodes: ops outside groups and one per kept group; a node's key is its
// place (a group's: its last member's).
typedef struct order_ctx {
  rblock_t *b;
  int32_t *node_of;  // by op index
  int32_t self;
  uint32_t *indeg;
  int32_t **succ;
  uint32_t *nsucc, *capsucc;
  bool oom;
} order_ctx_t;

static void add_edge(const iron_ir_value_t *v, void *arg) {
  order_ctx_t *o = arg;
  rblock_t *b = o->b;
  if (!v || v->id >= b->ids || b->val_op[v->id] < 0) return;
  int32_t from = o->node_of[b->val_op[v->id]];
  if (from < 0 || from == o->self) return;
  if (o->nsucc[from] == o->capsucc[from]) {
    uint32_t cap = o->capsucc[from] ? 2 * o->capsucc[from] : 4;
    int32_t *ns = realloc(o->succ[from], cap * sizeof(int32_t));
    if (!ns) {
      o->oom = true;
      return;
    }
    o->succ[from] = ns;
    o->capsucc[from] = cap;
  }
  o->succ[from][o->nsucc[from]++] = o->self;
  o->indeg[o->self]++;
}

static void heap_push(uint32_t *h, uint32_t *n, const uint32_t *key,
                      uint32_t x) {
  uint32_t i = (*n)++;
  h[i] = x;
  while (i > 0) {
    uint32_t p = (i - 1) / 2;
    if (key[h[p]] <= key[h[i]]) break;
    uint32_t t = h[p];
    h[p] = h[i];
    h[i] = t;
    i = p;
  }
}

static uint32_t heap_pop(uint32_t *h, uint32_t *n, const uint32_t *key) {
  uint32_t top = h[0];
  h[0] = h[--(*n)];
  uint32_t i = 0;
  for (;;) {
    uint32_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < *n && key[h[l]] < key[h[m]]) m = l;
    if (r < *n && key[h[r]] < key[h[m]]) m = r;
    if (m == i) break;
    uint32_t t = h[m];
    h[m] = h[i];
    h[i] = t;
    i = m;
  }
  return top;
}

// Fills order[0..nodes) with the nodes in a topological order that keeps
// every node at its key as far as its dependencies allow. `node_of`: op
// index -> node (group members share their group's node); `key`: per node.
static iron_status_t topo_order(rblock_t *b, int32_t *node_of, uint32_t nodes,
                                const uint32_t *key, uint32_t *order) {
  order_ctx_t o;
  memset(&o, 0, sizeof(o));
  o.b = b;
  o.node_of = node_of;
  o.indeg = calloc(nodes + 1, sizeof(uint32_t));
  o.succ = calloc(nodes + 1, sizeof(int32_t *));
  o.nsucc = calloc(nodes + 1, sizeof(uint32_t));
  o.capsucc = calloc(nodes + 1, sizeof(uint32_t));
  uint32_t *heap = calloc(nodes + 1, sizeof(uint32_t));
  iron_status_t st = IRON_OK;
  if (!o.indeg || !o.succ || !o.nsucc || !o.capsucc || !heap) {
    st = oom();
    goto done;
  }
  for (uint32_t i = 0; i < b->n; ++i) {
    o.self = node_of[i];
    each_use(b->blk->ops[i], add_edge, &o);
  }
  if (o.oom) {
    st = oom();
    goto done;
  }
  uint32_t nh = 0, emitted = 0;
  for (uint32_t v = 0; v < nodes; ++v)
    if (o.indeg[v] == 0) heap_push(heap, &nh, key, v);
  while (nh) {
    uint32_t v = heap_pop(heap, &nh, key);
    order[emitted++] = v;
    for (uint32_t s = 0; s < o.nsucc[v]; ++s)
      if (--o.indeg[o.succ[v][s]] == 0)
        heap_push(heap, &nh, key, (uint32_t)o.succ[v][s]);
  }
  if (emitted != nodes)
    st = IRON_ERR(INTERNAL, "row fusion formed a cyclic group (%u of %u ops "
                  "ordered)", emitted, nodes);
done:
  if (o.succ)
    for (uint32_t v = 0; v < nodes; ++v) free(o.succ[v]);
  free(o.succ);
  free(o.indeg);
  free(o.nsucc);
  free(o.capsucc);
  free(heap);
  return st;
}

// One block (its inner blocks are done first: iron_fuse_walk_blocks).
static iron_status_t fuse_rows_block(void *arg, iron_ir_block_t *blk) {
  rctx_t *c = arg;
  uint32_t n = blk->num_ops, ids = c->f->num_values;
  if (n < 3) return IRON_OK;
  rblock_t b;
  memset(&b, 0, sizeof(b));
  b.c = c;
  b.blk = blk;
  b.n = n;
  b.ids = ids;
  b.op_group = malloc(sizeof(int32_t) * n);
  b.val_op = malloc(sizeof(int32_t) * (ids + 1));
  b.groups = calloc(n + 1, sizeof(rgroup_t));
  b.op_deps = calloc(n + 1, sizeof(depset_t));
  bool *after = calloc(n + 1, sizeof(bool));
  bool *keep = calloc(n + 1, sizeof(bool));  // by group
  bool *escapes = calloc(ids + 1, sizeof(bool));
  iron_ir_value_t **remap = calloc(ids + 1, sizeof(*remap));
  int32_t *node_of = malloc(sizeof(int32_t) * (n + 1));
  int32_t *group_node = malloc(sizeof(int32_t) * (n + 1));
  uint32_t *key = calloc(n + 1, sizeof(uint32_t));
  uint32_t *order = calloc(n + 1, sizeof(uint32_t));
  iron_ir_op_t **node_op = calloc(n + 1, sizeof(*node_op));
  iron_ir_op_t **clones = NULL;  // by op index: the copy of a member
  bool *clone_after = NULL;      // by op index: the copy goes after it
  iron_status_t st = IRON_OK;
  if (!b.op_group || !b.val_op || !b.groups || !b.op_deps || !after ||
      !keep || !escapes || !remap || !node_of || !group_node || !key ||
      !order || !node_op) {
    st = oom();
    goto done;
  }
  for (uint32_t i = 0; i <= ids; ++i) b.val_op[i] = -1;
  for (uint32_t i = 0; i < n; ++i) {
    b.op_group[i] = -1;
    const iron_ir_op_t *op = blk->ops[i];
    for (uint32_t r = 0; r < op->num_results; ++r)
      if (op->results[r].id < ids) b.val_op[op->results[r].id] = (int32_t)i;
  }
  for (uint32_t i = 0; i < n; ++i) visit(&b, i);
  // Canonical groups; keep the valid ones, dissolve the others (their ops
  // run as before: the element-wise pass sees them next).
  valid_groups(&b, after, keep);
  bool any = false;
  for (int32_t g = 0; g < b.ngroups; ++g) any = any || keep[g];
  if (!any) goto done;
  for (uint32_t i = 0; i < n; ++i) {
    if (b.op_group[i] < 0) continue;
    int32_t g = gfind(b.groups, b.op_group[i]);
    b.op_group[i] = keep[g] ? g : -1;
  }
  // Nodes in block order of their keys: an outside op is itself; a group
  // is placed where its last member was.
  uint32_t nodes = 0;
  for (uint32_t i = 0; i <= n; ++i) group_node[i] = -1;
  for (uint32_t i = 0; i < n; ++i) {
    int32_t g = b.op_group[i];
    if (g < 0) {
      node_of[i] = (int32_t)nodes;
      key[nodes] = i;
      node_op[nodes] = blk->ops[i];
      nodes++;
    } else {
      if (group_node[g] < 0) {
        group_node[g] = (int32_t)nodes;
        nodes++;
      }
      node_of[i] = group_node[g];
      key[group_node[g]] = i;  // the last member wins
    }
  }
  st = topo_order(&b, node_of, nodes, key, order);
  if (st) goto done;
  // Which member values are used outside their group (anywhere in the
  // function)?
  escape_ctx_t e = {&b, escapes, -1};
  for (uint32_t k = 0; k < c->f->body.num_blocks; ++k)
    walk_escapes(&e, &c->f->body.blocks[k]);
  // Members that only spread a value from outside (a splat constant, an
  // iota, a broadcast of a value from outside: a gradient's ones, a causal
  // mask spread over the heads) and are also used outside: a copy of the op, placed before the fusion, serves the
  // outside uses, so that the fusion does not write the array out.
  // Likewise a broadcast of a member's (smaller) value used outside (a
  // softmax's row sums spread over the rows for the backward pass): the
  // fusion writes the smaller value and a copy placed after it spreads it
  // (`clone_after[]` marks those).
  clones = calloc(n + 1, sizeof(*clones));
  clone_after = calloc(n + 1, sizeof(bool));
  if (!clones || !clone_after) {
    st = oom();
    goto done;
  }
  uint32_t nclones = 0;
  for (uint32_t i = 0; i < n && !st; ++i) {
    iron_ir_op_t *op = blk->ops[i];
    if (b.op_group[i] < 0 || op->num_results != 1 || op->num_regions ||
        op->results[0].id >= ids || !escapes[op->results[0].id])
      continue;
    bool spread = op->kind == IRON_OP_CONSTANT || op->kind == IRON_OP_IOTA;
    if (op->kind == IRON_OP_BROADCAST_IN_DIM && op->num_operands == 1 &&
        vgroup(&b, op->operands[0]) < 0)
      spread = true;
    const iron_ir_value_t *src = op->num_operands == 1 ? op->operands[0] : NULL;
    if (op->kind == IRON_OP_BROADCAST_IN_DIM && src && src->id < ids &&
        vgroup(&b, src) == b.op_group[i] &&
        iron_ir_type_num_elements(src->type) <
            iron_ir_type_num_elements(op->results[0].type)) {
      spread = true;
      clone_after[i] = true;
      escapes[src->id] = true;  // the fusion writes the smaller value
    }
    if (!spread) continue;
    iron_ir_op_t *cl = iron_arena_alloc(&c->m->arena, sizeof(*cl));
    iron_ir_value_t *res = iron_arena_alloc(&c->m->arena, sizeof(*res));
    iron_ir_value_t **ops = iron_arena_alloc_array(
        &c->m->arena, op->num_operands + 1, sizeof(iron_ir_value_t *));
    if (!cl || !res || !ops) {
      st = oom();
      break;
    }
    *cl = *op;
    for (uint32_t k = 0; k < op->num_operands; ++k) ops[k] = op->operands[k];
    cl->operands = ops;
    *res = op->results[0];
    res->def_op = cl;
    res->id = c->f->num_values++;
    cl->results = res;
    remap[op->results[0].id] = res;
    escapes[op->results[0].id] = false;
    clones[i] = cl;
    nclones++;
  }
  for (int32_t g = 0; g < b.ngroups && !st; ++g) {
    if (group_node[g] < 0) continue;
    st = make_fusion(&b, g, escapes, remap, &node_op[group_node[g]]);
  }
  if (st) goto done;
  iron_ir_op_t **new_ops = iron_arena_alloc_array(
      &c->m->arena, nodes + nclones + 1, sizeof(*new_ops));
  if (!new_ops) {
    st = oom();
    goto done;
  }
  uint32_t nn = 0;
  for (uint32_t k = 0; k < nodes; ++k) {
    iron_ir_op_t *op = node_op[order[k]];
    bool fusion = op->kind == IRON_OP_FUSION;
    if (fusion) {
      // The copies of its members go first (those spreading its own
      // values after it).
      for (uint32_t i = 0; i < n; ++i)
        if (clones[i] && !clone_after[i] &&
            group_node[b.op_group[i]] == (int32_t)order[k])
          new_ops[nn++] = clones[i];
    }
    // A group none of whose values is used (dead code left by inlining)
    // disappears.
    if (!fusion || op->num_results) new_ops[nn++] = op;
    for (uint32_t i = 0; fusion && i < n; ++i)
      if (clones[i] && clone_after[i] &&
          group_node[b.op_group[i]] == (int32_t)order[k])
        new_ops[nn++] = clones[i];
  }
  blk->ops = new_ops;
  blk->num_ops = nn;
  remap_ctx_t r = {remap, ids};
  for (uint32_t k = 0; k < c->f->body.num_blocks; ++k)
    remap_block(&c->f->body.blocks[k], &r);
done:
  free(b.op_group);
  free(b.val_op);
  free(b.groups);
  free(b.op_deps);
  free(after);
  free(keep);
  free(escapes);
  free(remap);
  free(node_of);
  free(group_node);
  free(key);
  free(order);
  free(node_op);
  free(clones);
  free(clone_after);
  return st;
}

iron_status_t iron_compiler_fuse_rows(iron_ir_module_t *m,
                                      iron_fuse_predicate_t can_fuse,
                                      iron_row_fuse_predicate_t row_fusable,
                                      int *out_num_fusions) {
  rctx_t c = {m, NULL, can_fuse, row_fusable, 0};
  if (out_num_fusions) *out_num_fusions = 0;
  if (!can_fuse || !row_fusable) return IRON_OK;
  for (uint32_t i = 0; i < m->num_funcs; ++i) {
    c.f = &m->funcs[i];
    for (uint32_t k = 0; k < c.f->body.num_blocks; ++k)
      IRON_RETURN_IF_ERROR_PLAIN(iron_fuse_walk_blocks(
          &c.f->body.blocks[k], can_fuse, fuse_rows_block, &c));
  }
  if (out_num_fusions) *out_num_fusions = c.fusions;
  return IRON_OK;
}
