/* The float runtime's 2-d MaxPool (float32), for udo_build/kernels/default/pool.py:

     y[p][oy][ox] = max over ky < kh, kx < kw of x[p][oy * sh + ky * dh - ph][ox * sw + kx * dw - pw]

   for every plane p (batch x channels); positions outside the input are -inf (the padding,
   and what ceil_mode adds past it). An output row is the maximum over ky of the input rows it
   reads (whole rows: contiguous, vectorized; three whole rows in one pass of blocks), then
   over kx of that row's strided columns. The maximum keeps a NaN (of either side), as numpy's
   does: the same values as the numpy path. Each plane takes the plain maximum (one
   instruction) first, noting as it reads the rows whether one held a NaN; a plane where one
   did is pooled again with the maximum that keeps it.
   The row scratch is the calling thread's (1 when it cannot be had). */
#define _POSIX_C_SOURCE 200112L /* posix_memalign */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef ptrdiff_t idx;
#define EXPORT __attribute__((visibility("default")))

static inline float larger(float a, float b) { return a != a || a > b ? a : b; }
static inline float larger_finite(float a, float b) { return a > b ? a : b; } /* no NaN */

#define BLOCK 16 /* the narrowest rows read three at once */

/* the plain maximum a vector of VW floats at a time (GCC's vector extensions: the widest this
   host has) */
