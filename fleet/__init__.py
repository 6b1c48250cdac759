"""Fleet: multi-cluster queueing and dispatch for Ascend NPU training jobs."""

__version__ = "0.1.0"
