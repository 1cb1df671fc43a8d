#include "compiler/scan_in_place.h"

#include <stdlib.h>
#include <string.h>

#include "compiler/counted_loop.h"
#include "ir/builder.h"

typedef struct {
  iron_ir_module_t *m;
  iron_ir_func_t *f;
  int count;
} pass_t;

// The ops of one (xs, ys) pair (scan_in_place.h names them).
typedef struct {
  uint32_t x, y;       // carried-value indices of xs and ys
  iron_ir_op_t *s1;    // k1 = dynamic_slice(xs, i, 0...)    ([1, ...])
  iron_ir_op_t *k1r;   // reshape of s1 dropping the 1, or NULL
  iron_ir_op_t *dk;    // k2 = dynamic_update_slice(k1, u, s...)
  iron_ir_op_t *uy;    // [1, ...] reshape of k2, or NULL (k2 is [1, ...])
  iron_ir_op_t *dy;    // ys' = dynamic_update_slice(ys, ., i, 0...)
} pair_t;

static iron_status_t oom(void) {
  return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory in scan-in-place");
}

// Uses of v by the ops of blk, nested regions included.
static uint32_t count_uses(const iron_ir_block_t *blk,
                           const iron_ir_value_t *v) {
  uint32_t n = 0;
  for (uint32_t k = 0; k < blk->num_ops; ++k) {
    const iron_ir_op_t *op = blk->ops[k];
    for (uint32_t i = 0; i < op->num_operands; ++i) n += op->operands[i] == v;
    for (uint32_t r = 0; r < op->num_regions; ++r)
      for (uint32_t b = 0; b < op->regions[r].num_blocks; ++b)
        n += count_uses(&op->regions[r].blocks[b], v);
  }
  return n;
}

static uint32_t func_uses(const iron_ir_func_t *f, const iron_ir_value_t *v) {
  uint32_t n = 0;
  for (uint32_t b = 0; b < f->body.num_blocks; ++b)
    n += count_uses(&f->body.blocks[b], v);
  return n;
}

static void replace_uses(iron_ir_block_t *blk, const iron_ir_value_t *from,
                         iron_ir_value_t *to) {
  for (uint32_t k = 0; k < blk->num_ops; ++k) {
    iron_ir_op_t *op = blk->ops[k];
    for (uint32_t i = 0; i < op->num_operands; ++i)
      if (op->operands[i] == from) op->operands[i] = to;
    for (uint32_t r = 0; r < op->num_regions; ++r)
      for (uint32_t b = 0; b < op->regions[r].num_blocks; ++b)
        replace_uses(&op->regions[r].blocks[b], from, to);
  }
}

static bool is_zero(const iron_ir_value_t *v) {
  int64_t c;
  return iron_ir_const_int(v, &c) && c == 0;
}

// Which slab iteration `ctr` (0 .. n-1) reads or writes through start v:
// kForward when v is the counter, kReverse when it is n - 1 - counter
// (jax's scan(reverse=True): (n - ctr) - 1), either also under jax's wrap
// of a negative index (select(v < 0, v + n, v), which is v for 0 <= v).
// Both visit every slab once.
enum { kNotSlab = 0, kForward = 1, kReverse = 2 };

static int slab_index(const iron_ir_value_t *v, const iron_ir_value_t *ctr,
                      int64_t n) {
  const iron_ir_op_t *sel = v->def_op;
  if (sel && sel->kind == IRON_OP_SELECT && sel->num_operands == 3) {
    const iron_ir_value_t *x = sel->operands[2];
    const iron_ir_op_t *cmp = sel->operands[0]->def_op;
    const iron_ir_op_t *add = sel->operands[1]->def_op;
    if (!cmp || cmp->kind != IRON_OP_COMPARE || cmp->num_operands != 2 ||
        cmp->operands[0] != x || !is_zero(cmp->operands[1]) ||
        iron_ir_op_enum(cmp, "comparison_direction", -1) != IRON_CMP_LT ||
        !add || add->kind != IRON_OP_ADD || add->num_operands != 2 ||
        add->operands[0] != x)
      return kNotSlab;
    v = x;
  }
  if (v == ctr) return kForward;
  int64_t a, b;
  const iron_ir_op_t *sub = v->def_op;
  if (!sub || sub->kind != IRON_OP_SUBTRACT || sub->num_operands != 2)
    return kNotSlab;
  if (sub->operands[1] == ctr && iron_ir_const_int(sub->operands[0], &a))
    return a == n - 1 ? kReverse : kNotSlab;  // (n - 1) - ctr
  const iron_ir_op_t *in = sub->operands[0]->def_op;
  if (in && in->kind == IRON_OP_SUBTRACT && in->num_operands == 2 &&
      in->operands[1] == ctr && iron_ir_const_int(in->operands[0], &a) &&
      iron_ir_const_int(sub->operands[1], &b))
    return a - b == n - 1 ? kReverse : kNotSlab;  // (a - ctr) - b
  return kNotSlab;
}

