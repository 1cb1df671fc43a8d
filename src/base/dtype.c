#include "base/dtype.h"

typedef struct {
  const char *name;
  size_t size;
  iron_dtype_class_t cls;
  int pjrt;
} iron_dtype_info_t;

static const iron_dtype_info_t kInfo[IRON_DTYPE_COUNT] = {
    [IRON_DTYPE_INVALID] = {"invalid", 0, IRON_DTYPE_CLASS_INVALID, 0},
#define IRON_DTYPE_INFO_(e, n, b, c, p) \
  [IRON_DTYPE_##e] = {n, b, IRON_DTYPE_CLASS_##c, p},
    IRON_DTYPE_LIST(IRON_DTYPE_INFO_)
#undef IRON_DTYPE_INFO_
};

static const iron_dtype_info_t *info(iron_dtype_t dt) {
  if ((unsigned)dt >= IRON_DTYPE_COUNT) return &kInfo[0];
  return &kInfo[dt];
}

const char *iron_dtype_name(iron_dtype_t dt) { return info(dt)->name; }
size_t iron_dtype_size(iron_dtype_t dt) { return info(dt)->size; }
iron_dtype_class_t iron_dtype_class(iron_dtype_t dt) { return info(dt)->cls; }
int iron_dtype_to_pjrt(iron_dtype_t dt) { return info(dt)->pjrt; }

iron_dtype_t iron_dtype_from_pjrt(int pjrt_type) {
  if (pjrt_type <= 0) return IRON_DTYPE_INVALID;
  for (int i = 1; i < IRON_DTYPE_COUNT; ++i)
    if (kInfo[i].pjrt == pjrt_type) return (iron_dtype_t)i;
  return IRON_DTYPE_INVALID;
}

int iron_dtype_bits(iron_dtype_t dt) {
  switch (dt) {
    case IRON_DTYPE_PRED: return 1;
    case IRON_DTYPE_S2:
    case IRON_DTYPE_U2: return 2;
    case IRON_DTYPE_S4:
    case IRON_DTYPE_U4:
    case IRON_DTYPE_F4E2M1FN: return 4;
    case IRON_DTYPE_F6E2M3FN:
    case IRON_DTYPE_F6E3M2FN: return 6;
    case IRON_DTYPE_TF32: return 19;
    default: return (int)info(dt)->size * 8;
  }
}

iron_dtype_t iron_dtype_complex_part(iron_dtype_t dt) {
  if (dt == IRON_DTYPE_C64) return IRON_DTYPE_F32;
  if (dt == IRON_DTYPE_C128) return IRON_DTYPE_F64;
  return IRON_DTYPE_INVALID;
}
