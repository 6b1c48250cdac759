"""The fleet endpoint: the kube-compatible API users and admins talk to (kinds, handlers, auth)."""
