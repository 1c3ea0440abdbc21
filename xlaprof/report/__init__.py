"""Renderers: they present analysis results and compute nothing new."""
