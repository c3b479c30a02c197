"""The simulated kube-apiserver: its store, the kinds it serves, admission and validation, selectors,
authentication and RBAC, and its HTTP layer (`http/`)."""
