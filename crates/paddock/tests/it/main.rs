//! Paddock's integration tests, one binary: the runner, the broker, the
//! sandbox and its escape probes, the CLI, with stand-in engines and the
//! scripted upstream. One binary links the library once (the suites used
//! to be one binary each). The suites that run the real engines end to end
//! are the `engines` binary (`tests/engines/`, feature `engine-e2e`, which
//! `scripts/test` turns on). Shared helpers and mocks: the
//! `paddock-test-support` crate (`use paddock_test_support::prelude::*;`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod apply_attacks;
mod backstop_streams;
mod broker;
mod check_ignore_attacks;
mod cli;
mod closed_dirs;
mod context;
mod dashboard;
mod denial_attacks;
mod disk_attacks;
mod doc_examples;
mod doc_links;
mod egress;
mod egress_clients;
mod egress_credentials;
mod egress_direct;
mod egress_handoff;
mod egress_jobs;
mod egress_kept;
mod escape;
mod faults;
mod fleet;
mod forge_text_attacks;
mod gc;
mod git_alias_attacks;
mod git_escape;
mod github_token_attacks;
mod gitlab_token_attacks;
mod host_gits;
mod host_paths;
mod hosts;
mod invariants;
mod keep_attacks;
mod lease_race;
mod module_graph;
mod parsers;
mod postgres_store;
mod profile_timeout;
mod reaper;
mod record_attacks;
mod redaction;
mod result_bases;
mod result_bundle;
mod result_sources;
mod results;
mod sandbox_cli;
mod sandbox_jobs;
mod serve;
mod serve_attempts;
mod serve_limits;
mod serve_turns;
mod session_attacks;
mod setup_cache;
mod spec_text_attacks;
mod submission_attacks;
mod terminal_attacks;
mod token_endings;
mod usage_attacks;
