"""Ack receive: the CPU one client ack costs a pod before its bookkeeping, in process: the WebSocket
protocol's receive path (bytes in, the message handed to the connection's listener) and ``parse_client_frame``,
each over N acks as the load generator and the clients write them. Compare commits with PYTHONPATH pointing
at another checkout's services/.

    .venv/bin/python bench/ack_receive.py --acks 50000
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any, cast

import uvicorn
from uvicorn.server import ServerState
from websockets.frames import Frame, Opcode

from sparkwire.gateway.transport.contract import Message
from sparkwire.gateway.transport.uvicorn_websocket import SparkwireWebSocketProtocol
from sparkwire.protocol.client_frames import Ack, encode_ack, parse_client_frame


class _Transport:
    """What the protocol calls on its asyncio transport while it receives."""

    def is_closing(self) -> bool:
        return False

    def write(self, data: bytes) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--acks", type=int, default=50_000, help="acks per measurement")
    args = parser.parse_args()
    config = uvicorn.Config(app=lambda scope, receive, send: None, ws=SparkwireWebSocketProtocol)
    config.load()
    protocol = SparkwireWebSocketProtocol(config, ServerState(), {}, _loop=asyncio.new_event_loop(), opened=True)
    protocol.transport = cast(Any, _Transport())
    protocol.handshake_complete = True
    heard: list[Message] = []
    protocol.queue.listen(heard.append)
    text = encode_ack(Ack(123_456, 0, 0, "a1b2c3d4e5f60718"))
    frame = Frame(Opcode.TEXT, text.encode()).serialize(mask=True)
    start = time.process_time()
    for _ in range(args.acks):
        protocol.data_received(frame)
    received = time.process_time() - start
    assert len(heard) == args.acks and heard[0] == {"type": "websocket.receive", "text": text}
    start = time.process_time()
    for message in heard:
        parse_client_frame(message["text"])
    parsed = time.process_time() - start
    per_ack = 1e6 / args.acks
    print(f"receive {received * per_ack:.2f} µs + parse {parsed * per_ack:.2f} µs ="
          f" {(received + parsed) * per_ack:.2f} µs of CPU per ack ({args.acks} acks)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
