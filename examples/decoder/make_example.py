"""Generate the decoder example: one LLaMA-style decoder block decoding one token with a
fixed-size KV cache and an attention mask, with a custom rotary position embedding (RoPE) op and
the fused RMSNorm of examples/encoder.

    python examples/decoder/make_example.py

The block (D=64, 4 heads of 16, SwiGLU FFN 128, a cache of P=31 past positions), at opset 17:

    inputs   x [1, 1, 64], position [1, 1] (int64), past_key, past_value [1, 4, 31, 16],
             attention_mask [1, 1, 1, 32] (additive: 0 attends, MASKED = -255 does not)
    h  = RmsNorm(x, g1)                                 custom (examples/encoder/ops)
    q, k, v = h @ Wq, h @ Wk, h @ Wv, to heads [1, 4, 1, 16]
    q, k = Rope(q, position), Rope(k, position)         custom, ops/rope.xml
    present_key = Concat(past_key, k), present_value = Concat(past_value, v)   [1, 4, 32, 16]
    a  = Softmax(q @ present_key^T / 4 + attention_mask) @ present_value, to [1, 1, 64], @ Wo
    x1 = x + a
    y  = x1 + (Silu(h2 @ Wg) * (h2 @ Wu)) @ Wd, h2 = RmsNorm(x1, g2)

The cache is the vendor runtimes' fixed-size one (their LLM deployments keep a KV cache of a
fixed length and an attention mask; executorch's Qualcomm runner calls this layout "shift
pointer"): the newest position is last, the next step's past is the present without its oldest
position (a sliding window of P), and the mask slides with it. A sequence starts with an empty
cache (zeros) whose every past position is masked: after t steps the last t past positions hold
tokens and attend (0), the others stay masked, and beyond P steps the window slides. A decode
run entry of the recipe (README, "run entries") chains it this way: feed {present_key: past_key,
present_value: past_value}, position advanced by 1, mask sliding.

Writes, next to this script:
  model/decoder.onnx                  the model; outputs y, present_key, present_value
  data/calib/*.raw, data/calib.txt    512 calibration steps over 16 caches filled to lengths
                                      from empty to full with the keys and values of random
                                      tokens (class Tokens; name:=path lines)
  data/test/*.raw, data/test.txt      8 held-out steps over 4 other caches
  data/decode/*.raw, data/decode.txt  a sequence to decode: its first line is the first step
                                      (position 0, an empty cache, everything masked but the
                                      token itself); each later line gives a later token's x
                                      (the decode derives the cache, position and mask)
Inputs are raw little-endian float32 (the position too: the input list's convention).

`build_model(reference=True)` is the same block with the custom ops replaced by their standard-op
decompositions (RoPE from cos/sin tables gathered at the position, as exporters write it), which
onnxruntime runs. The same script always writes the same bytes (fixed seeds).
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent

def _encoder_example() -> ModuleType:
    """examples/encoder/make_example.py (its Builder and RmsNorm), under its own name."""
    path = HERE.parent / "encoder" / "make_example.py"
    spec = importlib.util.spec_from_file_location("udo_example_encoder", path)
    assert spec is not None and spec.loader is not None
    module = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))
    if not hasattr(module, "Builder"):
        spec.loader.exec_module(module)
    return module


ENCODER = _encoder_example()
DOMAIN, Builder, rms_norm = ENCODER.DOMAIN, ENCODER.Builder, ENCODER.rms_norm

D, HEADS, FFN, PAST, THETA, MAX_POSITIONS = 64, 4, 128, 31, 10000.0, 256
DH = D // HEADS
CACHE_SHAPE = (1, HEADS, PAST, DH)
PRESENT_SHAPE = [1, HEADS, PAST + 1, DH]
MASK_SHAPE = (1, 1, 1, PAST + 1)
MASKED = -255.0  # an additive mask's "do not attend": exp(-255) is 0 in float32, and the
# range stays small enough for 16-bit activations to keep the scores' precision
DECODE_STEPS = 32


def rope_tables() -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of position * theta^(-2i/DH), [MAX_POSITIONS, DH/2]: what the Rope op
    computes at each position, as a table."""
    inv_freq = THETA ** (-np.arange(0, DH, 2, dtype=np.float64) / DH)
    angles = np.arange(MAX_POSITIONS, dtype=np.float64)[:, None] * inv_freq
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def rope(b: Builder, x: str, name: str, reference: bool) -> str:
    """The Rope UDO, or (reference) rotate-half from gathered cos/sin tables:
    [x1, x2] -> [x1 cos - x2 sin, x2 cos + x1 sin]."""
    if not reference:
        return b.node("Rope", [x, "position"], name, domain=DOMAIN, theta=THETA)
    axes = b.const(f"{name}.axes", np.array([1], np.int64))
    tables = []
    for kind, table in zip(("cos", "sin"), rope_tables(), strict=True):
        rows = b.node("Gather", [b.const(f"{name}.{kind}", table), "position"],
                      f"{name}_{kind}_gather")
        tables.append(b.node("Unsqueeze", [rows, axes], f"{name}_{kind}"))
    cos, sin = tables
    half = b.const(f"{name}.split", np.array([DH // 2, DH // 2], np.int64))
    b.nodes.append(helper.make_node("Split", [x, half], [f"{name}_x1", f"{name}_x2"],
                                    name=f"{name}_split", axis=-1))
    x1, x2 = f"{name}_x1", f"{name}_x2"
    first = b.node("Sub", [b.node("Mul", [x1, cos], f"{name}_x1cos"),
                           b.node("Mul", [x2, sin], f"{name}_x2sin")], f"{name}_first")
    second = b.node("Add", [b.node("Mul", [x2, cos], f"{name}_x2cos"),
                            b.node("Mul", [x1, sin], f"{name}_x1sin")], f"{name}_second")
    return b.node("Concat", [first, second], name, axis=-1)


def to_heads(b: Builder, x: str, name: str) -> str:
    shape = b.const(f"{name}.shape", np.array([0, -1, HEADS, DH], np.int64))
    return b.node("Transpose", [b.node("Reshape", [x, shape], f"{name}_reshape")], name,
                  perm=[0, 2, 1, 3])


def attention(b: Builder, h: str, reference: bool) -> str:
    q = rope(b, to_heads(b, b.linear(h, "q_proj", D, D, bias=False), "q_heads"), "q_rope",
             reference)
    k = rope(b, to_heads(b, b.linear(h, "k_proj", D, D, bias=False), "k_heads"), "k_rope",
             reference)
    v = to_heads(b, b.linear(h, "v_proj", D, D, bias=False), "v_heads")
    b.nodes.append(helper.make_node("Concat", ["past_key", k], ["present_key"],
                                    name="cache_key", axis=2))
    b.nodes.append(helper.make_node("Concat", ["past_value", v], ["present_value"],
                                    name="cache_value", axis=2))
    keys_t = b.node("Transpose", ["present_key"], "keys_t", perm=[0, 1, 3, 2])
    scale = b.const("scale", np.array(1.0 / np.sqrt(DH), np.float32))
    scores = b.node("Mul", [b.node("MatMul", [q, keys_t], "scores"), scale], "scaled")
    masked = b.node("Add", [scores, "attention_mask"], "masked")
    probs = b.node("Softmax", [masked], "probs", axis=-1)
    ctx = b.node("Transpose", [b.node("MatMul", [probs, "present_value"], "context")],
                 "context_t", perm=[0, 2, 1, 3])
    merged = b.node("Reshape", [ctx, b.const("merge.shape", np.array([0, -1, D], np.int64))],
                    "context_merged")
    return b.linear(merged, "o_proj", D, D, bias=False)


def swiglu(b: Builder, h: str) -> str:
    gate = b.linear(h, "gate_proj", D, FFN, bias=False)
    silu = b.node("Mul", [gate, b.node("Sigmoid", [gate], "gate_sigmoid")], "gate_silu")
    up = b.linear(h, "up_proj", D, FFN, bias=False)
    return b.linear(b.node("Mul", [silu, up], "gated"), "down_proj", FFN, D, bias=False)


def build_model(reference: bool = False) -> onnx.ModelProto:
    b = Builder(seed=20260621)
    h = rms_norm(b, "x", b.gain("norm1.weight"), "norm1", reference)
    x1 = b.node("Add", ["x", attention(b, h, reference)], "residual1")
    h2 = rms_norm(b, x1, b.gain("norm2.weight"), "norm2", reference)
    b.nodes.append(helper.make_node("Add", [x1, swiglu(b, h2)], ["y"], name="residual2"))
    f32 = TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("x", f32, [1, 1, D]),
              helper.make_tensor_value_info("position", TensorProto.INT64, [1, 1]),
              helper.make_tensor_value_info("past_key", f32, list(CACHE_SHAPE)),
              helper.make_tensor_value_info("past_value", f32, list(CACHE_SHAPE)),
              helper.make_tensor_value_info("attention_mask", f32, list(MASK_SHAPE))]
    outputs = [helper.make_tensor_value_info("y", f32, [1, 1, D]),
               helper.make_tensor_value_info("present_key", f32, PRESENT_SHAPE),
               helper.make_tensor_value_info("present_value", f32, PRESENT_SHAPE)]
    # exporters record the shapes of custom ops' outputs (ONNX cannot infer them)
    custom = [("norm1_out", [1, 1, D]), ("norm2_out", [1, 1, D]),
              ("q_rope_out", [1, HEADS, 1, DH]), ("k_rope_out", [1, HEADS, 1, DH])]
    graph = helper.make_graph(
        b.nodes, "decoder_block", inputs, outputs, initializer=b.inits,
        value_info=[] if reference else [helper.make_tensor_value_info(n, f32, s)
                                         for n, s in custom])
    opsets = [helper.make_opsetid("", 17)] + ([] if reference else
                                              [helper.make_opsetid(DOMAIN, 1)])
    model = helper.make_model(graph, producer_name="udo-build-example", producer_version="1",
                              opset_imports=opsets)
    model.ir_version = 8
    return model


def mask(length: int) -> np.ndarray:
    """The additive mask of a cache holding `length` tokens (the last ones) and the new one."""
    values = np.full(MASK_SHAPE, MASKED, "<f4")
    values[..., PAST - length:] = 0.0
    return values


class Tokens:
    """The keys and values the block computes for tokens (they depend on the token alone:
    k = Rope(RmsNorm(x) g1 Wk) at its position, v = RmsNorm(x) g1 Wv), in float64 with exactly
    rounded sums (math.fsum: no BLAS, the same bytes on every machine), to float32; the
    calibration and test caches hold what a sequence of tokens really leaves in the cache."""

    def __init__(self) -> None:
        weights = {t.name: numpy_helper.to_array(t).astype(np.float64)
                   for t in build_model().graph.initializer}
        self.gain = weights["norm1.weight"]
        self.wk, self.wv = weights["k_proj.weight"], weights["v_proj.weight"]

    def _project(self, h: np.ndarray, w: np.ndarray) -> np.ndarray:
        return np.array([math.fsum(h * w[:, j]) for j in range(w.shape[1])]).reshape(HEADS, DH)

    def key_value(self, x: np.ndarray, position: int) -> tuple[np.ndarray, np.ndarray]:
        """[HEADS, DH] each, float32."""
        x = x.astype(np.float64).reshape(-1)
        h = x / math.sqrt(math.fsum(x * x) / D + ENCODER.EPS) * self.gain
        k, v = self._project(h, self.wk), self._project(h, self.wv)
        angles = position * THETA ** (-np.arange(0, DH, 2, dtype=np.float64) / DH)
        cos, sin = np.cos(angles), np.sin(angles)
        k1, k2 = k[:, :DH // 2], k[:, DH // 2:]
        k = np.concatenate([k1 * cos - k2 * sin, k2 * cos + k1 * sin], axis=-1)
        return k.astype("<f4"), v.astype("<f4")

    def cache(self, rng: np.random.Generator, length: int) -> tuple[np.ndarray, np.ndarray]:
        """The caches a sequence of `length` random tokens leaves (positions 0..length-1 in
        the last `length` places, zeros before them)."""
        key, value = np.zeros(CACHE_SHAPE, "<f4"), np.zeros(CACHE_SHAPE, "<f4")
        for position in range(length):
            x = rng.standard_normal(D).astype("<f4")
            key[0, :, PAST - length + position], value[0, :, PAST - length + position] = \
                self.key_value(x, position)
        return key, value


def write_steps(folder: str, steps: int, caches: int, seed: int, tokens: Tokens) -> None:
    """Decoding steps: a token's activations, a cache and its mask and position (the tokens in
    the cache); cache c holds the keys and values of round(c * P / (caches - 1)) random tokens,
    empty to full, the rest zero and masked. The steps share `caches` caches (many tokens
    calibrate the ranges at a small size)."""
    rng = np.random.default_rng(seed)
    root = HERE / "data" / folder
    root.mkdir(parents=True, exist_ok=True)
    for c in range(caches):
        length = round(c * PAST / (caches - 1))
        (root / f"position_{c:02d}.raw").write_bytes(np.full((1, 1), length, "<f4").tobytes())
        (root / f"mask_{c:02d}.raw").write_bytes(mask(length).tobytes())
        for name, cache in zip(("past_key", "past_value"), tokens.cache(rng, length),
                               strict=True):
            (root / f"{name}_{c:02d}.raw").write_bytes(cache.tobytes())
    lines = []
    for i in range(steps):
        (root / f"x_{i:03d}.raw").write_bytes(
            rng.standard_normal((1, 1, D)).astype("<f4").tobytes())
        c = i % caches
        lines.append(f"x:={folder}/x_{i:03d}.raw position:={folder}/position_{c:02d}.raw "
                     f"past_key:={folder}/past_key_{c:02d}.raw "
                     f"past_value:={folder}/past_value_{c:02d}.raw "
                     f"attention_mask:={folder}/mask_{c:02d}.raw\n")
    (root.parent / f"{folder}.txt").write_text("".join(lines))


def write_sequence(folder: str, steps: int, seed: int) -> None:
    """A sequence to decode: the first step's inputs in full (position 0, an empty cache, only
    the token itself unmasked), then each later token's x alone."""
    rng = np.random.default_rng(seed)
    root = HERE / "data" / folder
    root.mkdir(parents=True, exist_ok=True)
    (root / "position.raw").write_bytes(np.zeros((1, 1), "<f4").tobytes())
    (root / "empty_cache.raw").write_bytes(np.zeros(CACHE_SHAPE, "<f4").tobytes())
    (root / "mask.raw").write_bytes(mask(0).tobytes())
    lines = []
    for i in range(steps):
        (root / f"x_{i:03d}.raw").write_bytes(
            rng.standard_normal((1, 1, D)).astype("<f4").tobytes())
        lines.append(f"x:={folder}/x_{i:03d}.raw")
    lines[0] += (f" position:={folder}/position.raw past_key:={folder}/empty_cache.raw "
                 f"past_value:={folder}/empty_cache.raw attention_mask:={folder}/mask.raw")
    (root.parent / f"{folder}.txt").write_text("".join(line + "\n" for line in lines))


def main() -> int:
    (HERE / "model").mkdir(exist_ok=True)
    (HERE / "model" / "decoder.onnx").write_bytes(build_model().SerializeToString())
    tokens = Tokens()
    write_steps("calib", 512, caches=16, seed=1, tokens=tokens)
    write_steps("test", 8, caches=4, seed=2, tokens=tokens)
    write_sequence("decode", DECODE_STEPS, seed=3)
    print(f"wrote {HERE / 'model' / 'decoder.onnx'} and data/ (512 calibration, 8 test steps, "
          f"a sequence of {DECODE_STEPS} tokens)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
