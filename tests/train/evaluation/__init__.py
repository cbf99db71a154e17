"""Tests of train/evaluation/."""
