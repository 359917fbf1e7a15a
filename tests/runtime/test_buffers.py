"""The float session's pool of dead tensors (udo_build.runtime.buffers): what it keeps, what it
must never keep (an array someone can still see), its bounds, and a session whose convolutions
reuse them giving the same numbers run after run, whatever the caller holds on to."""

from __future__ import annotations

import numpy as np
import pytest

from udo_build.ir import Graph, Model, Node, TensorInfo
from udo_build.kernels import compiled
from udo_build.runtime import buffers as buffers_module
from udo_build.runtime.buffers import Buffers
from udo_build.runtime.float_session import Session


def test_a_dead_array_no_one_sees_is_kept_and_lent_once() -> None:
    pool = Buffers()
    env = {"a": np.empty((3, 4), np.float32), "b": np.empty((3, 4), np.float64)}
    pool.give(env.pop("a"))
    assert pool.held() == 0  # no convolution makes this shape yet
    pool.want((3, 4), "float32")
    env["a"] = np.empty((3, 4), np.float32)
    pool.give(env.pop("a"))
    pool.give(env.pop("b"))  # another dtype
    assert pool.held() == 48
    lent = pool.take((3, 4), np.float32)
    assert lent is not None and lent.shape == (3, 4) and pool.held() == 0
    assert pool.take((3, 4), np.float32) is None
    assert pool.take((4, 3), np.float32) is None


def test_arrays_someone_can_still_see_are_not_kept() -> None:
    pool = Buffers()
    pool.want((10,), "float32")
    pool.want((8,), "float32")
    base = np.empty(10, np.float32)
    held = np.empty(10, np.float32)
    read_only = np.empty(10, np.float32)
    read_only.flags.writeable = False
    env = {"view": base[2:], "held": held, "read-only": read_only, "scalar": 3.0,
           "empty": np.empty(0, np.float32)}
    for name in list(env):
        pool.give(env.pop(name))
    assert pool.held() == 0
    viewed = np.empty(10, np.float32)
    view = viewed[1:]
    env = {"viewed": viewed}
    del viewed
    pool.give(env.pop("viewed"))  # its view holds it
    assert pool.held() == 0 and view.base is not None


