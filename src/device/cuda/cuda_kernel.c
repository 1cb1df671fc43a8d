// The CUDA device's kernel table: each kernel file registers its op kinds.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/fuse.h"
#include "device/cuda/gen/prelude.h"
#include "device/cuda/gen/source.h"
#include "device/cuda/gen/types.h"
#include "device/cuda/cuda_device.h"
#include "device/cuda/cuda_fusion.h"
#include "device/cuda/cuda_fusion_plan.h"
#include "device/cuda/gen/ops.h"
#include "device/cuda/cuda_ops_internal.h"

// Every fusion fuse.c forms fits one launch's parameters.
_Static_assert(IRON_FUSE_MAX_OPERANDS <= IRON_CUDA_MAX_KERNEL_PARAMS,
               "fusions must fit one CUDA kernel launch's parameters");

static iron_cuda_kernel_table_t g_table;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void table_init(void) {
  iron_cuda_register_elementwise(g_table);
  iron_cuda_register_shape(g_table);
  iron_cuda_register_ops(g_table);
  g_table[IRON_OP_FUSION] = &iron_cuda_fusion_kernel;
}

static bool tensor_ok(const iron_ir_type_t *t) {
  return t->kind == IRON_TYPE_TENSOR && iron_cuda_ctype(t->dtype) != NULL;
}

enum { kFuseReduceMinThreads = 65536 };

// A reduce takes fused producers (cuda_fusion.c) when its operands are
// real or integer tensors the reduce generator stores: its body is checked
// when the fused kernel is generated (a refusal there names the reduce, as
// it would unfused). IRON_CUDA_FUSE_REDUCE=0 keeps reduces apart, =all
// fuses into every reduce (tests: the corpus' reduces are all narrow).
static bool reduce_fusable(const iron_ir_op_t *op) {
  const char *e = getenv("IRON_CUDA_FUSE_REDUCE");  // compile time only
  if ((e && strcmp(e, "0") == 0) || op->num_results == 0 || op->num_results > 8 ||
      op->num_operands != 2 * op->num_results)
    return false;
  for (uint32_t i = 0; i < op->num_operands; ++i) {
    const iron_ir_type_t *t = op->operands[i]->type;
    if (!tensor_ok(t) || !iron_ir_type_is_static(t) ||
        t->dtype == IRON_DTYPE_C64 || t->dtype == IRON_DTYPE_C128)
      return false;
  }
  // Producers fused into a narrow reduce kernel (a few blocks folding long
  // columns) run at that kernel's parallelism: measured slower than a
  // separate element-wise kernel (transformer d256 training step 6.86 ms
  // fused vs 6.11 ms apart on the H200). Only wide reduces take them.
  const iron_ir_type_t *in = op->operands[0]->type;
  bool reduced[IRON_MAX_RANK];
  iron_status_t st = iron_cuda_reduce_dims(op, in->rank, reduced);
  if (st) {
    iron_status_free(st);
    return false;
  }
  return (e && strcmp(e, "all") == 0) ||
         iron_cuda_reduce_threads(in->rank, in->dims, reduced) >=
             kFuseReduceMinThreads;
}

// slice, transpose and dynamic_slice fuse as indexed loads of a fusion
// input (cuda_fusion.c gen_indexed_load). Their operand must have another
// shape than their result, so that fuse.c (one shape per group) never puts
// it inside the same fusion. With IRON_CUDA_TRANSPOSE_FUSION on, every
// transpose fuses: as a pivot (iron_cuda_pivot_fusable) or as a load, the
// generator tiling those that move the innermost dim (gen/fusion.c).
// Without it, a transpose that moves the innermost dim reads its input
// uncoalesced: it fuses only when the operand is small enough to stay in
// L2; larger ones keep the tiled transpose kernel.
enum { kFuseTransposeMaxBytes = 4 << 20 };
static bool indexed_load_fusable(const iron_ir_op_t *op) {
  const char *e = getenv("IRON_CUDA_FUSE_SLICES");  // compile time only
  if (e && strcmp(e, "0") == 0) return false;
  if (op->num_operands < 1 || op->num_results != 1) return false;
  const iron_ir_type_t *in = op->operands[0]->type, *out = op->results[0].type;
  if (!tensor_ok(in) || !tensor_ok(out) || !iron_ir_type_is_static(in) ||
      !iron_ir_type_is_static(out) || in->rank != out->rank ||
      in->dtype != out->dtype)
    return false;
  // fuse.c never lets a transpose join a group as an element-wise member
  // (it pivots or loads), so a square one may fuse; slices and
  // dynamic_slices of their operand's shape could be taken for one.
  bool same = true;
  for (int32_t d = 0; d < in->rank; ++d) same = same && in->dims[d] == out->dims[d];
  if (same && (op->kind != IRON_OP_TRANSPOSE ||
               !iron_cuda_transpose_fusion_enabled()))
    return false;
  if (op->kind == IRON_OP_TRANSPOSE && iron_cuda_transpose_fusion_enabled())
    return op->num_operands == 1;  // tiled inside the fusion when it pays
  if (op->kind == IRON_OP_TRANSPOSE) {
    int64_t perm[IRON_MAX_RANK];
    uint32_t np = 0;
    iron_status_t st =
        iron_ir_op_i64_list(op, "permutation", perm, IRON_MAX_RANK, &np);
    if (st) {
      iron_status_free(st);
      return false;
    }
    size_t bytes;
    bool inner_kept = np > 0 && perm[np - 1] == (int64_t)np - 1;
    if (!inner_kept && (!iron_ir_type_byte_size(in, &bytes) ||
                        bytes > kFuseTransposeMaxBytes))
      return false;
  }
  if (op->kind == IRON_OP_DYNAMIC_SLICE) {
    if (op->num_operands != 1 + (uint32_t)in->rank) return false;
    for (uint32_t i = 1; i < op->num_operands; ++i) {
      const iron_ir_type_t *t = op->operands[i]->type;
      switch (t->kind == IRON_TYPE_TENSOR && t->rank == 0 ? t->dtype
                                                          : IRON_DTYPE_INVALID) {
        case IRON_DTYPE_S8: case IRON_DTYPE_S16: case IRON_DTYPE_S32:
        case IRON_DTYPE_S64: case IRON_DTYPE_U8: case IRON_DTYPE_U16:
        case IRON_DTYPE_U32: case IRON_DTYPE_U64:
          break;
        default:
          return false;
      }
    }
  } else if (op->num_operands != 1) {
    return false;
  }
  return true;
}

