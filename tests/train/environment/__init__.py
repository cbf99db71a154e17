"""Tests of train/environment/."""
