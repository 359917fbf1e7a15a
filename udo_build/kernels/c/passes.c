/* udo-build's compiled passes of the emulator (udo_build/kernels/compiled.py builds and loads
 * this file; the numpy code it stands in for is the reference, and the fallback).
 *
 * udo_requant: the int8 path's requantization (udo_build/runtime/integer/fixed.py), one pass
 * per row: q = zp + rint(clamp((acc + offset) x factor, lo, hi)), acc exact integers held as
 * float32, float64 or int32 (c/qconv.c's sums), factor = M0 / 2^shift and offset per
 * channel, lo/hi the clamp bounds less the zero point. Every operation is exact (the integer
 * sum, the product below 2^53 times a power of two, the clamp) but the rounding, which is IEEE
 * round-half-to-even as numpy's rint: the same integers as the numpy passes, whatever the
 * compiler vectorizes. With a table, the result goes straight through an 8-bit pair lookup (a
 * residual Add/Sum): out = table[q << 8 | other] (or table[other << 8 | q]), other the other
 * input's raw bytes.
 *
 * With `sum` (an Add's factors, constant and clamp: see pair_sum), the table's bytes are
 * computed instead of looked up, where the caller has checked that they are the same for every
 * pair (udo_pair_sum).
 *
 * udo_pair_lookup: out = table[a << 8 | b] over raw bytes (an 8-bit Add, Sum or Mul).
 *
 * udo_im2col: a 2-d integer convolution's columns of its centered input, x - zp in float32
 * (exact), in one pass from the raw integers (udo_build/runtime/integer/conv.py).
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

enum { ACC_F32 = 0, ACC_F64 = 1, ACC_I32 = 2 };
enum { OUT_U8 = 0, OUT_I8 = 1, OUT_U16 = 2, OUT_I16 = 3 };

typedef struct {
  const double *factor, *offset;  /* per channel (step 1) or one (step 0); offset may be NULL */
  ptrdiff_t factor_step, offset_step;
  double lo, hi;  /* the clamp bounds, less the zero point */
  int32_t zp;
} Requant;

/* One row of `n` accumulators rounded into int32 (clamped: the output type holds zp + q). */
#define ROUND_ROW(NAME, T)                                                                   \
  static void NAME(const T *restrict acc, ptrdiff_t n, double f, double off, double lo,     \
                   double hi, int32_t *restrict q) {                                         \
    for (ptrdiff_t i = 0; i < n; i++) {                                                      \
      double t = ((double)acc[i] + off) * f;                                                 \
      t = t < lo ? lo : t;                                                                   \
      t = t > hi ? hi : t;                                                                   \
      q[i] = (int32_t)rint(t);                                                               \
    }                                                                                        \
  }
ROUND_ROW(round_f32, float)
ROUND_ROW(round_f64, double)
ROUND_ROW(round_i32, int32_t)

#define STORE_ROW(NAME, T)                                                                   \
  static void NAME(const int32_t *restrict q, ptrdiff_t n, int32_t zp, T *restrict out) {   \
    for (ptrdiff_t i = 0; i < n; i++) out[i] = (T)(q[i] + zp);                               \
  }
STORE_ROW(store_u8, uint8_t)
STORE_ROW(store_i8, int8_t)
STORE_ROW(store_u16, uint16_t)
STORE_ROW(store_i16, int16_t)

