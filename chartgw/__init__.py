"""chartgw: a music chart aggregation gateway."""
