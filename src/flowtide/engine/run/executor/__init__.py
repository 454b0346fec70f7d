"""The run executor: the parts of :mod:`flowtide.engine.run` put to work for one run, layer by
layer (core, routing, tasks, parking, driving, executor) and by parts the executor holds (token
attempts, arming, child runs, phases, join groups), each committing and applying what the parts
decide."""
