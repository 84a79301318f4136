//! The address `paddock serve` listens on, as a user writes it (`--listen`,
//! `[serve] listen` in the config file), read into an IP address and a
//! port, and the failure to bind it said with its fix. Host names are not
//! looked up (which of a name's addresses would be bound is the resolver's
//! choice), so `localhost:8013` is refused with the address to write
//! instead (`127.0.0.1:8013`), where before it was "invalid socket address
//! syntax"; a port in use, one this user may not bind and an address that
//! is not this host's each name the likely cause and what to do.

use std::io;
use std::net::SocketAddr;

/// `text` as an IP address and a port, or what is wrong with it and what
/// to write instead.
pub fn parse(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let shown = crate::terminal_text::text(text);
    let example = "127.0.0.1:8012, 0.0.0.0:8012 or [::1]:8012; port 0 picks a free one";
    // A bare address, without its port.
    if text.parse::<std::net::IpAddr>().is_ok() {
        return Err(format!(
            "`{shown}` has no port: write the address and a port, such as {example}"
        ));
    }
    // A port alone.
    if let Ok(port) = text.parse::<u16>() {
        return Err(format!(
            "`{shown}` is a port without its address: write 127.0.0.1:{port} (this host only) or \
             0.0.0.0:{port} (every interface)"
        ));
    }
    let Some((host, port)) = text.rsplit_once(':') else {
        return Err(format!(
            "`{shown}` is not an IP address and a port: write one such as {example}"
        ));
    };
    let Ok(port) = port.parse::<u16>() else {
        return Err(format!(
            "`{shown}`: `{}` is not a port (0 to 65535): write an IP address and a port, such as \
             {example}",
            crate::terminal_text::text(port)
        ));
    };
    if host.eq_ignore_ascii_case("localhost") {
        return Err(format!(
            "`{shown}`: host names are not looked up: write 127.0.0.1:{port} (or [::1]:{port})"
        ));
    }
    Err(format!(
        "`{shown}`: `{}` is not an IP address, and host names are not looked up: write one of \
         this host's addresses with the port, such as 127.0.0.1:{port} (this host only) or \
         0.0.0.0:{port} (every interface)",
        crate::terminal_text::text(host)
    ))
}

/// [`parse`] for serde: the config file's `[serve] listen`.
pub fn deserialize_some<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<SocketAddr>, D::Error> {
    let text = <String as serde::Deserialize>::deserialize(d)?;
    parse(&text).map(Some).map_err(serde::de::Error::custom)
}

/// What to do about `err`, a failure to bind `addr`: the cause most
/// likely and its fix, or nothing for an error without a known one.
pub fn bind_hint(addr: SocketAddr, err: &io::Error) -> Option<String> {
    let port = addr.port();
    let another = "give another address with --listen ADDR or [serve] listen in the config file \
                   (port 0 picks a free one)";
    match err.kind() {
        io::ErrorKind::AddrInUse => Some(format!(
            "another process (another `paddock serve`?) listens on port {port} already: stop it, \
             or {another}"
        )),
        io::ErrorKind::PermissionDenied if port < 1024 => Some(format!(
            "port {port} is below 1024, which only a privileged process may bind: {another}"
        )),
        io::ErrorKind::AddrNotAvailable => Some(format!(
            "{} is not an address of this host: {another}",
            addr.ip()
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_read_and_each_mistake_is_named_with_its_fix() {
        let read: Vec<Result<SocketAddr, String>> = [
            "127.0.0.1:8013",
            "[::1]:0",
            "localhost:8013",
            "127.0.0.1",
            "127.0.0.1:80120",
            "paddock.example:80",
            "8012",
        ]
        .iter()
        .map(|t| parse(t))
        .collect();
        let example = "127.0.0.1:8012, 0.0.0.0:8012 or [::1]:8012; port 0 picks a free one";
        assert_eq!(
            read,
            vec![
                Ok(SocketAddr::from(([127, 0, 0, 1], 8013))),
                Ok("[::1]:0".parse().unwrap()),
                Err(
                    "`localhost:8013`: host names are not looked up: write 127.0.0.1:8013 (or \
                     [::1]:8013)"
                        .into()
                ),
                Err(format!(
                    "`127.0.0.1` has no port: write the address and a port, such as {example}"
                )),
                Err(format!(
                    "`127.0.0.1:80120`: `80120` is not a port (0 to 65535): write an IP address \
                     and a port, such as {example}"
                )),
                Err(
                    "`paddock.example:80`: `paddock.example` is not an IP address, and host \
                     names are not looked up: write one of this host's addresses with the port, \
                     such as 127.0.0.1:80 (this host only) or 0.0.0.0:80 (every interface)"
                        .into()
                ),
                Err(
                    "`8012` is a port without its address: write 127.0.0.1:8012 (this host \
                     only) or 0.0.0.0:8012 (every interface)"
                        .into()
                ),
            ]
        );
    }
}
