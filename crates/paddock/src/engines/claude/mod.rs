//! The Claude Code adapter (`claude -p --output-format stream-json
//! --verbose`): the broker as `ANTHROPIC_BASE_URL`, the job token as its API
//! key, nonessential traffic, telemetry, retries and auto-update off, Bash
//! allowed and file edits accepted inside the checkout.

use std::path::Path;

use paddock_protocol::EngineKind;

use super::{
    base_env, judge, Capabilities, CommandSpec, EngineAdapter, LaunchContext, Outcome,
    PreparedFile, StreamParser, StreamSummary,
};

mod stream;
pub use stream::ClaudeParser;

pub struct Claude;

impl EngineAdapter for Claude {
    fn kind(&self) -> EngineKind {
        EngineKind::Claude
    }

    fn prepare(&self, _ctx: &LaunchContext) -> Vec<PreparedFile> {
        Vec::new()
    }

    fn command(&self, ctx: &LaunchContext) -> CommandSpec {
        let mut env = base_env(ctx);
        let tmp = ctx.tmp.display().to_string();
        env.extend([
            ("ANTHROPIC_BASE_URL".to_string(), ctx.broker_url.clone()),
            ("ANTHROPIC_API_KEY".to_string(), ctx.job_token.clone()),
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
        CommandSpec {
            program: ctx.binary.clone(),
            args: vec![
                "-p".into(),
                ctx.prompt.clone(),
                "--output-format".into(),
                "stream-json".into(),
                "--verbose".into(),
                "--permission-mode".into(),
                "acceptEdits".into(),
                "--allowedTools".into(),
                "Bash".into(),
                "--model".into(),
                ctx.model.clone(),
            ],
            env,
            cwd: ctx.workdir.clone(),
        }
    }

    fn parser(&self, workdir: &Path) -> Box<dyn StreamParser> {
        Box::new(ClaudeParser::new(workdir))
    }

    fn finish(&self, exit_code: Option<i32>, summary: &StreamSummary) -> Outcome {
        judge(exit_code, summary)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            hooks: true,
            native_sandbox: false,
            reports_usage: true,
        }
    }
}
