"""The orchestrator's training, by role: environment/ (what an agent meets), models/ (loading and checkpoints),
evaluation/ (held-out measurement), stages/ (SFT, RFT, GRPO, launching); imports point that way, never back."""
