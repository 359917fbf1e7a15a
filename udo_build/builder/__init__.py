"""build stage of udo-build."""
