"""One module per section of the explainer: its parameters and its `build(lm, state)` (lm: the
loaded model, web.loaded.LoadedModel; lm.model is the pipeline model)."""
