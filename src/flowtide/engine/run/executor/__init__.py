"""The run executor: the parts of :mod:`flowtide.engine.run` put to work for one run, layer by
layer (core, attempts, arming, routing, joins, tasks, parking, subflows, driving, executor), each
committing and applying what the parts decide."""
