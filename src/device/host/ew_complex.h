// Complex scalar helpers for the element-wise kernels, following XLA:CPU's
// formulas where they differ from C99 Annex G (checked against jax's CPU
// backend by tests/gen_ew_vectors.py): multiply is the plain formula (no
// NaN recovery), abs returns NaN when a part is NaN even if the other is
// infinite, sign(z) = z / |z| (0 for 0).
#ifndef IRON_DEVICE_HOST_EW_COMPLEX_H_
#define IRON_DEVICE_HOST_EW_COMPLEX_H_

#include <complex.h>
#include <math.h>

#include "device/host/ew_common.h"

// FS: libm suffix; RT: part type; CT: complex type; MK: constructor.
#define EW_CPLX_HELPERS(FS, RT, CT, MK)                                     \
  /* XLA:CPU's multiply contracts into FMAs: re = fma(a, c, -(b*d)). */    \
  static inline CT ew_cmul##FS(CT x, CT y) {                                \
    RT a = creal##FS(x), b = cimag##FS(x), c = creal##FS(y),                \
       d = cimag##FS(y);                                                    \
    return MK(fma##FS(a, c, -(b * d)), fma##FS(a, d, b * c));               \
  }                                                                         \
  /* Smith's algorithm; a zero divisor divides each part by +0 as XLA.  */  \
  static inline CT ew_cdiv##FS(CT x, CT y) {                                \
    RT a = creal##FS(x), b = cimag##FS(x), c = creal##FS(y),                \
       d = cimag##FS(y);                                                    \
    if (c == 0 && d == 0) return MK(a / (RT)0, b / (RT)0);                  \
    RT re, im;                                                              \
    if (fabs##FS(c) >= fabs##FS(d)) {                                       \
      RT r = d / c, den = c + d * r;                                        \
      re = (a + b * r) / den;                                               \
      im = (b - a * r) / den;                                               \
    } else {                                                                \
      RT r = c / d, den = c * r + d;                                        \
      re = (a * r + b) / den;                                               \
      im = (b * r - a) / den;                                               \
    }                                                                       \
    if (re != re && im != im) {                                             \
      /* Recover infinities and zeros (C99 Annex G), as XLA:CPU does. */    \
      if ((isinf(a) || isinf(b)) && isfinite(c) && isfinite(d)) {           \
        a = copysign##FS(isinf(a) ? (RT)1 : (RT)0, a);                      \
        b = copysign##FS(isinf(b) ? (RT)1 : (RT)0, b);                      \
        re = (RT)INFINITY * (a * c + b * d);                                \
        im = (RT)INFINITY * (b * c - a * d);                                \
      } else if ((isinf(c) || isinf(d)) && isfinite(a) && isfinite(b)) {    \
        c = copysign##FS(isinf(c) ? (RT)1 : (RT)0, c);                      \
        d = copysign##FS(isinf(d) ? (RT)1 : (RT)0, d);                      \
        re = (RT)0 * (a * c + b * d);                                       \
        im = (RT)0 * (b * c - a * d);                                       \
      }                                                                     \
    }                                                                       \
    return MK(re, im);                                                      \
  }                                                                         \
  static inline RT ew_cabs##FS(CT x) {                                      \
    RT a = fabs##FS(creal##FS(x)), b = fabs##FS(cimag##FS(x));              \
    RT mx = ew_fmax##FS(a, b), mn = ew_fmin##FS(a, b);                      \
    RT q = mn / mx;                                                         \
    RT r = mx * sqrt##FS((RT)1 + q * q);                                    \
    /* (0,0), (inf,inf) and NaN parts make r NaN: then min is right. */     \
    return r != r ? mn : r;                                                 \
  }                                                                         \
  static inline CT ew_csign##FS(CT x) {                                     \
    RT m = ew_cabs##FS(x);                                                  \
    if (m == 0) return MK(0, 0);                                            \
    return MK(creal##FS(x) / m, cimag##FS(x) / m);                          \
  }                                                                         \
  /* exp/log/sin/cos by their textbook formulas: on infinite and NaN */   \
  /* parts they give what XLA:CPU gives (NaN where Annex G recovers).  */   \
  static inline CT ew_cexp##FS(CT x) {                                      \
    RT a = creal##FS(x), b = cimag##FS(x), e = exp##FS(a);                  \
    if (b == 0) return MK(e, b);                                            \
    return MK(e * cos##FS(b), e * sin##FS(b));                              \
  }                                                                         \
  static inline CT ew_clog##FS(CT x) {                                      \
    return MK(log##FS(ew_cabs##FS(x)),                                      \
              atan2##FS(cimag##FS(x), creal##FS(x)));                       \
  }                                                                         \
  static inline CT ew_csin##FS(CT x) {                                      \
    RT a = creal##FS(x), b = cimag##FS(x);                                  \
    return MK(sin##FS(a) * cosh##FS(b), cos##FS(a) * sinh##FS(b));          \
  }                                                                         \
  static inline CT ew_ccos##FS(CT x) {                                      \
    RT a = creal##FS(x), b = cimag##FS(x);                                  \
    return MK(cos##FS(a) * cosh##FS(b), -sin##FS(a) * sinh##FS(b));         \
  }                                                                         \
  static inline CT ew_cexpm1##FS(CT x) {                                    \
    RT a = creal##FS(x), b = cimag##FS(x);                                  \
    RT s = sin##FS(b * (RT)0.5);                                            \
    if (b == 0) return MK(expm1##FS(a), b);                                 \
    return MK(expm1##FS(a) * cos##FS(b) - (RT)2 * s * s,                    \
              exp##FS(a) * sin##FS(b));                                     \
  }                                                                         \
  static inline CT ew_clog1p##FS(CT x) {                                    \
    RT a = creal##FS(x), b = cimag##FS(x);                                  \
    RT re;                                                                  \
    if (fabs##FS(a) < (RT)0.5 && fabs##FS(b) < (RT)0.5) {                   \
      re = (RT)0.5 * log1p##FS(a * ((RT)2 + a) + b * b);                    \
    } else {                                                                \
      re = log##FS(ew_cabs##FS(MK(a + (RT)1, b)));                          \
    }                                                                       \
    return MK(re, atan2##FS(b, a + (RT)1));                                 \
  }                                                                         \
  static inline CT ew_clogistic##FS(CT x) {                                 \
    return ew_cdiv##FS(MK(1, 0), MK(1, 0) + ew_cexp##FS(-x));               \
  }                                                                         \
  /* sqrt with the principal branch chosen by b < 0 (so -0 counts as  */  \
  /* +0: sqrt(-1 - 0i) = +i, as XLA:CPU; C99 csqrt gives -i).          */  \
  static inline CT ew_csqrt##FS(CT x) {                                     \
    RT a = creal##FS(x), b = cimag##FS(x);                                  \
    if (a == 0 && b == 0) return MK(0, b);                                  \
    if (isinf(b) && a == a) return MK((RT)INFINITY, b);                               \
    RT t = sqrt##FS((fabs##FS(a) + ew_cabs##FS(x)) * (RT)0.5);              \
    if (a >= 0) return MK(t, b / ((RT)2 * t));                              \
    return MK(fabs##FS(b) / ((RT)2 * t), b < 0 ? -t : t);                   \
  }                                                                         \
  /* rsqrt in polar form, as XLA:CPU (rsqrt(-1 - 0i) = +i, rsqrt(0) =   */  \
  /* inf + NaN i).                                                      */  \
  static inline CT ew_crsqrt##FS(CT x) {                                    \
    if (creal##FS(x) == 0 && cimag##FS(x) == 0) {                           \
      return MK((RT)INFINITY, (RT)NAN);                                     \
    }                                                                       \
    if (isinf(creal##FS(x)) || isinf(cimag##FS(x))) return MK(0, 0);        \
    RT m = (RT)1 / sqrt##FS(ew_cabs##FS(x));                                \
    RT h = (RT)-0.5 * atan2##FS(cimag##FS(x), creal##FS(x));                \
    return MK(m * cos##FS(h), m * sin##FS(h));                              \
  }                                                                         \
  /* x**y in polar form: |x|^c e^(-d arg x) at angle d ln|x| + c arg x.  */  \
  static inline CT ew_cpow##FS(CT x, CT y) {                                \
    RT a = creal##FS(x), b = cimag##FS(x), c = creal##FS(y),                \
       d = cimag##FS(y);                                                    \
    if (a == 0 && b == 0) {                                                 \
      if (c == 0 && d == 0) return MK(1, 0);                                \
      if (d == 0 && c > 0) return MK(0, 0);                                 \
    }                                                                       \
    RT lr = log##FS(ew_cabs##FS(x)), th = atan2##FS(b, a);                  \
    RT mag = exp##FS(c * lr - d * th), ang = d * lr + c * th;               \
    return MK(mag * cos##FS(ang), mag * sin##FS(ang));                      \
  }                                                                         \
  /* XLA:CPU's complex GT/LT are lexicographic (real, then imaginary); */  \
  /* GE/LE look at the real parts only (measured on jax 0.10.2).        */  \
  static inline bool ew_cgt##FS(CT x, CT y) {                               \
    RT xr = creal##FS(x), yr = creal##FS(y);                                \
    return xr > yr || (xr == yr && cimag##FS(x) > cimag##FS(y));            \
  }                                                                         \
  static inline bool ew_clt##FS(CT x, CT y) {                               \
    RT xr = creal##FS(x), yr = creal##FS(y);                                \
    return xr < yr || (xr == yr && cimag##FS(x) < cimag##FS(y));            \
  }                                                                         \
  static inline bool ew_cge##FS(CT x, CT y) {                               \
    return creal##FS(x) >= creal##FS(y);                                    \
  }                                                                         \
  static inline bool ew_cle##FS(CT x, CT y) {                               \
    return creal##FS(x) <= creal##FS(y);                                    \
  }                                                                         \
  static inline CT ew_cmax##FS(CT x, CT y) {                                \
    return ew_cge##FS(x, y) ? x : y;                                        \
  }                                                                         \
  static inline CT ew_cmin##FS(CT x, CT y) {                                \
    return ew_cle##FS(x, y) ? x : y;                                        \
  }

EW_CPLX_HELPERS(f, float, float _Complex, CMPLXF)
EW_CPLX_HELPERS(, double, double _Complex, CMPLX)

#endif  // IRON_DEVICE_HOST_EW_COMPLEX_H_
