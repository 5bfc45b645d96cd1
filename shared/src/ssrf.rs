//! Callback address policy: which URLs and IP addresses Hookline may call.
//!
//! Subscribers choose their callback URL, so without a policy anyone could make
//! Hookline POST to the cloud metadata service, to the database on the private
//! network, or to the process itself (SSRF). The policy is enforced in three
//! places that must agree:
//!
//! * [`check_callback_url`] when a subscription is created (syntax, scheme,
//!   credentials, IP-literal hosts) and before every send, because an
//!   IP-literal URL never goes through a resolver;
//! * [`check_callback_resolves`] when a subscription is created or verified,
//!   to refuse names that resolve to forbidden addresses early and clearly;
//! * [`GuardedResolver`], installed in the delivery HTTP client, which checks
//!   the addresses each connection actually uses, so DNS rebinding between
//!   the check and the connect cannot bypass the policy.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::Url;

/// Which destinations a callback may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressPolicy {
    /// Production: public unicast addresses only, https only.
    PublicOnly,
    /// The `--dev` flag: loopback addresses are also allowed, and plain
    /// `http://` is allowed for loopback hosts only. Private, link-local and
    /// metadata addresses are still refused.
    AllowLoopback,
}

const LOOPBACK: &str = "loopback address";
const PRIVATE: &str = "private address";
const METADATA: &str = "cloud metadata address";
const LINK_LOCAL: &str = "link-local address";
const CGNAT: &str = "carrier-grade NAT address";
const MULTICAST: &str = "multicast address";
const BROADCAST: &str = "broadcast address";
const UNSPECIFIED: &str = "unspecified address";
const DOCUMENTATION: &str = "documentation address";
const BENCHMARKING: &str = "benchmarking address";
const RESERVED: &str = "reserved address";
const PROTOCOL_ASSIGNMENT: &str = "IETF protocol assignment address";
const TEREDO: &str = "Teredo tunnel address";
const SITE_LOCAL: &str = "site-local address";
const IPV4_COMPATIBLE: &str = "deprecated IPv4-compatible IPv6 address";

/// The AWS IPv6 instance metadata endpoint, `fd00:ec2::254`.
const AWS_METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254);

/// Why `ip` may not be called under `policy`, or `None` if it may.
///
/// Returns a short noun phrase such as `"loopback address"`, `"private
/// address"` or `"cloud metadata address"`, meant to be shown to the user who
/// entered the URL. IPv4 addresses hidden in IPv6 forms (IPv4-mapped,
/// IPv4-compatible, SIIT, 6to4, NAT64) are judged by the IPv4 address they
/// carry; Teredo and everything outside global unicast `2000::/3` are refused.
/// Metadata addresses are refused under every policy.
pub fn forbidden_reason(ip: IpAddr, policy: AddressPolicy) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_reason(v4, policy),
        IpAddr::V6(v6) => v6_reason(v6, policy),
    }
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], prefix: u32) -> bool {
    let mask = if prefix == 0 { 0 } else { u32::MAX << (32 - prefix) };
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn in_v6(ip: Ipv6Addr, net: [u16; 8], prefix: u32) -> bool {
    let mask = if prefix == 0 { 0 } else { u128::MAX << (128 - prefix) };
    let [a, b, c, d, e, f, g, h] = net;
    u128::from(ip) & mask == u128::from(Ipv6Addr::new(a, b, c, d, e, f, g, h)) & mask
}

fn v4_reason(ip: Ipv4Addr, policy: AddressPolicy) -> Option<&'static str> {
    // Order matters: the most specific ranges first.
    let reason = if ip == Ipv4Addr::new(169, 254, 169, 254) {
        METADATA
    } else if ip.is_broadcast() {
        BROADCAST
    } else if in_v4(ip, [0, 0, 0, 0], 8) {
        UNSPECIFIED
    } else if in_v4(ip, [127, 0, 0, 0], 8) {
        return match policy {
            AddressPolicy::AllowLoopback => None,
            AddressPolicy::PublicOnly => Some(LOOPBACK),
        };
    } else if in_v4(ip, [10, 0, 0, 0], 8) || in_v4(ip, [172, 16, 0, 0], 12) || in_v4(ip, [192, 168, 0, 0], 16) {
        PRIVATE
    } else if in_v4(ip, [100, 64, 0, 0], 10) {
        CGNAT
    } else if in_v4(ip, [169, 254, 0, 0], 16) {
        LINK_LOCAL
    } else if in_v4(ip, [224, 0, 0, 0], 4) {
        MULTICAST
    } else if in_v4(ip, [192, 0, 2, 0], 24) || in_v4(ip, [198, 51, 100, 0], 24) || in_v4(ip, [203, 0, 113, 0], 24) {
        DOCUMENTATION
    } else if in_v4(ip, [198, 18, 0, 0], 15) {
        BENCHMARKING
    } else if in_v4(ip, [192, 0, 0, 0], 24) {
        PROTOCOL_ASSIGNMENT
    } else if in_v4(ip, [240, 0, 0, 0], 4) || in_v4(ip, [192, 88, 99, 0], 24) {
        // 240/4 "future use"; 192.88.99/24 the deprecated 6to4 relay anycast.
        RESERVED
    } else {
        return None;
    };
    Some(reason)
}

