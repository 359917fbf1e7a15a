"""Generate a Llama-style decoder (random weights, seeded) as an ONNX model with a KV cache.

    python examples/llama/make_model.py [--size tiny|1b] [--tokens S] [--context C] [--out DIR]

The model, at opset 17, for S new tokens over a cache of P = C - S past positions:

    inputs   input_ids, position_ids [1, S] (int64), attention_mask [1, 1, S, C] (additive:
             0 attends, MASKED does not), past_key_<i>, past_value_<i> [1, KV, P, Dh] per layer
    x = Gather(embed_tokens, input_ids)                              [1, S, D]
    each layer i:
      h = RmsNorm(x, g)                          custom (examples/encoder/ops/rmsnorm.xml)
      q = Rope(heads(h @ Wq), position_ids)       custom (examples/decoder/ops/rope.xml)
      k = Rope(heads(h @ Wk), position_ids), v = heads(h @ Wv)       [1, KV, S, Dh]
      present_key_<i> = Concat(past_key_<i>, k), present_value_<i> likewise  [1, KV, C, Dh]
      grouped-query attention: each of the KV heads serves H / KV query heads (the cache is
      repeated by Reshape + Concat, 4-D throughout)
      x = x + Softmax(q k^T / sqrt(Dh) + attention_mask) v @ Wo
      x = x + (Silu(h2 @ Wgate) * (h2 @ Wup)) @ Wdown, h2 = RmsNorm(x, g2)
    logits = RmsNorm(x, g) @ lm_head                                 [1, S, V]

Sizes: `tiny` (2 layers, D=128, 4 heads / 2 KV heads, FFN 352, vocabulary 512: 0.6M
parameters, the weights inside the model file), `small` (2 layers, D=256, FFN 704, vocabulary
4096: 3.6M parameters) and `medium` (4 layers, D=1024, 16 heads / 4 KV heads, FFN 2816,
vocabulary 16000: 78M parameters), `large` (medium's shape with 28 layers: 349M parameters,
1.4 GB of float32 weights, the largest tensor the 62 MB embedding: too many weights to hold
under bench/llm.py's memory bound, small enough to build in minutes), all with external data
(bench/llm.py's smaller runs), and `1b` (TinyLlama-1.1B's shape: 22 layers,
D=2048, 32 heads / 4 KV heads, FFN 5632, vocabulary 32000: 1.1G parameters, 4.4 GB of float32
weights in one external data file beside the model, written one tensor at a time: generating it
never holds more than the largest tensor, the 262 MB embedding).

The KV cache is fixed-size, the newest positions last: a step's present_<kind>_<i> (past and
new) fed forward as the next step's past_<kind>_<i> keeps its newest P' positions, the mask
attending the filled ones (recipes/llm_tiny.yaml's generation run does this, naming the cache
`cache: {past: "past_{kind}_{layer}", present: "present_{kind}_{layer}"}`: the convention of
udo_build.runtime.generate, whose default names are optimum's past_key_values.<i>.key and
present.<i>.key).

The same arguments always write the same bytes (a seeded generator per tensor, in order).
The custom ops' output shapes are recorded as value_info, as exporters do.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DOMAIN = "aisw"
THETA = 10000.0
EPS = 1e-6
MASKED = -255.0  # exp(-255) is 0 in float32; small enough a range for 16-bit activations
ALIGN = 4096  # external tensors start on page boundaries (mappable)


@dataclass(frozen=True)
class Size:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    external: bool

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def parameters(self) -> int:
        d, kv = self.hidden, self.kv_heads * self.head_dim
        layer = 2 * d * d + 2 * d * kv + 3 * d * self.ffn + 2 * d
        return self.layers * layer + 2 * self.vocab * d + d


SIZES = {"tiny": Size(2, 128, 4, 2, 352, 512, external=False),
         "small": Size(2, 256, 4, 2, 704, 4096, external=True),
         "medium": Size(4, 1024, 16, 4, 2816, 16000, external=True),
         "large": Size(28, 1024, 16, 4, 2816, 16000, external=True),
         "1b": Size(22, 2048, 32, 4, 5632, 32000, external=True)}


class Weights:
    """The initializers: in the model, or appended to one external data file."""

    def __init__(self, seed: int, data: BinaryIO | None, location: str) -> None:
        self.rng = np.random.default_rng(seed)
        self.data, self.location = data, location
        self.inits: list[onnx.TensorProto] = []

    def add(self, name: str, value: np.ndarray) -> str:
        value = np.asarray(value, order="C")  # a 0-d value stays 0-d
        if self.data is None or value.nbytes < ALIGN:
            self.inits.append(numpy_helper.from_array(value, name))
            return name
        offset = -(-self.data.tell() // ALIGN) * ALIGN
        self.data.write(b"\0" * (offset - self.data.tell()))
        self.data.write(memoryview(value.astype(value.dtype.newbyteorder("<"), copy=False)))
        tensor = TensorProto(name=name, data_type=helper.np_dtype_to_tensor_dtype(value.dtype),
                             dims=value.shape)
        tensor.data_location = TensorProto.EXTERNAL
        for key, text in (("location", self.location), ("offset", str(offset)),
                          ("length", str(value.nbytes))):
            tensor.external_data.add(key=key, value=text)
        self.inits.append(tensor)
        return name

    def matrix(self, name: str, fan_in: int, fan_out: int) -> str:
        w = self.rng.standard_normal((fan_in, fan_out), dtype=np.float32)
        w *= np.float32(1.0 / math.sqrt(fan_in))
        return self.add(name, w)

    def gain(self, name: str, size: int) -> str:
        g = self.rng.standard_normal(size, dtype=np.float32)
        return self.add(name, 1.0 + np.float32(0.1) * g)


class Decoder:
    """Builds the graph: each method adds nodes and returns its output's name."""

    def __init__(self, size: Size, weights: Weights, tokens: int) -> None:
        self.size, self.w, self.tokens = size, weights, tokens
        self.nodes: list[onnx.NodeProto] = []
        self.shapes: list[onnx.ValueInfoProto] = []  # the custom ops' outputs

    def node(self, op: str, inputs: list[str], name: str, domain: str = "", **attrs) -> str:
        self.nodes.append(helper.make_node(op, inputs, [name], name=name, domain=domain,
                                           **attrs))
        return name

    def const(self, name: str, values: list[int]) -> str:
        return self.w.add(name, np.array(values, np.int64))

    def custom(self, op: str, inputs: list[str], name: str, shape: list[int], **attrs) -> str:
        self.shapes.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
        return self.node(op, inputs, name, domain=DOMAIN, **attrs)

    def norm(self, x: str, name: str) -> str:
        gain = self.w.gain(f"{name}.weight", self.size.hidden)
        return self.custom("RmsNorm", [x, gain], name, [1, self.tokens, self.size.hidden],
                           epsilon=EPS)

    def linear(self, x: str, name: str, fan_in: int, fan_out: int) -> str:
        return self.node("MatMul", [x, self.w.matrix(f"{name}.weight", fan_in, fan_out)], name)

    def heads(self, x: str, name: str, count: int) -> str:
        shape = self.const(f"{name}.shape", [1, -1, count, self.size.head_dim])
        return self.node("Transpose", [self.node("Reshape", [x, shape], f"{name}_reshape")],
                         name, perm=[0, 2, 1, 3])

    def repeated(self, cache: str, name: str) -> str:
        """[1, KV, C, Dh] -> [1, H, C, Dh]: each KV head once per query head it serves."""
        s = self.size
        group = s.heads // s.kv_heads
        if group == 1:
            return cache
        split = self.node("Reshape", [cache, self.const(f"{name}.split", [s.kv_heads, 1, -1,
                                                                          s.head_dim])],
                          f"{name}_split")
        copies = self.node("Concat", [split] * group, f"{name}_copies", axis=1)
        return self.node("Reshape", [copies, self.const(f"{name}.merge", [1, s.heads, -1,
                                                                          s.head_dim])], name)

    def attention(self, h: str, i: int) -> str:
        s, p = self.size, f"layers.{i}.self_attn"
        kv = s.kv_heads * s.head_dim
        rope = [1, s.heads, self.tokens, s.head_dim]
        q = self.custom("Rope", [self.heads(self.linear(h, f"{p}.q_proj", s.hidden, s.hidden),
                                            f"{p}.q_heads", s.heads), "position_ids"],
                        f"{p}.q_rope", rope, theta=THETA)
        k = self.custom("Rope", [self.heads(self.linear(h, f"{p}.k_proj", s.hidden, kv),
                                            f"{p}.k_heads", s.kv_heads), "position_ids"],
                        f"{p}.k_rope", [1, s.kv_heads, self.tokens, s.head_dim], theta=THETA)
        v = self.heads(self.linear(h, f"{p}.v_proj", s.hidden, kv), f"{p}.v_heads", s.kv_heads)
        keys = self.node("Concat", [f"past_key_{i}", k], f"present_key_{i}", axis=2)
        values = self.node("Concat", [f"past_value_{i}", v], f"present_value_{i}", axis=2)
        keys_t = self.node("Transpose", [self.repeated(keys, f"{p}.keys")], f"{p}.keys_t",
                           perm=[0, 1, 3, 2])
        scale = self.w.add(f"{p}.scale", np.array(1.0 / math.sqrt(s.head_dim), np.float32))
        scores = self.node("Mul", [self.node("MatMul", [q, keys_t], f"{p}.scores"), scale],
                           f"{p}.scaled")
        probs = self.node("Softmax", [self.node("Add", [scores, "attention_mask"],
                                                f"{p}.masked")], f"{p}.probs", axis=-1)
        context = self.node("MatMul", [probs, self.repeated(values, f"{p}.values")],
                            f"{p}.context")
        merged = self.node("Reshape", [self.node("Transpose", [context], f"{p}.context_t",
                                                 perm=[0, 2, 1, 3]),
                                       self.const(f"{p}.merge", [1, -1, s.hidden])],
                           f"{p}.merged")
        return self.linear(merged, f"{p}.o_proj", s.hidden, s.hidden)

    def mlp(self, h: str, i: int) -> str:
        s, p = self.size, f"layers.{i}.mlp"
        gate = self.linear(h, f"{p}.gate_proj", s.hidden, s.ffn)
        silu = self.node("Mul", [gate, self.node("Sigmoid", [gate], f"{p}.gate_sigmoid")],
                         f"{p}.gate_silu")
        up = self.linear(h, f"{p}.up_proj", s.hidden, s.ffn)
        return self.linear(self.node("Mul", [silu, up], f"{p}.gated"), f"{p}.down_proj",
                           s.ffn, s.hidden)

    def build(self) -> str:
        s = self.size
        embed = self.w.matrix("embed_tokens.weight", s.vocab, s.hidden)
        x = self.node("Gather", [embed, "input_ids"], "embed")
        for i in range(s.layers):
            x = self.node("Add", [x, self.attention(self.norm(x, f"layers.{i}.input_norm"), i)],
                          f"layers.{i}.residual1")
            x = self.node("Add", [x, self.mlp(self.norm(x, f"layers.{i}.post_norm"), i)],
                          f"layers.{i}.residual2")
        return self.linear(self.norm(x, "norm"), "logits", s.hidden, s.vocab)


