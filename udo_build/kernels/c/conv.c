/* The float runtime's 2-d convolution (group 1, float32) as one implicit GEMM per image, for
   udo_build/kernels/default/conv.py:

     y[m][n] = act(sum_k w[m][k] * X[k][n] + b[m] + z[m][n]),   n = oy * wo + ox

   with k = (c, ky, kx) in the weights' OIHW order. The input is read as "phases" (udo_conv
   makes them): the zero-padded input split by the strides, so that every tap reads its phase
   with stride 1, in planes of rows of wq >= wo pixels. Over the "wide" grid of ho x wq pixels
   (q = oy * wq + ox; the columns past wo are junk, computed and dropped), tap k of pixel q is
   xq[base[k] + q]: the taps of a tile of pixels are runs read in place, and the 3x3 taps of a
   channel share their cache lines. A 1x1 convolution without strides or pads reads the input
   itself (dense: wq == wo), packed tile by tile, since its taps are whole planes apart.

   The product runs in register tiles of MR x NR accumulators (NR = NV vectors of VL floats):
   every k adds a[k][0..MR) broadcast times b[k][0..NR) loaded, so each output value is one
   chain of fused multiply-adds over k in order, whatever the vector width: an AVX-512 and an
   AVX2 machine give the same bits. The k range is cut into blocks whose loaded operand stays
   in the L1 cache. Two orientations, each layer the one its cost says (cols_of):

   - rows: the weights broadcast (packed once per model as [M/MR][K][MR]), the pixels loaded;
     the partial sums wait in y, and each vector of a tile is stored with lane masks, one per
     output row it spans (no junk column is written); the epilogue runs in the registers;
   - cols: the pixels broadcast, the weights loaded (packed once as [M/NR][K][NR]): a 7x7
     image wastes no lanes, a 3x3 convolution no junk columns; the tiles wait in a scratch and
     are transposed in the registers as they are stored.

   The epilogue adds the bias, then the addend, then clamps at zero (Relu: a NaN stays NaN), in
   the order the unfused graph rounds them. Scratch memory is the calling thread's, kept and
   grown (1 when it cannot be had, for the caller's MemoryError). */
