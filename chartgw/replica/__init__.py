"""Read replicas: replication state, Litestream's configuration and the processes that run it."""
