/* The int8 path's 2-d convolution (group 1) on integer dot products, for
   udo_build/runtime/integer/conv.py:

     acc[m][n] = corr[m] + sum_k w[m][k] * u[k][n],   n = oy * wo + ox

   u the input's bytes read as unsigned (a signed input has its sign bit flipped: x + 128), w
   the int8 weights, corr[m] = bias[m] - zu * sum_k w[m][k] with zu the unsigned zero point:
   the centered product sum_k w (x - zp) + bias, the padding holding zu (the real zero).

   Each 32-bit lane adds four products of an unsigned byte by a signed byte at once (VNNI's
   vpdpbusd), so k runs by words of four input channels at one tap; a CPU with AVX2 and no VNNI
   packs two channels in a word as 16-bit values and adds their two products (vpmaddwd); one
   with AMX runs layers of 64 channels or a multiple by tiles of the same words (amx_fits). The input is made "phases"
   as in conv.c (the padded input split by the strides, so that every tap reads its phase with
   stride 1), each pixel one word of four channels' bytes, and the product runs over the wide
   grid of ho x wq pixels (the columns past wo are junk, computed and never stored): the
   pixels of a tap are a run of words read in place. The weights are packed once as
   [M/QMR][taps][C/4][QMR] words, zeros past M and past C.

   Register tiles of QMR output channels by QNV vectors of QL pixels: every word k adds the
   QMR weights' words broadcast times the pixels' words loaded. The k range is cut into blocks
   whose loaded operand stays in the L1 cache; a tile's partial sums wait in a scratch from one
   block to the next, and the last block's sums go through the epilogue: stored as int32, or
   requantized into bytes (and a fused 8-bit Add computed) as c/passes.c does it.

   Exact: every operation is an addition of 32-bit integers or a product of two bytes, which
   the instructions wrap modulo 2^32 (no saturation: vpdpbusd's, AMX's tdpbsud's, and
   vpmaddwd's pair of 0..255 times -128..127). Each output is therefore the true integer modulo 2^32, the true
   integer when |acc| < 2^31, which the caller checks before it calls (the weights' sums of
   magnitudes times the input's reach, plus the bias). Every build (512- or 256-bit VNNI, AVX2's
   pairs, or the portable lanes of a CPU without AVX2) gives the same integers.

   Scratch memory is the calling thread's, kept and grown (1 when it cannot be had, for the
   caller's MemoryError). */
#define _GNU_SOURCE /* posix_memalign, syscall */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>
#define QL 16
#define QMR 6
#define QNV 4
#define QISA 512
typedef __m512i qv;
static inline qv qload(const uint32_t *p) { return _mm512_loadu_si512((const void *)p); }
static inline void qstore(int32_t *p, qv v) { _mm512_storeu_si512((void *)p, v); }
static inline qv qset1(int32_t v) { return _mm512_set1_epi32(v); }
static inline qv qdot(qv acc, qv x, int32_t w) {
  return _mm512_dpbusd_epi32(acc, x, _mm512_set1_epi32(w));
}
/* v plus the lanes whose bit is set loaded from p (the others: anything) */
static inline qv qadd_lanes(qv v, unsigned bits, const int32_t *p) {
  return _mm512_add_epi32(v, _mm512_maskz_loadu_epi32((__mmask16)bits, p));
}
static inline void qstore_lanes(int32_t *p, unsigned bits, qv v) {
  _mm512_mask_storeu_epi32(p, (__mmask16)bits, v);
}
#elif defined(__AVXVNNI__) || defined(__AVX2__)
#include <immintrin.h>
#define QL 8
typedef __m256i qv;
#if defined(__AVXVNNI__)
#define QMR 4
#define QNV 3
#define QISA 256
static inline qv qdot(qv acc, qv x, int32_t w) {
  return _mm256_dpbusd_avx_epi32(acc, x, _mm256_set1_epi32(w));
}
#else
/* AVX2 without VNNI: a word holds two channels' values as 16-bit integers, and each lane adds
   the two products of its pair (vpmaddwd: 0..255 times -128..127, no saturation) */
