// The CUDA fusion planner (cuda_fusion_plan.h): which ops a fusion may
// hold, the shape it iterates over, and how each input and output is
// reached. Pure functions of the IR.
#include "device/cuda/cuda_fusion_plan.h"

#include <stdlib.h>
#include <string.h>

#include "device/cuda/gen/scalar.h"

bool iron_cuda_fusion_op_supported(iron_op_kind_t kind) {
  if (iron_cuda_scalar_op_supported(kind)) return true;
  switch (kind) {
    case IRON_OP_BROADCAST_IN_DIM:
    case IRON_OP_IOTA:
    case IRON_OP_SLICE:
    case IRON_OP_TRANSPOSE:
    case IRON_OP_DYNAMIC_SLICE:
      return true;
    default:
      return false;
  }
}

bool iron_cuda_fusion_is_indexed_load(iron_op_kind_t k) {
  return k == IRON_OP_SLICE || k == IRON_OP_TRANSPOSE ||
         k == IRON_OP_DYNAMIC_SLICE;
}

bool iron_cuda_fusion_needs_coords(const iron_cuda_fusion_t *f) {
  for (uint32_t i = 0; i < f->num_ops; ++i) {
    iron_op_kind_t k = f->ops[i]->kind;
    if (k == IRON_OP_BROADCAST_IN_DIM || k == IRON_OP_IOTA ||
        iron_cuda_fusion_is_indexed_load(k) ||
        k == IRON_OP_DYNAMIC_UPDATE_SLICE)
      return true;
  }
  return false;
}

bool iron_cuda_fusion_reads_input(const iron_cuda_fusion_t *f, uint32_t i) {
  const iron_ir_value_t *v = f->inputs[i];
  for (uint32_t j = 0; j < f->num_outputs; ++j) {
    if (f->outputs[j] == v) return true;
  }
  for (uint32_t o = 0; o < f->num_ops; ++o) {
    const iron_ir_op_t *op = f->ops[o];
    if (op->kind == IRON_OP_BROADCAST_IN_DIM) continue;
    // The operand of an indexed load is read at its own indices (a
    // dynamic_slice's start indices are read directly).
    uint32_t first = iron_cuda_fusion_is_indexed_load(op->kind) ? 1
                     : op->kind == IRON_OP_DYNAMIC_UPDATE_SLICE ? 2
                                                                : 0;
    for (uint32_t k = first; k < op->num_operands; ++k) {
      if (op->operands[k] == v) return true;
    }
  }
  return false;
}

const iron_ir_op_t *iron_cuda_fusion_dus_root(const iron_cuda_fusion_t *f,
                                              uint32_t j) {
  const iron_ir_op_t *d = f->outputs[j]->def_op;
  return d && d->kind == IRON_OP_DYNAMIC_UPDATE_SLICE ? d : NULL;
}

static bool is_member(const iron_cuda_fusion_t *f, const iron_ir_op_t *op) {
  for (uint32_t o = 0; op && o < f->num_ops; ++o)
    if (f->ops[o] == op) return true;
  return false;
}

// Whether a and b have the same dims once their size-1 dims are dropped.
static bool same_dims_but_units(const iron_ir_type_t *a,
                                const iron_ir_type_t *b) {
  int32_t i = 0, j = 0;
  for (;;) {
    while (i < a->rank && a->dims[i] == 1) ++i;
    while (j < b->rank && b->dims[j] == 1) ++j;
    if (i == a->rank || j == b->rank) return i == a->rank && j == b->rank;
    if (a->dims[i++] != b->dims[j++]) return false;
  }
}

