"""Fixes applied to a copy of the user's setup and measured before/after in fresh processes."""