#define QCH 2
#define QMR 4
#define QNV 2
#define QISA 1
static inline qv qdot(qv acc, qv x, int32_t w) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(x, _mm256_set1_epi32(w)));
}
#endif
static inline qv qload(const uint32_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
static inline void qstore(int32_t *p, qv v) { _mm256_storeu_si256((__m256i *)p, v); }
static inline qv qset1(int32_t v) { return _mm256_set1_epi32(v); }
static inline __m256i lanes_of(unsigned bits) {
  __m256i lane = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)bits), lane), lane);
}
static inline qv qadd_lanes(qv v, unsigned bits, const int32_t *p) {
  return _mm256_add_epi32(v, _mm256_maskload_epi32(p, lanes_of(bits)));
}
static inline void qstore_lanes(int32_t *p, unsigned bits, qv v) {
  _mm256_maskstore_epi32(p, lanes_of(bits), v);
}
#else
/* no VNNI: the same arithmetic lane by lane (a CPU of another kind, and the tests) */
#define QL 8
#define QMR 4
#define QNV 2
#define QISA 0
typedef uint32_t qv __attribute__((vector_size(32)));
static inline qv qload(const uint32_t *p) {
  qv v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline void qstore(int32_t *p, qv v) { memcpy(p, &v, sizeof v); }
static inline qv qset1(int32_t v) {
  uint32_t u = (uint32_t)v;
  return (qv){u, u, u, u, u, u, u, u};
}
static inline qv qdot(qv acc, qv x, int32_t w) {
  for (int b = 0; b < 4; b++) { /* byte b of each lane (unsigned) times byte b of w (signed) */
    uint32_t wb = (uint32_t)(int32_t)(int8_t)(uint8_t)((uint32_t)w >> (8 * b));
    acc += ((x >> (8 * b)) & 0xffu) * wb;
  }
  return acc;
}
static inline qv qadd_lanes(qv v, unsigned bits, const int32_t *p) {
  for (int i = 0; i < QL; i++)
    if (bits >> i & 1) v[i] += (uint32_t)p[i];
  return v;
}
static inline void qstore_lanes(int32_t *p, unsigned bits, qv v) {
  for (int i = 0; i < QL; i++)
    if (bits >> i & 1) p[i] = (int32_t)v[i];
}
#endif

#ifndef QCH
#define QCH 4 /* channels in a word: four bytes (VNNI), or two 16-bit values (AVX2) */
#endif
#define QSHIFT (32 / QCH)                            /* bits of a channel in a word */
#define QONES (QCH == 4 ? 0x01010101u : 0x00010001u) /* 1 in each channel of a word */

#ifndef QKC_BYTES
#define QKC_BYTES 32768 /* bytes of a k block of the loaded operand: in the L1 cache */
#endif
#define QTILE (QNV * QL)
#define SEGMENTS (QL + 1) /* the most output rows a vector of QL wide pixels spans */

typedef ptrdiff_t idx;
#define EXPORT __attribute__((visibility("default")))

/* 512, 256: the VNNI width this build uses; 1: AVX2's pairs of 16-bit values; 0: the portable
   lanes (a CPU of another kind: the int8 path does not use them, the tests do) */
EXPORT int udo_qconv_isa(void) { return QISA; }

/* AMX (a build with AMX-INT8, the CPU granting its tiles): where the channel groups of a tap
   fill whole tiles (c a multiple of 64), the product runs as tile dot products (tdpbsud: 16
   output channels by 16 pixels, 64 k bytes each, signed weights by unsigned inputs), the
   phases' words read as tiles of 16 k words by 16 pixels (a tap's channel groups are whole
   planes apart: one row stride). Its weights are packed a second time, after the rows ones, as
   [M/32][k words/16][2][16 channels][16 words]: one tile per 1 KiB. */
#if QISA == 512 && defined(__AMX_TILE__) && defined(__AMX_INT8__)
#define QAMX 1
#include <sys/syscall.h>
#include <unistd.h>
#endif
static int amx_fits(idx c) {
#ifdef QAMX
  return c % 64 == 0;
#else
  (void)c;
  return 0;
#endif
}

static idx rows_packed_size(idx m, idx c, idx taps) {
  return (m + QMR - 1) / QMR * QMR * taps * ((c + QCH - 1) / QCH) * 4;
}

/* bytes of the packed weights of m output channels, c input channels and `taps` taps */
EXPORT idx udo_qconv_packed_size(idx m, idx c, idx taps) {
  idx amx = amx_fits(c) ? (m + 31) / 32 * 32 * taps * (c / 4) * 4 : 0;
  return rows_packed_size(m, c, taps) + amx;
}

/* the word of output channel ch, channel group g, tap t: QCH values of w (m, c, taps), zeros
   past m and c */
static uint32_t word_of(const int8_t *w, idx m, idx c, idx taps, idx ch, idx g, idx t) {
  uint32_t word = 0;
  for (int j = 0; j < QCH; j++) {
    idx i = QCH * g + j;
    int32_t v = ch < m && i < c ? w[(ch * c + i) * taps + t] : 0;
    word |= ((uint32_t)v & (0xffffffffu >> (32 - QSHIFT))) << (QSHIFT * j);
  }
  return word;
}

/* w (m, c, taps) int8 as [ceil(m / QMR)][taps][ceil(c / QCH)][QMR] words (the rows), then
   where amx_fits as the tiles' [ceil(m / 32)][taps * c / 64][2][16][16] words, word k of the
   tiles being tap k / groups, group k % groups */
EXPORT void udo_qconv_pack(const int8_t *w, idx m, idx c, idx taps, int8_t *out) {
  idx groups = (c + QCH - 1) / QCH;
  uint32_t word;
  for (idx p = 0; p < m; p += QMR)
    for (idx t = 0; t < taps; t++)
      for (idx g = 0; g < groups; g++)
        for (int i = 0; i < QMR; i++, out += 4) {
          word = word_of(w, m, c, taps, p + i, g, t);
          memcpy(out, &word, sizeof word);
        }
  if (!amx_fits(c)) return;
  for (idx mb = 0; mb < (m + 31) / 32; mb++)
    for (idx k0 = 0; k0 < taps * groups; k0 += 16)
      for (int i = 0; i < 32; i++)
        for (idx k = k0; k < k0 + 16; k++, out += 4) {
          word = word_of(w, m, c, taps, mb * 32 + i, k % groups, k / groups);
          memcpy(out, &word, sizeof word);
        }
}

static _Thread_local uint32_t *scratch;
static _Thread_local size_t scratch_words;

static uint32_t *workspace(size_t words) {
  if (words > scratch_words) {
    free(scratch);
    scratch_words = 0;
    if (posix_memalign((void **)&scratch, 64, words * sizeof(uint32_t)) != 0)
      return scratch = NULL;
    scratch_words = words;
  }
  return scratch;
}

/* phase_map: for each start s of the stride the taps reach ((k * d) % stride), its index among
   those used, -1 for the others; returns how many are used */
static idx phase_map(idx *map, idx k, idx d, idx stride) {
  for (idx s = 0; s < stride; s++) map[s] = -1;
  for (idx t = 0; t < k; t++) map[t * d % stride] = 0;
  idx used = 0;
  for (idx s = 0; s < stride; s++)
    if (map[s] == 0) map[s] = used++;
  return used;
}

/* how many starts of the stride the taps reach (phase_map's count, without its map) */
static idx used_of(idx k, idx d, idx stride) {
  idx used = 0;
  for (idx s = 0; s < stride; s++)
    for (idx t = 0; t < k; t++)
      if (t * d % stride == s) {
        used++;
        break;
      }
  return used;
}

/* Row r of phase (py, px) of channel group g: word q holds the values of channels QCH g ..
   QCH g + QCH - 1 (bytes, or 16-bit values) at input pixel (r * sh + py - ph, q * sw + px - pw),
   each byte xor `flip` (the sign bit of a signed input); outside the input, and for a channel
   past c, the value zu. */
static void phase_row(uint32_t *restrict row, const uint8_t *x, uint8_t flip, uint8_t zu, idx c,
                      idx h, idx w, idx g, idx r, idx py, idx px, idx sh, idx sw, idx ph, idx pw,
                      idx wq) {
  uint32_t fill = (uint32_t)zu * QONES;
  idx iy = r * sh + py - ph;
  idx lo = pw - px > 0 ? (pw - px + sw - 1) / sw : 0, hi = w + pw - px;
  hi = hi > 0 ? (hi + sw - 1) / sw : 0;
  if (hi > wq) hi = wq;
  if (lo > hi) lo = hi;
  if (iy < 0 || iy >= h) lo = hi = 0;
  for (idx q = 0; q < lo; q++) row[q] = fill;
  for (idx q = hi; q < wq; q++) row[q] = fill;
  if (lo == hi) return;
  idx present = c - QCH * g < QCH ? c - QCH * g : QCH;
  uint32_t keep = present == QCH ? 0xffffffffu : (1u << (QSHIFT * present)) - 1u;
  uint32_t flips = (uint32_t)flip * QONES & keep, add = fill & ~keep;
  const uint8_t *s[QCH];
  for (idx j = 0; j < QCH; j++) s[j] = x + ((QCH * g + (j < present ? j : 0)) * h + iy) * w;
  idx off = px - pw;
#if QISA == 512
  if (sw <= 2) { /* 16 words at a time (the last run's lanes masked): bytes widened, shifted */
    const __m512i keepv = _mm512_set1_epi32((int32_t)keep),
                  flipv = _mm512_set1_epi32((int32_t)flips),
                  addv = _mm512_set1_epi32((int32_t)add), low = _mm512_set1_epi32(0xff);
    for (; lo < hi; lo += 16) {
      int n = hi - lo < 16 ? (int)(hi - lo) : 16;
      __mmask16 lanes = (__mmask16)((1u << n) - 1u);
      __mmask32 even = (__mmask32)((1u << (2 * n - 1)) - 1u); /* the bytes 2i, and between */
      __m512i v = _mm512_setzero_si512();
      for (int j = 0; j < QCH; j++) {
        const uint8_t *from = s[j] + lo * sw + off;
        __m512i b = sw == 1 ? _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(lanes, from))
                            : _mm512_and_si512(_mm512_cvtepu16_epi32(
                                                   _mm256_maskz_loadu_epi8(even, from)),
                                               low);
        v = _mm512_or_si512(v, _mm512_slli_epi32(b, QSHIFT * j));
      }
      v = _mm512_or_si512(_mm512_xor_si512(_mm512_and_si512(v, keepv), flipv), addv);
      _mm512_mask_storeu_epi32((void *)(row + lo), lanes, v);
    }
    return;
  }
#endif
  const uint8_t *restrict s0 = s[0] + off, *restrict s1 = s[1] + off;
#if QCH == 4
  const uint8_t *restrict s2 = s[2] + off, *restrict s3 = s[3] + off;
#define WORD(i) ((uint32_t)s0[i] | (uint32_t)s1[i] << 8 | (uint32_t)s2[i] << 16 | \
                 (uint32_t)s3[i] << 24)
