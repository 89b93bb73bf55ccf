#!/usr/bin/env python3
"""syn_drop.py SECS: a loopback port whose connections neither complete nor
are refused, as behind a firewall that drops: a listener with a backlog of
0, filled by connections of its own, so the kernel drops every further
SYN.  Prints the port once it is full, then holds it SECS seconds."""
import socket
import sys
import time


def main():
    secs = float(sys.argv[1])
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    held = []
    for _ in range(3):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        held.append(s)
    time.sleep(0.3)   # the handshakes that can complete have completed
    print(port, flush=True)
    time.sleep(secs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
