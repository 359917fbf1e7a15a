"""model stage of udo-build."""