/// The IPv4 address in the last 32 bits of `ip`.
fn low32(ip: Ipv6Addr) -> Ipv4Addr {
    Ipv4Addr::from(u128::from(ip) as u32)
}

fn v6_reason(ip: Ipv6Addr, policy: AddressPolicy) -> Option<&'static str> {
    let seg = ip.segments();
    if ip == AWS_METADATA_V6 {
        return Some(METADATA);
    }
    if ip.is_unspecified() {
        return Some(UNSPECIFIED);
    }
    if ip.is_loopback() {
        return match policy {
            AddressPolicy::AllowLoopback => None,
            AddressPolicy::PublicOnly => Some(LOOPBACK),
        };
    }
    // ::ffff:a.b.c.d (IPv4-mapped): a dual-stack socket connects to a.b.c.d.
    // ::ffff:0:a.b.c.d (SIIT, RFC 6145) carries one the same way.
    if in_v6(ip, [0, 0, 0, 0, 0, 0xffff, 0, 0], 96) || in_v6(ip, [0, 0, 0, 0, 0xffff, 0, 0, 0], 96) {
        return v4_reason(low32(ip), policy);
    }
    // ::a.b.c.d (IPv4-compatible, deprecated by RFC 4291): judged by the
    // embedded address, and refused anyway when that is public since nothing
    // legitimate uses the form.
    if in_v6(ip, [0; 8], 96) {
        return Some(v4_reason(low32(ip), policy).unwrap_or(IPV4_COMPATIBLE));
    }
    // NAT64 well-known prefix 64:ff9b::/96 (RFC 6052): the gateway connects to
    // the IPv4 address in the last 32 bits.
    if in_v6(ip, [0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96) {
        return v4_reason(low32(ip), policy);
    }
    // Local-use NAT64 64:ff9b:1::/48 (RFC 8215). The embedded address sits in
    // the last 32 bits for a /96 translator but in bits 48..88 (around the
    // u-octet) for a /48 one; refuse if either non-zero reading is forbidden
    // (an all-zero reading is just the other translator length).
    if in_v6(ip, [0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48) {
        let bytes = ip.octets();
        let at48 = Ipv4Addr::new(bytes[6], bytes[7], bytes[9], bytes[10]);
        let mut readings = [low32(ip), at48].into_iter().filter(|r| !r.is_unspecified()).peekable();
        if readings.peek().is_none() {
            return Some(UNSPECIFIED);
        }
        return readings.find_map(|r| v4_reason(r, policy));
    }
    // 6to4 2002:AABB:CCDD::/48 (RFC 3056): relays deliver to AA.BB.CC.DD.
    if seg[0] == 0x2002 {
        let embedded = Ipv4Addr::from(((seg[1] as u32) << 16) | seg[2] as u32);
        return v4_reason(embedded, policy);
    }
    // Teredo 2001::/32: the server and client addresses are obfuscated and
    // the tunnel goes wherever they point; never a webhook receiver.
    if in_v6(ip, [0x2001, 0, 0, 0, 0, 0, 0, 0], 32) {
        return Some(TEREDO);
    }
    // The rest of 2001::/23: benchmarking, ORCHID, AS112, anycast services.
    if in_v6(ip, [0x2001, 0x0002, 0, 0, 0, 0, 0, 0], 48) {
        return Some(BENCHMARKING);
    }
    if in_v6(ip, [0x2001, 0, 0, 0, 0, 0, 0, 0], 23) {
        return Some(PROTOCOL_ASSIGNMENT);
    }
    // 2001:db8::/32 and 3fff::/20 (RFC 9637).
    if in_v6(ip, [0x2001, 0x0db8, 0, 0, 0, 0, 0, 0], 32) || in_v6(ip, [0x3fff, 0, 0, 0, 0, 0, 0, 0], 20) {
        return Some(DOCUMENTATION);
    }
    if in_v6(ip, [0xfc00, 0, 0, 0, 0, 0, 0, 0], 7) {
        return Some(PRIVATE);
    }
    if in_v6(ip, [0xfe80, 0, 0, 0, 0, 0, 0, 0], 10) {
        return Some(LINK_LOCAL);
    }
    if in_v6(ip, [0xfec0, 0, 0, 0, 0, 0, 0, 0], 10) {
        return Some(SITE_LOCAL);
    }
    if in_v6(ip, [0xff00, 0, 0, 0, 0, 0, 0, 0], 8) {
        return Some(MULTICAST);
    }
    // Everything else outside global unicast 2000::/3: discard-only 100::/64,
    // SRv6 5f00::/16, unassigned space.
    if !in_v6(ip, [0x2000, 0, 0, 0, 0, 0, 0, 0], 3) {
        return Some(RESERVED);
    }
    None
}

/// Why a callback URL was refused. Messages are meant for the API user who
/// entered the URL; they never contain the URL's credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallbackUrlError {
    /// Not a usable absolute URL (unparseable, no host, credentials, ...).
    #[error("invalid callback URL: {0}")]
    Invalid(String),
    /// The scheme is not `https` (or `http` to a loopback host in dev mode).
    #[error("callback URL must use https")]
    NotHttps,
    /// The host is, or resolves to, an address the policy forbids.
    #[error("callback host {host} is not allowed: {reason}")]
    ForbiddenAddress {
        /// The host as written in the URL (IPv6 in brackets).
        host: String,
        /// What [`forbidden_reason`] said, e.g. `"private address"`.
        reason: &'static str,
    },
    /// The host name could not be resolved.
    #[error("callback host could not be resolved: {0}")]
    Unresolvable(String),
}