#define _POSIX_C_SOURCE 200112L /* posix_memalign */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#define VL 16
#define NV 4
typedef __m512 vf;
static inline vf vload(const float *p) { return _mm512_loadu_ps(p); }
static inline void vstore(float *p, vf v) { _mm512_storeu_ps(p, v); }
static inline vf vset1(float x) { return _mm512_set1_ps(x); }
static inline vf vzero(void) { return _mm512_setzero_ps(); }
static inline vf vfma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
static inline vf vadd(vf a, vf b) { return _mm512_add_ps(a, b); }
static inline vf vrelu(vf a) { return _mm512_max_ps(_mm512_setzero_ps(), a); }
/* lanes whose bit is set: loaded over a (the others kept), or stored */
static inline vf vload_lanes(vf a, unsigned bits, const float *p) {
  return _mm512_mask_loadu_ps(a, (__mmask16)bits, p);
}
static inline void vstore_lanes(float *p, unsigned bits, vf v) {
  _mm512_mask_storeu_ps(p, (__mmask16)bits, v);
}
/* r[i][j] becomes r[j][i]: pairs within 128-bit lanes, then their halves, then the lanes */
static inline void vtranspose(vf r[VL]) {
  __m512 t[VL];
  for (int i = 0; i < VL; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int g = 0; g < VL; g += 4) /* r[g + c]'s lane l: rows g..g+3 of column 4l + c */
    for (int h = 0; h < 2; h++) {
      __m512d a = _mm512_castps_pd(t[g + h]), b = _mm512_castps_pd(t[g + h + 2]);
      r[g + 2 * h] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
      r[g + 2 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    }
  for (int c = 0; c < 4; c++) { /* column 4l + c: lane l of r[c], r[4 + c], r[8 + c], r[12 + c] */
    __m512 p = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x44);
    __m512 q = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xee);
    __m512 u = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x44);
    __m512 w = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xee);
    t[c] = _mm512_shuffle_f32x4(p, u, 0x88);
    t[4 + c] = _mm512_shuffle_f32x4(p, u, 0xdd);
    t[8 + c] = _mm512_shuffle_f32x4(q, w, 0x88);
    t[12 + c] = _mm512_shuffle_f32x4(q, w, 0xdd);
  }
  for (int i = 0; i < VL; i++) r[i] = t[i];
}
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define VL 8
#define NV 2
typedef __m256 vf;
static inline vf vload(const float *p) { return _mm256_loadu_ps(p); }
static inline void vstore(float *p, vf v) { _mm256_storeu_ps(p, v); }
static inline vf vset1(float x) { return _mm256_set1_ps(x); }
static inline vf vzero(void) { return _mm256_setzero_ps(); }
static inline vf vfma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
static inline vf vadd(vf a, vf b) { return _mm256_add_ps(a, b); }
static inline vf vrelu(vf a) { return _mm256_max_ps(_mm256_setzero_ps(), a); }
static inline __m256i lanes_of(unsigned bits) {
  __m256i lane = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)bits), lane), lane);
}
static inline vf vload_lanes(vf a, unsigned bits, const float *p) {
  __m256i m = lanes_of(bits);
  return _mm256_blendv_ps(a, _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}
static inline void vstore_lanes(float *p, unsigned bits, vf v) {
  _mm256_maskstore_ps(p, lanes_of(bits), v);
}
/* r[i][j] becomes r[j][i]: pairs within 128-bit lanes, then their halves, then the lanes */
static inline void vtranspose(vf r[VL]) {
  __m256 t[VL];
  for (int i = 0; i < VL; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int g = 0; g < VL; g += 4)
    for (int h = 0; h < 2; h++) {
      __m256d a = _mm256_castps_pd(t[g + h]), b = _mm256_castps_pd(t[g + h + 2]);
      r[g + 2 * h] = _mm256_castpd_ps(_mm256_unpacklo_pd(a, b));
      r[g + 2 * h + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(a, b));
    }
  for (int c = 0; c < 4; c++) {
    t[c] = _mm256_permute2f128_ps(r[c], r[4 + c], 0x20);
    t[4 + c] = _mm256_permute2f128_ps(r[c], r[4 + c], 0x31);
  }
  for (int i = 0; i < VL; i++) r[i] = t[i];
}
#else
#define VL 4
#define NV 2
typedef float vf __attribute__((vector_size(16)));
static inline vf vload(const float *p) { vf v; memcpy(&v, p, sizeof v); return v; }
static inline void vstore(float *p, vf v) { memcpy(p, &v, sizeof v); }
static inline vf vset1(float x) { return (vf){x, x, x, x}; }
static inline vf vzero(void) { return (vf){0, 0, 0, 0}; }
static inline vf vfma(vf a, vf b, vf c) { return a * b + c; }
static inline vf vadd(vf a, vf b) { return a + b; }
static inline vf vrelu(vf a) {
  for (int i = 0; i < VL; i++) a[i] = a[i] < 0.0f ? 0.0f : a[i];
  return a;
}
static inline vf vload_lanes(vf a, unsigned bits, const float *p) {
  for (int i = 0; i < VL; i++)
    if (bits >> i & 1) a[i] = p[i];
  return a;
}
static inline void vstore_lanes(float *p, unsigned bits, vf v) {
  for (int i = 0; i < VL; i++)
    if (bits >> i & 1) p[i] = v[i];
}
static inline void vtranspose(vf r[VL]) { /* r[i][j] becomes r[j][i] */
  float a[VL][VL], t[VL][VL];
  memcpy(a, r, sizeof a);
  for (int i = 0; i < VL; i++)
    for (int j = 0; j < VL; j++) t[j][i] = a[i][j];
  memcpy(r, t, sizeof t);
}
#endif

#define MR 6
#define NR (NV * VL)
/* The orientation is chosen by a cost in k steps of one lane, fitted to ResNet-50's and
   SqueezeNet's layers and small-K first layers measured in both (K from 27 to 2304): the lanes
   each computes (a rows tile is MR output channels by NR wide pixels, the junk columns
   included; a cols tile NR channels by MR pixels) times K, plus a cost per output value. A cols
   output pays COLS_PER_OUTPUT for its tile's stores, reloads and transposition; a rows one read
   through phases pays ROWS_PER_OUTPUT (the phases, its epilogue), and each of its k steps
   costs TAPS_STEP (its loads straddle cache lines; a dense image's packed panels do not). */
#define COLS_PER_OUTPUT 60.0
#define ROWS_PER_OUTPUT 24.0
#define TAPS_STEP 1.23
#ifndef KC_ROWS
#define KC_ROWS 32768 /* bytes of a k block of the loaded operand: in the L1 cache */
#endif
#ifndef KC_COLS
#define KC_COLS 32768
#endif

typedef ptrdiff_t idx;
#define EXPORT __attribute__((visibility("default")))

/* acc[i][0..NR) += sum over k < kn of a_k[i] * b_k[0..NR): an operand is packed as [k][width]
   (its base NULL), or read in place, tap k at from + base[k]; a read in place, its MR values
   at aoff[i] from there (consecutive where aoff is NULL) */
static inline __attribute__((always_inline)) void accumulate(vf acc[MR][NV], idx kn,
                                                             const float *a, const idx *abase,
                                                             const idx *aoff, const float *b,
                                                             const idx *bbase) {
  for (idx k = 0; k < kn; k++) {
    const float *ak = abase ? a + abase[k] : a + k * MR;
    const float *bk = bbase ? b + bbase[k] : b + k * NR;
    vf bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) bv[v] = vload(bk + v * VL);
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
      vf av = vset1(aoff ? ak[aoff[i]] : ak[i]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; v++) acc[i][v] = vfma(av, bv[v], acc[i][v]);
    }
  }
}

