//! A test-only stand-in engine (cargo feature `stand-in-engine`), the
//! proof that a new engine is this one directory plus its registry line
//! (`engines::adapter`) and its name on the wire (protocol's
//! `EngineKind::StandIn`). It speaks OpenAI Chat Completions to the
//! broker, reads `STAND_IN.md`, gets its config (broker URL, model) as a
//! JSON file in its home and the prompt on stdin, and prints one JSON
//! object a line: `{"type":"session"}`, `{"type":"say","text":…}`,
//! `{"type":"done"}`, `{"type":"error","message":…}`. Nothing outside
//! this directory names it.

use std::path::{Path, PathBuf};

use paddock_protocol::{EngineKind, EventBody, Phase};
use serde_json::{Map, Value};

use super::jsonl;
use super::{
    base_env, judge, Capabilities, CommandSpec, EngineAdapter, EngineDenial, LaunchContext,
    Outcome, Pin, PreparedFile, StreamParser, StreamSummary, WireApi,
};

/// The pinned stand-in (a script in the tests answers `--version` with it).
pub const PIN: Pin = Pin {
    binary: "stand-in",
    package: "paddock-stand-in",
    version: "0.0.1",
};

pub struct StandIn;

impl StandIn {
    /// Its config file, kept read-only in its home on the sandbox rung.
    fn config_path(home: &Path) -> PathBuf {
        home.join(".stand-in").join("config.json")
    }
}

impl EngineAdapter for StandIn {
    fn kind(&self) -> EngineKind {
        EngineKind::StandIn
    }

    fn install(&self) -> Pin {
        PIN
    }

    fn wire_api(&self) -> WireApi {
        WireApi::Chat
    }

    fn instructions_file(&self) -> &'static str {
        "STAND_IN.md"
    }

    fn prepare(&self, ctx: &LaunchContext) -> Vec<PreparedFile> {
        let deny: Vec<&str> = ctx
            .policy
            .iter()
            .flat_map(|p| p.deny_commands.iter().map(String::as_str))
            .collect();
        let config = serde_json::json!({
            "base_url": format!("{}/v1", ctx.broker_url),
            "model": ctx.model,
            "deny_commands": deny,
        });
        vec![PreparedFile {
            path: Self::config_path(&ctx.home),
            contents: config.to_string(),
        }]
    }

    fn command(&self, ctx: &LaunchContext) -> CommandSpec {
        let mut env = base_env(ctx);
        env.push(("STAND_IN_TOKEN".into(), ctx.job_token.clone()));
        CommandSpec {
            program: ctx.binary.clone(),
            args: vec![
                "run".into(),
                "--config".into(),
                Self::config_path(&ctx.home).display().to_string(),
            ],
            env,
            cwd: ctx.workdir.clone(),
            stdin: Some(ctx.prompt.clone()),
            protect: self.protected_paths(&ctx.home),
        }
    }

    fn protected_paths(&self, home: &Path) -> Vec<PathBuf> {
        vec![home.join(".stand-in")]
    }

    fn parser(&self, _workdir: &Path) -> Box<dyn StreamParser> {
        Box::new(Parser::default())
    }

    fn stream_denials(&self, _line: &str) -> Vec<EngineDenial> {
        Vec::new()
    }

    fn denials_after(&self, _home: &Path) -> super::FoundAfter {
        super::FoundAfter::default()
    }

    fn finish(&self, exit_code: Option<i32>, summary: &StreamSummary) -> Outcome {
        judge(exit_code, summary)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            hooks: false,
            resume: false,
        }
    }
}

/// The stand-in's stdout, one JSON object a line.
#[derive(Debug, Default)]
struct Parser {
    summary: StreamSummary,
}

impl Parser {
    fn event(&mut self, obj: &Map<String, Value>, whole: &Value) -> Vec<EventBody> {
        let text = |key: &str| obj.get(key).and_then(Value::as_str).unwrap_or_default();
        let status = |phase| EventBody::Status {
            phase,
            detail: None,
        };
        match obj.get("type").and_then(Value::as_str) {
            Some("session") => vec![status(Phase::SessionStarted), status(Phase::TurnStarted)],
            Some("say") => vec![EventBody::Text {
                text: text("text").to_owned(),
            }],
            Some("done") => {
                self.summary.completed = true;
                vec![status(Phase::TurnCompleted)]
            }
            Some("error") => vec![jsonl::fatal(
                &mut self.summary,
                EngineKind::StandIn,
                text("message").to_owned(),
            )],
            other => vec![jsonl::raw(
                EngineKind::StandIn,
                other.unwrap_or(jsonl::NO_TYPE),
                whole,
            )],
        }
    }
}

impl StreamParser for Parser {
    fn parse_line(&mut self, line: &str) -> Vec<EventBody> {
        jsonl::parse_line(EngineKind::StandIn, line, |obj, whole| {
            self.event(obj, whole)
        })
    }

    fn summary(&self) -> StreamSummary {
        self.summary.clone()
    }
}
