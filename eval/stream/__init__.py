"""Streaming memory-management benchmarks (`agemem eval stream`): a policy over a long stream of tasks with an
experience memory, under memory addition / deletion rules (Xiong et al.) and bounded retention (TraceRetain).

Modules: :mod:`~eval.stream.base` (items, attempts, the task-adapter and solver interfaces),
:mod:`~eval.stream.bank` (records, the bank, retrieval), :mod:`~eval.stream.addition` (addition rules, evaluators,
the coarse judge), :mod:`~eval.stream.deletion`, :mod:`~eval.stream.retention` (eviction policies, the features of
the linear score, CEM search), :mod:`~eval.stream.retrieval` (similar, recent, none, error-free replay),
:mod:`~eval.stream.order` (given, shuffled, Gaussian-mixture shift), :mod:`~eval.stream.tasks` (HotpotQA and
synthetic streams), :mod:`~eval.stream.alfworld_task` (the ALFWorld stream), :mod:`~eval.stream.agent` (the chat
agent, its prompt and memory tools), :mod:`~eval.stream.runner` (the loop, the step log, resume),
:mod:`~eval.stream.analysis` (measures), :mod:`~eval.stream.plots`, :mod:`~eval.stream.evaluate` (one run, CEM
tuning, outputs) and :mod:`~eval.stream.sweep`.
"""