// big is [1, small's dims...] of small's dtype.
static bool unit_lead(const iron_ir_type_t *big, const iron_ir_type_t *small) {
  if (big->kind != IRON_TYPE_TENSOR || small->kind != IRON_TYPE_TENSOR ||
      big->dtype != small->dtype || big->rank != small->rank + 1 ||
      big->dims[0] != 1)
    return false;
  return memcmp(big->dims + 1, small->dims,
                (size_t)small->rank * sizeof(int64_t)) == 0;
}

// How op (a dynamic_slice or a dynamic_update_slice with starts from
// operand `first`) indexes a stacked array: at [slab, 0, ...] (slab_index)
// or not (kNotSlab).
static int starts_at_slab(const iron_ir_op_t *op, uint32_t first,
                          const iron_ir_value_t *ctr, int64_t n) {
  if (op->num_operands <= first) return kNotSlab;
  for (uint32_t i = first + 1; i < op->num_operands; ++i)
    if (!is_zero(op->operands[i])) return kNotSlab;
  return slab_index(op->operands[first], ctr, n);
}

// Whether carried value y of while `w` (body `b`, counter `ctr`, `trips`
// iterations from 0 by 1) is the ys of a pair; fills *p.
static bool match_pair(const iron_ir_func_t *f, const iron_ir_op_t *w,
                       const iron_ir_block_t *b, uint32_t y,
                       const iron_ir_value_t *ctr, int64_t trips, pair_t *p) {
  const iron_ir_op_t *ret = b->ops[b->num_ops - 1];
  const iron_ir_value_t *ay = &b->args[y];
  const iron_ir_type_t *t = ay->type;
  if (t->kind != IRON_TYPE_TENSOR || t->rank < 1 || t->dims[0] != trips ||
      !iron_ir_type_is_static(t) || y >= ret->num_operands)
    return false;
  *p = (pair_t){.y = y};
  // ys' = dynamic_update_slice(ys, upd, i, 0...), returned, ys read once.
  p->dy = ret->operands[y]->def_op;
  if (!p->dy || p->dy->kind != IRON_OP_DYNAMIC_UPDATE_SLICE ||
      p->dy->parent != b || p->dy->operands[0] != ay ||
      p->dy->num_operands != 2 + (uint32_t)t->rank ||
      starts_at_slab(p->dy, 2, ctr, trips) == kNotSlab ||
      count_uses(b, ay) != 1 ||
      count_uses(b, &p->dy->results[0]) != 1)
    return false;
  iron_ir_value_t *upd = p->dy->operands[1], *k2 = upd;
  const iron_ir_op_t *u = upd->def_op;
  if (u && u->parent == b &&
      (u->kind == IRON_OP_RESHAPE || iron_ir_broadcast_is_reshape(u)) &&
      unit_lead(upd->type, u->operands[0]->type) &&
      count_uses(b, upd) == 1) {
    p->uy = upd->def_op;
    k2 = u->operands[0];
  }
  // k2 = dynamic_update_slice(k1, u, s...) with k1 read only there.
  p->dk = k2->def_op;
  if (!p->dk || p->dk->kind != IRON_OP_DYNAMIC_UPDATE_SLICE ||
      p->dk->parent != b || p->dk->num_operands < 2 ||
      count_uses(b, p->dk->operands[0]) != 1)
    return false;
  for (uint32_t i = 2; i < p->dk->num_operands; ++i)
    if (p->dk->operands[i]->type->dtype != ctr->type->dtype) return false;
  const iron_ir_value_t *k1 = p->dk->operands[0];
  const iron_ir_value_t *slab = k1;
  if (p->uy) {
    p->k1r = k1->def_op;
    if (!p->k1r || p->k1r->kind != IRON_OP_RESHAPE || p->k1r->parent != b)
      return false;
    slab = p->k1r->operands[0];
    if (!unit_lead(slab->type, k1->type) || count_uses(b, slab) != 1)
      return false;
  } else if (p->dk->operands[1]->type->rank < 1 ||
             p->dk->operands[1]->type->dims[0] != 1) {
    return false;  // k2 is [1, ...]: its update must be one slab deep too
  }
  // The slab: dynamic_slice(xs, i, 0...) of [1, ys's other dims].
  p->s1 = slab->def_op;
  if (!p->s1 || p->s1->kind != IRON_OP_DYNAMIC_SLICE || p->s1->parent != b ||
      p->s1->num_operands != 1 + (uint32_t)t->rank ||
      starts_at_slab(p->s1, 1, ctr, trips) !=
          starts_at_slab(p->dy, 2, ctr, trips) ||
      slab->type->dtype != t->dtype ||
      slab->type->rank != t->rank || slab->type->dims[0] != 1 ||
      memcmp(slab->type->dims + 1, t->dims + 1,
             (size_t)(t->rank - 1) * sizeof(int64_t)) != 0)
    return false;
  // xs: a carried value of ys's type that the body passes through and
  // reads only there, whose final value nobody reads.
  const iron_ir_value_t *ax = p->s1->operands[0];
  if (ax->def_op || ax->def_block != b || ax->index == y ||
      !iron_ir_type_equal(ax->type, t) || ret->operands[ax->index] != ax ||
      count_uses(b, ax) != 2 || func_uses(f, &w->results[ax->index]) != 0)
    return false;
  p->x = ax->index;
  return true;
}

