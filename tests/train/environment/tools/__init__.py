"""Tests of train/environment/tools/."""
