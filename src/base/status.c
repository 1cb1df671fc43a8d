#include "base/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct iron_status_record {
  iron_status_code_t code;
  bool is_static;
  char *message;
};

static struct iron_status_record kOutOfMemoryStatus = {
    IRON_STATUS_RESOURCE_EXHAUSTED, true,
    (char *)"out of host memory while reporting an error"};

static char *iron_vformat(const char *fmt, va_list ap) {
  if (!fmt) fmt = "";
  va_list ap2;
  va_copy(ap2, ap);
  // A one-byte buffer rather than NULL: gcc's sanitizer builds warn about a
  // "null format string" for the NULL form.
  char probe[1];
  int n = vsnprintf(probe, sizeof(probe), fmt, ap2);
  va_end(ap2);
  if (n < 0) n = 0;
  char *buf = malloc((size_t)n + 1);
  if (!buf) return NULL;
  vsnprintf(buf, (size_t)n + 1, fmt, ap);
  return buf;
}

iron_status_t iron_status_makev(iron_status_code_t code, const char *fmt,
                                va_list ap) {
  if (code == IRON_STATUS_OK) return IRON_OK;
  struct iron_status_record *s = malloc(sizeof(*s));
  if (!s) return &kOutOfMemoryStatus;
  s->code = code;
  s->is_static = false;
  s->message = iron_vformat(fmt, ap);
  if (!s->message) {
    free(s);
    return &kOutOfMemoryStatus;
  }
  return s;
}

iron_status_t iron_status_make(iron_status_code_t code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  iron_status_t s = iron_status_makev(code, fmt, ap);
  va_end(ap);
  return s;
}

iron_status_t iron_status_annotate(iron_status_t status, const char *fmt,
                                   ...) {
  if (status == IRON_OK || status->is_static) return status;
  va_list ap;
  va_start(ap, fmt);
  char *ctx = iron_vformat(fmt, ap);
  va_end(ap);
  if (!ctx) return status;
  if (ctx[0] == '\0') {
    free(ctx);
    return status;
  }
  size_t a = strlen(ctx), b = strlen(status->message);
  char *joined = malloc(a + 2 + b + 1);
  if (joined) {
    memcpy(joined, ctx, a);
    joined[a] = ':';
    joined[a + 1] = ' ';
    memcpy(joined + a + 2, status->message, b + 1);
    free(status->message);
    status->message = joined;
  }
  free(ctx);
  return status;
}

iron_status_code_t iron_status_code(iron_status_t status) {
  return status ? status->code : IRON_STATUS_OK;
}

const char *iron_status_message(iron_status_t status) {
  return status ? status->message : "OK";
}

const char *iron_status_code_name(iron_status_code_t code) {
  switch (code) {
    case IRON_STATUS_OK: return "OK";
    case IRON_STATUS_CANCELLED: return "CANCELLED";
    case IRON_STATUS_UNKNOWN: return "UNKNOWN";
    case IRON_STATUS_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case IRON_STATUS_DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case IRON_STATUS_NOT_FOUND: return "NOT_FOUND";
    case IRON_STATUS_ALREADY_EXISTS: return "ALREADY_EXISTS";
    case IRON_STATUS_PERMISSION_DENIED: return "PERMISSION_DENIED";
    case IRON_STATUS_RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case IRON_STATUS_FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case IRON_STATUS_ABORTED: return "ABORTED";
    case IRON_STATUS_OUT_OF_RANGE: return "OUT_OF_RANGE";
    case IRON_STATUS_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case IRON_STATUS_INTERNAL: return "INTERNAL";
    case IRON_STATUS_UNAVAILABLE: return "UNAVAILABLE";
    case IRON_STATUS_DATA_LOSS: return "DATA_LOSS";
    case IRON_STATUS_UNAUTHENTICATED: return "UNAUTHENTICATED";
  }
  return "UNKNOWN";
}

void iron_status_free(iron_status_t status) {
  if (!status || status->is_static) return;
  free(status->message);
  free(status);
}

iron_status_t iron_status_clone(iron_status_t status) {
  if (!status) return IRON_OK;
  return iron_status_make(status->code, "%s", status->message);
}
