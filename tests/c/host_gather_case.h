// Random gather/scatter dimension numbers for test_host_gather.c and
// test_host_scatter.c. Gather and scatter share the structure:
//   gather offset_dims        <-> scatter update_window_dims
//   collapsed_slice_dims      <-> inserted_window_dims
//   operand_batching_dims     <-> input_batching_dims
//   start_indices_batching_dims <-> scatter_indices_batching_dims
//   start_index_map           <-> scatter_dims_to_operand_dims
// and the gather result shape is the scatter updates shape.
#ifndef IRON_TESTS_HOST_GATHER_CASE_H_
#define IRON_TESTS_HOST_GATHER_CASE_H_

#include "host_test_ops.h"

typedef struct gcase {
  int orank, irank, rrank;
  int64_t odims[IRON_MAX_RANK], idims[IRON_MAX_RANK], rdims[IRON_MAX_RANK];
  int n_off, n_col, n_b, n_sm;
  int64_t off[IRON_MAX_RANK], col[IRON_MAX_RANK], ob[IRON_MAX_RANK],
      ib[IRON_MAX_RANK], sm[IRON_MAX_RANK], slice[IRON_MAX_RANK];
  int64_t ivd;
} gcase_t;

static inline bool gc_has(const int64_t *v, int n, int64_t x) {
  for (int i = 0; i < n; ++i)
    if (v[i] == x) return true;
  return false;
}

static inline void gc_shuffle(int64_t *v, int n) {
  for (int i = n - 1; i > 0; --i) {
    int j = (int)ht_rand_range(0, i);
    int64_t t = v[i];
    v[i] = v[j];
    v[j] = t;
  }
}

static inline void gc_random(gcase_t *c) {
  memset(c, 0, sizeof(*c));
  c->orank = (int)ht_rand_range(1, 4);
  for (int d = 0; d < c->orank; ++d) c->odims[d] = ht_rand_range(1, 5);
  int64_t perm[IRON_MAX_RANK];
  for (int d = 0; d < c->orank; ++d) perm[d] = d;
  gc_shuffle(perm, c->orank);
  int p = 0;
  int max_b = c->orank >= 3 ? 2 : c->orank >= 2 ? 1 : 0;
  c->n_b = (int)ht_rand_range(0, max_b);
  if (ht_rand_range(0, 2) == 0) c->n_b = 0;
  for (int i = 0; i < c->n_b; ++i) c->ob[i] = perm[p++];
  // Start map: a random subset (in random order) of the other dims.
  int rest = c->orank - p;
  c->n_sm = (int)ht_rand_range(0, rest < 3 ? rest : 3);
  if (ht_rand_range(0, 3) == 0 && rest > 0) c->n_sm = 1;
  int64_t others[IRON_MAX_RANK];
  int no = 0;
  for (int i = p; i < c->orank; ++i) others[no++] = perm[i];
  gc_shuffle(others, no);
  for (int i = 0; i < c->n_sm; ++i) c->sm[i] = others[i];
  for (int d = 0; d < c->orank; ++d) {
    if (gc_has(c->ob, c->n_b, d)) {
      c->slice[d] = 1;
      continue;
    }
    if (ht_rand_range(0, 2) == 0) {
      c->col[c->n_col++] = d;
      c->slice[d] = 1;
      continue;
    }
    c->slice[d] = ht_rand_range(0, 2) == 0 ? c->odims[d]
                                             : ht_rand_range(1, c->odims[d]);
  }
  // Index batch dims: free ones plus the batching ones at random places.
  int nfree = (int)ht_rand_range(0, 2);
  int nbatch = nfree + c->n_b;
  int64_t bsize[IRON_MAX_RANK], kind[IRON_MAX_RANK];  // kind: -1 free, else i
  for (int i = 0; i < nbatch; ++i) kind[i] = i < nfree ? -1 : i - nfree;
  gc_shuffle(kind, nbatch);
  for (int i = 0; i < nbatch; ++i)
    bsize[i] = kind[i] < 0 ? ht_rand_range(1, 4) : c->odims[c->ob[kind[i]]];
  bool implicit = c->n_sm == 1 && ht_rand_range(0, 2) == 0;
  c->ivd = implicit ? nbatch : ht_rand_range(0, nbatch);
  c->irank = nbatch + (implicit ? 0 : 1);
  int bi = 0;
  for (int d = 0; d < c->irank; ++d) {
    if (!implicit && d == c->ivd) {
      c->idims[d] = c->n_sm;
      continue;
    }
    c->idims[d] = bsize[bi];
    if (kind[bi] >= 0) c->ib[kind[bi]] = d;
    ++bi;
  }
  // Result: batch dims and offset dims interleaved at random.
  int noff = 0;
  int64_t offsz[IRON_MAX_RANK];
  for (int d = 0; d < c->orank; ++d)
    if (!gc_has(c->col, c->n_col, d) && !gc_has(c->ob, c->n_b, d))
      offsz[noff++] = c->slice[d];
  c->rrank = nbatch + noff;
  int64_t pos[IRON_MAX_RANK];
  for (int i = 0; i < c->rrank; ++i) pos[i] = i;
  gc_shuffle(pos, c->rrank);
  c->n_off = noff;
  for (int i = 0; i < noff; ++i) c->off[i] = pos[i];
  for (int i = 0; i < noff; ++i)  // sort
    for (int j = i + 1; j < noff; ++j)
      if (c->off[j] < c->off[i]) {
        int64_t t = c->off[i];
        c->off[i] = c->off[j];
        c->off[j] = t;
      }
  int oi = 0;
  bi = 0;
  for (int d = 0; d < c->rrank; ++d) {
    if (gc_has(c->off, c->n_off, d)) {
      c->rdims[d] = offsz[oi++];
    } else {
      while (!implicit && bi == c->ivd) ++bi;
      c->rdims[d] = c->idims[bi++];
    }
  }
}