#else
#define WORD(i) ((uint32_t)s0[i] | (uint32_t)s1[i] << 16)
#endif
  if (sw == 1)
    for (idx q = lo; q < hi; q++) row[q] = ((WORD(q) & keep) ^ flips) | add;
  else
    for (idx q = lo; q < hi; q++) row[q] = ((WORD(q * sw) & keep) ^ flips) | add;
#undef WORD
}

/* acc[i][v] += the words k < kn of w (QMR each) times the pixels' words at x + base[k] + q0,
   for v < nv (a constant where it is inlined) */
static inline __attribute__((always_inline)) void accumulate(qv acc[QMR][QNV], const int nv,
                                                             idx kn, const uint32_t *x,
                                                             const idx *base, idx q0,
                                                             const int8_t *w) {
  for (idx k = 0; k < kn; k++) {
    const uint32_t *xk = x + base[k] + q0;
    qv xv[QNV];
#pragma GCC unroll 8
    for (int v = 0; v < nv; v++) xv[v] = qload(xk + v * QL);
#pragma GCC unroll 8
    for (int i = 0; i < QMR; i++) {
      int32_t wi;
      memcpy(&wi, w + (k * QMR + i) * 4, sizeof wi); /* a word of QCH weights */
#pragma GCC unroll 8
      for (int v = 0; v < nv; v++) acc[i][v] = qdot(acc[i][v], xv[v], wi);
    }
  }
}

