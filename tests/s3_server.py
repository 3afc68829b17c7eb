"""`python -m tests.s3_server PORT`: moto's S3 alone on 127.0.0.1:PORT, the replica test's stand-in for object
storage, without what `python -m moto.server` spends on it for every request: working out which of moto's
services a request is for (S3 is the only one asked) and a log line (nobody reads it). Both cost CPU in the
end-to-end test, where Litestream lists the bucket several times a second."""

from __future__ import annotations

import logging
import sys
from typing import Any

from flask import Flask
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import run_simple


class S3Only(DomainDispatcherApplication):
    def __init__(self) -> None:
        super().__init__(create_backend_app)
        self.s3 = create_backend_app("s3")

    def get_application(self, environ: dict[str, Any]) -> Flask:
        return self.s3


if __name__ == "__main__":
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    run_simple("127.0.0.1", int(sys.argv[1]), S3Only(), threaded=True, request_handler=MotoRequestHandler)