def build_model(size: Size, tokens: int, context: int, data: BinaryIO | None = None,
                location: str = "", seed: int = 20261128) -> onnx.ModelProto:
    """The decoder for `tokens` new tokens at context length `context` (its weights appended
    to `data`, named `location`, when given)."""
    if not 1 <= tokens <= context:
        raise ValueError(f"tokens must be 1 to the context length {context}, not {tokens}")
    decoder = Decoder(size, Weights(seed, data, location), tokens)
    decoder.build()
    f32, past = TensorProto.FLOAT, context - tokens
    cache = [1, size.kv_heads, past, size.head_dim]
    present = [1, size.kv_heads, context, size.head_dim]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, tokens]),
              helper.make_tensor_value_info("position_ids", TensorProto.INT64, [1, tokens]),
              helper.make_tensor_value_info("attention_mask", f32, [1, 1, tokens, context])]
    outputs = [helper.make_tensor_value_info("logits", f32, [1, tokens, size.vocab])]
    for i in range(size.layers):
        inputs += [helper.make_tensor_value_info(f"past_{kind}_{i}", f32, cache)
                   for kind in ("key", "value")]
        outputs += [helper.make_tensor_value_info(f"present_{kind}_{i}", f32, present)
                    for kind in ("key", "value")]
    graph = helper.make_graph(decoder.nodes, "llama", inputs, outputs,
                              initializer=decoder.w.inits, value_info=decoder.shapes)
    model = helper.make_model(graph, producer_name="udo-build-example", producer_version="1",
                              opset_imports=[helper.make_opsetid("", 17),
                                             helper.make_opsetid(DOMAIN, 1)])
    model.ir_version = 8
    return model