// The new ops go into `tmp`, then take dk's place in `b`.
static iron_ir_value_t *add_op(pass_t *ps, iron_ir_block_t *tmp,
                               const iron_ir_op_t *like, iron_op_kind_t kind,
                               uint32_t n, iron_ir_value_t *const *operands,
                               const iron_ir_type_t *type) {
  if (!type) return NULL;
  iron_ir_value_t *v =
      iron_ir_builder_op1(ps->m, ps->f, tmp, kind, n, operands, type);
  if (v) v->def_op->loc = like->loc;
  return v;
}

static iron_status_t rewrite_pair(pass_t *ps, iron_ir_op_t *w,
                                  iron_ir_block_t *b, const pair_t *p) {
  iron_ir_op_t *ret = b->ops[b->num_ops - 1];
  iron_ir_value_t *ax = &b->args[p->x], *ay = &b->args[p->y];
  const iron_ir_type_t *t = ax->type;
  iron_ir_value_t *u = p->dk->operands[1];
  iron_ir_value_t *k2 = &p->dk->results[0];
  bool k2_read = count_uses(b, k2) > 1;  // beyond the stacking into ys
  iron_ir_block_t tmp = {0};
  // xs' = dynamic_update_slice(xs, [1, ...] u, i, s...)
  if (p->uy) {
    int64_t dims[IRON_MAX_RANK];
    dims[0] = 1;
    memcpy(dims + 1, u->type->dims, (size_t)u->type->rank * sizeof(int64_t));
    u = add_op(ps, &tmp, p->dk, IRON_OP_RESHAPE, 1, &u,
               iron_ir_builder_tensor_type(ps->m, u->type->dtype,
                                           u->type->rank + 1, dims));
    if (!u) return oom();
  }
  iron_ir_value_t *ops[IRON_MAX_RANK + 2];
  uint32_t n = 0;
  ops[n++] = ax;
  ops[n++] = u;
  ops[n++] = p->s1->operands[1];  // the slab's index, defined before it
  for (uint32_t i = p->uy ? 2 : 3; i < p->dk->num_operands; ++i)
    ops[n++] = p->dk->operands[i];
  iron_ir_value_t *xs2 =
      add_op(ps, &tmp, p->dk, IRON_OP_DYNAMIC_UPDATE_SLICE, n, ops, t);
  if (!xs2) return oom();
  // k2 for its other readers: the slab of xs', read after the write.
  iron_ir_value_t *k2n = NULL;
  if (k2_read) {
    ops[0] = xs2;
    for (uint32_t i = 1; i < p->s1->num_operands; ++i)
      ops[i] = p->s1->operands[i];
    k2n = add_op(ps, &tmp, p->s1, IRON_OP_DYNAMIC_SLICE, p->s1->num_operands,
                 ops, p->s1->results[0].type);
    if (!k2n) return oom();
    k2n->def_op->attrs = p->s1->attrs;
    k2n->def_op->num_attrs = p->s1->num_attrs;
    if (p->k1r) {
      k2n = add_op(ps, &tmp, p->k1r, IRON_OP_RESHAPE, 1, &k2n, k2->type);
      if (!k2n) return oom();
    }
  }
  // Splice: the new ops where dk was, the pair's old ops gone.
  const iron_ir_op_t *gone[5] = {p->s1, p->k1r, p->dk, p->uy, p->dy};
  uint32_t total = b->num_ops + tmp.num_ops, m = 0;
  iron_ir_op_t **list =
      iron_arena_alloc_array(&ps->m->arena, total + 1, sizeof(*list));
  if (!list) return oom();
  for (uint32_t k = 0; k < b->num_ops; ++k) {
    iron_ir_op_t *op = b->ops[k];
    if (op == p->dk)
      for (uint32_t j = 0; j < tmp.num_ops; ++j) {
        tmp.ops[j]->parent = b;
        list[m++] = tmp.ops[j];
      }
    bool drop = false;
    for (int g = 0; g < 5; ++g) drop = drop || op == gone[g];
    if (!drop) list[m++] = op;
  }
  b->ops = list;
  b->num_ops = m;
  if (k2n) replace_uses(b, k2, k2n);
  ret->operands[p->x] = xs2;
  ret->operands[p->y] = ay;
  // The loop's ys result is its xs result now.
  for (uint32_t q = 0; q < ps->f->body.num_blocks; ++q)
    replace_uses(&ps->f->body.blocks[q], &w->results[p->y], &w->results[p->x]);
  ps->count++;
  return IRON_OK;
}

