"""The training stages and how they run: profiles, the training set, SFT, RFT, GRPO, the staged job, the run's
record, and launching it (ranks, accelerate, slurm). Uses the environment, the models and evaluation."""
