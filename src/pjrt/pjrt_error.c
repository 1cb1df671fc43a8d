// PJRT_Error: a heap wrapper around a non-OK iron_status_t. This file holds
// the one place where an iron_status_t becomes a PJRT_Error.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pjrt/pjrt_internal.h"

static void iron_pjrt_error_vt_destroy(PJRT_Error *error);
static void iron_pjrt_error_vt_message(const PJRT_Error *error,
                                       const char **message,
                                       size_t *message_size);
static PJRT_Error_Code iron_pjrt_error_vt_get_code(const PJRT_Error *error);
static void iron_pjrt_error_vt_for_each_payload(
    const PJRT_Error *error, PJRT_Error_PayloadVisitor visitor,
    void *user_arg);

static const PJRT_Error_FunctionTable iron_pjrt_error_vtable = {
    .struct_size = sizeof(PJRT_Error_FunctionTable),
    .instance_size = sizeof(PJRT_Error),
    .extension_start = NULL,
    .destroy = iron_pjrt_error_vt_destroy,
    .message = iron_pjrt_error_vt_message,
    .get_code = iron_pjrt_error_vt_get_code,
    .for_each_payload = iron_pjrt_error_vt_for_each_payload,
};

// Returned when even the wrapper cannot be allocated. Its status is NULL and
// is reported through the accessors below as RESOURCE_EXHAUSTED.
static PJRT_Error iron_pjrt_error_oom = {&iron_pjrt_error_vtable, NULL, NULL};
static const char iron_pjrt_error_oom_message[] =
    "RESOURCE_EXHAUSTED: out of memory while reporting an error";

// Length of the well-formed UTF-8 sequence at s (n bytes left) that
// encodes a printable character (or \n, \t), 0 when there is none.
static size_t printable_utf8_length(const unsigned char *s, size_t n) {
  unsigned char c = s[0];
  if (c < 0x80) return (c >= 0x20 && c != 0x7f) || c == '\n' || c == '\t';
  size_t len;
  uint32_t cp;
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2;
    cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (len > n) return 0;
  for (size_t i = 1; i < len; ++i) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  // Overlong forms, UTF-16 surrogates, past U+10FFFF; C1 controls.
  if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
      (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff ||
      (cp >= 0x80 && cp < 0xa0))
    return 0;
  return len;
}

// The message with every byte outside printable UTF-8 written as \xNN, or
// NULL when there is none (or no memory: the raw text is reported then).
static char *escape_message(const char *text) {
  const unsigned char *s = (const unsigned char *)text;
  size_t n = strlen(text), bad = 0;
  for (size_t i = 0; i < n;) {
    size_t len = printable_utf8_length(s + i, n - i);
    if (len == 0) {
      bad++;
      len = 1;
    }
    i += len;
  }
  if (bad == 0) return NULL;
  char *out = malloc(n + 3 * bad + 1);
  if (out == NULL) return NULL;
  static const char hex[] = "0123456789abcdef";
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    size_t len = printable_utf8_length(s + i, n - i);
    if (len == 0) {
      out[o++] = '\\';
      out[o++] = 'x';
      out[o++] = hex[s[i] >> 4];
      out[o++] = hex[s[i] & 15];
      i++;
      continue;
    }
    memcpy(out + o, s + i, len);
    o += len;
    i += len;
  }
  out[o] = '\0';
  return out;
}

PJRT_Error *iron_pjrt_error_from_status(iron_status_t status) {
  if (status == IRON_OK) return NULL;
  PJRT_Error *error = malloc(sizeof(*error));
  if (error == NULL) {
    iron_status_free(status);
    return &iron_pjrt_error_oom;
  }
  error->vtable = &iron_pjrt_error_vtable;
  error->status = status;
  error->escaped = escape_message(iron_status_message(status));
  return error;
}

PJRT_Error *iron_pjrt_error_unimplemented(const char *slot_name) {
  // jax's AOT helpers recognize "topology not implemented" as a backend
  // without topologies (and fall back to the live devices).
  if (strstr(slot_name, "Topology") != NULL)
    return iron_pjrt_error_from_status(IRON_ERR(
        UNIMPLEMENTED, "%s: topology not implemented by ironjax", slot_name));
  return iron_pjrt_error_from_status(
      IRON_ERR(UNIMPLEMENTED, "%s is not implemented by ironjax", slot_name));
}

static void iron_pjrt_error_vt_destroy(PJRT_Error *error) {
  if (error == NULL || error == &iron_pjrt_error_oom) return;
  iron_status_free(error->status);
  free(error->escaped);
  free(error);
}

static void iron_pjrt_error_vt_message(const PJRT_Error *error,
                                       const char **message,
                                       size_t *message_size) {
  const char *text = iron_pjrt_error_oom_message;
  if (error != NULL && error->status != NULL)
    text = error->escaped ? error->escaped : iron_status_message(error->status);
  *message = text;
  *message_size = strlen(text);
}

static PJRT_Error_Code iron_pjrt_error_vt_get_code(const PJRT_Error *error) {
  if (error == NULL) return PJRT_Error_Code_OK;
  if (error->status == NULL) return PJRT_Error_Code_RESOURCE_EXHAUSTED;
  // iron status codes use the PJRT/absl numbering (src/base/status.h).
  return (PJRT_Error_Code)iron_status_code(error->status);
}

static void iron_pjrt_error_vt_for_each_payload(
    const PJRT_Error *error, PJRT_Error_PayloadVisitor visitor,
    void *user_arg) {
  // Our errors carry no payloads.
  (void)error;
  (void)visitor;
  (void)user_arg;
}

void iron_pjrt_Error_Destroy(PJRT_Error_Destroy_Args *args) {
  iron_pjrt_error_vt_destroy(args->error);
}

void iron_pjrt_Error_Message(PJRT_Error_Message_Args *args) {
  iron_pjrt_error_vt_message(args->error, &args->message,
                             &args->message_size);
}

PJRT_Error *iron_pjrt_Error_GetCode(PJRT_Error_GetCode_Args *args) {
  args->code = iron_pjrt_error_vt_get_code(args->error);
  return NULL;
}

PJRT_Error *iron_pjrt_Error_ForEachPayload(
    PJRT_Error_ForEachPayload_Args *args) {
  iron_pjrt_error_vt_for_each_payload(args->error, args->visitor,
                                      args->user_arg);
  return NULL;
}