#if defined(__AVX512F__)
#define VW 16
#elif defined(__AVX__)
#define VW 8
#else
#define VW 4
#endif
typedef float vw __attribute__((vector_size(VW * sizeof(float))));
typedef int iw __attribute__((vector_size(VW * sizeof(int))));
static inline vw loadw(const float *p) {
  vw v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline vw maxw(vw a, vw b) { /* the plain maximum, a blend by a comparison */
  iw k = a > b;
  return (vw)(((iw)a & k) | ((iw)b & ~k));
}
/* rows[i] = the maximum of the three rows from x on (w >= BLOCK floats each) at i < w, a vector
   of VW at a time (the last one overlapping the one before: a maximum is the same recomputed);
   `keep` keeps NaNs (and returns 0), else the plain maximum, returning whether a NaN was
   read. */
static int max3_rows(const float *x, idx w, float *rows, int keep) {
  const float *a = x, *b = x + w, *c = x + 2 * w;
  if (keep) {
    for (idx i = 0; i < w; i++) rows[i] = larger(larger(a[i], b[i]), c[i]);
    return 0;
  }
  iw nan = {0};
  for (idx i0 = 0;; i0 += VW) {
    if (i0 + VW > w) i0 = w - VW;
    vw u = loadw(a + i0), v = loadw(b + i0), t = loadw(c + i0), m = maxw(maxw(u, v), t);
    nan |= (u != u) | (v != v) | (t != t);
    memcpy(rows + i0, &m, sizeof m);
    if (i0 + VW >= w) break;
  }
  for (int j = 0; j < VW; j++)
    if (nan[j]) return 1;
  return 0;
}

/* one plane's windows, with MAX the maximum (keeping NaNs, or for a plane without one);
   returns whether a NaN was among the input rows read (OR-ed in as they are read) */
#define POOL_PLANE(name, MAX)                                                                    \
  static int name(const float *plane, float *rows, idx h, idx w, idx kh, idx kw, idx sh,       \
                  idx sw, idx dh, idx dw, idx ph, idx pw, idx ho, idx wo, float *y) {          \
    int nan = 0;                                                                               \
    /* columns whose window lies inside the row: lo <= ox < hi */                              \
    idx lo = pw > 0 ? (pw + sw - 1) / sw : 0;                                                  \
    idx hi = w - (kw - 1) * dw + pw > 0 ? (w - (kw - 1) * dw + pw - 1) / sw + 1 : 0;           \
    if (hi > wo) hi = wo;                                                                      \
    if (lo > hi) lo = hi;                                                                      \
    for (idx oy = 0; oy < ho; oy++) {                                                          \
      float *out = y + oy * wo;                                                                \
      int any = 0;                                                                             \
      idx top = oy * sh - ph;                                                                  \
      if (kh == 3 && dh == 1 && top >= 0 && top + 2 < h && w >= BLOCK) { /* 3 whole rows */    \
        nan |= max3_rows(plane + top * w, w, rows, MAX == larger);                             \
        any = 1;                                                                               \
      } else                                                                                   \
      for (idx ky = 0; ky < kh; ky++) {                                                        \
        idx iy = oy * sh + ky * dh - ph;                                                       \
        if (iy < 0 || iy >= h) continue;                                                       \
        const float *src = plane + iy * w;                                                     \
        int found = 0;                                                                         \
        if (!any)                                                                              \
          for (idx i = 0; i < w; i++) {                                                        \
            rows[i] = src[i];                                                                  \
            found |= src[i] != src[i];                                                         \
          }                                                                                    \
        else                                                                                   \
          for (idx i = 0; i < w; i++) {                                                        \
            rows[i] = MAX(rows[i], src[i]);                                                    \
            found |= src[i] != src[i];                                                         \
          }                                                                                    \
        nan |= found;                                                                          \
        any = 1;                                                                               \
      }                                                                                        \
      if (any && sw == 2 && dw == 1 && kw == 3) { /* the common 3x3 stride-2 window */         \
        const float *r = rows + lo * 2 - pw;                                                   \
        idx n = hi - lo;                                                                       \
        float *o = out + lo;                                                                   \
        for (idx i = 0; i < n; i++) o[i] = MAX(MAX(r[2 * i], r[2 * i + 1]), r[2 * i + 2]);      \
      } else if (any) {                                                                        \
        for (idx ox = lo; ox < hi; ox++) {                                                     \
          const float *r = rows + ox * sw - pw;                                                \
          float best = r[0];                                                                   \
          for (idx kx = 1; kx < kw; kx++) best = MAX(best, r[kx * dw]);                        \
          out[ox] = best;                                                                      \
        }                                                                                      \
      }                                                                                        \
      for (idx ox = 0; ox < wo; ox++) { /* the windows that reach past the row */              \
        if (any && ox >= lo && ox < hi) {                                                      \
          ox = hi - 1;                                                                         \
          continue;                                                                            \
        }                                                                                      \
        float best = -INFINITY;                                                                \
        if (any)                                                                               \
          for (idx kx = 0; kx < kw; kx++) {                                                    \
            idx ix = ox * sw + kx * dw - pw;                                                   \
            if (ix >= 0 && ix < w) best = MAX(best, rows[ix]);                                 \
          }                                                                                    \
        out[ox] = best;                                                                        \
      }                                                                                        \
    }                                                                                          \
    return nan;                                                                                \
  }

POOL_PLANE(pool_plane, larger)
POOL_PLANE(pool_plane_finite, larger_finite)

static _Thread_local float *row_scratch;
static _Thread_local size_t row_floats;

EXPORT int udo_maxpool(const float *x, idx planes, idx h, idx w, idx kh, idx kw, idx sh, idx sw,
                       idx dh, idx dw, idx ph, idx pw, idx ho, idx wo, float *y) {
  if ((size_t)w > row_floats) {
    free(row_scratch);
    row_floats = 0;
    if (posix_memalign((void **)&row_scratch, 64, sizeof(float) * (size_t)w) != 0) {
      row_scratch = NULL;
      return 1;
    }
    row_floats = (size_t)w;
  }
  float *rows = row_scratch;
  for (idx p = 0; p < planes; p++) {
    const float *plane = x + p * h * w;
    /* the plain maximum first; a plane where it met a NaN again, keeping them */
    if (pool_plane_finite(plane, rows, h, w, kh, kw, sh, sw, dh, dw, ph, pw, ho, wo,
                          y + p * ho * wo))
      pool_plane(plane, rows, h, w, kh, kw, sh, sw, dh, dw, ph, pw, ho, wo, y + p * ho * wo);
  }
  return 0;
}
