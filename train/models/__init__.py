"""The model being trained or evaluated: loading and converting it, its generators, which checkpoint folders
are complete, and a checkpoint as an episode's agent. Imports nothing else of train/"""
