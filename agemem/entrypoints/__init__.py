"""The composition root: the command line, ``MemoryAgent``, chat, the demo and export.

The only layer allowed to import every other one (as prime-rl keeps ``entrypoints/`` on top).
"""