static void remove_op(iron_ir_op_t *op) {
  iron_ir_block_t *blk = op->parent;
  uint32_t m = 0;
  for (uint32_t k = 0; k < blk->num_ops; ++k)
    if (blk->ops[k] != op) blk->ops[m++] = blk->ops[k];
  blk->num_ops = m;
}

// Drops the carried values of while `w` that nothing reads (the body
// passes them through, the condition ignores them, nobody reads the
// loop's result): the ys of rewritten pairs. Their initial values' ops go
// too when nothing else reads them (the zeros jax stacks ys into: a
// memset of the whole stacked array per call).
static iron_status_t drop_dead_carries(pass_t *ps, iron_ir_op_t *w) {
  iron_ir_block_t *cond = &w->regions[0].blocks[0];
  iron_ir_block_t *b = &w->regions[1].blocks[0];
  iron_ir_op_t *ret = b->ops[b->num_ops - 1];
  uint32_t n = w->num_results, keep = 0;
  if (cond->num_args != n || ret->num_operands != n) return IRON_OK;
  bool *dead = calloc(n + 1, sizeof(bool));
  if (!dead) return oom();
  for (uint32_t j = 0; j < n; ++j) {
    dead[j] = b->args[j].type->kind == IRON_TYPE_TENSOR &&
              ret->operands[j] == &b->args[j] &&
              count_uses(b, &b->args[j]) == 1 &&
              count_uses(cond, &cond->args[j]) == 0 &&
              func_uses(ps->f, &w->results[j]) == 0;
    keep += !dead[j];
  }
  if (keep == n) {
    free(dead);
    return IRON_OK;
  }
  iron_arena_t *a = &ps->m->arena;
  iron_ir_value_t **ops = iron_arena_alloc_array(a, keep + 1, sizeof(*ops));
  iron_ir_value_t **rops = iron_arena_alloc_array(a, keep + 1, sizeof(*rops));
  iron_ir_value_t *res = iron_arena_alloc_array(a, keep + 1, sizeof(*res));
  iron_ir_value_t *cargs = iron_arena_alloc_array(a, keep + 1, sizeof(*cargs));
  iron_ir_value_t *bargs = iron_arena_alloc_array(a, keep + 1, sizeof(*bargs));
  if (!ops || !rops || !res || !cargs || !bargs) {
    free(dead);
    return oom();
  }
  uint32_t m = 0;
  for (uint32_t j = 0; j < n; ++j) {
    if (dead[j]) continue;
    ops[m] = w->operands[j];
    res[m] = w->results[j];
    cargs[m] = cond->args[j];
    bargs[m] = b->args[j];
    res[m].index = cargs[m].index = bargs[m].index = m;
    for (uint32_t q = 0; q < ps->f->body.num_blocks; ++q)
      replace_uses(&ps->f->body.blocks[q], &w->results[j], &res[m]);
    replace_uses(cond, &cond->args[j], &cargs[m]);
    replace_uses(b, &b->args[j], &bargs[m]);
    m++;
  }
  m = 0;
  for (uint32_t j = 0; j < n; ++j)
    if (!dead[j]) rops[m++] = ret->operands[j];
  iron_ir_value_t **old_inits = w->operands;
  w->operands = ops;
  w->num_operands = keep;
  w->results = res;
  w->num_results = keep;
  cond->args = cargs;
  cond->num_args = keep;
  b->args = bargs;
  b->num_args = keep;
  ret->operands = rops;
  ret->num_operands = keep;
  for (uint32_t j = 0; j < n; ++j) {
    iron_ir_op_t *d = dead[j] ? old_inits[j]->def_op : NULL;
    // (Only from the loop's own block: an enclosing block is being walked.)
    if (d && d->parent == w->parent && d->num_regions == 0 &&
        d->num_results == 1 &&
        (d->kind == IRON_OP_BROADCAST_IN_DIM || d->kind == IRON_OP_CONSTANT) &&
        func_uses(ps->f, &d->results[0]) == 0)
      remove_op(d);
  }
  free(dead);
  return IRON_OK;
}

