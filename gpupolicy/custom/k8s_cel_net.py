"""The Kubernetes CEL IP and CIDR libraries (k8s.io/apiserver/pkg/cel/library/ip.go and cidr.go,
Kubernetes 1.31 and later): `ip(s)`, `isIP(s)`, `ip.isCanonical(s)`, an IP's `family()`,
`isUnspecified()`, `isLoopback()`, `isLinkLocalMulticast()`, `isLinkLocalUnicast()`,
`isGlobalUnicast()`; `cidr(s)`, `isCIDR(s)`, a CIDR's `containsIP(ip or s)`,
`containsCIDR(cidr or s)`, `ip()`, `masked()`, `prefixLength()`; and `string()` of either.

As Go's `net/netip`, which those libraries parse with: IPv4 with leading zeros, IPv4-mapped IPv6
addresses and IPv6 zones are refused; `isGlobalUnicast` is Go's (private ranges included). An IP is
the map `{"__ip__": "<canonical text>"}`, a CIDR `{"__cidr__": "<address>/<bits>"}`, its address
as written (`cidr('10.0.0.1/8').ip()` is 10.0.0.1; `masked()` clears the host bits).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any

from gpupolicy.custom.errors import CelFunctionError

IP = "__ip__"
CIDR = "__cidr__"

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_LINK_LOCAL_MULTICAST_V4 = ipaddress.IPv4Network("224.0.0.0/24")
_BROADCAST_V4 = ipaddress.IPv4Address("255.255.255.255")


def _error(message: str) -> Exception:
    return CelFunctionError(message)


def _parse_address(text: str) -> Address:
    if "%" in text:
        raise ValueError("IP address with zone value is not allowed")
    address = ipaddress.ip_address(text)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        raise ValueError("IPv4-mapped IPv6 address is not allowed")
    return address


def _address(value: Any, function: str) -> Address:
    if isinstance(value, dict) and IP in value:
        return ipaddress.ip_address(value[IP])
    raise _error(f"{function}: not an IP: {value!r}")


def ip(value: Any) -> dict[str, str]:
    """`ip(s)`, or a CIDR's `ip()`: its address."""
    if isinstance(value, dict) and CIDR in value:
        return {IP: str(value[CIDR]).rpartition("/")[0]}
    if not isinstance(value, str):
        raise _error(f"ip(): not a string: {value!r}")
    try:
        return {IP: str(_parse_address(value))}
    except ValueError as exc:
        raise _error(f"IP Address {value!r} parse error during conversion from string: {exc}") from None


def is_ip(text: str) -> bool:
    try:
        _parse_address(text)
    except ValueError:
        return False
    return True


def is_canonical(text: str) -> bool:
    """`ip.isCanonical(s)`: whether `s` is the address as netip writes it."""
    try:
        return str(_parse_address(text)) == text
    except ValueError as exc:
        raise _error(f"IP Address {text!r} parse error during conversion from string: {exc}") from None


def family(value: Any) -> int:
    return _address(value, "family").version


def is_unspecified(value: Any) -> bool:
    return _address(value, "isUnspecified").is_unspecified


def is_loopback(value: Any) -> bool:
    return _address(value, "isLoopback").is_loopback


def is_link_local_multicast(value: Any) -> bool:
    address = _address(value, "isLinkLocalMulticast")
    if isinstance(address, ipaddress.IPv4Address):
        return address in _LINK_LOCAL_MULTICAST_V4
    return address.packed[0] == 0xFF and address.packed[1] & 0x0F == 0x02


def is_link_local_unicast(value: Any) -> bool:
    return _address(value, "isLinkLocalUnicast").is_link_local


def is_global_unicast(value: Any) -> bool:
    """Go's `IsGlobalUnicast`: anything but unspecified, loopback, multicast, link-local unicast
    and the IPv4 broadcast address (private ranges are global unicast)."""
    address = _address(value, "isGlobalUnicast")
    return not (
        address.is_unspecified
        or address.is_loopback
        or address.is_multicast
        or address.is_link_local
        or address == _BROADCAST_V4
    )


def _parse_prefix(text: str) -> tuple[Address, int]:
    address_text, slash, bits_text = text.partition("/")
    if not slash or not bits_text.isdigit() or (len(bits_text) > 1 and bits_text.startswith("0")):
        raise ValueError("no valid prefix length")
    address = _parse_address(address_text)
    bits = int(bits_text)
    if bits > address.max_prefixlen:
        raise ValueError(f"prefix length {bits} out of range")
    return address, bits


def _network(value: Any, function: str) -> Network:
    if isinstance(value, str):
        value = cidr(value)
    if isinstance(value, dict) and CIDR in value:
        return ipaddress.ip_network(value[CIDR], strict=False)
    raise _error(f"{function}: not a CIDR: {value!r}")


def cidr(text: Any) -> dict[str, str]:
    if not isinstance(text, str):
        raise _error(f"cidr(): not a string: {text!r}")
    try:
        address, bits = _parse_prefix(text)
    except ValueError as exc:
        raise _error(f"network address {text!r} parse error during conversion from string: {exc}") from None
    return {CIDR: f"{address}/{bits}"}


def is_cidr(text: str) -> bool:
    try:
        _parse_prefix(text)
    except ValueError:
        return False
    return True


def contains_ip(value: Any, other: Any) -> bool:
    network = _network(value, "containsIP")
    address = _address(ip(other) if isinstance(other, str) else other, "containsIP")
    return address.version == network.version and address in network


def contains_cidr(value: Any, other: Any) -> bool:
    network = _network(value, "containsCIDR")
    inner = _network(other, "containsCIDR")
    return inner.version == network.version and inner.subnet_of(network)  # type: ignore[arg-type]


def masked(value: Any) -> dict[str, str]:
    return {CIDR: str(_network(value, "masked"))}


def prefix_length(value: Any) -> int:
    return _network(value, "prefixLength").prefixlen


def string(value: Any) -> str:
    """`string()` of an IP or a CIDR (the engine converts the standard types itself)."""
    if isinstance(value, dict) and IP in value:
        return str(value[IP])
    if isinstance(value, dict) and CIDR in value:
        return str(value[CIDR])
    raise _error(f"string(): cannot convert {value!r}")


NET_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "ip": ip,
    "isIP": is_ip,
    "ip.isCanonical": is_canonical,
    "family": family,
    "isUnspecified": is_unspecified,
    "isLoopback": is_loopback,
    "isLinkLocalMulticast": is_link_local_multicast,
    "isLinkLocalUnicast": is_link_local_unicast,
    "isGlobalUnicast": is_global_unicast,
    "cidr": cidr,
    "isCIDR": is_cidr,
    "containsIP": contains_ip,
    "containsCIDR": contains_cidr,
    "masked": masked,
    "prefixLength": prefix_length,
    "string": string,
}