// A member that only adds or drops size-1 dims of a value the fusion
// computes (a reshape or an in-order broadcast_in_dim) to feed a
// dynamic_update_slice root's update: fuse.c lets such an op into a group
// of another shape.
static bool is_unit_reshape_of_member(const iron_cuda_fusion_t *f,
                                      const iron_ir_op_t *op) {
  if ((op->kind != IRON_OP_RESHAPE && op->kind != IRON_OP_BROADCAST_IN_DIM) ||
      op->num_operands != 1 || op->num_results != 1 ||
      !is_member(f, op->operands[0]->def_op))
    return false;
  bool feeds_root = false;
  for (uint32_t o = 0; o < f->num_ops && !feeds_root; ++o)
    feeds_root = f->ops[o]->kind == IRON_OP_DYNAMIC_UPDATE_SLICE &&
                 f->ops[o]->num_operands > 1 &&
                 f->ops[o]->operands[1] == &op->results[0];
  if (!feeds_root) return false;
  if (op->kind == IRON_OP_BROADCAST_IN_DIM)
    return iron_ir_broadcast_is_reshape(op);
  return same_dims_but_units(op->operands[0]->type, op->results[0].type);
}

// The shape the fusion iterates over: the group's shape (fuse.c), which
// every member's result has except dynamic_update_slice roots (the
// operand's shape), unit reshapes of member values feeding a root's update,
// indexed loads and iotas that a reshape took to the group's shape (as
// many elements) and one-element values computed for the group (start
// indices: every thread computes them). So: the first other member's
// result of more than one element (a member computed from one of the
// group's values and reshaped, which a hand-built fusion may hold, is
// read by linear index whatever its dims); failing that, a root's update
// (through such a unit reshape: the value it reshapes), a load's result, or any
// other member's (a group of one element).
// An iota whose value a reshape member takes to another shape.
static bool is_reshaped_iota(const iron_cuda_fusion_t *f,
                             const iron_ir_op_t *op) {
  if (op->kind != IRON_OP_IOTA || op->num_results != 1) return false;
  for (uint32_t o = 0; o < f->num_ops; ++o) {
    const iron_ir_op_t *u = f->ops[o];
    if ((u->kind == IRON_OP_RESHAPE || u->kind == IRON_OP_BROADCAST_IN_DIM) &&
        u->num_operands == 1 && u->operands[0] == &op->results[0] &&
        !iron_ir_type_equal(u->results[0].type, op->results[0].type))
      return true;
  }
  return false;
}

// A reshape (or a broadcast_in_dim that is one) between an indexed load
// and another such reshape: fuse.c lets a load's chain of reshapes join a
// group ([1, t, d] -> [t, d] -> [t, heads, dh]); only the chain's last
// link has the group's shape.
static bool is_inner_load_reshape(const iron_cuda_fusion_t *f,
                                  const iron_ir_op_t *op) {
  if ((op->kind != IRON_OP_RESHAPE && !iron_ir_broadcast_is_reshape(op)) ||
      op->num_operands != 1 || op->num_results != 1)
    return false;
  const iron_ir_op_t *d = op->operands[0]->def_op;
  bool from_load = false;
  for (int hops = 0; hops < 8 && d && is_member(f, d); ++hops) {
    if (iron_cuda_fusion_is_indexed_load(d->kind)) {
      from_load = true;
      break;
    }
    if (d->kind != IRON_OP_RESHAPE && !iron_ir_broadcast_is_reshape(d)) break;
    d = d->operands[0]->def_op;
  }
  if (!from_load) return false;
  for (uint32_t o = 0; o < f->num_ops; ++o) {
    const iron_ir_op_t *u = f->ops[o];
    if ((u->kind == IRON_OP_RESHAPE || iron_ir_broadcast_is_reshape(u)) &&
        u->num_operands == 1 && u->operands[0] == &op->results[0])
      return true;
  }
  return false;
}

static bool is_space_member(const iron_cuda_fusion_t *f,
                            const iron_ir_op_t *op) {
  return op->kind != IRON_OP_DYNAMIC_UPDATE_SLICE &&
         !iron_cuda_fusion_is_indexed_load(op->kind) &&
         !is_unit_reshape_of_member(f, op) && !is_reshaped_iota(f, op) &&
         !is_inner_load_reshape(f, op) && op->num_results == 1;
}

static void mark_ancestors(const iron_cuda_fusion_t *f, uint8_t *phase,
                           const iron_ir_value_t *v);
static int32_t op_index(const iron_cuda_fusion_t *f, const iron_ir_op_t *op);
static bool is_transpose(const iron_ir_op_t *op);
static bool mark_before_pivots(const iron_cuda_fusion_t *f, uint8_t *pre);

