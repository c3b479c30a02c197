"""What the cluster's exporters serve to a Prometheus: dcgm-exporter (`dcgm`) and kube-state-metrics (`ksm`)."""
