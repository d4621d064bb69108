"""The sockets under a connection: what a connection asks of one (``contract``), the WebSocket under
sparkwire's uvicorn protocol (``uvicorn_websocket``; its direct path ``wire``, live batches written straight
through; ``uvicorn_http``, header deadline and connection cap; ``upgrade``, a plain upgrade checked once from
uvicorn's parse) or plain ASGI (``asgi``), and Server-Sent Events (``sse``, ``sse_routes``);
the ``/ws`` endpoint (``websocket_endpoint``) and how a close is sent (``closing``). Nothing here knows what a
connection does with its socket: the pod hands the endpoints its decisions."""