/// Whether a host name is `localhost` or under `.localhost` (RFC 6761), which
/// resolvers map to loopback without asking DNS.
fn is_localhost_name(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    host == "localhost" || host.ends_with(".localhost")
}

/// Checks a callback URL without any network access.
///
/// Requires an absolute `https` URL with a host and no `user:password@`;
/// plain `http` is accepted only under [`AddressPolicy::AllowLoopback`] and
/// only for loopback hosts (`127.0.0.0/8`, `::1`, `localhost`). IP-literal
/// hosts (in any spelling the URL standard accepts, e.g. `127.1` or
/// `0x7f000001`) are judged by [`forbidden_reason`]; `localhost` names count as
/// loopback. Host names are resolved later, by [`check_callback_resolves`] and
/// [`GuardedResolver`]. Address problems are reported before scheme problems,
/// because they are the more serious. Returns the parsed URL.
pub fn check_callback_url(url: &str, policy: AddressPolicy) -> Result<Url, CallbackUrlError> {
    let parsed = Url::parse(url.trim()).map_err(|e| CallbackUrlError::Invalid(e.to_string()))?;
    let scheme = parsed.scheme();
    if scheme != "https" && scheme != "http" {
        return Err(CallbackUrlError::NotHttps);
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(CallbackUrlError::Invalid("credentials (user:password@) are not allowed in a callback URL".into()));
    }
    let (host_str, kind) =
        classify_host(&parsed).ok_or_else(|| CallbackUrlError::Invalid("callback URL has no host".into()))?;
    let is_loopback = match kind {
        HostKind::Ip(ip) => {
            check_ip(&host_str, ip, policy)?;
            match ip {
                IpAddr::V4(v4) => v4.is_loopback(),
                IpAddr::V6(v6) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
            }
        }
        HostKind::Domain(name) => {
            let local = is_localhost_name(name);
            if local && policy == AddressPolicy::PublicOnly {
                return Err(CallbackUrlError::ForbiddenAddress { host: host_str, reason: LOOPBACK });
            }
            local
        }
    };
    if scheme == "http" && !(policy == AddressPolicy::AllowLoopback && is_loopback) {
        return Err(CallbackUrlError::NotHttps);
    }
    Ok(parsed)
}

