"""quant stage of udo-build."""
