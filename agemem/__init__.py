"""AgeMem: an LLM agent that manages its long-term and short-term memory through tool calls.

Import what you need from the submodules; nothing heavy (torch, transformers, encoders) is
loaded until it is used.
"""

__version__ = "0.1.0"
