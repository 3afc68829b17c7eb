"""The artist-history index and the recording identity built beside it."""
