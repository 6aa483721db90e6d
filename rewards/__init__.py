"""Judges and the composite reward terms (task, context, memory, penalties)."""
