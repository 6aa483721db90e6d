"""Evaluation harnesses: HotpotQA, ALFWorld and the streaming memory-management benchmarks."""
