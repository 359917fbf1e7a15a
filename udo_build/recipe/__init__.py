"""The recipe: schema, loading with positions, matrix expansion."""

from .load import find_root, load_recipe
from .model import Dims, Outputs, Recipe, Target

__all__ = ["Dims", "Outputs", "Recipe", "Target", "find_root", "load_recipe"]