/* w (m x k, rows contiguous) as [ceil(m / width)][k][width] panels, zeros past row m */
EXPORT void udo_conv_pack(const float *w, idx m, idx kn, int cols, float *out) {
  int width = cols ? NR : MR;
  for (idx p = 0; p < m; p += width)
    for (idx k = 0; k < kn; k++)
      for (int i = 0; i < width; i++) *out++ = p + i < m ? w[(p + i) * kn + k] : 0.0f;
}

EXPORT idx udo_conv_packed_size(idx m, idx kn, int cols) {
  idx width = cols ? NR : MR;
  return (m + width - 1) / width * width * kn;
}

static int dense_of(const idx *g) { /* a 1x1 convolution without strides or pads */
  return g[3] == 1 && g[4] == 1 && g[5] == 1 && g[6] == 1 && g[9] == 0 && g[10] == 0 &&
         g[11] == g[1] && g[12] == g[2];
}

static int cols_of(idx m, idx n, idx wide, int dense, idx kn) {
  double rows = (double)((m + MR - 1) / MR * MR) * (double)((wide + NR - 1) / NR * NR) * kn;
  double cols = (double)((m + NR - 1) / NR * NR) * (double)((n + MR - 1) / MR * MR) * kn;
  double outputs = (double)m * (double)n;
  if (!dense) rows = rows * TAPS_STEP + ROWS_PER_OUTPUT * outputs;
  return cols + COLS_PER_OUTPUT * outputs < rows;
}

/* the width of the wide grid: the output's plus the columns a tap row reaches past it */
static idx wide_of(const idx *g, int dense) {
  return dense ? g[12] : g[12] + (g[4] - 1) * g[8] / g[6];
}

/* whether udo_conv runs this geometry (its 14 numbers) in the cols orientation: how its weights
   are packed */
EXPORT int udo_conv_cols(const idx *g) {
  int dense = dense_of(g);
  return cols_of(g[13], g[11] * g[12], g[11] * wide_of(g, dense), dense, g[0] * g[3] * g[4]);
}

/* the input's element types (udo_conv_int's x_kind; udo_conv's float32 is X_F32) */
enum { X_U8 = 0, X_I8 = 1, X_U16 = 2, X_I16 = 3, X_F32 = 4 };

/* The image: its taps (xq, base: tap k of wide pixel q = oy * wq + ox at xq[base[k] + q]; when
   `dense`, wq == wo and xq is the caller's input, never read past its end), the output and what
   the epilogue adds. */
typedef struct {
  const float *xq;
  const void *raw; /* a dense image of integers (kind, less zp), read by gather: xq unused */
  int kind;
  float zp;
  const idx *base;
  int dense;
  idx kn, m, ho, wq, wo;
  const float *bias, *z;
  int relu;
  float *y;
} Conv;

/* gather of an integer image: each value less zp, as float32 (exact) */
#define GATHER_INT(T)                                                                          \
  for (idx k = 0; k < cv->kn; k++, out += NR) {                                                \
    const T *src = (const T *)cv->raw + cv->base[k] + q0;                                      \
    if (valid == NR)                                                                           \
      for (idx i = 0; i < NR; i++) out[i] = (float)src[i] - cv->zp;                            \
    else                                                                                       \
      for (idx i = 0; i < NR; i++) out[i] = i < valid ? (float)src[i] - cv->zp : 0.0f;         \
  }

/* pixels [q0, q0 + NR) of every tap as [k][NR], zeros past the image */
static void gather(const Conv *cv, idx q0, float *out) {
  idx valid = cv->ho * cv->wq - q0;
  if (valid > NR) valid = NR;
  switch (cv->kind) {
  case X_U8: GATHER_INT(uint8_t) return;
  case X_I8: GATHER_INT(int8_t) return;
  case X_U16: GATHER_INT(uint16_t) return;
  case X_I16: GATHER_INT(int16_t) return;
  default: break;
  }
  for (idx k = 0; k < cv->kn; k++, out += NR) {
    const float *src = cv->xq + cv->base[k] + q0;
    if (valid == NR) {
#pragma GCC unroll 8
      for (int v = 0; v < NV; v++) vstore(out + v * VL, vload(src + v * VL));
      continue;
    }
    for (idx i = 0; i < NR; i++) out[i] = i < valid ? src[i] : 0.0f;
  }
}

