"""Step-wise GRPO: advantages, samples, loss, the update and the training loop."""
