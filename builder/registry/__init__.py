"""HTTP exchanges with an OCI registry: addresses, hardened transport, auth, the client, hints, retries."""
