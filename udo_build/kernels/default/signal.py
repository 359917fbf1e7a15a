"""Signal ops: the Hann, Hamming and Blackman windows, DFT, STFT and MelWeightMatrix.

A complex tensor is real-valued with a last axis of 2 (real, imaginary); a real signal has a
last axis of 1. Transforms run in numpy's FFT at float64 and return the input's dtype.
"""

from __future__ import annotations

import numpy as np

from ._common import axis_of, element_type
from ._package import DEFAULT


def _scalar(value: np.ndarray | None, name: str) -> int:
    if value is None or np.asarray(value).size != 1:
        raise ValueError(f"{name} must be a scalar, got "
                         f"{None if value is None else list(np.shape(value))}")
    return int(np.asarray(value).reshape(()))


def _window(size: np.ndarray, periodic: int, output_datatype: int,
            terms: tuple[float, ...]) -> np.ndarray:
    """sum_k (-1)^k terms[k] cos(2 pi k n / N), N = size (periodic) or size - 1."""
    n = _scalar(size, "size")
    denominator = n if periodic else n - 1
    phase = 2 * np.pi * np.arange(n) / max(denominator, 1)
    values = sum((-1) ** k * a * np.cos(k * phase) for k, a in enumerate(terms))
    return np.asarray(values).astype(element_type(output_datatype))


@DEFAULT.op("HannWindow")
def hann_window(size: np.ndarray, *, output_datatype: int = 1, periodic: int = 1) -> np.ndarray:
    return _window(size, periodic, output_datatype, (0.5, 0.5))


@DEFAULT.op("HammingWindow")
def hamming_window(size: np.ndarray, *, output_datatype: int = 1,
                   periodic: int = 1) -> np.ndarray:
    return _window(size, periodic, output_datatype, (25 / 46, 21 / 46))


@DEFAULT.op("BlackmanWindow")
def blackman_window(size: np.ndarray, *, output_datatype: int = 1,
                    periodic: int = 1) -> np.ndarray:
    return _window(size, periodic, output_datatype, (0.42, 0.5, 0.08))


def _complex(x: np.ndarray) -> np.ndarray:
    """A [..., 1] or [..., 2] tensor as complex128 [...]."""
    if x.shape[-1] == 1:
        return x[..., 0].astype(np.complex128)
    if x.shape[-1] == 2:
        return x[..., 0].astype(np.float64) + 1j * x[..., 1].astype(np.float64)
    raise ValueError(f"a signal's last axis is 1 (real) or 2 (complex), got {x.shape[-1]}")


def _pair(z: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=-1).astype(dtype)


@DEFAULT.op("DFT")
def dft(x: np.ndarray, dft_length: np.ndarray | None = None,
        axis_tensor: np.ndarray | None = None, *, axis: int = 1, inverse: int = 0,
        onesided: int = 0) -> np.ndarray:
    """The discrete Fourier transform along a signal axis (the attribute before opset 20, the
    `axis` input from it). onesided keeps the n // 2 + 1 first bins; inverse with onesided is
    the inverse of a real signal's onesided transform (a real output)."""
    if axis_tensor is not None:
        axis = _scalar(axis_tensor, "axis")
    axis = axis_of(axis, x.ndim)
    if axis == x.ndim - 1:
        raise ValueError(f"DFT axis {axis} is the real/imaginary axis, not a signal axis")
    signal = _complex(x)
    n_in = signal.shape[axis]
    if dft_length is not None:
        n = _scalar(dft_length, "dft_length")
    else:
        n = 2 * (n_in - 1) if inverse and onesided else n_in
    if inverse and onesided:
        return np.fft.irfft(signal, n=n, axis=axis)[..., None].astype(x.dtype)
    out = np.fft.ifft(signal, n=n, axis=axis) if inverse else np.fft.fft(signal, n=n, axis=axis)
    if onesided:
        out = np.take(out, np.arange(n // 2 + 1), axis=axis)
    return _pair(out, x.dtype)


@DEFAULT.op("STFT")
def stft(signal: np.ndarray, frame_step: np.ndarray, window: np.ndarray | None = None,
         frame_length: np.ndarray | None = None, *, onesided: int = 1) -> np.ndarray:
    """[batch, frames, bins, 2]: the DFT of each windowed frame of signal [batch, length, 1|2]."""
    step = _scalar(frame_step, "frame_step")
    if frame_length is not None:
        length = _scalar(frame_length, "frame_length")
    elif window is not None:
        length = window.shape[0]
    else:
        raise ValueError("STFT needs a window or a frame_length")
    if window is not None and window.shape[0] != length:
        raise ValueError(f"STFT window of {window.shape[0]} values, frame_length {length}")
    z = _complex(signal)  # [batch, length]
    frames = 1 + (z.shape[1] - length) // step
    if frames < 1:
        raise ValueError(f"STFT signal of {z.shape[1]} samples is shorter than a frame "
                         f"({length})")
    starts = np.arange(frames) * step
    framed = z[:, starts[:, None] + np.arange(length)[None, :]]  # [batch, frames, length]
    if window is not None:
        framed = framed * window.astype(np.float64)
    out = np.fft.fft(framed, axis=-1)
    if onesided:
        out = out[..., :length // 2 + 1]
    return _pair(out, signal.dtype)


@DEFAULT.op("MelWeightMatrix")
def mel_weight_matrix(num_mel_bins: np.ndarray, dft_length: np.ndarray,
                      sample_rate: np.ndarray, lower_edge_hertz: np.ndarray,
                      upper_edge_hertz: np.ndarray, *, output_datatype: int = 1) -> np.ndarray:
    """[dft_length // 2 + 1, num_mel_bins] triangular filters, evenly spaced on the mel scale
    (mel = 2595 log10(1 + hz / 700)), their edges rounded down to DFT bins."""
    mels, n = _scalar(num_mel_bins, "num_mel_bins"), _scalar(dft_length, "dft_length")
    rate = _scalar(sample_rate, "sample_rate")
    low, high = (2595 * np.log10(1 + float(np.asarray(v).reshape(())) / 700)
                 for v in (lower_edge_hertz, upper_edge_hertz))
    points = np.arange(mels + 2) * (high - low) / (mels + 2) + low
    hertz = 700 * (10 ** (points / 2595) - 1)
    edges = ((n + 1) * hertz // rate).astype(np.int64)
    out = np.zeros((n // 2 + 1, mels))
    bins = np.arange(n // 2 + 1)
    for i in range(mels):
        left, center, right = edges[i:i + 3]
        if center == left:
            out[center, i] = 1
        else:
            rising = (bins >= left) & (bins <= center)
            out[rising, i] = (bins[rising] - left) / (center - left)
        if right > center:
            falling = (bins >= center) & (bins < right)
            out[falling, i] = (right - bins[falling]) / (right - center)
    return out.astype(element_type(output_datatype))
