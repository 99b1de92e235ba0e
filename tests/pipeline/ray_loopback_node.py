"""``ray start`` for a node of a cluster on this machine's loopback (used by ``test_ray_two_nodes.py``).

Run as ``python ray_loopback_node.py start ...`` with ``ray start``'s own arguments. ``ray start`` replaces a
``--node-ip-address`` of 127.0.0.1 by the machine's outward address (so that other machines could reach the
node) and its servers then listen on every interface; this keeps 127.0.0.1, so every server of both nodes
listens on the loopback only. Two real workstations need none of this (README, "Two machines").
"""

from __future__ import annotations

import sys

import ray._private.services as services
from ray.scripts.scripts import main

_resolve = services.resolve_ip_for_localhost
services.resolve_ip_for_localhost = lambda host: host if host == "127.0.0.1" else _resolve(host)

if __name__ == "__main__":
    sys.exit(main())
