"""One module per section of the explainer: its parameters and its `build(model, state)`."""
