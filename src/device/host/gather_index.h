// Shared pieces of the host gather and scatter kernels (gather.c,
// scatter_kernel.c): reading start indices of any integer dtype, and the
// "box" of window elements copied/combined per index point, with adjacent
// dimensions merged so the innermost run is as long as possible.
#ifndef IRON_DEVICE_HOST_GATHER_INDEX_H_
#define IRON_DEVICE_HOST_GATHER_INDEX_H_

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "device/host/host_kernel.h"

extern const iron_kernel_t iron_host_scatter_kernel;

static inline bool iron_gather_index_dtype_ok(iron_dtype_t dt) {
  switch (dt) {
    case IRON_DTYPE_S2: case IRON_DTYPE_S4: case IRON_DTYPE_U2:
    case IRON_DTYPE_U4:
    case IRON_DTYPE_S8: case IRON_DTYPE_S16: case IRON_DTYPE_S32:
    case IRON_DTYPE_S64: case IRON_DTYPE_U8: case IRON_DTYPE_U16:
    case IRON_DTYPE_U32: case IRON_DTYPE_U64:
      return true;
    default:
      return false;
  }
}

// Element `i` of an index tensor as int64; u64 values above INT64_MAX
// saturate (they are out of bounds either way: gather clamps them to the top,
// scatter drops them).
static inline int64_t iron_gather_index_read(const void *data, iron_dtype_t dt,
                                             int64_t i) {
  switch (dt) {
    // Sub-byte integers are stored one per byte in the low bits (the upper
    // bits are not necessarily a sign extension: jax hands s4 -1 as 0x0F).
    case IRON_DTYPE_S2:
      return (int8_t)(uint8_t)(((const uint8_t *)data)[i] << 6) >> 6;
    case IRON_DTYPE_S4:
      return (int8_t)(uint8_t)(((const uint8_t *)data)[i] << 4) >> 4;
    case IRON_DTYPE_S8: return ((const int8_t *)data)[i];
    case IRON_DTYPE_S16: return ((const int16_t *)data)[i];
    case IRON_DTYPE_S32: return ((const int32_t *)data)[i];
    case IRON_DTYPE_S64: return ((const int64_t *)data)[i];
    case IRON_DTYPE_U2: return ((const uint8_t *)data)[i] & 0x3;
    case IRON_DTYPE_U4: return ((const uint8_t *)data)[i] & 0xF;
    case IRON_DTYPE_U8: return ((const uint8_t *)data)[i];
    case IRON_DTYPE_U16: return ((const uint16_t *)data)[i];
    case IRON_DTYPE_U32: return ((const uint32_t *)data)[i];
    case IRON_DTYPE_U64: {
      uint64_t u = ((const uint64_t *)data)[i];
      return u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u;
    }
    default: return 0;
  }
}

// A window box: `rank` dims (outermost first) with element strides in the
// big tensor (operand/result: `a`) and in the small one (gather output or
// scatter updates: `b`).
typedef struct iron_gather_box {
  int32_t rank;
  int64_t size[IRON_MAX_RANK];
  int64_t a_stride[IRON_MAX_RANK];
  int64_t b_stride[IRON_MAX_RANK];
  int64_t count;  // product of sizes
} iron_gather_box_t;

// Drops size-1 dims and merges an outer dim into its inner neighbour when
// both strides compose, so a row-contiguous window becomes one run.
static inline void iron_gather_box_simplify(iron_gather_box_t *box) {
  iron_gather_box_t o;
  memset(&o, 0, sizeof(o));
  o.count = 1;
  for (int32_t i = 0; i < box->rank; ++i) o.count *= box->size[i];
  for (int32_t i = 0; i < box->rank; ++i) {
    if (box->size[i] == 1) continue;
    o.size[o.rank] = box->size[i];
    o.a_stride[o.rank] = box->a_stride[i];
    o.b_stride[o.rank] = box->b_stride[i];
    ++o.rank;
  }
  // Merge from the inside out.
  for (int32_t i = o.rank - 2; i >= 0; --i) {
    int32_t j = i + 1;
    if (o.a_stride[i] == o.a_stride[j] * o.size[j] &&
        o.b_stride[i] == o.b_stride[j] * o.size[j]) {
      o.size[i] *= o.size[j];
      o.a_stride[i] = o.a_stride[j];
      o.b_stride[i] = o.b_stride[j];
      for (int32_t k = j; k + 1 < o.rank; ++k) {
        o.size[k] = o.size[k + 1];
        o.a_stride[k] = o.a_stride[k + 1];
        o.b_stride[k] = o.b_stride[k + 1];
      }
      --o.rank;
    }
  }
  *box = o;
}

// Copies a window element by element size (1, 2, 4, 8, 16 bytes or any).
static inline void iron_gather_copy_strided(char *dst, int64_t ds,
                                            const char *src, int64_t ss,
                                            int64_t n, size_t es) {
  if (ds == 1 && ss == 1) {
    memcpy(dst, src, (size_t)n * es);
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    memcpy(dst + (size_t)(i * ds) * es, src + (size_t)(i * ss) * es, es);
}

// Dimension-number list helpers shared by gather and scatter prepare.
static inline bool list_has(const int64_t *v, uint32_t n, int64_t x) {
  for (uint32_t i = 0; i < n; ++i)
    if (v[i] == x) return true;
  return false;
}

static inline int32_t list_pos(const int64_t *v, uint32_t n, int64_t x) {
  for (uint32_t i = 0; i < n; ++i)
    if (v[i] == x) return (int32_t)i;
  return -1;
}

static inline void strides_of(const iron_ir_type_t *t, int64_t *out) {
  int64_t s = 1;
  for (int32_t i = t->rank - 1; i >= 0; --i) {
    out[i] = s;
    s *= t->dims[i];
  }
}

#endif  // IRON_DEVICE_HOST_GATHER_INDEX_H_
