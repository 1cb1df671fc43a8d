// stablehlo.fft's attributes and shapes, read and validated once for every
// device (host fft.c, CUDA cuda_fft.c), so that the devices accept and
// refuse the same programs with the same statuses and messages. Plans
// (host factorisations, cuFFT handles) stay with each device.
#ifndef IRON_DEVICE_PLANS_FFT_PLAN_H_
#define IRON_DEVICE_PLANS_FFT_PLAN_H_

#include <stdint.h>

#include "base/dtype.h"
#include "base/status.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

// fft_type's values (stablehlo's FftType enum).
enum {
  IRON_FFT_PLAN_FFT = 0,
  IRON_FFT_PLAN_IFFT,
  IRON_FFT_PLAN_RFFT,
  IRON_FFT_PLAN_IRFFT
};

typedef struct iron_fft_plan {
  const iron_ir_type_t *in, *out;  // borrowed from the op
  int32_t type;                    // IRON_FFT_PLAN_*
  int32_t d;                       // transform dims: the d innermost, 1..3
  int32_t rank;                    // of input and result
  int64_t len[4];                  // fft_length (len[0..d-1]), <= 2^40 each
  double total;                    // prod(len) as a double
} iron_fft_plan_t;

// Validates a stablehlo.fft and fills *out: 1 operand and 1 result of
// static tensor types, fft_type, 1 to 3 fft_length entries, the dtype pair
// of the type (c64/c128, f32 <-> c64, f64 <-> c128), transform dims that
// fit fft_length (RFFT's result / IRFFT's input last dim n/2 + 1) and equal
// batch dims. INVALID_ARGUMENT naming the op for malformed ops,
// UNIMPLEMENTED (iron_ir_op_unimplemented) for dynamic shapes, other dtype
// pairs, more than 3 transform dims and lengths beyond 2^40.
iron_status_t iron_fft_plan_read(const iron_ir_op_t *op,
                                 iron_fft_plan_t *out);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_PLANS_FFT_PLAN_H_
