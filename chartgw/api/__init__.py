"""What a route is made of: parameters, formats, keys and rate limits, endpoint declarations, responses,
the OpenAPI document, the refresh endpoints, and the `Group` declaration every group fills in."""
