//! The environment that points a job's engine, its tools and its setup
//! commands at the job's egress proxy: `HTTPS_PROXY`, `HTTP_PROXY` and
//! `ALL_PROXY` (and the lower-case twins tools read: curl reads only
//! `http_proxy` in lower case), and `NO_PROXY` for loopback, where the
//! broker is (the model's traffic goes to the broker, not through the
//! proxy). On the `sandbox` rung nothing but these two loopback ports
//! leads out, so a tool that ignores the variables reaches nothing; on the
//! `process` rung they are advice (docs/egress.md). A job with
//! credentials also gets the usual CA-bundle variables pointing at its CA
//! bundle ([`ca_env`]) and each credential's placeholder.

/// What `NO_PROXY` lists: loopback, where the broker listens.
pub const NO_PROXY: &str = "127.0.0.1,localhost,::1";

/// The proxy variables for a proxy at `url` (`http://127.0.0.1:PORT`).
pub fn proxy_env(url: &str) -> Vec<(String, String)> {
    let mut env = Vec::with_capacity(8);
    for name in PROXY_VARIABLES {
        let value = if *name == "NO_PROXY" { NO_PROXY } else { url };
        env.push((name.to_string(), value.to_string()));
        env.push((name.to_ascii_lowercase(), value.to_string()));
    }
    env
}

pub use paddock_protocol::credential::CA_VARIABLES;
use paddock_protocol::credential::PROXY_VARIABLES;

/// Each CA-bundle variable pointing at the job's bundle (`path`: the
/// system's roots and the job's CA).
pub fn ca_env(path: &str) -> Vec<(String, String)> {
    CA_VARIABLES
        .iter()
        .map(|v| (v.to_string(), path.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_point_at_the_proxy_and_loopback_stays_direct() {
        let url = "http://127.0.0.1:8081";
        let want: Vec<(String, String)> = [
            ("HTTPS_PROXY", url),
            ("https_proxy", url),
            ("HTTP_PROXY", url),
            ("http_proxy", url),
            ("ALL_PROXY", url),
            ("all_proxy", url),
            ("NO_PROXY", NO_PROXY),
            ("no_proxy", NO_PROXY),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(proxy_env(url), want);
    }
}
