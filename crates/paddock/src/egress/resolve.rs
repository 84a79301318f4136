//! Name resolution for the egress proxy: the proxy resolves every name
//! itself (a job never resolves one), once per request, and connects to the
//! very addresses it checked. A trait, so tests map names to loopback
//! stand-ins and play DNS rebinding (`paddock_test_support::dns`).

use std::io;
use std::net::IpAddr;

/// Resolves a host name to its addresses.
#[async_trait::async_trait]
pub trait Resolver: Send + Sync + 'static {
    /// Every address of `host` (a validated, lowercase name), in the
    /// resolver's order.
    async fn resolve(&self, host: &str) -> io::Result<Vec<IpAddr>>;
}

/// The system's resolver (`getaddrinfo` on a blocking thread, through
/// tokio).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

#[async_trait::async_trait]
impl Resolver for SystemResolver {
    async fn resolve(&self, host: &str) -> io::Result<Vec<IpAddr>> {
        let addrs = tokio::net::lookup_host((host, 0)).await?;
        Ok(addrs.map(|a| a.ip()).collect())
    }
}