/* Where the lanes of a rows tile go: vector v's lanes in segment s are stored at
   off[v][s] + lane of an output row (the lanes of one output row; the junk columns and the
   pixels past the image in none). */
typedef struct {
  int segs[NV];
  idx off[NV][VL];
  unsigned bits[NV][VL];
} Lanes;

static void lanes_of_tile(const Conv *cv, idx q0, Lanes *ln) {
  if (cv->wq == cv->wo) { /* dense: a vector is one run of the output */
    idx n = cv->ho * cv->wo;
    for (int v = 0; v < NV; v++) {
      idx start = q0 + v * VL, count = n - start < VL ? n - start : VL;
      ln->segs[v] = count > 0;
      ln->off[v][0] = start;
      ln->bits[v][0] = count >= 32 ? ~0u : (1u << (count > 0 ? count : 0)) - 1u;
    }
    return;
  }
  for (int v = 0; v < NV; v++) {
    int segs = 0;
    for (idx l = 0; l < VL;) {
      idx q = q0 + v * VL + l, oy = q / cv->wq, ox = q % cv->wq;
      idx run = cv->wq - ox < VL - l ? cv->wq - ox : VL - l;
      if (oy < cv->ho && ox < cv->wo) {
        idx count = cv->wo - ox < run ? cv->wo - ox : run;
        ln->off[v][segs] = oy * cv->wo + ox - l;
        ln->bits[v][segs++] = ((1u << count) - 1u) << l;
      }
      l += run;
    }
    ln->segs[v] = segs;
  }
}

/* y rows m0.. of a rows tile (q0: its first wide pixel) get the sums of k in [k0, k0 + kb):
   started from zero (k0 == 0) or from what they hold, the epilogue after the last block */
static inline __attribute__((always_inline)) void rows_tile(const Conv *cv, const Lanes *ln,
                                                            idx m0, idx k0, idx kb,
                                                            const float *a, const float *b,
                                                            const idx *bbase) {
  vf acc[MR][NV];
  idx n = cv->ho * cv->wo, rows = cv->m - m0 < MR ? cv->m - m0 : MR;
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) {
      acc[i][v] = vzero();
      if (k0 > 0 && i < rows)
        for (int s = 0; s < ln->segs[v]; s++)
          acc[i][v] = vload_lanes(acc[i][v], ln->bits[v][s], cv->y + (m0 + i) * n + ln->off[v][s]);
    }
  accumulate(acc, kb, a, NULL, NULL, b, bbase);
  int last = k0 + kb == cv->kn;
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++) {
    if (i >= rows) break;
    float *y = cv->y + (m0 + i) * n;
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) {
      vf out = acc[i][v];
      if (last) {
        if (cv->bias) out = vadd(out, vset1(cv->bias[m0 + i]));
        if (cv->z) {
          vf z = vzero();
          for (int s = 0; s < ln->segs[v]; s++)
            z = vload_lanes(z, ln->bits[v][s], cv->z + (m0 + i) * n + ln->off[v][s]);
          out = vadd(out, z);
        }
        if (cv->relu) out = vrelu(out);
      }
      for (int s = 0; s < ln->segs[v]; s++) vstore_lanes(y + ln->off[v][s], ln->bits[v][s], out);
    }
  }
}

/* the scratch of the calling thread, by use (the phases, the panels): kept, grown as needed */
static _Thread_local float *scratch[2];
static _Thread_local size_t scratch_floats[2];

static float *workspace(int slot, size_t floats) {
  if (floats > scratch_floats[slot]) {
    free(scratch[slot]);
    scratch_floats[slot] = 0;
    if (posix_memalign((void **)&scratch[slot], 64, floats * sizeof(float)) != 0)
      return scratch[slot] = NULL;
    scratch_floats[slot] = floats;
  }
  return scratch[slot];
}

/* k blocks: the fewest of at most `bytes` of the loaded operand (KC_ROWS, KC_COLS), of equal size */
static idx k_block(idx kn, idx bytes) {
  idx most = bytes / (NR * (idx)sizeof(float)), blocks = (kn + most - 1) / most;
  return (kn + blocks - 1) / blocks;
}

/* whether udo_conv may write y over its addend z (the same memory): each addend value is read
   in the epilogue before its output is written there, and nothing is written before (cols:
   the tiles wait in a scratch; rows: one k block, no partial sums kept in y) */
