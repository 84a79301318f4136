//! One attempt of a job to reach the network through its broker's egress
//! proxy, allowed or not: the `network` event's body (docs/events.md) and
//! what the closeout's list of denied destinations is made of.

use serde::{Deserialize, Serialize};

/// Which list was in force: the setup commands' or the agent's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EgressPhase {
    Setup,
    Agent,
}

impl EgressPhase {
    pub fn as_str(&self) -> &'static str {
        match self {
            EgressPhase::Setup => "setup",
            EgressPhase::Agent => "agent",
        }
    }
}

/// How the job asked: a `CONNECT` tunnel (TLS) or a plain HTTP request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EgressMethod {
    Connect,
    Http,
}

/// One connection attempt through the egress proxy and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressRecord {
    /// The host the request named (lowercase; cut and escaped when it was
    /// not a host name at all).
    pub host: String,
    pub port: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<EgressMethod>,
    /// The address connected to (or the one refused), `ip:port`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Bytes from the job to the destination.
    pub bytes_up: u64,
    /// Bytes from the destination to the job.
    pub bytes_down: u64,
    pub duration_ms: u64,
    pub phase: EgressPhase,
    pub allowed: bool,
    /// The rule that refused it (`allowlist`, `deny_list:loopback`,
    /// `sni_mismatch`, ...), or for an allowed connection what ended it
    /// early (`phase_switch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Why, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The host profile's credential of a terminated tunnel (its name;
    /// never its value or the job's placeholder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
    /// How many requests of a terminated tunnel got the credential's value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub substituted: Option<u64>,
}