static inline void gc_unravel(int64_t lin, int rank, const int64_t *dims,
                              int64_t *out) {
  for (int d = rank - 1; d >= 0; --d) {
    out[d] = lin % dims[d];
    lin /= dims[d];
  }
}

static inline int64_t gc_ravel(int rank, const int64_t *dims,
                               const int64_t *idx) {
  int64_t lin = 0;
  for (int d = 0; d < rank; ++d) lin = lin * dims[d] + idx[d];
  return lin;
}

// For one result (gather) / updates (scatter) element `r`: the window start
// in the operand per dim (unclamped, batching coordinates included) and the
// window offset per operand dim.
static inline void gc_locate(const gcase_t *c, const int64_t *r,
                             const int64_t *indices, int64_t *out_start,
                             int64_t *out_offset) {
  int64_t bidx[IRON_MAX_RANK];  // index-tensor coordinates of the batch point
  int nb = 0;
  for (int d = 0; d < c->rrank; ++d)
    if (!gc_has(c->off, c->n_off, d)) bidx[nb++] = r[d];
  int64_t icoord[IRON_MAX_RANK];
  int b = 0;
  for (int d = 0; d < c->irank; ++d) {
    if (d == c->ivd) continue;
    icoord[d] = bidx[b++];
  }
  for (int d = 0; d < c->orank; ++d) out_start[d] = out_offset[d] = 0;
  for (int k = 0; k < c->n_sm; ++k) {
    if (c->ivd < c->irank) icoord[c->ivd] = k;
    out_start[c->sm[k]] = indices[gc_ravel(c->irank, c->idims, icoord)];
  }
  for (int i = 0; i < c->n_b; ++i) out_start[c->ob[i]] = icoord[c->ib[i]];
  int o = 0;
  for (int d = 0; d < c->orank; ++d) {
    if (gc_has(c->col, c->n_col, d) || gc_has(c->ob, c->n_b, d)) continue;
    out_offset[d] = r[c->off[o++]];
  }
}

static inline void gc_attr(ht_op_t *b, const char *name, int n,
                           const int64_t *v) {
  ht_attr_i64(b, name, n, v);
}

#endif  // IRON_TESTS_HOST_GATHER_CASE_H_