// The iteration space: the shape of the members that are not one-element
// feeds (fuse.c's scalar groups join fusions of any shape, an empty one
// too: a zero-element space computes nothing, whatever its scalars).
static const iron_ir_type_t *space_of(const iron_cuda_fusion_t *f,
                                      const uint8_t *pre) {
  for (uint32_t o = 0; o < f->num_ops; ++o) {
    const iron_ir_op_t *op = f->ops[o];
    if (is_space_member(f, op) && !(pre && pre[o]) &&
        iron_ir_type_num_elements(op->results[0].type) != 1)
      return op->results[0].type;
  }
  for (uint32_t o = 0; o < f->num_ops; ++o) {
    const iron_ir_op_t *d = f->ops[o];
    if (d->kind != IRON_OP_DYNAMIC_UPDATE_SLICE || d->num_operands < 2)
      continue;
    const iron_ir_value_t *u = d->operands[1];
    if (u->def_op && is_member(f, u->def_op) &&
        is_unit_reshape_of_member(f, u->def_op))
      return u->def_op->operands[0]->type;
    return u->type;
  }
  // A load of more than one element: one-element loads may belong to a
  // start index's scalar group (x[i] feeding a dynamic_slice's start),
  // which says nothing about the space.
  const iron_ir_type_t *one = NULL;
  for (uint32_t o = 0; o < f->num_ops; ++o) {
    if (!iron_cuda_fusion_is_indexed_load(f->ops[o]->kind) || (pre && pre[o]))
      continue;
    const iron_ir_type_t *t = f->ops[o]->results[0].type;
    if (iron_ir_type_num_elements(t) != 1) return t;
    if (!one) one = t;
  }
  if (one) return one;
  for (uint32_t o = 0; o < f->num_ops; ++o)
    if (is_space_member(f, f->ops[o]) && !(pre && pre[o]))
      return f->ops[o]->results[0].type;
  return f->num_outputs ? f->outputs[0]->type : NULL;
}


// Members that only compute a pivot transpose's operand (phase 1) have
// its shape, not the space's: they do not count.
const iron_ir_type_t *iron_cuda_fusion_space(const iron_cuda_fusion_t *f) {
  uint8_t *pre = calloc(f->num_ops ? f->num_ops : 1, 1);
  if (pre && !mark_before_pivots(f, pre)) {
    free(pre);
    pre = NULL;
  }
  const iron_ir_type_t *t = space_of(f, pre);
  free(pre);
  return t;
}

// Marks (bit 1 of pre[o]) the members computed before the fusion's
// transposes of member values (its pivots), at the pivots' operand
// coordinates: the ancestors of the pivots' operands, and the outputs of
// the operand's shape that no pivot feeds, with their ancestors (fuse.c
// lets members of a group computed before its transpose escape beside the
// transpose's operand; at the result's coordinates they have no place:
// fz_9801757). A member no pivot feeds is the same function of its
// coordinates wherever it is computed. False: out of memory.
static bool mark_before_pivots(const iron_cuda_fusion_t *f, uint8_t *pre) {
  const iron_ir_type_t *in0 = NULL;
  for (uint32_t o = 0; o < f->num_ops; ++o) {
    const iron_ir_op_t *op = f->ops[o];
    if (!is_transpose(op) || op_index(f, op->operands[0]->def_op) < 0)
      continue;
    if (!in0) in0 = op->operands[0]->type;
    mark_ancestors(f, pre, op->operands[0]);
  }
  if (!in0) return true;
  uint8_t *after = calloc(f->num_ops, 1);  // a pivot feeds it
  if (!after) return false;
  for (uint32_t o = 0; o < f->num_ops; ++o) {
    const iron_ir_op_t *op = f->ops[o];
    after[o] = is_transpose(op) && op_index(f, op->operands[0]->def_op) >= 0;
    for (uint32_t k = 0; k < op->num_operands && !after[o]; ++k) {
      int32_t d = op_index(f, op->operands[k]->def_op);
      after[o] = d >= 0 && after[d];
    }
  }
  for (uint32_t j = 0; j < f->num_outputs; ++j) {
    const iron_ir_type_t *t = f->outputs[j]->type;
    int32_t o = op_index(f, f->outputs[j]->def_op);
    bool same = o >= 0 && !after[o] && t->rank == in0->rank;
    for (int32_t d = 0; same && d < t->rank; ++d)
      same = t->dims[d] == in0->dims[d];
    if (same) mark_ancestors(f, pre, f->outputs[j]);
  }
  free(after);
  return true;
}
// ---------------------------------------------------------------------------
// Pivot transposes (fuse.h: iron_compiler_fuse_pivots)

