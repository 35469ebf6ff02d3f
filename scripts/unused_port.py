"""A port of 127.0.0.1 that nothing uses now, for a server started next.

Below the kernel's ephemeral range (ip_local_port_range): a port taken from
that range is free again once the probe closes, and any outgoing connection
(the test suite makes thousands) or any server bound to port 0 may take it
before the server binds it. Drawn at random from 10000 up to that range, so
that servers picking at once rarely draw the same one.

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
            low = int(ranges.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    if low > 10001:
        for _ in range(200):
            port = random.randrange(10000, low)
            if _binds(port):
                return port
    # No room below the range: a port the system gives.
    return _binds(0)


if __name__ == "__main__":
    print(unused_port())