EXPORT int udo_conv_onto_addend(const idx *g) {
  idx kn = g[0] * g[3] * g[4];
  return udo_conv_cols(g) || k_block(kn, KC_ROWS) >= kn;
}

/* rows: each tile of NR wide pixels, k block by k block, passes every row tile of the weights
   over the taps it reads: in place from the phases; a dense image's tile packed first, since
   its taps are whole planes apart (a copy keeps many reads in flight where the product would
   wait on each plane's line, and never reads past the end of the caller's input), unless few
   row tiles would read the copy (in_place). A dense image of GROUP_ROWS output channels or
   more packs a group of consecutive tiles (GROUP_PIXELS, within GROUP_BYTES of panels) and
   passes each row tile of the weights over all of them: each output row (and the addend's) is
   then written in runs of the group's width, which the hardware prefetches, instead of one
   tile's width in each of m planes in turn (more streams than it follows). So does an image
   read through its phases whose taps fit one k block (a first layer: few taps, a large output
   that is written cold), by TAPS_GROUP tiles. */
#define GROUP_PIXELS 512
#define GROUP_BYTES (256 << 10)
#define GROUP_ROWS 128 /* output channels from which a dense image packs groups: fewer planes
                          the prefetcher follows, and the tile's panel in L1 serves them better */
#define TAPS_GROUP 32 /* tiles of a group read in place, its taps in one k block (a first layer) */
/* whether a dense image's rows tile at q0 is read in place, not packed: with at most
   IN_PLACE_ROWS output channels (few row tiles to share a packed panel), a whole tile of float32
   (whose reads stay inside each plane) */
#define IN_PLACE_ROWS 64
static int in_place(const Conv *cv, idx q0, idx q_end) {
  return cv->dense && cv->m <= IN_PLACE_ROWS && cv->xq && q0 + NR <= q_end;
}

static int rows(const Conv *cv, const float *packed) {
  idx kn = cv->kn, kc = k_block(kn, KC_ROWS), q_end = cv->ho * cv->wq;
  idx group = 1;
  if ((cv->dense && cv->m >= GROUP_ROWS) || (!cv->dense && kn <= kc)) {
    group = GROUP_BYTES / (kn * NR * (idx)sizeof(float));
    idx most = cv->dense ? GROUP_PIXELS / NR : TAPS_GROUP;
    if (group > most) group = most;
    if (group < 1) group = 1;
  }
  float *panel = NULL;
  if (cv->dense && !(panel = workspace(1, (size_t)(group * kn * NR)))) return 1;
  Lanes ln[GROUP_PIXELS / NR > TAPS_GROUP ? GROUP_PIXELS / NR : TAPS_GROUP];
  for (idx q0 = 0; q0 < q_end; q0 += group * NR) {
    idx tiles = 0;
    for (; tiles < group && q0 + tiles * NR < q_end; tiles++) {
      if (cv->dense && !in_place(cv, q0 + tiles * NR, q_end))
        gather(cv, q0 + tiles * NR, panel + tiles * kn * NR);
      lanes_of_tile(cv, q0 + tiles * NR, &ln[tiles]);
    }
    for (idx k0 = 0; k0 < kn; k0 += kc) {
      idx kb = kn - k0 < kc ? kn - k0 : kc;
      if (!cv->dense && q0 + (tiles + 1) * NR <= q_end) /* the next tile's runs of these taps */
        for (idx k = k0; k < k0 + kb; k++)
          for (int line = 0; line < NR * (int)sizeof(float); line += 64)
            __builtin_prefetch((const char *)(cv->xq + cv->base[k] + q0 + tiles * NR) + line, 0,
                               3);
      for (idx m0 = 0; m0 < cv->m; m0 += MR) {
        const float *a = packed + m0 * kn + k0 * MR;
        for (idx t = 0; t < tiles; t++)
          if (in_place(cv, q0 + t * NR, q_end))
            rows_tile(cv, &ln[t], m0, k0, kb, a, cv->xq + q0 + t * NR, cv->base + k0);
          else if (cv->dense)
            rows_tile(cv, &ln[t], m0, k0, kb, a, panel + t * kn * NR + k0 * NR, NULL);
          else
            rows_tile(cv, &ln[t], m0, k0, kb, a, cv->xq + q0 + t * NR, cv->base + k0);
      }
    }
  }
  return 0;
}

/* pixels [t_begin, t_end) of chunk j of the cols tiles (tiles: [pixel - t_begin][NR]) into y:
   each VL x VL block transposed in the registers, a vector of VL pixels of one channel, stored
   with the epilogue */
