"""Parsers: raw artefacts (metrics report text, PT_XLA_DEBUG logs) into typed objects.

They import neither torch nor torch_xla, so analysis runs on any machine.
"""
