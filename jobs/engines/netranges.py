"""Addresses that are not the public internet: the lists both engines keep a job's egress away from.

The IANA special-purpose ranges that are not globally routable: private networks (a cluster's pods,
Services and nodes, a host's LANs), loopback, link-local (cloud metadata at 169.254.169.254),
carrier-grade NAT, documentation and benchmark ranges, multicast and reserved.
"""

from __future__ import annotations

# Where a host's or a cluster's own networks and services are: private, shared (CGNAT), loopback,
# link-local, multicast and reserved.
PRIVATE_V4 = (
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "224.0.0.0/4",
    "240.0.0.0/4",
)
# Documentation and benchmark ranges: no service lives there on the internet, but egress proxies that
# answer DNS with stand-in addresses hand them out (pypi.org is 203.0.113.80 on such a network), so
# only the Kubernetes policy, whose ranges an operator may change, refuses them.
UNROUTED_V4 = (
    "192.0.0.0/24",
    "192.0.2.0/24",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
)
NOT_GLOBAL_V6 = (
    "::1/128",
    # (No ::ffff:0:0/96: the Kubernetes API server refuses IPv4-mapped ipBlocks, and a connection to
    # such an address leaves as IPv4, which the ranges above cover.)
    "64:ff9b::/96",  # NAT64: the IPv4 ranges above by another name
    "100::/64",
    "2001:db8::/32",
    "fc00::/7",
    "fe80::/10",
    "ff00::/8",
)
