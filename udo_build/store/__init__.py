"""store stage of udo-build."""
