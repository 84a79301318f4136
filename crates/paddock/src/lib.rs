//! Paddock: runs rented headless coding engines (Codex CLI, Claude Code) as
//! ephemeral, metered jobs. This library holds every part of the `paddock`
//! binary as a module; see ARCHITECTURE.md for the map. The library never
//! prints: what reaches the terminal is the binary's (`src/cli/`), or the
//! log (`tracing`).
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod api_token;
pub mod broker;
pub mod cache_cap;
pub mod cancel;
pub mod config;
pub mod context;
pub mod cut_text;
pub mod doctor;
pub mod egress;
pub mod engines;
pub mod env_handover;
pub mod error_chain;
pub mod event_line;
pub mod file_age;
pub mod heartbeat;
pub mod host_check;
pub mod host_id;
pub mod job_ref;
pub mod launcher;
pub mod ledger;
pub mod leftovers;
pub mod listen_addr;
pub mod log;
pub mod output;
pub mod own_children;
pub(crate) mod own_file;
pub mod paths;
pub mod policy;
pub(crate) mod proc_read;
pub mod reaper;
pub mod record_limit;
pub mod redact;
pub mod requeue;
pub mod results;
pub mod rung;
pub mod runner;
#[cfg(feature = "scripted")]
pub mod scripted;
pub mod secret;
pub mod server;
pub mod session;
pub(crate) mod setup_cache;
pub mod setup_check;
pub mod shell_word;
pub mod store;
pub mod supervise;
pub mod telemetry;
pub mod terminal_text;
pub mod time_text;
pub mod usage;
pub mod workspace;
