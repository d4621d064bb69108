"""The sockets under a connection: what a connection asks of one (``contract``), the WebSocket under
sparkwire's uvicorn protocol (``front_door``, each connection's request head read once, a plain upgrade opened
straight on ``uvicorn_websocket``, anything else handed to ``uvicorn_http``, header deadline and connection cap;
``upgrade``, a plain upgrade checked once; ``lean_server_protocol``, websockets' side copied from a template;
``wire``, live batches written straight through) or plain ASGI (``asgi``), and Server-Sent Events (``sse``,
``sse_routes``);
the ``/ws`` endpoint (``websocket_endpoint``) and how a close is sent (``closing``). Nothing here knows what a
connection does with its socket: the pod hands the endpoints its decisions."""