// A dynamic_update_slice fuses as a root: the fused kernel writes its
// update into the operand (cuda_fusion.c). Not full-size updates (those are
// a copy) and integer scalar start indices only.
static bool dus_fusable(const iron_ir_op_t *op) {
  const char *e = getenv("IRON_CUDA_FUSE_SLICES");  // compile time only
  if (e && strcmp(e, "0") == 0) return false;
  if (op->num_operands < 2 || op->num_results != 1) return false;
  const iron_ir_type_t *x = op->operands[0]->type, *u = op->operands[1]->type;
  if (!tensor_ok(x) || !tensor_ok(u) || !iron_ir_type_is_static(x) ||
      !iron_ir_type_is_static(u) || x->rank != u->rank || x->dtype != u->dtype ||
      op->num_operands != 2 + (uint32_t)x->rank ||
      iron_ir_type_num_elements(u) >= iron_ir_type_num_elements(x))
    return false;
  for (uint32_t i = 2; i < op->num_operands; ++i) {
    const iron_ir_type_t *t = op->operands[i]->type;
    switch (t->kind == IRON_TYPE_TENSOR && t->rank == 0 ? t->dtype
                                                        : IRON_DTYPE_INVALID) {
      case IRON_DTYPE_S8: case IRON_DTYPE_S16: case IRON_DTYPE_S32:
      case IRON_DTYPE_S64: case IRON_DTYPE_U8: case IRON_DTYPE_U16:
      case IRON_DTYPE_U32: case IRON_DTYPE_U64:
        break;
      default:
        return false;
    }
  }
  return true;
}

bool iron_cuda_fusable(const iron_ir_op_t *op) {
  // A device loop is one kernel generated from the loop's own regions.
  if (op->kind == IRON_OP_WHILE) return iron_cuda_while_kernel(op) != NULL;
  if (op->kind == IRON_OP_REDUCE) return reduce_fusable(op);
  if (op->kind == IRON_OP_DYNAMIC_UPDATE_SLICE) return dus_fusable(op);
  if (op->kind == IRON_OP_SLICE || op->kind == IRON_OP_TRANSPOSE ||
      op->kind == IRON_OP_DYNAMIC_SLICE)
    return indexed_load_fusable(op);
  if (!iron_cuda_fusion_op_supported(op->kind) || op->num_results != 1)
    return false;
  if (op->kind == IRON_OP_CONSTANT) {
    // Only splats become literals in the generated code.
    const iron_ir_attr_t *a = iron_ir_op_attr(op, "value");
    if (!a || a->kind != IRON_ATTR_DENSE || !a->dense.splat) return false;
  }
  if (!tensor_ok(op->results[0].type)) return false;
  for (uint32_t i = 0; i < op->num_operands; ++i)
    if (!tensor_ok(op->operands[i]->type)) return false;
  return true;
}

bool iron_cuda_vector_dot(const iron_ir_op_t *op, uint32_t matrix) {
  const char *e = getenv("IRON_CUDA_VECTOR_DOTS");  // compile time only
  if (e && strcmp(e, "0") == 0) return false;
  if (e && strcmp(e, "all") == 0) return true;
  // Sliced: follow reshapes and converts up to a slice or dynamic_slice.
  const iron_ir_value_t *v = op->operands[matrix];
  for (int hops = 0; hops < 8 && v->def_op; ++hops) {
    const iron_ir_op_t *d = v->def_op;
    if (d->kind == IRON_OP_SLICE || d->kind == IRON_OP_DYNAMIC_SLICE)
      return true;
    if (d->kind != IRON_OP_RESHAPE && d->kind != IRON_OP_CONVERT &&
        !iron_ir_broadcast_is_reshape(d))
      return false;
    v = d->operands[0];
  }
  return false;
}

bool iron_cuda_pivot_fusable(const iron_ir_op_t *op) {
  return op->kind == IRON_OP_TRANSPOSE &&
         iron_cuda_transpose_fusion_enabled() && indexed_load_fusable(op);
}

const iron_kernel_t *iron_cuda_kernel_lookup(iron_op_kind_t kind) {
  pthread_once(&g_once, table_init);
  if ((int)kind < 0 || kind >= IRON_OP_COUNT) return NULL;
  return g_table[kind];
}
