"""The live demo page (``/``), the feed page (``/feed``: a stream's newest rows, newest first), their scripts
(``/static``), and the browser client served beside them."""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

# The live demo page and its scripts.
STATIC_DIR = Path(__file__).parents[1] / "static"
# The browser client, served beside them: its source is the npm package in sparkwire/client/js.
BROWSER_CLIENT = Path(__file__).parents[2] / "client" / "js" / "sparkwire-client.js"


async def demo_page(_: Request) -> Response:
    return FileResponse(STATIC_DIR / "index.html")


async def feed_page(_: Request) -> Response:
    return FileResponse(STATIC_DIR / "feed.html")


async def browser_client(_: Request) -> Response:
    return FileResponse(BROWSER_CLIENT, media_type="text/javascript")


def page_routes() -> list[BaseRoute]:
    return [
        Route("/", demo_page),
        Route("/feed", feed_page),
        Route("/static/sparkwire-client.js", browser_client),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ]
