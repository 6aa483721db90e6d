"""Task loaders, the three-stage episode, distractor generators, generation engines and the batched episode driver."""