/* Where a vector of QL wide pixels from q0 goes in an output plane: the runs of its lanes that
   fall in one output row (ox < wo), each as its lane bits and the offset of lane 0 in the plane
   (the lanes past the grid, and junk columns, are in none). Returns the number of runs. */
static int runs_of(idx q0, idx ho, idx wq, idx wo, unsigned *bits, idx *at) {
  idx end = q0 + QL, last = ho * wq;
  if (end > last) end = last;
  int n = 0;
  for (idx q = q0; q < end;) {
    idx oy = q / wq, row = oy * wq, stop = row + wo < end ? row + wo : end;
    if (q < stop) {
      bits[n] = (unsigned)(((1ull << (stop - q)) - 1) << (q - q0));
      at[n++] = oy * wo - row + q0;
    }
    q = row + wq;
  }
  return n;
}

/* What becomes of the accumulators (udo_qconv's `factor`, `numbers`, `ints`, `other`): kept as
   int32, or requantized into bytes as udo_requant does (c/passes.c): q = rint(clamp(acc x
   factor[ch], lo, hi)) and out = zp + q; with a sum form (an 8-bit Add fused after the
   convolution: udo_pair_sum's numbers), out = z + rint(clamp(f0 a + f1 b + c, lo2, hi2)) of the
   typed values a = zp + q and b, the other input's byte at the same place (q_first: a is the
   Add's first input). The same IEEE operations in the same order as c/passes.c: the same
   bytes. */
enum { OUT_U8 = 0, OUT_I8 = 1, OUT_I32 = 2 };
typedef struct {
  const double *factor;
  idx factor_step;
  double lo, hi;
  int32_t zp;
  int kind;
  const double *sum; /* f0, f1, c, lo2, hi2, z; NULL: no Add */
  int other_signed, q_first;
  const uint8_t *other;
} Epilogue;

