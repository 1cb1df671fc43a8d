// PJRT_Event: a handle on an iron_event_t. Events are real: they complete
// when the runtime's work completes, possibly on a worker thread.
#include <stdlib.h>

#include "pjrt/pjrt_internal.h"

PJRT_Event *iron_pjrt_event_wrap(iron_event_t *event) {
  PJRT_Event *wrapper = malloc(sizeof(*wrapper));
  if (wrapper == NULL) {
    iron_event_release(event);
    return NULL;
  }
  wrapper->event = event;
  return wrapper;
}

PJRT_Error *iron_pjrt_Event_Destroy(PJRT_Event_Destroy_Args *args) {
  if (args->event == NULL) return NULL;
  iron_event_release(args->event->event);
  free(args->event);
  return NULL;
}

PJRT_Error *iron_pjrt_Event_IsReady(PJRT_Event_IsReady_Args *args) {
  args->is_ready = iron_event_is_ready(args->event->event);
  return NULL;
}

PJRT_Error *iron_pjrt_Event_Error(PJRT_Event_Error_Args *args) {
  return iron_pjrt_error_from_status(iron_event_status(args->event->event));
}

PJRT_Error *iron_pjrt_Event_Await(PJRT_Event_Await_Args *args) {
  return iron_pjrt_error_from_status(iron_event_wait(args->event->event));
}

typedef struct iron_pjrt_on_ready {
  PJRT_Event_OnReadyCallback callback;
  void *user_arg;
} iron_pjrt_on_ready_t;

static void iron_pjrt_event_fire(iron_status_t status, void *arg) {
  iron_pjrt_on_ready_t on_ready = *(iron_pjrt_on_ready_t *)arg;
  free(arg);
  // The callback owns the error; it may destroy the PJRT_Event it was
  // registered on (jaxlib does), which is safe: see OnReady below.
  on_ready.callback(iron_pjrt_error_from_status(status), on_ready.user_arg);
}

PJRT_Error *iron_pjrt_Event_OnReady(PJRT_Event_OnReady_Args *args) {
  iron_pjrt_on_ready_t *on_ready = malloc(sizeof(*on_ready));
  if (on_ready == NULL)
    return iron_pjrt_error_from_status(
        IRON_ERR(RESOURCE_EXHAUSTED, "PJRT_Event_OnReady: out of memory"));
  on_ready->callback = args->callback;
  on_ready->user_arg = args->user_arg;
  // The callback may run right here and destroy args->event (dropping its
  // reference); hold our own so the iron event outlives this call.
  iron_event_t *event = args->event->event;
  iron_event_retain(event);
  iron_event_on_ready(event, iron_pjrt_event_fire, on_ready);
  iron_event_release(event);
  return NULL;
}

PJRT_Error *iron_pjrt_Event_Create(PJRT_Event_Create_Args *args) {
  iron_event_t *event = NULL;
  iron_status_t status = iron_event_create(&event);
  if (status != IRON_OK) return iron_pjrt_error_from_status(status);
  PJRT_Event *wrapper = iron_pjrt_event_wrap(event);
  if (wrapper == NULL)
    return iron_pjrt_error_from_status(
        IRON_ERR(RESOURCE_EXHAUSTED, "PJRT_Event_Create: out of memory"));
  args->event = wrapper;
  return NULL;
}

PJRT_Error *iron_pjrt_Event_Set(PJRT_Event_Set_Args *args) {
  iron_status_t status = IRON_OK;
  if (args->error_code != PJRT_Error_Code_OK) {
    size_t size = args->error_message_size;
    if (size > 65536) size = 65536;  // a message, not a payload
    status = iron_status_make((iron_status_code_t)args->error_code, "%.*s",
                              (int)size,
                              args->error_message ? args->error_message : "");
  }
  iron_event_complete(args->event->event, status);
  return NULL;
}
