"""Signals and cancels: addressing a park, judging and answering a signal, the requests an
engine records and waits on, and who waits on a run."""
