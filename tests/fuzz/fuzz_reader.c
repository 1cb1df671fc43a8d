// libFuzzer entry point: any byte string must read into a valid module or
// be refused with INVALID_ARGUMENT / RESOURCE_EXHAUSTED naming what was
// expected; never a crash, hang or leak. Whatever reads must also print.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "stablehlo/reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  iron_ir_module_t *m = NULL;
  iron_status_t st = iron_stablehlo_read(data, size, &m);
  if (st) {
    iron_status_code_t code = iron_status_code(st);
    if (code != IRON_STATUS_INVALID_ARGUMENT &&
        code != IRON_STATUS_RESOURCE_EXHAUSTED)
      __builtin_trap();
    if (m) __builtin_trap();
    // Bytecode errors name where they happened.
    if (code == IRON_STATUS_INVALID_ARGUMENT &&
        !strstr(iron_status_message(st), "bytecode offset ") &&
        !strstr(iron_status_message(st), "function") &&
        !strstr(iron_status_message(st), "builtin.module"))
      __builtin_trap();
    iron_status_free(st);
    return 0;
  }
  iron_ir_print_options_t opts = {size & 1};
  char *text = iron_ir_module_print_to_string(m, &opts);
  free(text);
  iron_ir_module_destroy(m);
  return 0;
}
