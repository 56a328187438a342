"""torchlint: find and fix the PyTorch mistakes that leave a GPU idle."""

__version__ = "0.1.0"
