"""The chord-kernels version (kept apart so that modules can name it without importing the package)."""

__version__ = "0.2.0"
