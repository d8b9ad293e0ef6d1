"""The inference engine: a real transformer in NumPy (see pipeline.model), loaded from a
Hugging Face style directory (pipeline.loader)."""
from .kvcache import KVCache
from .loader import DEFAULT_MODEL_DIR, ModelLoadError, load_model
from .model import Model, ModelConfig

__all__ = ["load_model", "Model", "ModelConfig", "ModelLoadError", "KVCache",
           "DEFAULT_MODEL_DIR"]
