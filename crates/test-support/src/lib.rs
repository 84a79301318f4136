//! Test-only stand-ins for what Paddock's tests cannot reach, kept out of
//! the product: a recording upstream that serves a scenario as OpenAI,
//! Anthropic, Vertex AI or a SigV4-verifying Amazon Bedrock would
//! ([`upstream`]), a Google OAuth token endpoint ([`google`]) and a
//! Microsoft Entra ID token endpoint ([`entra`]), a DNS resolver for the
//! egress proxy that maps names to loopback stand-ins and can rebind
//! ([`dns`]), a GitHub REST API mock ([`github`]) and a git smart-HTTP
//! server around `git http-backend` ([`git_http`]). Each speaks the real
//! wire format and checks what the broker sends. A dev-dependency of `paddock`
//! only (`publish = false`).

// Stand-ins assert on what they receive: a failed assertion fails the test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod bedrock;
pub mod dns;
pub mod endless;
pub mod entra;
pub mod git_http;
pub mod github;
pub mod google;
pub mod tls;
pub mod upstream;

pub use upstream::{MockUpstream, RecordedRequest};

/// True when running in CI, where a missing prerequisite is a failure.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}
