"""ir stage of udo-build."""
