"""What the end-to-end suites share, on the local stack (tests/e2e/local) and in kind (tests/e2e/kind): faults
injected in the background while traffic flows, clients run until they caught up with the log, and the
journal of each client's connections that tells a protocol reset from a lost cursor."""
