"""The graph IR shared by the converter, the quantizer, the runtime and the HTP compiler."""

from .graph import DEFAULT_PACKAGE, Graph, Model, Node, TensorInfo, array_digest, freeze, thaw

__all__ = ["DEFAULT_PACKAGE", "Graph", "Model", "Node", "TensorInfo", "array_digest", "freeze",
           "thaw"]