/* the bytes of lanes `bits` of v (channel ch, lane 0 at offset `at` of the plane) */
static inline void finish(const Epilogue *e, idx ch, idx plane, idx at, unsigned bits, qv v,
                          void *y) {
  if (e->kind == OUT_I32) {
    qstore_lanes((int32_t *)y + ch * plane + at, bits, v);
    return;
  }
  double f = e->factor[ch * e->factor_step];
  uint8_t *out = (uint8_t *)y + ch * plane + at;
#if QISA == 512
  const __m512d fv = _mm512_set1_pd(f), lo = _mm512_set1_pd(e->lo), hi = _mm512_set1_pd(e->hi);
  __m256i half[2] = {_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1)};
  __m256i q[2];
  for (int h = 0; h < 2; h++) {
    __m512d t = _mm512_mul_pd(_mm512_cvtepi32_pd(half[h]), fv);
    q[h] = _mm512_cvtpd_epi32(_mm512_min_pd(_mm512_max_pd(t, lo), hi)); /* rint: to even */
  }
  __m512i r = _mm512_add_epi32(_mm512_inserti64x4(_mm512_castsi256_si512(q[0]), q[1], 1),
                               _mm512_set1_epi32(e->zp));
  if (e->sum != NULL) {
    const double *sm = e->sum;
    __m128i raw = _mm_maskz_loadu_epi8((__mmask16)bits, e->other + ch * plane + at);
    __m512i o = e->other_signed ? _mm512_cvtepi8_epi32(raw) : _mm512_cvtepu8_epi32(raw);
    __m256i oh[2] = {_mm512_castsi512_si256(o), _mm512_extracti64x4_epi64(o, 1)};
    __m256i rh[2] = {_mm512_castsi512_si256(r), _mm512_extracti64x4_epi64(r, 1)};
    const __m512d f0 = _mm512_set1_pd(sm[0]), f1 = _mm512_set1_pd(sm[1]),
                  c = _mm512_set1_pd(sm[2]), lo2 = _mm512_set1_pd(sm[3]),
                  hi2 = _mm512_set1_pd(sm[4]);
    for (int h = 0; h < 2; h++) {
      __m512d a = _mm512_cvtepi32_pd(rh[h]), b = _mm512_cvtepi32_pd(oh[h]);
      __m512d t = e->q_first ? _mm512_add_pd(_mm512_mul_pd(f0, a), _mm512_mul_pd(f1, b))
                             : _mm512_add_pd(_mm512_mul_pd(f0, b), _mm512_mul_pd(f1, a));
      t = _mm512_min_pd(_mm512_max_pd(_mm512_add_pd(t, c), lo2), hi2);
      q[h] = _mm512_cvtpd_epi32(t);
    }
    r = _mm512_add_epi32(_mm512_inserti64x4(_mm512_castsi256_si512(q[0]), q[1], 1),
                         _mm512_set1_epi32((int32_t)sm[5]));
  }
  _mm512_mask_cvtepi32_storeu_epi8(out, (__mmask16)bits, r);
#elif QISA == 256 || QISA == 1
  const __m256d fv = _mm256_set1_pd(f), lo = _mm256_set1_pd(e->lo), hi = _mm256_set1_pd(e->hi);
  __m128i half[2] = {_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)}, q[2];
  for (int h = 0; h < 2; h++) {
    __m256d t = _mm256_mul_pd(_mm256_cvtepi32_pd(half[h]), fv);
    q[h] = _mm256_cvtpd_epi32(_mm256_min_pd(_mm256_max_pd(t, lo), hi)); /* rint: to even */
  }
  __m256i r = _mm256_add_epi32(_mm256_set_m128i(q[1], q[0]), _mm256_set1_epi32(e->zp));
  if (e->sum != NULL) {
    const double *sm = e->sum;
    uint8_t bytes[8] = {0};
    const uint8_t *from = e->other + ch * plane + at;
    for (int i = 0; i < 8; i++)
      if (bits >> i & 1) bytes[i] = from[i];
    __m128i raw = _mm_loadl_epi64((const __m128i *)bytes);
    __m256i o = e->other_signed ? _mm256_cvtepi8_epi32(raw) : _mm256_cvtepu8_epi32(raw);
    __m128i oh[2] = {_mm256_castsi256_si128(o), _mm256_extracti128_si256(o, 1)};
    __m128i rh[2] = {_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1)};
    const __m256d f0 = _mm256_set1_pd(sm[0]), f1 = _mm256_set1_pd(sm[1]),
                  c = _mm256_set1_pd(sm[2]), lo2 = _mm256_set1_pd(sm[3]),
                  hi2 = _mm256_set1_pd(sm[4]);
    for (int h = 0; h < 2; h++) {
      __m256d a = _mm256_cvtepi32_pd(rh[h]), b = _mm256_cvtepi32_pd(oh[h]);
      __m256d t = e->q_first ? _mm256_add_pd(_mm256_mul_pd(f0, a), _mm256_mul_pd(f1, b))
                             : _mm256_add_pd(_mm256_mul_pd(f0, b), _mm256_mul_pd(f1, a));
      t = _mm256_min_pd(_mm256_max_pd(_mm256_add_pd(t, c), lo2), hi2);
      q[h] = _mm256_cvtpd_epi32(t);
    }
    r = _mm256_add_epi32(_mm256_set_m128i(q[1], q[0]), _mm256_set1_epi32((int32_t)sm[5]));
  }
  /* each lane's low byte (the value fits it), the two halves' four joined: eight bytes */
  const __m256i low = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                       -1, 0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                       -1, -1);
  __m256i packed = _mm256_shuffle_epi8(r, low);
  __m128i eight = _mm_unpacklo_epi32(_mm256_castsi256_si128(packed),
                                     _mm256_extracti128_si256(packed, 1));
  if (bits == 0xffu) {
    _mm_storel_epi64((__m128i *)out, eight);
  } else {
    uint8_t bytes[8];
    _mm_storel_epi64((__m128i *)bytes, eight);
    for (int i = 0; i < 8; i++)
      if (bits >> i & 1) out[i] = bytes[i];
  }