static void store_chunk(const Conv *cv, const float *tiles, idx j, idx t_begin, idx t_end) {
  idx n = cv->ho * cv->wo, m0 = j * NR, chans = cv->m - m0 < NR ? cv->m - m0 : NR;
  for (idx c0 = 0; c0 < chans; c0 += VL)
    for (idx t0 = t_begin; t0 < t_end; t0 += VL) {
      unsigned bits = t_end - t0 >= VL ? (1u << VL) - 1u : (1u << (t_end - t0)) - 1u;
      vf r[VL];
      for (int i = 0; i < VL; i++) r[i] = vload(tiles + (t0 - t_begin + i) * NR + c0);
      vtranspose(r);
      for (int i = 0; i < VL && c0 + i < chans; i++) {
        idx ch = m0 + c0 + i;
        vf v = r[i];
        if (cv->bias) v = vadd(v, vset1(cv->bias[ch]));
        if (cv->z) v = vadd(v, vload_lanes(vzero(), bits, cv->z + ch * n + t0));
        if (cv->relu) v = vrelu(v);
        vstore_lanes(cv->y + ch * n + t0, bits, v);
      }
    }
}

/* cols: panels of MR output pixels, read in place at their offsets in the planes (the last
   panel repeats its last pixel), pass over each panel of NR channels of the weights, k block
   by k block. The panels go by slabs whose tiles (c[M/NR][slab][MR][NR]) stay in the L2 cache
   (SLAB_BYTES, whole VL blocks of pixels); each chunk of a slab is stored transposed after its
   last k block, while in the cache. */
#ifndef SLAB_BYTES
#define SLAB_BYTES (1 << 20)
#endif
static int cols(const Conv *cv, const float *packed) {
  idx kn = cv->kn, kc = k_block(kn, KC_COLS), n = cv->ho * cv->wo, count = (n + MR - 1) / MR;
  idx chunks = (cv->m + NR - 1) / NR;
  idx whole = VL / 2, slab = SLAB_BYTES / (chunks * MR * NR * (idx)sizeof(float)) / whole * whole;
  if (slab < whole) slab = whole; /* MR * whole panels: whole VL blocks of pixels (MR is even) */
  if (slab > count) slab = count;
  size_t offsets = (size_t)(count * MR);
  float *room = workspace(1, offsets * 2 + (size_t)(chunks * slab * MR * NR + VL * NR));
  if (!room) return 1;
  idx *off = (idx *)room;
  float *c = room + offsets * 2;
  for (idx t = 0; t < count * MR; t++) {
    idx pixel = t < n ? t : n - 1;
    off[t] = pixel / cv->wo * cv->wq + pixel % cv->wo;
  }
  for (idx s0 = 0; s0 < count; s0 += slab) {
    idx panels = count - s0 < slab ? count - s0 : slab;
    for (idx k0 = 0; k0 < kn; k0 += kc) {
      idx kb = kn - k0 < kc ? kn - k0 : kc;
      for (idx j = 0; j < chunks; j++) {
        const float *b = packed + j * NR * kn + k0 * NR;
        /* the weights' next block, fetched a slice per panel while this one is in use */
        const char *next = (const char *)(j + 1 < chunks ? b + NR * kn
                                          : k0 + kb < kn ? packed + (k0 + kb) * NR : NULL);
        idx lines = kb * NR * (idx)sizeof(float) / 64, per = (lines + panels - 1) / panels;
        float *tiles = c + j * slab * MR * NR;
        for (idx p = 0; p < panels; p++) {
          float *tile = tiles + p * MR * NR;
          if (next)
            for (idx l = p * per; l < (p + 1) * per && l < lines; l++)
              __builtin_prefetch(next + l * 64, 0, 3);
          vf acc[MR][NV];
#pragma GCC unroll 8
          for (int i = 0; i < MR; i++)
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) acc[i][v] = k0 ? vload(tile + i * NR + v * VL) : vzero();
          const idx *at = off + (s0 + p) * MR;
          int run = 1; /* one run of the plane: no offset to look up */
          for (int i = 1; i < MR; i++) run &= at[i] == at[0] + i;
          if (run)
            accumulate(acc, kb, cv->xq + at[0], cv->base + k0, NULL, b, NULL);
          else
            accumulate(acc, kb, cv->xq, cv->base + k0, at, b, NULL);
#pragma GCC unroll 8
          for (int i = 0; i < MR; i++)
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) vstore(tile + i * NR + v * VL, acc[i][v]);
        }
        if (k0 + kb == kn) {
          idx t_end = (s0 + panels) * MR < n ? (s0 + panels) * MR : n;
          store_chunk(cv, tiles, j, s0 * MR, t_end);
        }
      }
    }
  }
  return 0;
}

