//! The end-to-end suites that run the real engines (Codex CLI, Claude
//! Code, at their pins) against the scripted upstream and the providers'
//! stand-ins: jobs, context, budgets, Azure/Bedrock/Vertex, the host
//! profile, and the opt-in live provider smoke tests. One binary behind
//! the `engine-e2e` feature (`scripts/test` turns it on), so a plain
//! `cargo test` stays quick. Tests that change the process's environment
//! (the credential chains read it) hold `paddock_test_support::PROCESS_ENV`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod azure_e2e;
mod bedrock_e2e;
mod budget_e2e;
mod context_e2e;
mod disk_e2e;
mod e2e;
mod live_providers;
mod policy;
mod resume_e2e;
mod vertex_e2e;