#else
  int32_t lanes[QL];
  memcpy(lanes, &v, sizeof lanes);
  for (int i = 0; i < QL; i++) {
    if (!(bits >> i & 1)) continue;
    double t = (double)lanes[i] * f;
    t = t < e->lo ? e->lo : t;
    t = t > e->hi ? e->hi : t;
    int32_t r = (int32_t)rint(t) + e->zp;
    if (e->sum != NULL) {
      const double *sm = e->sum;
      uint8_t byte = e->other[ch * plane + at + i];
      double qv = (double)r, ov = e->other_signed ? (double)(int8_t)byte : (double)byte;
      double u = e->q_first ? sm[0] * qv + sm[1] * ov + sm[2] : sm[0] * ov + sm[1] * qv + sm[2];
      u = u < sm[3] ? sm[3] : u;
      u = u > sm[4] ? sm[4] : u;
      r = (int32_t)rint(u) + (int32_t)sm[5];
    }
    out[i] = (uint8_t)r;
  }
#endif
}

#ifdef QAMX
/* whether this process may use the tiles (Linux grants them on request: once a process) */
static int amx_ready(void) {
  static int state = -1;
  if (state < 0) /* ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA */
    state = syscall(SYS_arch_prctl, 0x1023, 18) == 0;
  return state;
}

typedef struct {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} TileConfig;

/* The product by tiles (see amx_fits), every k word of an image's grid at once: C tiles 0-3
   (channels a of 2 by pixels b of 2, 16 x 16 each), A tiles 4-5 (the weights), B tiles 6-7
   (the pixels); the sums of a 32 x 32 block go through a scratch to the epilogue. */
static void amx_product(const Epilogue *e, const uint32_t *xq, const idx *base,
                        const int8_t *tiles, const int32_t *corr, idx kg, idx m, idx plane,
                        idx ho, idx wq, idx wo, idx stride, void *y) {
  TileConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette = 1;
  for (int t = 0; t < 8; t++) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  _tile_loadconfig(&cfg);
  int32_t sums[4][16][16] __attribute__((aligned(64)));
  idx grid = ho * wq, chunks = kg / 16;
  for (idx q0 = 0; q0 < grid; q0 += 32) {
    unsigned bits[2][SEGMENTS];
    idx at[2][SEGMENTS];
    int runs[2];
    for (int v = 0; v < 2; v++) runs[v] = runs_of(q0 + v * 16, ho, wq, wo, bits[v], at[v]);
    for (idx mb = 0; mb < m; mb += 32) {
      const int8_t *wt = tiles + mb / 32 * chunks * 2048;
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (idx kc = 0; kc < chunks; kc++, wt += 2048) {
        const uint32_t *x0 = xq + base[kc * 16] + q0;
        _tile_loadd(4, wt, 64);
        _tile_loadd(5, wt + 1024, 64);
        _tile_loadd(6, x0, stride);
        _tile_loadd(7, x0 + 16, stride);
        _tile_dpbsud(0, 4, 6);
        _tile_dpbsud(1, 4, 7);
        _tile_dpbsud(2, 5, 6);
        _tile_dpbsud(3, 5, 7);
      }
      _tile_stored(0, sums[0], 64);
      _tile_stored(1, sums[1], 64);
      _tile_stored(2, sums[2], 64);
      _tile_stored(3, sums[3], 64);
      for (int a = 0; a < 2; a++)
        for (int i = 0; i < 16; i++) {
          idx ch = mb + 16 * a + i;
          if (ch >= m) break;
          qv start = qset1(corr[ch]);
          for (int v = 0; v < 2; v++) {
            qv acc = _mm512_add_epi32(start, qload((const uint32_t *)sums[2 * a + v][i]));
            for (int r = 0; r < runs[v]; r++) finish(e, ch, plane, at[v][r], bits[v][r], acc, y);
          }
        }
    }
  }
  _tile_release();
}
#endif

