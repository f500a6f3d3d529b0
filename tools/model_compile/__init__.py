"""model-compile: review tools for torch.compile wiring in recipe-based training repos."""

__version__ = "0.1.0"
