"""The simulated cluster's behaviour: the scheduler, the kubelets and what their containers run, and the
controllers (DaemonSets, DRA claims, node lifecycle, GPU plumbing states)."""