/* what a tile of pixels passes: the image's operands and output */
typedef struct {
  const Epilogue *e;
  const uint32_t *xq;
  const idx *base;
  const int8_t *packed;
  const int32_t *corr;
  int32_t *partial; /* a tile's partial sums between k blocks: [m rounded up to QMR][QTILE] */
  idx kg, m, plane;
  void *y;
} Pass;

/* a tile of wide pixels: its vectors (nv <= QNV) and where each one's lanes are stored */
typedef struct {
  int nv;
  int runs[QNV];
  unsigned bits[QNV][SEGMENTS];
  idx at[QNV][SEGMENTS];
} Tile;

/* the k block [k0, k0 + kn) of tile t (from wide pixel q0) through every row tile of the
   weights: its partial sums kept for the next block, or the last block's through the
   epilogue; nv (t's vectors) a constant where it is inlined */
static inline __attribute__((always_inline)) void pass_tile(const Pass *p, const Tile *t,
                                                            const int nv, idx q0, idx k0,
                                                            idx kn) {
  int last = k0 + kn == p->kg;
  for (idx mb = 0; mb < p->m; mb += QMR) {
    /* every index of acc a constant once the loops are unrolled: it lives in registers */
    qv acc[QMR][QNV];
    int32_t *part = p->partial + mb * QTILE;
#pragma GCC unroll 8
    for (int i = 0; i < QMR; i++)
#pragma GCC unroll 8
      for (int v = 0; v < nv; v++)
        acc[i][v] = k0 > 0 ? qload((const uint32_t *)part + i * QTILE + v * QL)
                           : qset1(mb + i < p->m ? p->corr[mb + i] : 0);
    accumulate(acc, nv, kn, p->xq, p->base + k0, q0,
               p->packed + (mb / QMR * p->kg + k0) * QMR * 4);
    if (!last) {
#pragma GCC unroll 8
      for (int i = 0; i < QMR; i++)
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) qstore(part + i * QTILE + v * QL, acc[i][v]);
      continue;
    }
#pragma GCC unroll 8
    for (int i = 0; i < QMR; i++) {
      if (mb + i >= p->m) break;
#pragma GCC unroll 8
      for (int v = 0; v < nv; v++)
        for (int s = 0; s < t->runs[v]; s++)
          finish(p->e, mb + i, p->plane, t->at[v][s], t->bits[v][s], acc[i][v], p->y);
    }
  }
}

/* One image x (c, h, w) of bytes (signed when `is_signed`) into y (m, ho, wo): the kernel
   kh x kw, strides sh x sw, dilations dh x dw, pads ph, pw before the first row and column
   (negative: cropped), these 14 numbers in `geometry` (c, h, w, kh, kw, sh, sw, dh, dw, ph, pw,
   ho, wo, m) as conv.c reads them; packed the weights as udo_qconv_pack made them, corr (m) what
   each output channel starts from, zu the unsigned zero point (0..255: the zero point, plus 128
   for a signed input). The epilogue (see Epilogue): factor (one per channel when ints[2] is 1,
   else one), numbers = {lo, hi, then the sum form's six}, ints = {zp, kind (0 uint8, 1 int8,
   2 int32: the accumulators themselves), factor step, the other input signed, q_first, a sum
   form}, other the Add's other input (m, ho, wo) bytes or NULL. 0, 1 when memory ran out, 2 for
   a zero point outside a byte or a kind it does not know. */
