"""``fedcluster sweep``: a grid of ordinary runs over keys and seeds, resumable, summarised in one table and one
picture (:mod:`.grid` the points, :mod:`.execute` running them, :mod:`.table` the results, :mod:`.command` the
commands)."""
