"""The one error every model loader raises (pipeline.loader for Hugging Face directories,
pipeline.gguf_file for llama.cpp's files): its own module, so that neither loader imports the
other for it."""


class ModelLoadError(Exception):
    """A model directory or file that cannot be loaded; the message names the file (and the key
    or tensor)."""
