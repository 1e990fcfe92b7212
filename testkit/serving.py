"""How the fake servers serve: socketserver's serve_forever looks for shutdown() every poll_interval, 0.5 s by
default, and every test that stops a server waited that out (215 teardowns of 0.5-1 s in the fast tier: about a
quarter of its worker time). Requests are answered as they come either way; only stopping is quicker."""

POLL_S = 0.02
