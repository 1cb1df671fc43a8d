// The host-callback kernel (custom_call @iron_python_callback): see
// callback.h for the contract between the plugin and ironjax.
#include "device/host/callback.h"

#include "device/device.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

// Zero-initialized (NULL): no handler until the Python package sets one.
static _Atomic(iron_host_callback_handler_t) g_handler;

void iron_host_callback_set_handler(iron_host_callback_handler_t handler) {
  atomic_store(&g_handler, handler);
}

typedef struct {
  uint64_t id;
  uint32_t num_inputs, num_outputs;  // including tokens
} callback_params_t;

// Pins: per callback id, the compiled ops naming it (iron_host_callback_pins).
// Few ids are live at once (one per callback op of a live executable): a
// plain array.
typedef struct {
  uint64_t id;
  int32_t count;
} callback_pin_t;
static pthread_mutex_t g_pin_mu = PTHREAD_MUTEX_INITIALIZER;
static callback_pin_t *g_pins;
static size_t g_num_pins, g_cap_pins;

static bool pin(uint64_t id) {
  pthread_mutex_lock(&g_pin_mu);
  bool ok = true;
  size_t i = 0;
  while (i < g_num_pins && g_pins[i].id != id) ++i;
  if (i == g_num_pins) {
    if (g_num_pins == g_cap_pins) {
      size_t cap = g_cap_pins ? 2 * g_cap_pins : 16;
      callback_pin_t *n = realloc(g_pins, cap * sizeof(*n));
      if (!n) ok = false;
      else {
        g_pins = n;
        g_cap_pins = cap;
      }
    }
    if (ok) g_pins[g_num_pins++] = (callback_pin_t){id, 0};
  }
  if (ok) g_pins[i].count++;
  pthread_mutex_unlock(&g_pin_mu);
  return ok;
}

static void unpin(uint64_t id) {
  pthread_mutex_lock(&g_pin_mu);
  for (size_t i = 0; i < g_num_pins; ++i) {
    if (g_pins[i].id != id) continue;
    if (--g_pins[i].count == 0) g_pins[i] = g_pins[--g_num_pins];
    break;
  }
  pthread_mutex_unlock(&g_pin_mu);
}

int32_t iron_host_callback_pins(uint64_t callback_id) {
  pthread_mutex_lock(&g_pin_mu);
  int32_t n = 0;
  for (size_t i = 0; i < g_num_pins; ++i)
    if (g_pins[i].id == callback_id) n = g_pins[i].count;
  pthread_mutex_unlock(&g_pin_mu);
  return n;
}

static void callback_destroy(void *params) {
  callback_params_t *p = params;
  if (!p) return;
  unpin(p->id);
  free(p);
}

// Python tracebacks are long; the useful end (the exception) is kept by the
// handler when it truncates.
#define CALLBACK_ERROR_CAPACITY 16384

static iron_status_t check_type(const iron_ir_op_t *op, const char *what,
                                uint32_t index, const iron_ir_type_t *t) {
  if (t->kind == IRON_TYPE_TOKEN) return IRON_OK;
  if (t->kind == IRON_TYPE_TENSOR && iron_ir_type_is_static(t)) return IRON_OK;
  char buf[128];
  iron_ir_type_format(t, buf, sizeof(buf));
  return iron_ir_op_unimplemented(op, "(host callback) with %s %u of type %s",
                                  what, index, buf);
}

static iron_status_t callback_prepare(const iron_ir_op_t *op,
                                      iron_region_t *const *regions,
                                      void **out_params) {
  (void)regions;
  const char *config = iron_ir_op_string(op, "backend_config");
  if (!config || !config[0])
    return iron_ir_op_unimplemented(
        op, "(host callback) without a callback id in backend_config");
  char *end = NULL;
  errno = 0;
  unsigned long long id = strtoull(config, &end, 10);
  if (errno != 0 || *end != '\0' || config[0] == '-')
    return iron_ir_op_unimplemented(
        op, "(host callback) with backend_config \"%s\" (expected a callback "
        "id)", config);
  for (uint32_t i = 0; i < op->num_operands; ++i)
    IRON_RETURN_IF_ERROR_PLAIN(
        check_type(op, "operand", i, op->operands[i]->type));
  for (uint32_t i = 0; i < op->num_results; ++i)
    IRON_RETURN_IF_ERROR_PLAIN(
        check_type(op, "result", i, op->results[i].type));
  callback_params_t *p = malloc(sizeof(*p));
  if (!p || !pin((uint64_t)id)) {
    free(p);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  }
  p->id = (uint64_t)id;
  p->num_inputs = op->num_operands;
  p->num_outputs = op->num_results;
  *out_params = p;
  return IRON_OK;
}

