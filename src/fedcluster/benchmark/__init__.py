"""``fedcluster benchmark``: every registered method against a fixed taxonomy of heterogeneity scenarios, each a
registered scenario with its ground truth, over seeds, in one table per scenario, a heatmap of ranks and a summary
of which method leads under which shift (generated from the numbers).

The parts, each with one job: :mod:`~fedcluster.benchmark.taxonomy` (the scenarios and the budgets),
:mod:`~fedcluster.benchmark.methods` (which methods, at which settings), :mod:`~fedcluster.benchmark.plan` (the
benchmark as one reproduction experiment), :mod:`~fedcluster.benchmark.runner` (one seed's runs through the
reproduction suite's run store), :mod:`~fedcluster.benchmark.records` (the results kept between calls),
:mod:`~fedcluster.benchmark.table` (the figures, mean ± standard error), :mod:`~fedcluster.benchmark.results_page` (the
page and its heatmap) and :mod:`~fedcluster.benchmark.command` (the command line).
"""
