//! The Claude Code adapter (`claude -p --output-format stream-json
//! --verbose`): the broker as `ANTHROPIC_BASE_URL`, the job token as its API
//! key, nonessential traffic, telemetry, retries and auto-update off, Bash
//! allowed and file edits accepted inside the checkout.

use std::path::{Path, PathBuf};

use paddock_protocol::EngineKind;

use super::{
    base_env, judge, Capabilities, CommandSpec, EngineAdapter, EngineDenial, LaunchContext,
    Outcome, Pin, PreparedFile, StreamParser, StreamSummary, WireApi,
};

pub mod denials;
pub mod settings;
mod stream;
pub use stream::ClaudeParser;

/// The pinned Claude Code.
pub const PIN: Pin = Pin {
    binary: "claude",
    package: "@anthropic-ai/claude-code",
    version: "2.1.197",
};

pub struct Claude;

/// The `--settings` file carrying the host profile's hook and deny rules.
fn settings_path(home: &Path) -> PathBuf {
    home.join(".claude").join("paddock-policy.json")
}

impl EngineAdapter for Claude {
    fn kind(&self) -> EngineKind {
        EngineKind::Claude
    }

    fn install(&self) -> Pin {
        PIN
    }

    fn wire_api(&self) -> WireApi {
        WireApi::Messages
    }

    fn instructions_file(&self) -> &'static str {
        "CLAUDE.md"
    }

    fn prepare(&self, ctx: &LaunchContext) -> Vec<PreparedFile> {
        match &ctx.policy {
            Some(policy) => vec![PreparedFile {
                path: settings_path(&ctx.home),
                contents: settings::claude_settings(&policy.deny_commands, &policy.hook_command),
            }],
            None => Vec::new(),
        }
    }

    fn command(&self, ctx: &LaunchContext) -> CommandSpec {
        let mut env = base_env(ctx);
        let tmp = ctx.tmp.display().to_string();
        match (&ctx.vertex, &ctx.bedrock) {
            // Bedrock mode with Claude's own AWS auth skipped: the broker
            // signs with SigV4; the job token travels as a custom header.
            (_, Some(region)) => env.extend([
                ("CLAUDE_CODE_USE_BEDROCK".to_string(), "1".to_string()),
                ("CLAUDE_CODE_SKIP_BEDROCK_AUTH".to_string(), "1".to_string()),
                (
                    "ANTHROPIC_BEDROCK_BASE_URL".to_string(),
                    ctx.broker_url.clone(),
                ),
                ("AWS_REGION".to_string(), region.clone()),
                (
                    "ANTHROPIC_CUSTOM_HEADERS".to_string(),
                    format!("x-api-key: {}", ctx.job_token),
                ),
            ]),
            // Vertex mode with Claude's own Google auth skipped: the broker
            // mints the token; the job token travels as a custom header.
            (Some((project, region)), None) => env.extend([
                ("CLAUDE_CODE_USE_VERTEX".to_string(), "1".to_string()),
                ("CLAUDE_CODE_SKIP_VERTEX_AUTH".to_string(), "1".to_string()),
                (
                    "ANTHROPIC_VERTEX_BASE_URL".to_string(),
                    format!("{}/v1", ctx.broker_url),
                ),
                ("ANTHROPIC_VERTEX_PROJECT_ID".to_string(), project.clone()),
                ("CLOUD_ML_REGION".to_string(), region.clone()),
                (
                    "ANTHROPIC_CUSTOM_HEADERS".to_string(),
                    format!("x-api-key: {}", ctx.job_token),
                ),
            ]),
            (None, None) => env.extend([
                ("ANTHROPIC_BASE_URL".to_string(), ctx.broker_url.clone()),
                ("ANTHROPIC_API_KEY".to_string(), ctx.job_token.clone()),
            ]),
        }
        env.extend([
            (
                "CLAUDE_CONFIG_DIR".to_string(),
                ctx.home.join(".claude").display().to_string(),
            ),
            ("CLAUDE_CODE_TMPDIR".to_string(), tmp),
            (
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".to_string(),
                "1".to_string(),
            ),
            ("DISABLE_TELEMETRY".to_string(), "1".to_string()),
            ("DISABLE_AUTOUPDATER".to_string(), "1".to_string()),
            ("CLAUDE_CODE_MAX_RETRIES".to_string(), "0".to_string()),
        ]);
        // `-p` without a prompt argument: Claude Code reads it from stdin.
        let mut args: Vec<String> = vec![
            "-p".into(),
            "--output-format".into(),
            "stream-json".into(),
            "--verbose".into(),
            "--permission-mode".into(),
            "acceptEdits".into(),
            "--allowedTools".into(),
            "Bash".into(),
            "--model".into(),
            ctx.model.clone(),
        ];
        if ctx.policy.is_some() {
            args.extend([
                "--settings".into(),
                settings_path(&ctx.home).display().to_string(),
            ]);
        }
        CommandSpec {
            program: ctx.binary.clone(),
            args,
            env,
            cwd: ctx.workdir.clone(),
            stdin: Some(ctx.prompt.clone()),
            protect: self.protected_paths(&ctx.home),
        }
    }

    /// The `--settings` file with the deny hook and rules.
    fn protected_paths(&self, home: &Path) -> Vec<PathBuf> {
        vec![settings_path(home)]
    }

    fn parser(&self, workdir: &Path) -> Box<dyn StreamParser> {
        Box::new(ClaudeParser::new(workdir))
    }

    fn stream_denials(&self, line: &str) -> Vec<EngineDenial> {
        denials::in_line(line)
    }

    /// Everything it refused is on its stream.
    fn denials_after(&self, _home: &Path) -> Vec<EngineDenial> {
        Vec::new()
    }

    fn finish(&self, exit_code: Option<i32>, summary: &StreamSummary) -> Outcome {
        judge(exit_code, summary)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities { hooks: true }
    }
}