def test_the_bounds_let_arrays_go(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(buffers_module, "TOTAL", 100)
    pool = Buffers()
    pool.want((2,), "float32")
    pool.want((30,), "float32")
    for _ in range(buffers_module.PER_SHAPE + 2):
        env = {"a": np.empty(2, np.float32)}
        pool.give(env.pop("a"))
    assert pool.held() == 8 * buffers_module.PER_SHAPE
    env = {"big": np.empty(30, np.float32)}
    pool.give(env.pop("big"))  # 120 bytes more than TOTAL allows
    assert pool.held() == 8 * buffers_module.PER_SHAPE


def _chain() -> Model:
    """x -> Conv -> Relu -> Conv -> Relu -> Conv -> y: each conv output of one shape dies after
    the next one reads it, so the third convolution can reuse the first one's array."""
    rng = np.random.default_rng(1)
    weights = {f"w{i}": rng.standard_normal((8, 8, 3, 3)).astype(np.float32) * 0.2
               for i in range(3)}
    nodes = []
    current = "x"
    for i in range(3):
        nodes.append(Node.make(f"conv{i}", "Conv", [current, f"w{i}"], [f"c{i}"],
                               {"pads": [1, 1, 1, 1]}))
        current = f"c{i}"
        if i < 2:
            nodes.append(Node.make(f"relu{i}", "Relu", [current], [f"r{i}"]))
            current = f"r{i}"
    shape = (1, 8, 20, 20)
    values = tuple(TensorInfo(n, "float32", shape) for n in ("c0", "r0", "c1", "r1"))
    graph = Graph("g", (TensorInfo("x", "float32", shape),),
                  (TensorInfo("c2", "float32", shape),), tuple(nodes), values)
    return Model(graph, weights)


def test_a_session_reuses_dead_tensors_and_gives_the_same_numbers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(compiled.SWITCH, raising=False)
    if compiled.library() is None:
        pytest.skip("no C compiler (or it failed): the compiled convolution cannot run here")
    session = Session(_chain())
    x = np.random.default_rng(2).standard_normal((1, 8, 20, 20)).astype(np.float32)
    lent: list[int] = []
    original = Buffers.take

    def counting(self: Buffers, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray | None:
        found = original(self, shape, dtype)
        lent.append(found is not None)
        return found

    monkeypatch.setattr(Buffers, "take", counting)
    first = session.run({"x": x})["c2"]
    results = [session.run({"x": x})["c2"] for _ in range(3)]
    assert sum(lent) >= 4  # later runs convolve into dead tensors
    for result in results:  # the arrays a caller holds are never lent out again
        np.testing.assert_array_equal(result, first)
    assert len({id(r) for r in results}) == 3
    # a caller keeping every streamed tensor: none of them is overwritten by a later step
    kept = dict(session.stream({"x": x}, ["c0", "r0", "c1", "r1", "c2"]))
    again = dict(session.stream({"x": x}, ["c0", "r0", "c1", "r1", "c2"]))
    for name, value in kept.items():
        np.testing.assert_array_equal(value, again[name])
    direct = session.run({"x": x}, ["c0", "c1", "c2"])
    for name, value in direct.items():
        np.testing.assert_array_equal(value, kept[name])


def test_a_plan_built_after_loading_packs_its_weights_before_its_first_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Calibration and quant reports build their plan before forking their workers: its
    weights are packed then, in one process, not once per worker on its first run."""
    monkeypatch.delenv(compiled.SWITCH, raising=False)
    if compiled.library() is None:
        pytest.skip("no C compiler (or it failed): the compiled convolution cannot run here")
    session = Session(_chain())

    def packed(outputs: tuple[str, ...]) -> list[bool]:
        return [bool(step.kwargs["packed"]._packings) for step in session.plan(outputs).steps
                if "packed" in step.kwargs]

    assert packed(("c2",)) == [False, False, False]  # the load's own plan: on its first run
    assert packed(("c0", "c1", "c2")) == [True, True, True]
    x = np.random.default_rng(3).standard_normal((1, 8, 20, 20)).astype(np.float32)
    first = session.run({"x": x}, ["c0", "c1", "c2"])
    again = session.run({"x": x}, ["c2"])
    np.testing.assert_array_equal(first["c2"], again["c2"])
    assert packed(("c2",)) == [True, True, True]


def test_max_pools_take_dead_tensors_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """x -> MaxPool -> Relu -> MaxPool -> y: from the second run on, each MaxPool writes into
    an array of its shape that died in the run before; the results stay those of the first."""
    monkeypatch.delenv(compiled.SWITCH, raising=False)
    if compiled.library() is None:
        pytest.skip("no C compiler (or it failed): the compiled MaxPool cannot run here")
    pool = {"kernel_shape": [3, 3], "strides": [2, 2]}
    nodes = (Node.make("p0", "MaxPool", ["x"], ["p0"], pool), Node.make("r", "Relu", ["p0"], ["r"]),
             Node.make("p1", "MaxPool", ["r"], ["y"], pool))
    graph = Graph("g", (TensorInfo("x", "float32", (1, 4, 33, 33)),),
                  (TensorInfo("y", "float32", (1, 4, 7, 7)),), nodes,
                  (TensorInfo("p0", "float32", (1, 4, 16, 16)),
                   TensorInfo("r", "float32", (1, 4, 16, 16))))
    session = Session(Model(graph, {}))
    lent: list[tuple[int, ...]] = []
    original = Buffers.take

    def counting(self: Buffers, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray | None:
        found = original(self, shape, dtype)
        if found is not None:
            lent.append(tuple(shape))
        return found

    monkeypatch.setattr(Buffers, "take", counting)
    x = np.random.default_rng(4).standard_normal((1, 4, 33, 33)).astype(np.float32)
    first = session.run({"x": x})["y"]
    results = [session.run({"x": x})["y"] for _ in range(3)]
    assert lent.count((1, 4, 16, 16)) == 3  # the first MaxPool's, run after run
    for result in [first, *results]:
        np.testing.assert_array_equal(result, first)
    assert len({id(r) for r in [first, *results]}) == 4
