"""The recipe: schema, loading with positions, matrix expansion."""

from ..source import find_root
from .load import load_recipe
from .model import Dims, Outputs, Recipe, RecordTarget

__all__ = ["Dims", "Outputs", "Recipe", "RecordTarget", "find_root", "load_recipe"]
