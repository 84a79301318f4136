//! The Codex CLI adapter (`codex exec --json`): a `paddock` model provider in
//! the job's own CODEX_HOME whose base URL is the broker and whose key is the
//! job token, analytics, plugins and update checks off, commands run with the
//! core environment only. Codex's own sandbox is bypassed: isolation is the
//! job's rung, one sandbox rather than nested ones.

use std::path::{Path, PathBuf};

use paddock_protocol::EngineKind;

use super::{
    base_env, judge, Capabilities, CommandSpec, EngineAdapter, EngineDenial, LaunchContext,
    Outcome, Pin, PreparedFile, SessionPlace, StreamParser, StreamSummary, WireApi,
};

pub mod native;
pub mod rollout;
pub mod rules;
mod stream;
pub mod trust;
pub use stream::CodexParser;

/// The pinned Codex CLI.
pub const PIN: Pin = Pin {
    binary: "codex",
    package: "@openai/codex",
    version: "0.171.0",
};

/// The variable Codex reads the job token from (`env_key` of the provider).
pub const TOKEN_VAR: &str = "PADDOCK_JOB_TOKEN";

pub struct Codex;

impl Codex {
    fn codex_home(ctx: &LaunchContext) -> PathBuf {
        ctx.home.join(".codex")
    }

    /// The job's `config.toml`, built as a TOML document so that every value
    /// is escaped properly.
    pub fn config_toml(ctx: &LaunchContext) -> String {
        let mut provider = toml::Table::new();
        provider.insert("name".into(), "Paddock broker".into());
        provider.insert("base_url".into(), format!("{}/v1", ctx.broker_url).into());
        provider.insert("env_key".into(), TOKEN_VAR.into());
        provider.insert("wire_api".into(), "responses".into());
        provider.insert("request_max_retries".into(), 0.into());
        provider.insert("stream_max_retries".into(), 0.into());
        let mut providers = toml::Table::new();
        providers.insert("paddock".into(), provider.into());

        let mut analytics = toml::Table::new();
        analytics.insert("enabled".into(), false.into());
        let mut features = toml::Table::new();
        features.insert("plugins".into(), false.into());
        let mut shell_env = toml::Table::new();
        shell_env.insert("inherit".into(), "core".into());

        let mut root = toml::Table::new();
        root.insert("model".into(), ctx.model.clone().into());
        root.insert("model_provider".into(), "paddock".into());
        if let Some(effort) = &ctx.reasoning_effort {
            root.insert("model_reasoning_effort".into(), effort.clone().into());
        }
        root.insert("check_for_update_on_startup".into(), false.into());
        // Codex offers the provider's web search by default; a job that
        // has not turned it on is not offered it (the broker refuses it
        // anyway).
        if !ctx.web_search {
            root.insert("web_search".into(), "disabled".into());
        }
        root.insert("analytics".into(), analytics.into());
        root.insert("features".into(), features.into());
        root.insert("shell_environment_policy".into(), shell_env.into());
        root.insert("model_providers".into(), providers.into());
        if let Some(policy) = ctx.policy.as_ref().filter(|p| !p.hook_command.is_empty()) {
            // The host profile's PreToolUse hook (`paddock hook pre-tool-use`).
            let mut hook = toml::Table::new();
            hook.insert("type".into(), "command".into());
            hook.insert("command".into(), policy.hook_command.clone().into());
            // Longer than the engine may run (`hook_timeout_secs`): Codex reads
            // a hook it stopped at its timeout as "go on". The trusted hash
            // below covers the same value.
            let timeout = i64::try_from(policy.hook_timeout_secs).unwrap_or(i64::MAX);
            hook.insert("timeout".into(), timeout.into());
            let mut group = toml::Table::new();
            group.insert("hooks".into(), toml::Value::Array(vec![hook.into()]));
            let mut hooks = toml::Table::new();
            hooks.insert("PreToolUse".into(), toml::Value::Array(vec![group.into()]));
            // Trusted the way Codex persists a reviewed hook (see `trust`).
            let mut state = toml::Table::new();
            state.insert(
                "trusted_hash".into(),
                trust::trusted_hash(&policy.hook_command, policy.hook_timeout_secs).into(),
            );
            let mut states = toml::Table::new();
            states.insert(
                trust::state_key(&Self::codex_home(ctx).join("config.toml")),
                state.into(),
            );
            hooks.insert("state".into(), states.into());
            root.insert("hooks".into(), hooks.into());
        }
        format!(
            "# Written by Paddock for one job; not user configuration.\n{}",
            toml::to_string(&root).unwrap_or_default()
        )
    }
}

impl EngineAdapter for Codex {
    fn kind(&self) -> EngineKind {
        EngineKind::Codex
    }

    fn install(&self) -> Pin {
        PIN
    }

    fn wire_api(&self) -> WireApi {
        WireApi::Responses
    }