/// A URL host: an IP literal or a name to resolve.
enum HostKind<'a> {
    Ip(IpAddr),
    Domain(&'a str),
}

/// The URL's host as written (IPv6 in brackets) and what kind it is. For
/// `http`/`https` the URL parser has already turned every IPv4 spelling into
/// dotted-quad form, so a host that parses as an IPv4 address is one.
fn classify_host(url: &Url) -> Option<(String, HostKind<'_>)> {
    let host = url.host_str().filter(|h| !h.is_empty())?;
    let kind = if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        HostKind::Ip(IpAddr::V6(inner.parse().ok()?))
    } else if let Ok(v4) = host.parse::<Ipv4Addr>() {
        HostKind::Ip(IpAddr::V4(v4))
    } else {
        HostKind::Domain(host)
    };
    Some((host.to_string(), kind))
}

fn check_ip(host: &str, ip: IpAddr, policy: AddressPolicy) -> Result<(), CallbackUrlError> {
    match forbidden_reason(ip, policy) {
        Some(reason) => Err(CallbackUrlError::ForbiddenAddress { host: host.to_string(), reason }),
        None => Ok(()),
    }
}

/// Resolves the URL's host and refuses it if ANY of its addresses is
/// forbidden (a name with one public and one private address is refused, since
/// a connection may use either).
///
/// Used when a subscription is created or verified, to give the user a clear
/// error early; deliveries are protected by [`GuardedResolver`] regardless.
/// IP-literal hosts are checked without resolving.
pub async fn check_callback_resolves(url: &Url, policy: AddressPolicy) -> Result<(), CallbackUrlError> {
    let (host_str, kind) =
        classify_host(url).ok_or_else(|| CallbackUrlError::Invalid("callback URL has no host".into()))?;
    let name = match kind {
        HostKind::Ip(ip) => return check_ip(&host_str, ip, policy),
        HostKind::Domain(name) => name,
    };
    let port = url.port_or_known_default().unwrap_or(443);
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((name, port))
        .await
        .map_err(|e| CallbackUrlError::Unresolvable(format!("{name}: {e}")))?
        .collect();
    if addrs.is_empty() {
        return Err(CallbackUrlError::Unresolvable(format!("{name}: no addresses")));
    }
    for addr in &addrs {
        check_ip(&host_str, addr.ip(), policy)?;
    }
    Ok(())
}

/// The error a [`GuardedResolver`] fails a connection with when a name
/// resolves to a forbidden address. The HTTP client finds it in the error's
/// source chain to report [`crate::http_client::PostError::ForbiddenAddress`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForbiddenResolution {
    /// The name that was resolved.
    pub host: String,
    /// The forbidden address it resolved to.
    pub ip: IpAddr,
    /// What [`forbidden_reason`] said about `ip`.
    pub reason: &'static str,
}

impl fmt::Display for ForbiddenResolution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} resolves to {}: {}", self.host, self.ip, self.reason)
    }
}

impl std::error::Error for ForbiddenResolution {}

/// A DNS resolver for `reqwest` that enforces the [`AddressPolicy`] on every
/// connection.
///
/// It resolves with the system resolver and fails the lookup (so the
/// connection is never opened) if any resolved address is forbidden;
/// otherwise it returns exactly the addresses it checked, so the connection
/// goes to an address that was checked and DNS rebinding cannot slip a private
/// address in between. IP-literal URLs bypass resolvers, so callers must also
/// run [`check_callback_url`].
#[derive(Debug, Clone, Copy)]
pub struct GuardedResolver {
    policy: AddressPolicy,
}

impl GuardedResolver {
    /// A resolver enforcing `policy`.
    pub fn new(policy: AddressPolicy) -> Self {
        GuardedResolver { policy }
    }

