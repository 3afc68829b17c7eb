"""Pushing changes: the change feed and its streams, webhooks and their delivery worker."""