// Counts the non-token tensors of `ts`.
static int32_t count_data(const iron_tensor_t *const *ts, uint32_t n) {
  int32_t c = 0;
  for (uint32_t i = 0; i < n; ++i)
    if (ts[i]->dtype != IRON_DTYPE_TOKEN) ++c;
  return c;
}

static iron_status_t callback_run(const iron_kernel_ctx_t *ctx,
                                  const void *params,
                                  const iron_tensor_t *const *inputs,
                                  iron_tensor_t *const *outputs) {
  (void)ctx;
  const callback_params_t *p = params;
  const uint32_t num_inputs = p->num_inputs, num_outputs = p->num_outputs;
  iron_host_callback_handler_t handler = atomic_load(&g_handler);
  if (!handler)
    return IRON_ERR(FAILED_PRECONDITION,
                    "host callback %llu: no callback handler is installed "
                    "(ironjax installs it when jax initialises the iron "
                    "plugin; programs with host callbacks cannot run "
                    "without Python)",
                    (unsigned long long)p->id);
  const int32_t ni = count_data(inputs, num_inputs);
  const int32_t no = count_data((const iron_tensor_t *const *)outputs,
                                num_outputs);
  // One allocation: pointers, sizes, error text.
  const size_t n = (size_t)ni + (size_t)no;
  char *mem = malloc(n * (sizeof(void *) + sizeof(uint64_t)) +
                     CALLBACK_ERROR_CAPACITY);
  if (!mem) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  void **ptrs = (void **)mem;
  uint64_t *sizes = (uint64_t *)(mem + n * sizeof(void *));
  char *error = mem + n * (sizeof(void *) + sizeof(uint64_t));
  error[0] = '\0';
  int32_t k = 0;
  for (uint32_t i = 0; i < num_inputs; ++i) {
    if (inputs[i]->dtype == IRON_DTYPE_TOKEN) continue;
    ptrs[k] = inputs[i]->data;
    sizes[k] = inputs[i]->nbytes;
    ++k;
  }
  for (uint32_t i = 0; i < num_outputs; ++i) {
    if (outputs[i]->dtype == IRON_DTYPE_TOKEN) continue;
    ptrs[k] = outputs[i]->data;
    sizes[k] = outputs[i]->nbytes;
    ++k;
  }
  iron_device_host_callback_enter();
  int32_t rc = handler(p->id, ni, ptrs, sizes, no, ptrs + ni, sizes + ni,
                       error, CALLBACK_ERROR_CAPACITY);
  iron_device_host_callback_leave();
  iron_status_t st = IRON_OK;
  if (rc != 0) {
    error[CALLBACK_ERROR_CAPACITY - 1] = '\0';
    st = IRON_ERR(INTERNAL, "%s",
                  error[0] ? error : "host callback failed (no message)");
  }
  free(mem);
  return st;
}

static const iron_kernel_t kCallbackKernel = {
    /* .name = */ "host_callback",
    /* .prepare = */ callback_prepare,
    /* .run = */ callback_run,
    /* .destroy = */ callback_destroy,
    /* .inplace_ok = */ false,
    /* .elementwise = */ false,
};

const iron_kernel_t *iron_host_callback_kernel_for_target(
    const char *target) {
  if (target && strcmp(target, IRON_HOST_CALLBACK_TARGET) == 0)
    return &kCallbackKernel;
  return NULL;
}

const iron_kernel_t *iron_reference_callback_kernel(const char *target) {
  return iron_host_callback_kernel_for_target(target);
}