bool iron_cuda_transpose_fusion_enabled(void) {
  const char *e = getenv("IRON_CUDA_TRANSPOSE_FUSION");  // compile time only
  return !(e && strcmp(e, "0") == 0);
}

static int32_t op_index(const iron_cuda_fusion_t *f, const iron_ir_op_t *op) {
  for (uint32_t o = 0; op && o < f->num_ops; ++o)
    if (f->ops[o] == op) return (int32_t)o;
  return -1;
}

static bool read_perm(const iron_ir_op_t *op, int64_t *perm) {
  uint32_t n = 0;
  iron_status_t st =
      iron_ir_op_i64_list(op, "permutation", perm, IRON_MAX_RANK, &n);
  if (st) {
    iron_status_free(st);
    return false;
  }
  const iron_ir_type_t *in = op->operands[0]->type;
  if ((int32_t)n != in->rank) return false;
  for (uint32_t d = 0; d < n; ++d)
    if (perm[d] < 0 || perm[d] >= in->rank) return false;
  return true;
}

static bool is_transpose(const iron_ir_op_t *op) {
  return op->kind == IRON_OP_TRANSPOSE && op->num_operands == 1 &&
         op->num_results == 1 && op->operands[0]->type->kind == IRON_TYPE_TENSOR &&
         iron_ir_type_is_static(op->operands[0]->type);
}

// Whether a transpose of an input reads it across its contiguous dim (an
// uncoalesced indexed load, which a tile makes coalesced).
static bool moves_inner(const iron_ir_op_t *op, const int64_t *perm) {
  const iron_ir_type_t *in = op->operands[0]->type;
  int32_t last = -1;  // the source's innermost non-unit dim
  for (int32_t d = in->rank - 1; d >= 0 && last < 0; --d)
    if (in->dims[d] != 1) last = d;
  if (last < 0) return false;
  int32_t lo = -1;  // the result's innermost non-unit dim
  for (int32_t d = in->rank - 1; d >= 0 && lo < 0; --d)
    if (in->dims[perm[d]] != 1) lo = d;
  return perm[lo] != last;
}

static bool same_pivot(const iron_ir_op_t *a, const int64_t *pa,
                       const iron_ir_op_t *b, const int64_t *pb) {
  const iron_ir_type_t *x = a->operands[0]->type, *y = b->operands[0]->type;
  if (x->rank != y->rank) return false;
  for (int32_t d = 0; d < x->rank; ++d)
    if (x->dims[d] != y->dims[d] || pa[d] != pb[d]) return false;
  return true;
}

void iron_cuda_fusion_pivots_free(iron_cuda_fusion_pivots_t *p) {
  free(p->phase);
  free(p->out_phase);
  memset(p, 0, sizeof(*p));
}

// Phase 1 members: the ancestors of pivot operands (members only).
static void mark_ancestors(const iron_cuda_fusion_t *f, uint8_t *phase,
                           const iron_ir_value_t *v) {
  int32_t o = op_index(f, v->def_op);
  if (o < 0 || (phase[o] & 1)) return;
  phase[o] |= 1;
  const iron_ir_op_t *op = f->ops[o];
  for (uint32_t k = 0; k < op->num_operands; ++k)
    mark_ancestors(f, phase, op->operands[k]);
}

