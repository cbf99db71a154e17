"""Measuring an agent on held-out tasks: the evaluate-orchestrator job, describe-llm-tools, the preference score,
the diagnoses and the plots and summaries a reviewer reads. Uses the environment and the models."""
