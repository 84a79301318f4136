//! Test-only stand-ins for what Paddock's tests cannot reach, kept out of
//! the product: a recording upstream that serves a scenario as OpenAI,
//! Anthropic, Vertex AI or a SigV4-verifying Amazon Bedrock would
//! ([`upstream`]), a Google OAuth token endpoint ([`google`]) and a
//! Microsoft Entra ID token endpoint ([`entra`]), a DNS resolver for the
//! egress proxy that maps names to loopback stand-ins and can rebind
//! ([`dns`]), a GitHub REST API mock ([`github`]), a GitLab one ([`gitlab`]), their shared
//! recording and paging ([`forge_mock`]), and a git smart-HTTP
//! server around `git http-backend` ([`git_http`]), package registry stand-ins
//! for real `pip` and `npm` clients ([`pypi_index`], [`npm_registry`]), a real headless Chromium
//! driven over the DevTools protocol ([`chromium`]), a real loopback
//! OpenSSH server and a stalling one ([`sshd`]). Each speaks the real
//! wire format and checks what the broker sends. And the fixtures every
//! integration test shares: a private Paddock home running the real binary
//! ([`home`]), git repositories ([`git`]), job specs and stand-in engines
//! ([`jobs`]), prerequisite checks that skip locally and fail in CI
//! ([`skip`]), credential-test stand-ins ([`credentials`]); [`prelude`]
//! names them all. A dev-dependency of `paddock` only (`publish = false`).

// Stand-ins assert on what they receive: a failed assertion fails the test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod bedrock;
pub mod bench;
pub mod chromium;
pub mod credentials;
pub mod dns;
pub mod egress_record;
pub mod endless;
pub mod entra;
pub mod forge_mock;
pub mod git;
pub mod git_http;
pub mod github;
pub mod gitlab;
pub mod google;
pub mod home;
pub mod jobs;
pub mod npm_registry;
pub mod overlay;
pub mod postgres;
pub mod processes;
pub mod pypi_index;
pub mod script;
pub mod skip;
pub mod sshd;
pub mod tls;
pub mod upstream;

pub use skip::{engine, in_ci, sandbox_available, PROCESS_ENV};
pub use upstream::{MockUpstream, RecordedRequest};

/// What an integration test uses by name: `use paddock_test_support::prelude::*;`.
pub mod prelude {
    pub use crate::credentials::*;
    pub use crate::git::*;
    pub use crate::home::*;
    pub use crate::jobs::*;
    pub use crate::overlay::OverlayJob;
    pub use crate::script::*;
    pub use crate::skip::*;
    pub use paddock::store::{SqliteStore, Store};
}
