// Builds single ops by hand (plain IR structs) and tensors for the host
// kernel unit tests (test_host_shape/dot/reduce), so kernels can be prepared
// and run without the reader or the runtime.
#ifndef IRON_TESTS_HOST_TEST_OPS_H_
#define IRON_TESTS_HOST_TEST_OPS_H_

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "device/host/host_kernel.h"
#include "ir/ir.h"

#define HT_MAX 48

typedef struct ht_op {
  iron_ir_op_t op;
  iron_ir_type_t operand_types[HT_MAX];
  iron_ir_value_t operand_vals[HT_MAX];
  iron_ir_value_t *operand_ptrs[HT_MAX];
  iron_ir_type_t result_types[HT_MAX];
  iron_ir_value_t result_vals[HT_MAX];
  iron_ir_attr_t attrs[HT_MAX];
  iron_ir_named_attr_t named[HT_MAX];
  iron_ir_type_t attr_types[HT_MAX];
  int64_t attr_data[HT_MAX][IRON_MAX_RANK];
} ht_op_t;

static inline void ht_type(iron_ir_type_t *t, iron_dtype_t dt, int rank,
                           const int64_t *dims) {
  memset(t, 0, sizeof(*t));
  t->kind = IRON_TYPE_TENSOR;
  t->dtype = dt;
  t->rank = rank;
  for (int i = 0; i < rank; ++i) t->dims[i] = dims[i];
}

static inline void ht_init(ht_op_t *b, iron_op_kind_t kind) {
  memset(b, 0, sizeof(*b));
  b->op.kind = kind;
  b->op.name = iron_op_kind_name(kind);
  b->op.operands = b->operand_ptrs;
  b->op.results = b->result_vals;
  b->op.attrs = b->named;
}

static inline void ht_operand(ht_op_t *b, iron_dtype_t dt, int rank,
                              const int64_t *dims) {
  uint32_t i = b->op.num_operands++;
  ht_type(&b->operand_types[i], dt, rank, dims);
  b->operand_vals[i].type = &b->operand_types[i];
  b->operand_ptrs[i] = &b->operand_vals[i];
}

static inline void ht_result(ht_op_t *b, iron_dtype_t dt, int rank,
                             const int64_t *dims) {
  uint32_t i = b->op.num_results++;
  ht_type(&b->result_types[i], dt, rank, dims);
  b->result_vals[i].type = &b->result_types[i];
  b->result_vals[i].def_op = &b->op;
  b->result_vals[i].index = i;
}

// An i64 list attribute stored as a DENSE tensor<n x i64>, as the reader
// produces.
static inline void ht_attr_i64(ht_op_t *b, const char *name, int n,
                               const int64_t *values) {
  uint32_t i = b->op.num_attrs++;
  for (int k = 0; k < n; ++k) b->attr_data[i][k] = values[k];
  int64_t dims[1] = {n};
  ht_type(&b->attr_types[i], IRON_DTYPE_S64, 1, dims);
  b->attrs[i].kind = IRON_ATTR_DENSE;
  b->attrs[i].dense.type = &b->attr_types[i];
  b->attrs[i].dense.data = b->attr_data[i];
  b->attrs[i].dense.size = (size_t)n * 8;
  b->named[i].name = name;
  b->named[i].value = &b->attrs[i];
}

static inline iron_tensor_t *ht_tensor(iron_dtype_t dt, int rank,
                                       const int64_t *dims) {
  iron_tensor_t *t = calloc(1, sizeof(*t));
  t->dtype = dt;
  t->rank = rank;
  t->count = 1;
  for (int i = 0; i < rank; ++i) {
    t->dims[i] = dims[i];
    t->count *= dims[i];
  }
  t->nbytes = (size_t)t->count * iron_dtype_size(dt);
  t->data = calloc(t->nbytes + 16, 1);
  return t;
}

static inline iron_tensor_t *ht_tensor_like(const iron_ir_type_t *t) {
  return ht_tensor(t->dtype, t->rank, t->dims);
}

static inline void ht_tensor_free(iron_tensor_t *t) {
  if (!t) return;
  free(t->data);
  free(t);
}

static uint64_t ht_rand_state = 0x9e3779b97f4a7c15ull;
static inline uint64_t ht_rand(void) {
  ht_rand_state ^= ht_rand_state << 13;
  ht_rand_state ^= ht_rand_state >> 7;
  ht_rand_state ^= ht_rand_state << 17;
  return ht_rand_state;
}
static inline int64_t ht_rand_range(int64_t lo, int64_t hi) {  // [lo, hi]
  return lo + (int64_t)(ht_rand() % (uint64_t)(hi - lo + 1));
}

static inline void ht_fill_bytes(iron_tensor_t *t) {
  unsigned char *d = t->data;
  for (size_t i = 0; i < t->nbytes; ++i) d[i] = (unsigned char)ht_rand();
}

// Prepares op with its kernel and runs it once. Returns the prepare or run
// status; *out_params is destroyed here.
static inline iron_status_t ht_run(ht_op_t *b, iron_threadpool_t *pool,
                                   iron_region_t *const *regions,
                                   iron_tensor_t **inputs,
                                   iron_tensor_t **outputs) {
  const iron_kernel_t *k = iron_host_kernel_lookup(b->op.kind);
  if (!k) return IRON_ERR(UNIMPLEMENTED, "no kernel");
  void *params = NULL;
  iron_status_t st = k->prepare(&b->op, regions, &params);
  if (st) return st;
  iron_kernel_ctx_t ctx = {0};
  ctx.pool = pool;
  st = k->run(&ctx, params, (const iron_tensor_t *const *)inputs,
              (iron_tensor_t *const *)outputs);
  if (k->destroy) k->destroy(params); else free(params);
  return st;
}

#endif  // IRON_TESTS_HOST_TEST_OPS_H_
