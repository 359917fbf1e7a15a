/* A direct 2-d convolution over a channel-blocked layout (NCHW8c), stride 1, for
   bench/conv_layers.py: how close a plain C kernel comes to onnxruntime per layer.

   x: [C/8][Hp][Wp][8], the input zero-padded (Hp = H + KH - 1, Wp = W + KW - 1) with slack
      after it (the last tile reads up to TW - 1 pixels past the end);
   w: [M/8][C/8][KH][KW][8 in][8 out];  b: [M];
   y: [M/8][n][8] with n = H * Wp rounded up to TW: output row h, column j at h * Wp + j
      (columns W..Wp-1 of each row are junk, dropped by the caller).
   Padded width: output pixel p reads input pixel p + kh * Wp + kw of every channel, for all
   rows at once, so one tile of TW consecutive pixels needs no edge case but the last. */
#include <stddef.h>

typedef float v8 __attribute__((vector_size(32), aligned(4)));
#define OBT 2 /* output blocks of 8 channels per tile */
#define TW 6  /* pixels per tile: OBT * TW = 12 accumulators of 8 floats */

static void tile(const float *x, const float *w, const float *b, float *y, int cb_n, int hp,
                 int wp, int kh_n, int kw_n, size_t p0, size_t wob, size_t yob) {
  v8 acc[OBT][TW];
  for (int o = 0; o < OBT; o++)
    for (int j = 0; j < TW; j++) acc[o][j] = *(const v8 *)(b + o * 8);
  for (int cb = 0; cb < cb_n; cb++)
    for (int kh = 0; kh < kh_n; kh++)
      for (int kw = 0; kw < kw_n; kw++) {
        const float *xp = x + ((size_t)cb * hp * wp + p0 + (size_t)kh * wp + kw) * 8;
        const float *wt = w + (((size_t)cb * kh_n + kh) * kw_n + kw) * 64;
        for (int ic = 0; ic < 8; ic++) {
          v8 u[OBT];
          for (int o = 0; o < OBT; o++) u[o] = *(const v8 *)(wt + o * wob + ic * 8);
          for (int j = 0; j < TW; j++) {
            float s = xp[j * 8 + ic];
            for (int o = 0; o < OBT; o++) acc[o][j] += u[o] * s;
          }
        }
      }
  for (int o = 0; o < OBT; o++)
    for (int j = 0; j < TW; j++) *(v8 *)(y + o * yob + (p0 + j) * 8) = acc[o][j];
}

/* The whole convolution; the output blocks (M / 8) must be a multiple of OBT. */
void direct_conv(const float *x, const float *w, const float *b, float *y, int cb_n, int ob_n,
                 int h, int wd, int kh_n, int kw_n) {
  int hp = h + kh_n - 1, wp = wd + kw_n - 1;
  size_t wob = (size_t)cb_n * kh_n * kw_n * 64, n = (size_t)h * wp;
  size_t yob = (n + TW - 1) / TW * TW * 8;
  for (int ob = 0; ob + OBT <= ob_n; ob += OBT)
    for (size_t p0 = 0; p0 < n; p0 += TW)
      tile(x, w + ob * wob, b + ob * 8, y + ob * yob, cb_n, hp, wp, kh_n, kw_n, p0, wob, yob);
}

int direct_conv_tile(void) { return TW; }
