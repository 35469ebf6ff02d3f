"""A port of 127.0.0.1 that nothing uses now, for a server started next.

Outside the kernel's ephemeral range (ip_local_port_range): a port taken
from that range is free again once the probe closes, and any outgoing
connection (the test suite makes thousands) or any server bound to port 0 may
take it before the server binds it. Drawn at random from 10000 up to that
range (above it, where it starts lower), so that servers picking at once
rarely draw the same one.

    python3 scripts/unused_port.py     # prints one
"""

import random
import socket


def _binds(port):
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return None
        return probe.getsockname()[1]


def unused_port():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as ranges:
            low, high = (int(word) for word in ranges.read().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    # Below the range; where the range starts too low for that, above it.
    outside = range(10000, low) if low > 10001 else range(high + 1, 65536) if high < 65000 else None
    if outside:
        for _ in range(200):
            port = random.choice(outside)
            if _binds(port):
                return port
    # No room outside the range: a port the system gives.
    port = _binds(0)
    if port is None:
        raise SystemExit("unused_port: no port of 127.0.0.1 can be bound")
    return port


if __name__ == "__main__":
    print(unused_port())