/* Through a pair table of 1- or 2-byte entries: q is the high (first) or low byte. */
static void lookup_row(const int32_t *restrict q, ptrdiff_t n, int32_t zp,
                       const uint8_t *restrict other, int q_first, const void *table,
                       int entry, void *out) {
  if (entry == 1) {
    const uint8_t *t = table;
    uint8_t *o = out;
    if (q_first)
      for (ptrdiff_t i = 0; i < n; i++) o[i] = t[(uint32_t)(uint8_t)(q[i] + zp) << 8 | other[i]];
    else
      for (ptrdiff_t i = 0; i < n; i++) o[i] = t[(uint32_t)other[i] << 8 | (uint8_t)(q[i] + zp)];
  } else {
    const uint16_t *t = table;
    uint16_t *o = out;
    if (q_first)
      for (ptrdiff_t i = 0; i < n; i++) o[i] = t[(uint32_t)(uint8_t)(q[i] + zp) << 8 | other[i]];
    else
      for (ptrdiff_t i = 0; i < n; i++) o[i] = t[(uint32_t)other[i] << 8 | (uint8_t)(q[i] + zp)];
  }
}

/* The sum form of an 8-bit pair (an Add of two 8-bit inputs, every term on one grid of
 * 2^-shift: exact in double): zp + rint(clamp(f0 a + f1 b + c, lo, hi)), a and b the typed
 * values, sum = {f0, f1, c, lo, hi, zp}; what the pair's table holds, computed (udo_pair_sum
 * lets the caller check that, for every pair, before it uses this in place of the table). */
static inline int32_t pair_sum(double a, double b, const double *sum) {
  double t = sum[0] * a + sum[1] * b + sum[2];
  t = t < sum[3] ? sum[3] : t;
  t = t > sum[4] ? sum[4] : t;
  return (int32_t)rint(t) + (int32_t)sum[5];
}

/* kinds: bit 0, the first byte signed; bit 1, the second; the q side is typed already */
static inline double byte_value(uint8_t b, int is_signed) {
  return is_signed ? (double)(int8_t)b : (double)b;
}

/* sum_row's loop for one signedness of the other input (the numbers held in locals: no
   aliasing to rule out at each element) */
#define SUM_LOOP(OTHER_T)                                                                      \
  for (ptrdiff_t i = 0; i < n; i++) {                                                          \
    double qv = (double)(q[i] + zp), ov = (double)(OTHER_T)other[i];                          \
    double t = q_first ? f0 * qv + f1 * ov + c : f0 * ov + f1 * qv + c;                        \
    t = t < lo ? lo : t;                                                                       \
    t = t > hi ? hi : t;                                                                       \
    out[i] = (uint8_t)((int32_t)rint(t) + z);                                                  \
  }

static void sum_row(const int32_t *restrict q, ptrdiff_t n, int32_t zp,
                    const uint8_t *restrict other, int q_first, const double *sum, int kinds,
                    uint8_t *restrict out) {
  const double f0 = sum[0], f1 = sum[1], c = sum[2], lo = sum[3], hi = sum[4];
  const int32_t z = (int32_t)sum[5];
  if (kinds & (q_first ? 2 : 1))
    SUM_LOOP(int8_t)
  else
    SUM_LOOP(uint8_t)
}

/* out = the sum form of each pair of raw bytes (a first), as its low byte */
EXPORT void udo_pair_sum(const uint8_t *a, const uint8_t *b, ptrdiff_t n, const double *sum,
                         int kinds, uint8_t *out) {
  for (ptrdiff_t i = 0; i < n; i++)
    out[i] = (uint8_t)pair_sum(byte_value(a[i], kinds & 1), byte_value(b[i], kinds & 2), sum);
}

#define ROW_BLOCK 4096

/* acc: channels x rows x cols elements at element strides (s_c, s_r, 1); out (and other, with
 * a table) contiguous channels x rows x cols. Returns 0, or -1 for a kind it does not take. */
