"""udo-build: declarative, incremental builds of networks with custom ops for HTP NPUs."""

__version__ = "0.1.0"
