"""Presentation: how the page writes numbers (numbers) and tokens (tokens, shading), the
glossary, the tour and presentation mode, the predict-first answers, and the page-wide texts
computed once (overview, precision, distribution)."""
