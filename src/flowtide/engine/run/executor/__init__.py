"""The run executor: the parts of :mod:`flowtide.engine.run` put to work for one run, by parts
the executor holds (router, task steps, join groups, token attempts, arming, child runs, phases)
and the classes over its core (parking, driving, executor), each committing and applying what
the parts decide."""