    /// Resolves `host` and checks every address; the same logic the
    /// `reqwest` integration runs, usable without a `reqwest::dns::Name`.
    pub async fn resolve_checked(
        &self,
        host: &str,
    ) -> Result<Vec<SocketAddr>, Box<dyn std::error::Error + Send + Sync>> {
        let policy = self.policy;
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, 0)).await?.collect();
        if addrs.is_empty() {
            return Err(format!("{host}: no addresses").into());
        }
        for addr in &addrs {
            if let Some(reason) = forbidden_reason(addr.ip(), policy) {
                return Err(Box::new(ForbiddenResolution { host: host.to_string(), ip: addr.ip(), reason }));
            }
        }
        Ok(addrs)
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let this = *self;
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs = this.resolve_checked(&host).await?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use AddressPolicy::{AllowLoopback, PublicOnly};

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// (address, reason under PublicOnly, reason under AllowLoopback)
    const TABLE: &[(&str, Option<&str>, Option<&str>)] = &[
        // public
        ("8.8.8.8", None, None),
        ("1.1.1.1", None, None),
        ("2606:4700::1111", None, None),
        ("2001:4860:4860::8888", None, None),
        ("172.32.0.1", None, None),
        ("100.128.0.1", None, None),
        ("192.0.3.1", None, None),
        // loopback
        ("127.0.0.1", Some(LOOPBACK), None),
        ("127.255.255.254", Some(LOOPBACK), None),
        ("::1", Some(LOOPBACK), None),
        // private
        ("10.0.0.1", Some(PRIVATE), Some(PRIVATE)),
        ("10.255.255.255", Some(PRIVATE), Some(PRIVATE)),
        ("172.16.0.1", Some(PRIVATE), Some(PRIVATE)),
        ("172.31.255.255", Some(PRIVATE), Some(PRIVATE)),
        ("192.168.1.1", Some(PRIVATE), Some(PRIVATE)),
        ("fc00::1", Some(PRIVATE), Some(PRIVATE)),
        ("fd12:3456::1", Some(PRIVATE), Some(PRIVATE)),
        // link-local
        ("169.254.0.1", Some(LINK_LOCAL), Some(LINK_LOCAL)),
        ("fe80::1", Some(LINK_LOCAL), Some(LINK_LOCAL)),
        ("febf::1", Some(LINK_LOCAL), Some(LINK_LOCAL)),
        // CGNAT
        ("100.64.0.1", Some(CGNAT), Some(CGNAT)),
        ("100.127.255.255", Some(CGNAT), Some(CGNAT)),
        // multicast, broadcast, unspecified
        ("224.0.0.1", Some(MULTICAST), Some(MULTICAST)),
        ("239.255.255.250", Some(MULTICAST), Some(MULTICAST)),
        ("ff02::1", Some(MULTICAST), Some(MULTICAST)),
        ("255.255.255.255", Some(BROADCAST), Some(BROADCAST)),
        ("0.0.0.0", Some(UNSPECIFIED), Some(UNSPECIFIED)),
        ("0.1.2.3", Some(UNSPECIFIED), Some(UNSPECIFIED)),
        ("::", Some(UNSPECIFIED), Some(UNSPECIFIED)),
        // documentation / reserved
        ("192.0.0.8", Some(PROTOCOL_ASSIGNMENT), Some(PROTOCOL_ASSIGNMENT)),
        ("192.0.2.1", Some(DOCUMENTATION), Some(DOCUMENTATION)),
        ("198.51.100.7", Some(DOCUMENTATION), Some(DOCUMENTATION)),
        ("203.0.113.9", Some(DOCUMENTATION), Some(DOCUMENTATION)),
        ("198.18.0.1", Some(BENCHMARKING), Some(BENCHMARKING)),
        ("198.19.255.255", Some(BENCHMARKING), Some(BENCHMARKING)),
        ("240.0.0.1", Some(RESERVED), Some(RESERVED)),
        ("254.1.2.3", Some(RESERVED), Some(RESERVED)),
        ("2001:db8::1", Some(DOCUMENTATION), Some(DOCUMENTATION)),
        ("3fff::1", Some(DOCUMENTATION), Some(DOCUMENTATION)),
        ("100::1", Some(RESERVED), Some(RESERVED)),
        ("fec0::1", Some(SITE_LOCAL), Some(SITE_LOCAL)),
        // metadata: always
        ("169.254.169.254", Some(METADATA), Some(METADATA)),
        ("fd00:ec2::254", Some(METADATA), Some(METADATA)),
        ("::ffff:169.254.169.254", Some(METADATA), Some(METADATA)),
        ("64:ff9b::a9fe:a9fe", Some(METADATA), Some(METADATA)),
        ("2002:a9fe:a9fe::1", Some(METADATA), Some(METADATA)),
        // IPv4-mapped
        ("::ffff:127.0.0.1", Some(LOOPBACK), None),
        ("::ffff:10.0.0.1", Some(PRIVATE), Some(PRIVATE)),
        ("::ffff:192.168.0.1", Some(PRIVATE), Some(PRIVATE)),
        ("::ffff:8.8.8.8", None, None),
        ("::ffff:0:10.0.0.1", Some(PRIVATE), Some(PRIVATE)),
        // IPv4-compatible
        ("::127.0.0.1", Some(LOOPBACK), Some(IPV4_COMPATIBLE)),
        ("::10.0.0.1", Some(PRIVATE), Some(PRIVATE)),
        ("::8.8.8.8", Some(IPV4_COMPATIBLE), Some(IPV4_COMPATIBLE)),
        // 6to4
        ("2002:7f00:1::1", Some(LOOPBACK), None),
        ("2002:0a00:0001::", Some(PRIVATE), Some(PRIVATE)),
        ("2002:c0a8:0101:1::1", Some(PRIVATE), Some(PRIVATE)),
        ("2002:0808:0808::1", None, None),
        // NAT64
        ("64:ff9b::7f00:1", Some(LOOPBACK), None),
        ("64:ff9b::10.0.0.1", Some(PRIVATE), Some(PRIVATE)),
        ("64:ff9b::8.8.8.8", None, None),
        ("64:ff9b:1::10.0.0.1", Some(PRIVATE), Some(PRIVATE)),
        ("64:ff9b:1::192.168.1.1", Some(PRIVATE), Some(PRIVATE)),
        ("64:ff9b:1:0a00:1:0::", Some(PRIVATE), Some(PRIVATE)),
        ("64:ff9b:1::8.8.8.8", None, None),
        // Teredo and the rest of 2001::/23
        ("2001::1", Some(TEREDO), Some(TEREDO)),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", Some(TEREDO), Some(TEREDO)),
        ("2001:2::1", Some(BENCHMARKING), Some(BENCHMARKING)),
        ("2001:10::1", Some(PROTOCOL_ASSIGNMENT), Some(PROTOCOL_ASSIGNMENT)),
    ];

    #[test]
    fn address_table() {
        for (addr, public_only, allow_loopback) in TABLE {
            assert_eq!(forbidden_reason(ip(addr), PublicOnly), *public_only, "{addr} PublicOnly");
            assert_eq!(forbidden_reason(ip(addr), AllowLoopback), *allow_loopback, "{addr} AllowLoopback");
        }
    }

    fn forbidden(host: &str, reason: &'static str) -> CallbackUrlError {
        CallbackUrlError::ForbiddenAddress { host: host.into(), reason }
    }

    #[test]
    fn url_checks() {
        type Case = (&'static str, AddressPolicy, Result<(), CallbackUrlError>);
        let cases: Vec<Case> = vec![
            ("https://example.com/hook", PublicOnly, Ok(())),
            ("https://example.com:8443/hook?x=1", PublicOnly, Ok(())),
            ("https://8.8.8.8/hook", PublicOnly, Ok(())),
            ("https://[2606:4700::1111]/hook", PublicOnly, Ok(())),
            ("HTTPS://EXAMPLE.COM/", PublicOnly, Ok(())),
            ("http://example.com/hook", PublicOnly, Err(CallbackUrlError::NotHttps)),
            ("http://example.com/hook", AllowLoopback, Err(CallbackUrlError::NotHttps)),
            ("ftp://example.com/hook", PublicOnly, Err(CallbackUrlError::NotHttps)),
            ("http://127.0.0.1:9000/hook", AllowLoopback, Ok(())),
            ("http://localhost:9000/hook", AllowLoopback, Ok(())),
            ("http://[::1]:9000/hook", AllowLoopback, Ok(())),
            ("https://127.0.0.1:9000/hook", AllowLoopback, Ok(())),
            ("http://127.0.0.1:9000/hook", PublicOnly, Err(forbidden("127.0.0.1", LOOPBACK))),
            ("https://127.0.0.1/hook", PublicOnly, Err(forbidden("127.0.0.1", LOOPBACK))),
            ("https://localhost/hook", PublicOnly, Err(forbidden("localhost", LOOPBACK))),
            ("https://api.localhost./hook", PublicOnly, Err(forbidden("api.localhost.", LOOPBACK))),
            ("https://127.1/hook", PublicOnly, Err(forbidden("127.0.0.1", LOOPBACK))),
            ("https://0x7f000001/hook", PublicOnly, Err(forbidden("127.0.0.1", LOOPBACK))),
            ("https://2130706433/hook", PublicOnly, Err(forbidden("127.0.0.1", LOOPBACK))),
            ("http://10.0.0.1/hook", AllowLoopback, Err(forbidden("10.0.0.1", PRIVATE))),
            ("https://10.0.0.1/hook", AllowLoopback, Err(forbidden("10.0.0.1", PRIVATE))),
            ("https://169.254.169.254/latest/meta-data", PublicOnly, Err(forbidden("169.254.169.254", METADATA))),
            ("https://169.254.169.254/latest/meta-data", AllowLoopback, Err(forbidden("169.254.169.254", METADATA))),
            ("http://169.254.169.254/", AllowLoopback, Err(forbidden("169.254.169.254", METADATA))),
            ("https://[fd00:ec2::254]/", AllowLoopback, Err(forbidden("[fd00:ec2::254]", METADATA))),
            ("https://[::ffff:127.0.0.1]/hook", PublicOnly, Err(forbidden("[::ffff:7f00:1]", LOOPBACK))),
            ("https://[::ffff:10.0.0.1]/hook", AllowLoopback, Err(forbidden("[::ffff:a00:1]", PRIVATE))),
            ("http://[::ffff:127.0.0.1]:9000/", AllowLoopback, Ok(())),
            ("https://[::1]/", PublicOnly, Err(forbidden("[::1]", LOOPBACK))),
            ("https://0.0.0.0/", AllowLoopback, Err(forbidden("0.0.0.0", UNSPECIFIED))),
        ];
        for (url, policy, expected) in cases {
            assert_eq!(check_callback_url(url, policy).map(|_| ()), expected, "{url} {policy:?}");
        }
    }

    #[test]
    fn url_syntax_and_credentials() {
        for url in ["https://user:pass@example.com/", "https://user@example.com/", "https://:pass@example.com/"] {
            let err = check_callback_url(url, PublicOnly).unwrap_err();
            assert!(matches!(err, CallbackUrlError::Invalid(_)), "{url}: {err:?}");
            assert!(!err.to_string().contains("pass@"), "{err}");
        }
        for url in ["", "not a url", "example.com/hook", "https://", "https://exa mple.com/", "mailto:a@example.com"] {
            let err = check_callback_url(url, PublicOnly).unwrap_err();
            assert!(matches!(err, CallbackUrlError::Invalid(_) | CallbackUrlError::NotHttps), "{url:?}: {err:?}");
        }
        let url = check_callback_url("  https://example.com/a  ", PublicOnly).unwrap();
        assert_eq!(url.as_str(), "https://example.com/a");
    }

    #[test]
    fn error_messages() {
        assert_eq!(
            forbidden("10.0.0.1", PRIVATE).to_string(),
            "callback host 10.0.0.1 is not allowed: private address"
        );
        assert_eq!(CallbackUrlError::NotHttps.to_string(), "callback URL must use https");
    }

    #[tokio::test]
    async fn resolves_check() {
        let local = Url::parse("https://localhost:9000/").unwrap();
        assert_eq!(check_callback_resolves(&local, AllowLoopback).await, Ok(()));
        assert_eq!(check_callback_resolves(&local, PublicOnly).await, Err(forbidden("localhost", LOOPBACK)));
        let literal = Url::parse("https://10.1.2.3/").unwrap();
        assert_eq!(check_callback_resolves(&literal, AllowLoopback).await, Err(forbidden("10.1.2.3", PRIVATE)));
        let literal = Url::parse("https://8.8.8.8/").unwrap();
        assert_eq!(check_callback_resolves(&literal, PublicOnly).await, Ok(()));
        let bogus = Url::parse("https://does-not-exist.invalid/").unwrap();
        assert!(matches!(check_callback_resolves(&bogus, PublicOnly).await, Err(CallbackUrlError::Unresolvable(_))));
    }

    #[tokio::test]
    async fn guarded_resolver() {
        let name: Name = "localhost".parse().unwrap();
        let err = match GuardedResolver::new(PublicOnly).resolve(name).await {
            Ok(_) => panic!("localhost must be refused under PublicOnly"),
            Err(e) => e,
        };
        let fr = err.downcast_ref::<ForbiddenResolution>().expect("a ForbiddenResolution");
        assert_eq!(fr.reason, LOOPBACK);
        assert!(err.to_string().starts_with("localhost resolves to "), "{err}");

        let name: Name = "localhost".parse().unwrap();
        let addrs: Vec<SocketAddr> =
            GuardedResolver::new(AllowLoopback).resolve(name).await.unwrap_or_else(|e| panic!("{e}")).collect();
        assert!(!addrs.is_empty());
        assert!(addrs.iter().all(|a| a.ip().is_loopback()));
    }

    fn private_v4() -> impl Strategy<Value = Ipv4Addr> {
        prop_oneof![
            any::<u32>().prop_map(|x| Ipv4Addr::from((10u32 << 24) | (x & 0x00ff_ffff))),
            any::<u32>().prop_map(|x| Ipv4Addr::from((172u32 << 24 | 16 << 16) | (x & 0x000f_ffff))),
            any::<u32>().prop_map(|x| Ipv4Addr::from((192u32 << 24 | 168 << 16) | (x & 0x0000_ffff))),
            any::<u32>().prop_map(|x| Ipv4Addr::from((169u32 << 24 | 254 << 16) | (x & 0x0000_ffff))),
            any::<u32>().prop_map(|x| Ipv4Addr::from((100u32 << 24 | 64 << 16) | (x & 0x003f_ffff))),
            any::<u32>().prop_map(|x| Ipv4Addr::from((127u32 << 24) | (x & 0x00ff_ffff))),
        ]
    }

    /// Every IPv6 form that carries `v4`.
    fn hidden_forms(v4: Ipv4Addr) -> Vec<Ipv6Addr> {
        let n = u32::from(v4) as u128;
        let o = v4.octets();
        vec![
            v4.to_ipv6_mapped(),
            v4.to_ipv6_compatible(),
            Ipv6Addr::from((0xffffu128 << 48) | n), // ::ffff:0:a.b.c.d
            Ipv6Addr::from((0x0064_ff9bu128 << 96) | n),
            Ipv6Addr::from((0x0064_ff9b_0001u128 << 80) | n),
            Ipv6Addr::from(
                (0x0064_ff9b_0001u128 << 80)
                    | (u128::from(u16::from_be_bytes([o[0], o[1]])) << 64)
                    | (u128::from(u16::from_be_bytes([o[2], o[3]])) << 40),
            ),
            Ipv6Addr::from((0x2002u128 << 112) | (n << 80) | 1),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn private_v4_refused_in_every_v6_form(v4 in private_v4(), policy in prop_oneof![Just(PublicOnly), Just(AllowLoopback)]) {
            let direct = forbidden_reason(IpAddr::V4(v4), policy);
            if !(v4.is_loopback() && policy == AllowLoopback) {
                prop_assert!(direct.is_some(), "{} {:?}", v4, policy);
            }
            for v6 in hidden_forms(v4) {
                let hidden = forbidden_reason(IpAddr::V6(v6), policy);
                if direct.is_some() {
                    prop_assert_eq!(hidden, direct, "{} as {}", v4, v6);
                }
                prop_assert!(
                    (policy == AllowLoopback && v4.is_loopback()) || hidden.is_some(),
                    "{} as {} allowed", v4, v6
                );
            }
        }

        #[test]
        fn mapped_and_nat64_forms_match_direct(v4 in any::<u32>().prop_map(Ipv4Addr::from)) {
            let direct = forbidden_reason(IpAddr::V4(v4), PublicOnly);
            prop_assert_eq!(forbidden_reason(IpAddr::V6(v4.to_ipv6_mapped()), PublicOnly), direct);
            prop_assert_eq!(forbidden_reason(IpAddr::V6(Ipv6Addr::from((0x0064_ff9bu128 << 96) | u32::from(v4) as u128)), PublicOnly), direct);
        }
    }
}
