"""htp stage of udo-build."""
