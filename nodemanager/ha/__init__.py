"""High availability: a leader lease on etcd, so only one of several head nodes acts (docs/ha.md)."""
