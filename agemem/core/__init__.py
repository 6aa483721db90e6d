"""The core layer: memory environment, memory stores, tool protocol, prompts and configuration.

Nothing here imports the layers above it (rollouts, rewards, train, eval, recipes, entrypoints);
``.importlinter`` checks that in CI (``.ci/layers.sh``).
"""