iron_status_t iron_cuda_fusion_pivots_plan(const iron_cuda_fusion_t *f,
                                           iron_cuda_fusion_pivots_t *out) {
  memset(out, 0, sizeof(*out));
  // Transposes of member values must pivot.
  for (uint32_t o = 0; o < f->num_ops; ++o) {
    const iron_ir_op_t *op = f->ops[o];
    if (!is_transpose(op) || op_index(f, op->operands[0]->def_op) < 0)
      continue;
    int64_t perm[IRON_MAX_RANK];
    if (!read_perm(op, perm))
      return iron_ir_op_unimplemented(op, "in a CUDA fusion with this "
                                          "permutation");
    if (out->num == IRON_CUDA_MAX_PIVOTS ||
        (out->num &&
         !same_pivot(f->ops[out->op[0]], out->perm, op, perm)))
      return iron_ir_op_unimplemented(op,
                                      "in a CUDA fusion with other "
                                      "transposes of computed values");
    if (!out->num) memcpy(out->perm, perm, sizeof(perm));
    out->op[out->num++] = o;
  }
  if (!out->num && !iron_cuda_transpose_fusion_enabled()) return IRON_OK;
  uint32_t n = f->num_ops ? f->num_ops : 1;
  out->phase = calloc(n, 1);
  out->out_phase = calloc(f->num_outputs ? f->num_outputs : 1, 1);
  if (!out->phase || !out->out_phase ||
      !mark_before_pivots(f, out->phase)) {
    iron_cuda_fusion_pivots_free(out);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (fusion plan)");
  }
  // Transposes of inputs that read across the contiguous dim pivot too
  // (a tile makes both sides coalesced) when they transpose alike and
  // are not needed at the operand's coordinates; not in fusions with
  // dynamic_update_slice roots (fuse.c gives those no pivots: they write
  // at coordinates of their own).
  bool roots = false;
  for (uint32_t o = 0; o < f->num_ops; ++o)
    roots = roots || f->ops[o]->kind == IRON_OP_DYNAMIC_UPDATE_SLICE;
  if (iron_cuda_transpose_fusion_enabled() && !roots) {
    for (uint32_t o = 0; o < f->num_ops && out->num < IRON_CUDA_MAX_PIVOTS;
         ++o) {
      const iron_ir_op_t *op = f->ops[o];
      if (!is_transpose(op) || (out->phase[o] & 1) ||
          op_index(f, op->operands[0]->def_op) >= 0)
        continue;
      int64_t perm[IRON_MAX_RANK];
      if (!read_perm(op, perm) || !moves_inner(op, perm) ||
          iron_ir_type_num_elements(op->results[0].type) <= 1)
        continue;
      if (out->num && !same_pivot(f->ops[out->op[0]], out->perm, op, perm))
        continue;
      if (!out->num) memcpy(out->perm, perm, sizeof(perm));
      out->op[out->num++] = o;
    }
  }
  if (!out->num) {
    iron_cuda_fusion_pivots_free(out);
    return IRON_OK;
  }
  out->in = f->ops[out->op[0]]->operands[0]->type;
  for (uint32_t j = 0; j < out->num; ++j)
    if (out->phase[out->op[j]] & 1) {  // fuse.c never chains pivots
      const iron_ir_op_t *op = f->ops[out->op[j]];
      iron_cuda_fusion_pivots_free(out);
      return iron_ir_op_unimplemented(op, "in a CUDA fusion that transposes "
                                          "it again");
    }
  // Outputs computed in phase 1 are stored there; the rest in phase 2,
  // which computes every member it needs (phase 1 members too: a square
  // transpose's operand read again at the result's coordinates).
  for (uint32_t j = 0; j < f->num_outputs; ++j) {
    int32_t o = op_index(f, f->outputs[j]->def_op);
    out->out_phase[j] = o >= 0 && (out->phase[o] & 1) ? 1 : 2;
  }
  for (int32_t o = (int32_t)f->num_ops - 1; o >= 0; --o) {
    if (!(out->phase[o] & 1)) {
      out->phase[o] |= 2;
      continue;
    }
    const iron_ir_op_t *op = f->ops[o];
    bool need = false;
    for (uint32_t j = 0; j < f->num_outputs && !need; ++j)
      need = out->out_phase[j] == 2 && f->outputs[j]->def_op == op;
    for (uint32_t q = (uint32_t)o + 1; q < f->num_ops && !need; ++q) {
      if (!(out->phase[q] & 2) || iron_cuda_fusion_is_pivot(out, q)) continue;
      const iron_ir_op_t *u = f->ops[q];
      for (uint32_t k = 0; k < u->num_operands && !need; ++k)
        need = u->operands[k]->def_op == op;
    }
    if (need) out->phase[o] |= 2;
  }
  return IRON_OK;
}

