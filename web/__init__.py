"""The web side of the explainer: validation, the section registry, views and figure builders.

Only `web.figures` imports Plotly; `pipeline` knows nothing of Flask.
"""