/* map[i] for i < stride: the number of i among the phases kernel taps of this dilation start
   on (-1: none does); returns how many there are */
static idx phase_map(idx *map, idx taps, idx dilation, idx stride) {
  idx used = 0;
  if (!map) return 0;
  for (idx i = 0; i < stride; i++) map[i] = -1;
  for (idx t = 0; t < taps; t++) map[t * dilation % stride] = 0;
  for (idx i = 0; i < stride; i++)
    if (map[i] == 0) map[i] = used++;
  return used;
}

/* phase plane row r of channel ch: padded pixels (r * sh + py, q * sw + px), q < wq, of an
   input of type T, less zp (float32: zp 0, the values copied; integers: exact in float32) */
#define PHASE_ROW(NAME, T, COPY)                                                               \
  static void NAME(float *row, const T *x, float zp, idx h, idx w, idx ch, idx r, idx py,      \
                   idx px, idx sh, idx sw, idx ph, idx pw, idx wq) {                           \
    idx iy = r * sh + py - ph;                                                                 \
    if (iy < 0 || iy >= h) {                                                                   \
      memset(row, 0, sizeof(float) * (size_t)wq);                                              \
      return;                                                                                  \
    }                                                                                          \
    const T *src = x + (ch * h + iy) * w;                                                      \
    /* columns q read x[q * sw + px - pw]: inside for q in [lo, hi) */                         \
    idx lo = pw - px > 0 ? (pw - px + sw - 1) / sw : 0, hi = (w + pw - px + sw - 1) / sw;      \
    if (hi > wq) hi = wq;                                                                      \
    if (lo > hi) lo = hi;                                                                      \
    for (idx q = 0; q < lo; q++) row[q] = 0.0f;                                                \
    if (sw == 1 && COPY) { /* float32: the values themselves */                               \
      memcpy(row + lo, src + lo + px - pw, sizeof(float) * (size_t)(hi - lo));                 \
    } else if (sw == 1) {                                                                      \
      const T *from = src + px - pw;                                                           \
      for (idx q = lo; q < hi; q++) row[q] = (float)from[q] - zp;                              \
    } else if (sw == 2) { /* a constant stride: the compiler splits vectors into lanes */      \
      const T *from = src + px - pw;                                                           \
      for (idx q = lo; q < hi; q++)                                                            \
        row[q] = COPY ? (float)from[2 * q] : (float)from[2 * q] - zp;                          \
    } else {                                                                                   \
      for (idx q = lo; q < hi; q++)                                                            \
        row[q] = COPY ? (float)src[q * sw + px - pw] : (float)src[q * sw + px - pw] - zp;      \
    }                                                                                          \
    for (idx q = hi; q < wq; q++) row[q] = 0.0f;                                               \
  }
PHASE_ROW(phase_row_f32, float, 1)
PHASE_ROW(phase_row_u8, uint8_t, 0)
PHASE_ROW(phase_row_i8, int8_t, 0)
PHASE_ROW(phase_row_u16, uint16_t, 0)
PHASE_ROW(phase_row_i16, int16_t, 0)

static void phase_row(float *row, const void *x, int kind, float zp, idx h, idx w, idx ch, idx r,
                      idx py, idx px, idx sh, idx sw, idx ph, idx pw, idx wq) {
  switch (kind) {
  case X_U8: phase_row_u8(row, x, zp, h, w, ch, r, py, px, sh, sw, ph, pw, wq); break;
  case X_I8: phase_row_i8(row, x, zp, h, w, ch, r, py, px, sh, sw, ph, pw, wq); break;
  case X_U16: phase_row_u16(row, x, zp, h, w, ch, r, py, px, sh, sw, ph, pw, wq); break;
  case X_I16: phase_row_i16(row, x, zp, h, w, ch, r, py, px, sh, sw, ph, pw, wq); break;
  default: phase_row_f32(row, x, zp, h, w, ch, r, py, px, sh, sw, ph, pw, wq);
  }
}

/* One image x (c, h, w) into y (m, ho, wo): the kernel kh x kw, strides sh x sw, dilations
   dh x dw, pads ph, pw before the first row and column (negative: cropped), these 14 numbers
   in `geometry` (c, h, w, kh, kw, sh, sw, dh, dw, ph, pw, ho, wo, m); packed the weights
   as udo_conv_pack made them for this size (udo_conv_cols says which); bias (m) and z
   (m, ho, wo) may be NULL. 0, or 1 when memory ran out.

   The phases: phase (py, px) holds the zero-padded input's pixels (r * sh + py, q * sw + px)
   for r < hq, q < wq; tap (c, ky, kx) reads phase ((ky * dh) % sh, (kx * dw) % sw) from row
   (ky * dh) / sh, column (kx * dw) / sw on. Only the phases some tap reads are made, with
   zeros after them (a tile's runs may reach past the last plane); a 1x1 convolution without
   strides or pads reads x itself. */
