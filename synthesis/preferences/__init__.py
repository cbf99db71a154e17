"""Preference pairs (instruction PI, vector P over a tool set) for preference-aware orchestration training."""
