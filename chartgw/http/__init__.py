"""Serving: the app, the server and its fast lane, the front page and API docs, observation (request ids,
metrics, access log), exports, and the nginx tier in front."""