EXPORT int udo_qconv(const void *x, int is_signed, int zu, const idx *geometry,
                     const int8_t *packed, const int32_t *corr, const double *factor,
                     const double *numbers, const int *ints, const uint8_t *other, void *y) {
  const idx *g = geometry;
  idx c = g[0], h = g[1], w = g[2], kh = g[3], kw = g[4], sh = g[5], sw = g[6], dh = g[7],
      dw = g[8], ph = g[9], pw = g[10], ho = g[11], wo = g[12], m = g[13];
  if (zu < 0 || zu > 255 || ints[1] < OUT_U8 || ints[1] > OUT_I32) return 2;
  Epilogue e = {factor, ints[2], numbers[0], numbers[1], ints[0], ints[1],
                ints[5] ? numbers + 2 : NULL, ints[3], ints[4], other};
  if (ho <= 0 || wo <= 0 || m <= 0) return 0;
  idx groups = (c + QCH - 1) / QCH, taps = kh * kw, kg = taps * groups;
  idx hq = ho + (kh - 1) * dh / sh, wq = wo + (kw - 1) * dw / sw, plane = hq * wq;
  idx maps = sh + sw, rows_used = used_of(kh, dh, sh), cols_used = used_of(kw, dw, sw);
  idx phases = rows_used * cols_used * groups * plane, slack = QTILE + wq + 16;
  idx grid = ho * wq, most = QKC_BYTES / (QTILE * (idx)sizeof(uint32_t));
  idx blocks = (kg + most - 1) / most, kc = (kg + blocks - 1) / blocks;
#ifdef QAMX
  int tiles = amx_fits(c) && amx_ready();
#else
  int tiles = 0;
#endif
  idx mpad = (m + QMR - 1) / QMR * QMR, partials = !tiles && blocks > 1 ? mpad * QTILE : 0;
  size_t head = (size_t)(maps + kg) * sizeof(idx) / sizeof(uint32_t) + 16;
  uint32_t *room = workspace(head + (size_t)(phases + slack + partials + 16));
  if (!room) return 1;
  idx *rowmap = (idx *)room, *colmap = rowmap + sh, *base = colmap + sw;
  phase_map(rowmap, kh, dh, sh);
  phase_map(colmap, kw, dw, sw);
  uint32_t *xq = room + head;
  int32_t *partial = (int32_t *)(xq + phases + slack + (16 - (phases + slack) % 16));
  uint8_t flip = is_signed ? 0x80 : 0;
  if (kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0 && hq == h && wq == w) {
    for (idx gi = 0; gi < groups; gi++) /* dense: each plane one run of h * w words */
      phase_row(xq + gi * plane, x, flip, (uint8_t)zu, c, 1, h * w, gi, 0, 0, 0, 1, 1, 0, 0,
                plane);
  } else {
    for (idx py = 0; py < sh; py++)
      for (idx px = 0; px < sw; px++) {
        if (rowmap[py] < 0 || colmap[px] < 0) continue;
        idx at = rowmap[py] * cols_used + colmap[px];
        for (idx gi = 0; gi < groups; gi++)
          for (idx r = 0; r < hq; r++)
            phase_row(xq + ((at * groups + gi) * hq + r) * wq, x, flip, (uint8_t)zu, c, h, w,
                      gi, r, py, px, sh, sw, ph, pw, wq);
      }
  }
  memset(xq + phases, 0, sizeof(uint32_t) * (size_t)slack);
  for (idx ky = 0; ky < kh; ky++)
    for (idx kx = 0; kx < kw; kx++) {
      idx at = rowmap[ky * dh % sh] * cols_used + colmap[kx * dw % sw];
      for (idx gi = 0; gi < groups; gi++)
        base[(ky * kw + kx) * groups + gi] =
            (at * groups + gi) * plane + ky * dh / sh * wq + kx * dw / sw;
    }
#ifdef QAMX
  if (tiles) {
    amx_product(&e, xq, base, packed + rows_packed_size(m, c, taps), corr, kg, m, ho * wo, ho,
                wq, wo, plane * (idx)sizeof(uint32_t), y);
    return 0;
  }
#endif
  /* each tile of QTILE wide pixels passes every k block, each block every row tile of the
     weights (the block's operand stays in the L1 cache); the partial sums of a tile wait in
     `partial` from one block to the next, the last block's go through the epilogue */
  Pass pass = {&e, xq, base, packed, corr, partial, kg, m, ho * wo, y};
  for (idx q0 = 0; q0 < grid; q0 += QTILE) {
    Tile t;
    idx left = (grid - q0 + QL - 1) / QL; /* the last tile: the vectors that reach the grid */
    t.nv = left < QNV ? (int)left : QNV;
    for (int v = 0; v < t.nv; v++)
      t.runs[v] = runs_of(q0 + v * QL, ho, wq, wo, t.bits[v], t.at[v]);
    for (idx k0 = 0; k0 < kg; k0 += kc) {
      idx kn = kg - k0 < kc ? kg - k0 : kc;
      if (t.nv == QNV) pass_tile(&pass, &t, QNV, q0, k0, kn);
#if QNV > 1
      else if (t.nv == 1) pass_tile(&pass, &t, 1, q0, k0, kn);
#endif
#if QNV > 2
      else if (t.nv == 2) pass_tile(&pass, &t, 2, q0, k0, kn);
#endif
#if QNV > 3
      else if (t.nv == 3) pass_tile(&pass, &t, 3, q0, k0, kn);
#endif
    }
  }
  return 0;
}
