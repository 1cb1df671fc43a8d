// Element types: the table and enum are public (include/iron/dtype.h);
// this adds the class predicates the library uses.
#ifndef IRON_BASE_DTYPE_H_
#define IRON_BASE_DTYPE_H_

#include <stdbool.h>

#include "iron/dtype.h"

static inline bool iron_dtype_is_float(iron_dtype_t dt) {
  return iron_dtype_class(dt) == IRON_DTYPE_CLASS_FLOAT;
}
static inline bool iron_dtype_is_complex(iron_dtype_t dt) {
  return iron_dtype_class(dt) == IRON_DTYPE_CLASS_COMPLEX;
}
static inline bool iron_dtype_is_int(iron_dtype_t dt) {
  iron_dtype_class_t c = iron_dtype_class(dt);
  return c == IRON_DTYPE_CLASS_SINT || c == IRON_DTYPE_CLASS_UINT;
}
static inline bool iron_dtype_is_signed_int(iron_dtype_t dt) {
  return iron_dtype_class(dt) == IRON_DTYPE_CLASS_SINT;
}
static inline bool iron_dtype_is_unsigned_int(iron_dtype_t dt) {
  return iron_dtype_class(dt) == IRON_DTYPE_CLASS_UINT;
}

#endif  // IRON_BASE_DTYPE_H_