def write_model(size_name: str, folder: Path, tokens: int, context: int) -> Path:
    """Write llama_<size>.onnx (and llama_<size>.data for external sizes) into `folder`."""
    size = SIZES[size_name]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"llama_{size_name}.onnx"
    if not size.external:
        path.write_bytes(build_model(size, tokens, context).SerializeToString())
        return path
    location = f"llama_{size_name}.data"
    with open(folder / location, "wb") as data:
        model = build_model(size, tokens, context, data, location)
    path.write_bytes(model.SerializeToString())
    return path


def causal_mask(tokens: int, context: int, filled: int) -> np.ndarray:
    """The additive mask of `tokens` new tokens after `filled` cached ones (the newest last):
    token t attends the filled past and the new tokens up to itself."""
    mask = np.full((1, 1, tokens, context), MASKED, "<f4")
    past = context - tokens
    mask[..., past - filled:past] = 0.0
    for t in range(tokens):
        mask[0, 0, t, past:past + t + 1] = 0.0
    return mask


def write_steps(root: Path, name: str, size_name: str, tokens: int, context: int, steps: int,
                seed: int) -> Path:
    """An input list `<name>.txt` in `root` (files in `root/<name>/`, raw little-endian
    float32, the ids and positions too: the input list's convention) of `steps` steps of
    `tokens` random tokens after a cache filled to a random length. The cached keys and values
    are standard normal stand-ins: what the model's projections of RMS-normalized states give
    in distribution, not the keys of real tokens."""
    size, rng = SIZES[size_name], np.random.default_rng(seed)
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    past = context - tokens
    cache = (1, size.kv_heads, past, size.head_dim)
    lines = []
    for step in range(steps):
        filled = int(rng.integers(0, past + 1))
        arrays = {"input_ids": rng.integers(0, size.vocab, (1, tokens)),
                  "position_ids": filled + np.arange(tokens)[None, :],
                  "attention_mask": causal_mask(tokens, context, filled)}
        for i in range(size.layers):
            for kind in ("key", "value"):
                values = np.zeros(cache, "<f4")
                values[:, :, past - filled:] = rng.standard_normal(
                    (1, size.kv_heads, filled, size.head_dim))
                arrays[f"past_{kind}_{i}"] = values
        entries = []
        for key, value in arrays.items():
            (folder / f"{key}_{step:03d}.raw").write_bytes(value.astype("<f4").tobytes())
            entries.append(f"{key}:={name}/{key}_{step:03d}.raw")
        lines.append(" ".join(entries) + "\n")
    (root / f"{name}.txt").write_text("".join(lines))
    return root / f"{name}.txt"


