"""Tests of train/stages/."""