static int conv(const void *x, int kind, float zp, idx c, idx h, idx w, idx kh, idx kw, idx sh,
                idx sw, idx dh, idx dw, idx ph, idx pw, idx ho, idx wo, idx m,
                const float *packed, const float *bias, const float *z, int relu, float *y) {
  idx numbers[14] = {c, h, w, kh, kw, sh, sw, dh, dw, ph, pw, ho, wo, m};
  int dense = dense_of(numbers);
  idx hq = ho + (kh - 1) * dh / sh, wq = wide_of(numbers, dense), kn = c * kh * kw;
  int by_cols = udo_conv_cols(numbers);
  int converted = dense && kind != X_F32 && by_cols;
  if (dense) hq = h, wq = w;
  idx plane = hq * wq, head = sh + sw + kn, slack = NR + MR;
  /* the phases the taps read: rows py and columns px of the strides some tap starts on; a
     dense image of integers: itself, less zp, as float32 for the cols orientation (which reads
     its pixels in place), read so by gather for the rows one */
  float *room = workspace(0, (size_t)head * 2);
  idx rows_used = phase_map((idx *)room, kh, dh, sh);
  idx cols_used = phase_map(room ? (idx *)room + sh : NULL, kw, dw, sw);
  idx phases = converted ? c * plane : dense ? 0 : rows_used * cols_used * c * plane + slack;
  room = room ? workspace(0, (size_t)head * 2 + (size_t)phases) : NULL;
  if (!room) return 1;
  idx *rowmap = (idx *)room, *colmap = rowmap + sh, *base = colmap + sw;
  phase_map(rowmap, kh, dh, sh);
  phase_map(colmap, kw, dw, sw);
  const float *xq = x;
  if (converted) {
    float *q = room + (size_t)head * 2;
    for (idx ch = 0; ch < c; ch++)
      for (idx r = 0; r < h; r++)
        phase_row(q + (ch * h + r) * w, x, kind, zp, h, w, ch, r, 0, 0, 1, 1, 0, 0, w);
    xq = q;
  } else if (!dense) {
    float *q = room + (size_t)head * 2;
    for (idx py = 0; py < sh; py++)
      for (idx px = 0; px < sw; px++) {
        if (rowmap[py] < 0 || colmap[px] < 0) continue;
        idx at = rowmap[py] * cols_used + colmap[px];
        for (idx ch = 0; ch < c; ch++)
          for (idx r = 0; r < hq; r++)
            phase_row(q + ((at * c + ch) * hq + r) * wq, x, kind, zp, h, w, ch, r, py, px, sh,
                      sw, ph, pw, wq);
      }
    memset(q + phases - slack, 0, sizeof(float) * (size_t)slack);
    xq = q;
  }
  idx k = 0;
  for (idx ch = 0; ch < c; ch++)
    for (idx ky = 0; ky < kh; ky++)
      for (idx kx = 0; kx < kw; kx++) {
        idx at = dense ? 0 : rowmap[ky * dh % sh] * cols_used + colmap[kx * dw % sw];
        base[k++] = (at * c + ch) * plane + ky * dh / sh * wq + kx * dw / sw;
      }
  int gathered = dense && kind != X_F32 && !converted; /* gather reads the integers */
  Conv cv = {gathered ? NULL : xq, x, gathered ? kind : X_F32, zp, base, dense, kn, m, ho, wq,
             wo, bias, z, relu, y};
  return by_cols ? cols(&cv, packed) : rows(&cv, packed);
}

EXPORT int udo_conv(const float *x, const idx *geometry, const float *packed, const float *bias,
                    const float *z, int relu, float *y) {
  const idx *g = geometry;
  return conv(x, X_F32, 0.0f, g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10],
              g[11], g[12], g[13], packed, bias, z, relu, y);
}

/* udo_conv of integers x (x_kind: X_U8 .. X_I16) less their zero point zp, the integer path's
   centered input: the phases (or a dense image's float copy) are made from the integers,
   exact in float32 (integers of at most 16 bits), the padding the real zero. */
EXPORT int udo_conv_int(const void *x, int x_kind, float zp, const idx *geometry,
                        const float *packed, const float *bias, int relu, float *y) {
  const idx *g = geometry;
  if (x_kind < X_U8 || x_kind > X_I16) return 2;
  return conv(x, x_kind, zp, g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10],
              g[11], g[12], g[13], packed, bias, NULL, relu, y);
}
