"""Streaming memory-management benchmarks (`agemem eval stream`): a policy over a long stream of tasks with an
experience memory, under memory addition / deletion rules (Xiong et al.) and bounded retention (TraceRetain).

Modules: :mod:`~agemem.eval.stream.base` (items, attempts, the task-adapter and solver interfaces),
:mod:`~agemem.eval.stream.bank` (records, the bank, retrieval), :mod:`~agemem.eval.stream.addition` (addition
rules, evaluators, the coarse judge), :mod:`~agemem.eval.stream.deletion`,
:mod:`~agemem.eval.stream.retention` (eviction policies, the features of the linear score, CEM search),
:mod:`~agemem.eval.stream.retrieval` (similar, recent, none, error-free replay),
:mod:`~agemem.eval.stream.order` (given, shuffled, Gaussian-mixture shift), :mod:`~agemem.eval.stream.tasks`
(the QA streams and the game streams, each task one episode on the environment's turn loop),
:mod:`~agemem.eval.stream.agent` (the agent's prompt, its memory tools on the bank, its environment),
:mod:`~agemem.eval.stream.remem` (ReMem, Evo-Memory's Think / Refine / Act agent),
:mod:`~agemem.eval.stream.runner` (the loop, the step log, resume), :mod:`~agemem.eval.stream.analysis`
(measures), :mod:`~agemem.eval.stream.plots`, :mod:`~agemem.eval.stream.evaluate` (one run, CEM tuning,
outputs) and :mod:`~agemem.eval.stream.sweep`.
"""
