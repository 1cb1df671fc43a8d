// ironjax public API: errors as values. An iron_status_t is pointer-sized; NULL (IRON_OK) means
// success. A non-OK status owns a heap record with a code and a message, and
// context is prepended as it propagates up the stack:
//   "while compiling jit_f: while lowering stablehlo.add (f.py:3): ..."
// Ownership: whoever receives a non-OK status must either return it (after
// annotating it) or free it with iron_status_free. Thread-safe: statuses are
// plain values; none is shared.
#ifndef IRON_STATUS_H_
#define IRON_STATUS_H_

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// Codes follow absl/PJRT numbering so that conversion to PJRT_Error_Code is
// the identity.
typedef enum iron_status_code {
  IRON_STATUS_OK = 0,
  IRON_STATUS_CANCELLED = 1,
  IRON_STATUS_UNKNOWN = 2,
  IRON_STATUS_INVALID_ARGUMENT = 3,
  IRON_STATUS_DEADLINE_EXCEEDED = 4,
  IRON_STATUS_NOT_FOUND = 5,
  IRON_STATUS_ALREADY_EXISTS = 6,
  IRON_STATUS_PERMISSION_DENIED = 7,
  IRON_STATUS_RESOURCE_EXHAUSTED = 8,
  IRON_STATUS_FAILED_PRECONDITION = 9,
  IRON_STATUS_ABORTED = 10,
  IRON_STATUS_OUT_OF_RANGE = 11,
  IRON_STATUS_UNIMPLEMENTED = 12,
  IRON_STATUS_INTERNAL = 13,
  IRON_STATUS_UNAVAILABLE = 14,
  IRON_STATUS_DATA_LOSS = 15,
  IRON_STATUS_UNAUTHENTICATED = 16,
} iron_status_code_t;

typedef struct iron_status_record *iron_status_t;

#define IRON_OK ((iron_status_t)NULL)

#if defined(__GNUC__)
#define IRON_PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))
#define IRON_MUST_USE __attribute__((warn_unused_result))
#else
#define IRON_PRINTF_LIKE(f, a)
#define IRON_MUST_USE
#endif

// Makes a status with `code` and a printf-formatted message. Never returns
// NULL for a non-OK code: if allocation fails a static out-of-memory status is
// returned (freeing it is a no-op).
iron_status_t iron_status_make(iron_status_code_t code, const char *fmt, ...)
    IRON_PRINTF_LIKE(2, 3) IRON_MUST_USE;
iron_status_t iron_status_makev(iron_status_code_t code, const char *fmt,
                                va_list ap) IRON_MUST_USE;

// Prepends "<context>: " to the message of a non-OK status; OK passes through.
// Consumes `status` and returns the annotated one.
iron_status_t iron_status_annotate(iron_status_t status, const char *fmt, ...)
    IRON_PRINTF_LIKE(2, 3) IRON_MUST_USE;

// Accessors borrow. The message of IRON_OK is "OK".
iron_status_code_t iron_status_code(iron_status_t status);
const char *iron_status_message(iron_status_t status);
const char *iron_status_code_name(iron_status_code_t code);

// Frees a status (NULL is fine).
void iron_status_free(iron_status_t status);

// Returns a deep copy (for sticky device errors that are handed out many
// times).
iron_status_t iron_status_clone(iron_status_t status) IRON_MUST_USE;

#ifdef __cplusplus
}
#endif

#endif  // IRON_STATUS_H_
