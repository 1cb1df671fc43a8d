// PJRT_Error: a heap wrapper around a non-OK iron_status_t. This file holds
// the one place where an iron_status_t becomes a PJRT_Error.
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
static PJRT_Error iron_pjrt_error_oom = {&iron_pjrt_error_vtable, NULL};
static const char iron_pjrt_error_oom_message[] =
    "RESOURCE_EXHAUSTED: out of memory while reporting an error";

PJRT_Error *iron_pjrt_error_from_status(iron_status_t status) {
  if (status == IRON_OK) return NULL;
  PJRT_Error *error = malloc(sizeof(*error));
  if (error == NULL) {
    iron_status_free(status);
    return &iron_pjrt_error_oom;
  }
  error->vtable = &iron_pjrt_error_vtable;
  error->status = status;
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
  free(error);
}

static void iron_pjrt_error_vt_message(const PJRT_Error *error,
                                       const char **message,
                                       size_t *message_size) {
  const char *text = iron_pjrt_error_oom_message;
  if (error != NULL && error->status != NULL)
    text = iron_status_message(error->status);
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
