//! Paddock's wire types: the contract between the parts of Paddock and the
//! outside world. A [`JobSpec`] comes in (TOML or JSON), normalized
//! [`AgentEvent`]s and [`ModelCall`] ledger rows come out. This crate holds no
//! logic beyond parsing and validating these types, so that every producer
//! and consumer (CLI, server, store, dashboard) agrees on one definition.
//! It never prints.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod api;
pub mod context;
pub mod credential;
pub mod egress;
pub mod event;
pub mod host_profile;
pub mod job;
pub mod ledger;
pub mod lexical_path;
pub mod local_source;
pub mod network;
pub mod parse_error;
pub mod plain_text;
pub mod ref_name;
pub mod results;
pub mod spec;
pub mod turn;
pub mod url_credentials;

pub use context::{ContextSpec, InlineSkill};
pub use credential::{in_scope as credential_in_scope, CredentialSpec};
pub use egress::{EgressMethod, EgressPhase, EgressRecord};
pub use event::{AgentEvent, ChangeKind, EventBody, Phase, TokenUsage};
pub use host_profile::{
    profile_key, BuildPolicy, CpuLimit, DeprecatedKey, HostProfile, Loaded, ProfileError,
    Verification,
};
pub use job::{JobRecord, JobStatus};
pub use ledger::{CallStatus, ModelCall};
pub use local_source::{LocalSource, SourceForm};
pub use network::{
    Destination, Host, HostPattern, NetworkLimits, NetworkSpec, SetupNetwork, SetupSpec,
};
pub use results::{
    GitHubAppSpec, GitHubCredential, GitHubSpec, GitLabSpec, PushCredential, PushSpec, ResultsSpec,
};
pub use spec::{
    AmbientCredentials, BrokerSpec, BudgetSpec, EngineKind, EngineSpec, EntraSpec, HostReference,
    Isolation, JobSpec, KeyHeaderKind, KeyRef, LimitsSpec, PolicySpec, PriorAttempt, ProviderKind,
    RepositorySpec, RetrySpec, SpecError, Ticket, TicketComment, UpstreamSpec,
};
pub use turn::TurnRequest;
