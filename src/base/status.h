// Errors as values: the public part (codes, iron_status_t, make, annotate,
// accessors) is include/iron/status.h; this adds the propagation macros the
// library uses internally.
#ifndef IRON_BASE_STATUS_H_
#define IRON_BASE_STATUS_H_

#include <stdbool.h>

#include "iron/status.h"

#ifdef __cplusplus
extern "C" {
#endif

static inline bool iron_status_is_ok(iron_status_t s) { return s == NULL; }

#define IRON_RETURN_IF_ERROR(expr, ...)                                  \
  do {                                                                   \
    iron_status_t iron_status_tmp_ = (expr);                             \
    if (iron_status_tmp_ != IRON_OK)                                     \
      return iron_status_annotate(iron_status_tmp_, __VA_ARGS__);        \
  } while (0)

#define IRON_RETURN_IF_ERROR_PLAIN(expr)                                 \
  do {                                                                   \
    iron_status_t iron_status_tmp_ = (expr);                             \
    if (iron_status_tmp_ != IRON_OK) return iron_status_tmp_;            \
  } while (0)

// Shorthands for the common codes.
#define IRON_ERR(code, ...) iron_status_make(IRON_STATUS_##code, __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif  // IRON_BASE_STATUS_H_
