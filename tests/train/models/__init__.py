"""Tests of train/models/."""