EXPORT int udo_requant(const void *acc, int acc_kind, ptrdiff_t channels, ptrdiff_t rows,
                       ptrdiff_t cols, ptrdiff_t s_c, ptrdiff_t s_r, const double *factor,
                       ptrdiff_t factor_step, const double *offset, ptrdiff_t offset_step,
                       double lo, double hi, int32_t zp, void *out, int out_kind,
                       const void *table, int entry, const uint8_t *other, int q_first,
                       const double *sum, int kinds) {
  static const int size[] = {1, 1, 2, 2};
  if (acc_kind < 0 || acc_kind > 2 || out_kind < 0 || out_kind > 3) return -1;
  if (table != NULL && (size[out_kind] != 1 || (entry != 1 && entry != 2))) return -1;
  int32_t q[ROW_BLOCK];
  int item = table != NULL ? entry : size[out_kind];
  for (ptrdiff_t c = 0; c < channels; c++) {
    double f = factor[c * factor_step];
    double off = offset != NULL ? offset[c * offset_step] : 0.0;
    for (ptrdiff_t r = 0; r < rows; r++) {
      ptrdiff_t at = (c * rows + r) * cols;
      for (ptrdiff_t k = 0; k < cols; k += ROW_BLOCK) {
        ptrdiff_t n = cols - k < ROW_BLOCK ? cols - k : ROW_BLOCK;
        ptrdiff_t from = c * s_c + r * s_r + k;
        if (acc_kind == ACC_F32)
          round_f32((const float *)acc + from, n, f, off, lo, hi, q);
        else if (acc_kind == ACC_F64)
          round_f64((const double *)acc + from, n, f, off, lo, hi, q);
        else
          round_i32((const int32_t *)acc + from, n, f, off, lo, hi, q);
        char *dst = (char *)out + (at + k) * item;
        if (table != NULL && sum != NULL && entry == 1)
          sum_row(q, n, zp, other + at + k, q_first, sum, kinds, (uint8_t *)dst);
        else if (table != NULL)
          lookup_row(q, n, zp, other + at + k, q_first, table, entry, dst);
        else if (out_kind == OUT_U8)
          store_u8(q, n, zp, (uint8_t *)dst);
        else if (out_kind == OUT_I8)
          store_i8(q, n, zp, (int8_t *)dst);
        else if (out_kind == OUT_U16)
          store_u16(q, n, zp, (uint16_t *)dst);
        else
          store_i16(q, n, zp, (int16_t *)dst);
      }
    }
  }
  return 0;
}

EXPORT int udo_pair_lookup(const uint8_t *a, const uint8_t *b, ptrdiff_t n, const void *table,
                           int entry, void *out) {
  if (entry == 1) {
    const uint8_t *t = table;
    uint8_t *o = out;
    for (ptrdiff_t i = 0; i < n; i++) o[i] = t[(uint32_t)a[i] << 8 | b[i]];
  } else if (entry == 2) {
    const uint16_t *t = table;
    uint16_t *o = out;
    for (ptrdiff_t i = 0; i < n; i++) o[i] = t[(uint32_t)a[i] << 8 | b[i]];
  } else {
    return -1;
  }
  return 0;
}

/* udo_im2col: the columns (channels, kh, kw, oh, ow) of a 2-d convolution of x (channels, h, w),
 * 1- or 2-byte integers (x_kind: OUT_U8 .. OUT_I16), centered: x - zp as float32 (exact: both
 * are integers of at most 16 bits), the padding the real zero; output row y of tap (i, j) reads
 * input row y * sh + i * dh - bh, column o * sw + j * dw - bw (bh, bw: the start pads, negative
 * for a crop). What udo_build/kernels/default/conv.py's im2col makes of the centered input. */
