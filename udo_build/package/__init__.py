"""package stage of udo-build."""