bool iron_cuda_fusion_is_pivot(const iron_cuda_fusion_pivots_t *p,
                               uint32_t o) {
  for (uint32_t j = 0; j < p->num; ++j)
    if (p->op[j] == o) return true;
  return false;
}

// IRON_CUDA_TRANSPOSE_PAIRS=0 (tests, A/B): 1- and 2-byte pivots keep
// 32x32 tiles of one element per thread and access.
static bool pairs_enabled(void) {
  const char *e = getenv("IRON_CUDA_TRANSPOSE_PAIRS");  // compile time only
  return !(e && strcmp(e, "0") == 0);
}

static bool tiled_enabled(void) {
  const char *e = getenv("IRON_CUDA_TILED_TRANSPOSE");  // compile time only
  return !(e && strcmp(e, "0") == 0);
}

void iron_cuda_fusion_tile_plan(const iron_cuda_fusion_pivots_t *p,
                                iron_cuda_fusion_tile_t *out) {
  memset(out, 0, sizeof(*out));
  size_t tile_bytes = p->num * 32 * 33 * iron_dtype_size(p->in->dtype);
  const iron_ir_type_t *in = p->in;
  int64_t istr[IRON_MAX_RANK], s = 1;
  for (int32_t d = in->rank - 1; d >= 0; --d) {
    istr[d] = s;
    s *= in->dims[d];
  }
  // The result's dims with their source strides; unit dims dropped and
  // dims contiguous in the source merged (as cuda_shape.c's tiled
  // transpose).
  int32_t r = 0;
  for (int32_t d = 0; d < in->rank; ++d) {
    int64_t dim = in->dims[p->perm[d]], str = istr[p->perm[d]];
    if (dim == 1) continue;
    if (r > 0 && out->src_strides[r - 1] == str * dim) {
      out->dims[r - 1] *= dim;
      out->src_strides[r - 1] = str;
      continue;
    }
    out->dims[r] = dim;
    out->src_strides[r] = str;
    r++;
  }
  out->rank = r;
  s = 1;
  for (int32_t d = r - 1; d >= 0; --d) {
    out->out_strides[d] = s;
    s *= out->dims[d];
  }
  out->k = -1;
  int64_t count = iron_ir_type_num_elements(in);
  if (count <= 0 || r < 2 || !tiled_enabled() ||
      out->src_strides[r - 1] == 1 || tile_bytes > kIronCudaPivotTileMaxBytes)
    return;
  for (int32_t k = 0; k < r - 1 && out->k < 0; ++k)
    if (out->src_strides[k] == 1 && out->dims[k] >= 16 &&
        out->dims[r - 1] >= 16)
      out->k = k;
  if (out->k < 0) return;
  // Pairs for elements of 1 or 2 bytes (64x64 tiles): 4-byte accesses
  // and up where 32 threads of a 32x32 tile would move 64 bytes or less.
  size_t es = iron_dtype_size(in->dtype);
  out->pairs = es <= 2 && out->dims[out->k] % 2 == 0 &&
               out->dims[r - 1] % 2 == 0 && pairs_enabled() &&
               p->num * 64 * 65 * es <= kIronCudaPivotTileMaxBytes;
  int64_t t = out->pairs ? 64 : 32;
  int64_t blocks = ((out->dims[out->k] + t - 1) / t) * ((out->dims[r - 1] + t - 1) / t);
  for (int32_t d = 0; d < r - 1; ++d)
    if (d != out->k) blocks *= out->dims[d];
  if (blocks > 0x7fffffffLL) {
    out->k = -1;
    return;
  }
  out->blocks = blocks;
}
