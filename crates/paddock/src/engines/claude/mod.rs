//! The Claude Code adapter (`claude -p --output-format stream-json
//! --verbose`): the broker as `ANTHROPIC_BASE_URL`, the job token as its API
//! key, nonessential traffic, telemetry, retries and auto-update off, Bash
//! allowed and file edits accepted inside the checkout.

use std::path::{Path, PathBuf};

use paddock_protocol::EngineKind;

use super::{
    base_env, judge, Capabilities, CommandSpec, EngineAdapter, EngineDenial, LaunchContext,
    Outcome, Pin, PreparedFile, SessionPlace, StreamParser, StreamSummary, WireApi,
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

/// The longest project directory name before Claude Code shortens it.
const SLUG_MAX: usize = 200;

/// The directory Claude Code keeps a checkout's sessions in, named after
/// its path (2.1.197): every character but an ASCII letter or digit
/// becomes `-`; a name longer than 200 is cut there and followed by `-`
/// and the path's 32-bit string hash (Java's, over UTF-16 units) in base 36.
pub fn project_slug(path: &str) -> String {
    let slug: String = path
        .encode_utf16()
        .map(|u| match char::from_u32(u32::from(u)) {
            Some(c) if c.is_ascii_alphanumeric() => c,
            _ => '-',
        })
        .collect();
    if slug.len() <= SLUG_MAX {
        return slug;
    }
    let hash = path.encode_utf16().fold(0i32, |h, u| {
        h.wrapping_shl(5).wrapping_sub(h).wrapping_add(i32::from(u))
    });
    format!(
        "{}-{}",
        &slug[..SLUG_MAX],
        base36(i64::from(hash).unsigned_abs())
    )
}

/// `n` in base 36, lower case, as JavaScript's `toString(36)`.
fn base36(mut n: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8_lossy(&out).into_owned()
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
                contents: settings::claude_settings(policy),
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
        // Claude Code's WebSearch runs the provider's web search; a job
        // that has not turned it on is not offered it (the broker refuses
        // it anyway).
        if !ctx.web_search {
            args.extend(["--disallowedTools".into(), "WebSearch".into()]);
        }
        // The session's transcript is in its project directory (`session_place`).
        if let Some(session) = &ctx.resume {
            args.extend(["--resume".into(), session.clone()]);
        }
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
    fn denials_after(&self, _home: &Path) -> super::FoundAfter {
        super::FoundAfter::default()
    }

    fn finish(&self, exit_code: Option<i32>, summary: &StreamSummary) -> Outcome {
        judge(exit_code, summary)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            hooks: true,
            resume: true,
        }
    }

    /// Its transcript, `$CLAUDE_CONFIG_DIR/projects/<the checkout's slug>/<id>.jsonl`.
    fn session_place(&self, workdir: &Path, session: &str) -> Option<SessionPlace> {
        Some(SessionPlace {
            dir: Path::new(".claude/projects").join(project_slug(&workdir.display().to_string())),
            depth: 0,
            suffix: format!("{session}.jsonl"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A resumed turn adds `--resume SESSION`; its transcript is in the
    /// checkout's project directory.
    #[test]
    fn a_resumed_turn_names_its_session() {
        let mut ctx = crate::engines::test_context();
        let fresh = Claude.command(&ctx).args;
        ctx.resume = Some("0199-abc".into());
        let resumed = Claude.command(&ctx).args;
        let mut want = fresh.clone();
        want.extend(["--resume".to_string(), "0199-abc".to_string()]);
        assert_eq!(resumed, want);
        assert_eq!(
            Claude.session_place(&ctx.workdir, "0199-abc"),
            Some(SessionPlace {
                dir: PathBuf::from(".claude/projects/-data-jobs-job-1-work"),
                depth: 0,
                suffix: "0199-abc.jsonl".into(),
            })
        );
    }

    /// Not turned on, the provider's web search (WebSearch) is not
    /// offered to the model; turned on, nothing is said of it.
    #[test]
    fn web_search_is_offered_only_when_the_job_turns_it_on() {
        let mut ctx = crate::engines::test_context();
        let off = Claude.command(&ctx).args;
        ctx.web_search = true;
        let on = Claude.command(&ctx).args;
        let after_verbose = |args: &[String]| -> Vec<String> {
            let i = args.iter().position(|a| a == "--model").unwrap();
            args[i + 2..].to_vec()
        };
        assert_eq!(
            (after_verbose(&off), after_verbose(&on)),
            (
                vec!["--disallowedTools".to_string(), "WebSearch".to_string()],
                Vec::<String>::new()
            )
        );
    }

    /// Claude Code's project directory names (2.1.197's `$E`): short
    /// paths with every other character a dash; long ones cut at 200 and
    /// followed by the path's string hash in base 36 (values computed
    /// with its own function under Node).
    #[test]
    fn project_slugs_follow_claude_code() {
        let long = format!("/w/{}", "é".repeat(250));
        assert_eq!(
            (
                project_slug("/root/.local/share/paddock/jobs/job-01/work"),
                project_slug(&long).len(),
                project_slug(&long)[200..].to_string(),
            ),
            (
                "-root--local-share-paddock-jobs-job-01-work".to_string(),
                200 + 1 + LONG_HASH.len(),
                format!("-{LONG_HASH}"),
            )
        );
    }

    /// `Math.abs(hash("/w/" + "é".repeat(250))).toString(36)` in Node.
    const LONG_HASH: &str = "blrp47";
}
