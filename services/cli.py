from __future__ import annotations
def main() -> None:
    print("hi")
