"""Advantages, the step-wise GRPO loss and the training loop on accelerate / DeepSpeed."""