static ptrdiff_t ceil_div(ptrdiff_t a, ptrdiff_t b) { /* b > 0 */
  return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

typedef struct {
  ptrdiff_t channels, h, w, kh, kw, sh, sw, dh, dw, bh, bw, oh, ow;
} Window;

/* x - zp over a contiguous run (kept out of line: inlined, gcc vectorized it 5x slower). */
#define CENTER_RUN(NAME, T)                                                                  \
  __attribute__((noinline)) static void NAME(const T *restrict in, ptrdiff_t n, float zp,   \
                                             float *restrict out) {                          \
    for (ptrdiff_t i = 0; i < n; i++) out[i] = (float)in[i] - zp;                            \
  }
CENTER_RUN(run_u8, uint8_t)
CENTER_RUN(run_i8, int8_t)
CENTER_RUN(run_u16, uint16_t)
CENTER_RUN(run_i16, int16_t)

/* The columns for one input type; a 1x1 that reads the input as it is: one run. */
#define IM2COL(NAME, T, RUN)                                                                 \
  static void NAME(const T *restrict x, const Window *g, float zp, float *restrict out) {   \
    if (g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->bh == 0 && g->bw == 0 &&   \
        g->oh == g->h && g->ow == g->w) {                                                     \
      RUN(x, g->channels * g->h * g->w, zp, out);                                            \
      return;                                                                                \
    }                                                                                        \
    ptrdiff_t ow = g->ow, sw = g->sw;                                                        \
    for (ptrdiff_t c = 0; c < g->channels; c++) {                                            \
      const T *plane = x + c * g->h * g->w;                                                  \
      for (ptrdiff_t i = 0; i < g->kh; i++) {                                                \
        for (ptrdiff_t j = 0; j < g->kw; j++) {                                              \
          ptrdiff_t at = j * g->dw - g->bw; /* the input column of output column 0 */       \
          ptrdiff_t from = ceil_div(-at, sw), to = ceil_div(g->w - at, sw);                  \
          from = from < 0 ? 0 : (from > ow ? ow : from);                                     \
          to = to > ow ? ow : (to < from ? from : to);                                       \
          for (ptrdiff_t y = 0; y < g->oh; y++, out += ow) {                                 \
            ptrdiff_t iy = y * g->sh + i * g->dh - g->bh;                                    \
            if (iy < 0 || iy >= g->h) {                                                      \
              memset(out, 0, (size_t)ow * sizeof(float));                                    \
              continue;                                                                      \
            }                                                                                \
            const T *row = plane + iy * g->w + at;                                           \
            for (ptrdiff_t o = 0; o < from; o++) out[o] = 0.0f;                              \
            if (sw == 1)                                                                     \
              for (ptrdiff_t o = from; o < to; o++) out[o] = (float)row[o] - zp;             \
            else if (sw == 2)                                                                \
              for (ptrdiff_t o = from; o < to; o++) out[o] = (float)row[2 * o] - zp;         \
            else                                                                             \
              for (ptrdiff_t o = from; o < to; o++) out[o] = (float)row[o * sw] - zp;        \
            for (ptrdiff_t o = to; o < ow; o++) out[o] = 0.0f;                               \
          }                                                                                  \
        }                                                                                    \
      }                                                                                      \
    }                                                                                        \
  }
IM2COL(im2col_u8, uint8_t, run_u8)
IM2COL(im2col_i8, int8_t, run_i8)
IM2COL(im2col_u16, uint16_t, run_u16)
IM2COL(im2col_i16, int16_t, run_i16)

EXPORT int udo_im2col(const void *x, int x_kind, ptrdiff_t channels, ptrdiff_t h, ptrdiff_t w,
                      ptrdiff_t kh, ptrdiff_t kw, ptrdiff_t sh, ptrdiff_t sw, ptrdiff_t dh,
                      ptrdiff_t dw, ptrdiff_t bh, ptrdiff_t bw, ptrdiff_t oh, ptrdiff_t ow,
                      float zp, float *cols) {
  Window g = {channels, h, w, kh, kw, sh, sw, dh, dw, bh, bw, oh, ow};
  if (sh < 1 || sw < 1) return -1;
  if (x_kind == OUT_U8)
    im2col_u8(x, &g, zp, cols);
  else if (x_kind == OUT_I8)
    im2col_i8(x, &g, zp, cols);
  else if (x_kind == OUT_U16)
    im2col_u16(x, &g, zp, cols);
  else if (x_kind == OUT_I16)
    im2col_i16(x, &g, zp, cols);
  else
    return -1;
  return 0;
}