    fn instructions_file(&self) -> &'static str {
        "AGENTS.md"
    }

    fn prepare(&self, ctx: &LaunchContext) -> Vec<PreparedFile> {
        let mut files = vec![PreparedFile {
            path: Self::codex_home(ctx).join("config.toml"),
            contents: Self::config_toml(ctx),
        }];
        if let Some(policy) = &ctx.policy {
            files.push(PreparedFile {
                path: Self::codex_home(ctx).join("rules").join("default.rules"),
                contents: rules::codex_rules(&policy.profile_id, &policy.deny_commands),
            });
        }
        files
    }

    fn command(&self, ctx: &LaunchContext) -> CommandSpec {
        let mut env = base_env(ctx);
        env.push((
            "CODEX_HOME".into(),
            Self::codex_home(ctx).display().to_string(),
        ));
        env.push((TOKEN_VAR.into(), ctx.job_token.clone()));
        let mut args: Vec<String> = vec!["exec".into()];
        // `codex exec resume [OPTIONS] SESSION_ID PROMPT`: the same turn
        // options, the session's history read from its rollout file.
        if ctx.resume.is_some() {
            args.push("resume".into());
        }
        args.extend([
            "--json".into(),
            "--skip-git-repo-check".into(),
            "--dangerously-bypass-approvals-and-sandbox".into(),
        ]);
        args.extend(["-m".into(), ctx.model.clone()]);
        args.extend(ctx.resume.clone());
        // `-`: `codex exec` reads the prompt from stdin.
        args.push("-".into());
        let (program, native_env) = self.native_program(&ctx.binary);
        let _ = native_env;
        CommandSpec {
            program,
            args,
            env,
            cwd: ctx.workdir.clone(),
            stdin: Some(ctx.prompt.clone()),
            protect: self.protected_paths(&ctx.home),
        }
    }

    /// The npm package's `bin/codex.js` is a Node launcher that finds the
    /// platform package's native binary and execs it with two variables
    /// (`native.rs`); Paddock does the same without Node (~6 ms instead of
    /// ~78 ms a start). Anything else (a native install, a wrapper script,
    /// a layout it does not know) starts as it is.
    fn native_program(&self, binary: &Path) -> (PathBuf, Vec<(String, String)>) {
        match native::behind_launcher(binary) {
            Some(found) => (found.program, found.env),
            None => (binary.to_path_buf(), Vec::new()),
        }
    }

    /// The execpolicy rules (the hook and its trust are in config.toml,
    /// which Codex reads once at start).
    fn protected_paths(&self, home: &Path) -> Vec<PathBuf> {
        vec![home.join(".codex/rules")]
    }

    fn parser(&self, workdir: &Path) -> Box<dyn StreamParser> {
        Box::new(CodexParser::new(workdir))
    }

    /// Its `--json` stream shows no refused call.
    fn stream_denials(&self, _line: &str) -> Vec<EngineDenial> {
        Vec::new()
    }

    fn denials_after(&self, home: &Path) -> super::FoundAfter {
        rollout::refused_calls(&home.join(".codex"))
    }

    fn finish(&self, exit_code: Option<i32>, summary: &StreamSummary) -> Outcome {
        judge(exit_code, summary)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            // execpolicy rules and the PreToolUse hook (trusted in the
            // job's config.toml: Paddock writes the only hook).
            hooks: true,
            resume: true,
        }
    }

    /// Its rollout files, `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`
    /// (found by id wherever they lie under `sessions`).
    fn session_place(&self, _workdir: &Path, session: &str) -> Option<SessionPlace> {
        Some(SessionPlace {
            dir: PathBuf::from(".codex/sessions"),
            depth: 3,
            suffix: format!("-{session}.jsonl"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Codex offers the provider's web search unless its config says
    /// `web_search = "disabled"`: said unless the job turns it on.
    #[test]
    fn web_search_is_disabled_unless_the_job_turns_it_on() {
        let mut ctx = crate::engines::test_context();
        let web_search = |ctx: &LaunchContext| {
            let text = Codex::config_toml(ctx);
            let table: toml::Table = toml::from_str(&text).unwrap();
            table.get("web_search").cloned()
        };
        let off = web_search(&ctx);
        ctx.web_search = true;
        assert_eq!(
            (off, web_search(&ctx)),
            (Some(toml::Value::String("disabled".into())), None)
        );
    }

    /// A resumed turn is `codex exec resume [OPTIONS] SESSION -`; a new
    /// one `codex exec [OPTIONS] -`.
    #[test]
    fn a_resumed_turn_names_its_session() {
        let mut ctx = crate::engines::test_context();
        let args = |ctx: &LaunchContext| Codex.command(ctx).args;
        let options = [
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "-m",
            "m-1",
        ];
        let fresh: Vec<String> = ["exec"]
            .iter()
            .chain(options.iter())
            .chain(["-"].iter())
            .map(|s| s.to_string())
            .collect();
        assert_eq!(args(&ctx), fresh);
        ctx.resume = Some("0199-abc".into());
        let resumed: Vec<String> = ["exec", "resume"]
            .iter()
            .chain(options.iter())
            .chain(["0199-abc", "-"].iter())
            .map(|s| s.to_string())
            .collect();
        assert_eq!(args(&ctx), resumed);
        assert_eq!(
            Codex.session_place(&ctx.workdir, "0199-abc"),
            Some(SessionPlace {
                dir: PathBuf::from(".codex/sessions"),
                depth: 3,
                suffix: "-0199-abc.jsonl".into(),
            })
        );
    }
}