static iron_status_t walk_block(pass_t *ps, iron_ir_block_t *blk) {
  for (uint32_t k = 0; k < blk->num_ops; ++k) {
    iron_ir_op_t *op = blk->ops[k];
    bool flow = op->kind == IRON_OP_WHILE || op->kind == IRON_OP_IF ||
                op->kind == IRON_OP_CASE;
    for (uint32_t r = 0; flow && r < op->num_regions; ++r)
      for (uint32_t q = 0; q < op->regions[r].num_blocks; ++q)
        IRON_RETURN_IF_ERROR_PLAIN(walk_block(ps, &op->regions[r].blocks[q]));
    iron_counted_loop_t c;
    if (op->kind != IRON_OP_WHILE || !iron_counted_loop(op, &c) ||
        !c.init_known || c.init != 0 || c.step != 1 || c.limit_index >= 0 ||
        c.limit <= 0)
      continue;
    iron_ir_block_t *b = &op->regions[1].blocks[0];
    if (b->num_args != op->num_results || b->num_args != op->num_operands)
      continue;
    int before = ps->count;
    for (uint32_t y = 0; y < b->num_args; ++y) {
      pair_t p;
      if (y != c.counter &&
          match_pair(ps->f, op, b, y, &b->args[c.counter], c.limit, &p))
        IRON_RETURN_IF_ERROR_PLAIN(rewrite_pair(ps, op, b, &p));
    }
    if (ps->count > before) {
      IRON_RETURN_IF_ERROR_PLAIN(drop_dead_carries(ps, op));
      // The loop's operands' ops may have been removed before index k.
      for (k = 0; k < blk->num_ops && blk->ops[k] != op; ++k) {
      }
    }
  }
  return IRON_OK;
}

iron_status_t iron_compiler_scan_in_place(iron_ir_module_t *module,
                                          int *out_count) {
  pass_t ps = {.m = module};
  const char *e = getenv("IRON_SCAN_IN_PLACE");
  if (!(e && strcmp(e, "0") == 0))
    for (uint32_t i = 0; i < module->num_funcs; ++i) {
      ps.f = &module->funcs[i];
      for (uint32_t q = 0; q < ps.f->body.num_blocks; ++q)
        IRON_RETURN_IF_ERROR_PLAIN(walk_block(&ps, &ps.f->body.blocks[q]));
    }
  if (out_count) *out_count = ps.count;
  return IRON_OK;
}
