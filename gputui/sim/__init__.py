from .cluster import SimCluster

__all__ = ["SimCluster"]
