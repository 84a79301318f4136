//! A real headless Chromium (Debian's `chromium`) driven over the Chrome
//! DevTools Protocol on a pipe (`--remote-debugging-pipe`: the browser reads
//! commands from its fd 3 and writes answers and events to its fd 4, each
//! message JSON ended by a NUL byte), so no WebSocket client is needed. A
//! shell maps the child's stdin and stdout onto fds 3 and 4. [`Browser`]
//! sends commands and waits for their answers; [`Page`] is one tab attached
//! as a flat session: navigate, evaluate JavaScript, wait for a condition,
//! take a screenshot, and every console error, uncaught exception and log
//! error (a Content-Security-Policy violation among them) it saw.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::oneshot;

/// How long one command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

/// The Chromium binary on PATH, if there is one.
pub fn find() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            std::env::var_os("PATH").and_then(|path| {
                std::env::split_paths(&path)
                    .map(|dir| dir.join(name))
                    .find(|p| p.is_file())
            })
        })
}

/// A running headless Chromium.
pub struct Browser {
    child: Child,
    stdin: tokio::sync::Mutex<ChildStdin>,
    next_id: AtomicU64,
    pending: Pending,
    /// Events by session id (`""` for the browser's own).
    events: Arc<Mutex<Vec<(String, Value)>>>,
}

impl Browser {
    /// Starts `binary` headless with a fresh profile in `profile`; its
    /// stderr goes to `profile/chromium.log`.
    pub async fn launch(binary: &Path, profile: &Path) -> Browser {
        std::fs::create_dir_all(profile).unwrap();
        let log = std::fs::File::create(profile.join("chromium.log")).unwrap();
        let mut child = Command::new("/bin/sh")
            .arg("-c")
            .arg(r#"exec "$0" "$@" 3<&0 4>&1 </dev/null >/dev/null"#)
            .arg(binary)
            .args([
                "--headless",
                "--remote-debugging-pipe",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--metrics-recording-only",
                "--mute-audio",
                "--window-size=1280,900",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let pending: Pending = Arc::default();
        let events: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
        let (p, e) = (pending.clone(), events.clone());
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match reader.read_until(0, &mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                if buf.last() == Some(&0) {
                    buf.pop();
                }
                let Ok(msg) = serde_json::from_slice::<Value>(&buf) else {
                    continue;
                };
                if let Some(id) = msg.get("id").and_then(Value::as_u64) {
                    if let Some(tx) = p.lock().unwrap().remove(&id) {
                        let _ = tx.send(msg);
                    }
                } else {
                    let session = msg["sessionId"].as_str().unwrap_or("").to_owned();
                    e.lock().unwrap().push((session, msg));
                }
            }
        });
        Browser {
            child,
            stdin: tokio::sync::Mutex::new(stdin),
            next_id: AtomicU64::new(1),
            pending,
            events,
        }
    }

    /// Sends `method` with `params` (to `session`, if given); its result,
    /// or a panic with the protocol's error.
    pub async fn call(&self, session: Option<&str>, method: &str, params: Value) -> Value {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            msg["sessionId"] = Value::from(s);
        }
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        {
            let mut stdin = self.stdin.lock().await;
            stdin.write_all(&bytes).await.unwrap();
            stdin.flush().await.unwrap();
        }
        let answer = tokio::time::timeout(COMMAND_TIMEOUT, rx)
            .await
            .unwrap_or_else(|_| panic!("no answer to {method} in {COMMAND_TIMEOUT:?}"))
            .unwrap_or_else(|_| panic!("chromium went away during {method}"));
        if let Some(err) = answer.get("error") {
            panic!("{method}: {err}");
        }
        answer["result"].clone()
    }

    /// A new tab, attached, with the runtime, log and page domains on.
    pub async fn page(&self) -> Page<'_> {
        let target = self
            .call(None, "Target.createTarget", json!({ "url": "about:blank" }))
            .await;
        let attached = self
            .call(
                None,
                "Target.attachToTarget",
                json!({ "targetId": target["targetId"], "flatten": true }),
            )
            .await;
        let session = attached["sessionId"].as_str().unwrap().to_owned();
        let page = Page {
            browser: self,
            session,
        };
        for domain in ["Runtime.enable", "Log.enable", "Page.enable"] {
            page.call(domain, json!({})).await;
        }
        page
    }

    /// Ends the browser.
    pub async fn close(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}

/// One tab.
pub struct Page<'b> {
    browser: &'b Browser,
    session: String,
}

impl Page<'_> {
    pub async fn call(&self, method: &str, params: Value) -> Value {
        self.browser.call(Some(&self.session), method, params).await
    }

    fn events(&self) -> Vec<Value> {
        self.browser
            .events
            .lock()
            .unwrap()
            .iter()
            .filter(|(s, _)| *s == self.session)
            .map(|(_, e)| e.clone())
            .collect()
    }

    fn loads(&self) -> usize {
        self.events()
            .iter()
            .filter(|e| e["method"] == "Page.loadEventFired")
            .count()
    }

    /// Navigates to `url` and waits for the page's load event.
    pub async fn goto(&self, url: &str) {
        let before = self.loads();
        self.call("Page.navigate", json!({ "url": url })).await;
        self.wait_loads(before).await;
    }

    /// Waits until a load event after the first `before` ones.
    pub async fn wait_loads(&self, before: usize) {
        for _ in 0..600 {
            if self.loads() > before {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the page never loaded");
    }

    /// Evaluates `expression` in the page; its value (JSON).
    pub async fn eval(&self, expression: &str) -> Value {
        let r = self
            .call(
                "Runtime.evaluate",
                json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
            )
            .await;
        if let Some(e) = r.get("exceptionDetails") {
            panic!("evaluating {expression}: {e}");
        }
        r["result"]["value"].clone()
    }

    /// Waits (up to `timeout`) until `expression` is true in the page.
    pub async fn wait_for(&self, expression: &str, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        while tokio::time::Instant::now() < deadline {
            if self.eval(expression).await == Value::Bool(true) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("`{expression}` never became true in {timeout:?}");
    }

    /// A PNG screenshot of the page, written to `path`.
    pub async fn screenshot(&self, path: &Path) {
        let shot = self
            .call(
                "Page.captureScreenshot",
                json!({ "format": "png", "captureBeyondViewport": true }),
            )
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(path, png).unwrap();
    }

    /// Every console error, uncaught exception and error log entry (CSP
    /// violations, failed loads) this page reported, as text.
    pub fn errors(&self) -> Vec<String> {
        self.events()
            .iter()
            .filter_map(|e| match e["method"].as_str() {
                Some("Runtime.consoleAPICalled") if e["params"]["type"] == "error" => {
                    Some(format!("console: {}", e["params"]["args"]))
                }
                Some("Runtime.exceptionThrown") => {
                    Some(format!("exception: {}", e["params"]["exceptionDetails"]))
                }
                Some("Log.entryAdded") if e["params"]["entry"]["level"] == "error" => {
                    Some(format!(
                        "log: {} {}",
                        e["params"]["entry"]["text"], e["params"]["entry"]["url"]
                    ))
                }
                _ => None,
            })
            .collect()
    }
}