def write_prompt(path: Path, size_name: str, length: int, seed: int) -> Path:
    """A prompt file of `length` random token ids (the generation run's: the model's weights
    are random too, so any text is as good as another)."""
    ids = np.random.default_rng(seed).integers(0, SIZES[size_name].vocab, length)
    path.write_text("# token ids, the prompt of the generation run of recipes/llm_tiny.yaml\n"
                    + " ".join(map(str, ids)) + "\n")
    return path


def write_sequences(path: Path, size_name: str, lengths: tuple[int, ...], seed: int) -> Path:
    """A sequences file (quantize.sequences): one random token id sequence of each length per
    line, which calibration prefills through the model with its own KV cache."""
    rng = np.random.default_rng(seed)
    path.write_text("# token id sequences calibrating recipes/llm_tiny.yaml, one per line\n"
                    + "".join(" ".join(map(str, rng.integers(0, SIZES[size_name].vocab, n)))
                              + "\n" for n in lengths))
    return path


def write_example(folder: Path) -> None:
    """The tiny example of recipes/llm_tiny.yaml: the model (AR-128 at context 256; the recipe
    prepares AR-1 too, through its input dimensions) and its data: calibration steps at
    AR-128 (the prompt's activations cover a token's: calibrated at AR-1, AR-128 records
    lose 7 dB), held-out test steps at AR-1 and AR-128, and the 12 token ids of the prompt
    the generation run starts from."""
    write_model("tiny", folder / "model", 128, 256)
    data = folder / "data"
    write_steps(data, "calib_ar128", "tiny", 128, 256, 8, seed=1)
    write_steps(data, "test_ar1", "tiny", 1, 256, 2, seed=2)
    write_steps(data, "test_ar128", "tiny", 128, 256, 1, seed=3)
    write_prompt(data / "prompt.txt", "tiny", 12, seed=4)
    write_sequences(data / "calib_tokens.txt", "tiny", (40, 200, 256, 256), seed=5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--tokens", type=int, default=1, help="new tokens per step (AR-n)")
    parser.add_argument("--context", type=int, default=256, help="context length (P + S)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "model")
    parser.add_argument("--example", action="store_true",
                        help="write the tiny example of recipes/llm_tiny.yaml (model and data) "
                        "next to this script")
    args = parser.parse_args(argv)
    if args.example:
        write_example(Path(__file__).resolve().parent)
        print("wrote the tiny example: model/llama_tiny.onnx and data/")
        return 0
    path = write_model(args.size, args.out, args.tokens, args.context)
    print(f"wrote {path}: {SIZES[args.size].parameters():,} parameters, AR-{args.tokens} at "
          f"context {args.context}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
