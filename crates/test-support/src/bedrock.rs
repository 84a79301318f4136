//! The Amazon Bedrock parts of the stand-in upstream: the AWS credentials
//! it verifies SigV4 signatures with (re-signing what it received with
//! `paddock::broker::bedrock::sign_with`), AWS's message for a signature
//! that does not verify, and the conversion of a Messages SSE reply into
//! the AWS event stream Bedrock answers with.

use bytes::Bytes;
use http::HeaderMap;
use paddock::broker::{bedrock, eventstream, Secret};
use serde_json::Value;

/// The AWS credentials a stand-in Bedrock verifies signatures with.
#[derive(Debug, Clone)]
pub struct AwsCredentials {
    pub access_key_id: String,
    pub secret_access_key: Secret,
    pub region: String,
}

/// AWS's message for a request whose signature does not verify.
pub const INVALID_SIGNATURE: &str = "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.";

/// Re-signs the request as received with `aws` and compares signatures.
pub fn verify_sigv4(
    aws: &AwsCredentials,
    path_and_query: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(), String> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let auth = text("authorization").ok_or("no authorization header")?;
    let signed_headers = auth
        .split(", ")
        .find_map(|p| p.strip_prefix("SignedHeaders="))
        .ok_or("no SignedHeaders")?;
    let credential = auth
        .split(", ")
        .find_map(|p| p.strip_prefix("AWS4-HMAC-SHA256 Credential="))
        .ok_or("not AWS4-HMAC-SHA256")?;
    if credential.split('/').next() != Some(aws.access_key_id.as_str()) {
        return Err(format!("unknown access key in {credential}"));
    }
    let date = text("x-amz-date").ok_or("no x-amz-date")?;
    let format = time::macros::format_description!("[year][month][day]T[hour][minute][second]Z");
    let when = time::PrimitiveDateTime::parse(date, format)
        .map_err(|e| format!("x-amz-date {date}: {e}"))?
        .assume_utc();
    let host = text("host").ok_or("no host")?;
    let mut signed = Vec::new();
    for name in signed_headers.split(';') {
        match name {
            "host" | "x-amz-date" | "x-amz-security-token" => {}
            other => signed.push((other, text(other).ok_or(format!("no {other}"))?)),
        }
    }
    let expected = bedrock::sign_with(
        &bedrock::SigningKey {
            access_key_id: &aws.access_key_id,
            secret_access_key: aws.secret_access_key.expose(),
            session_token: text("x-amz-security-token"),
            region: &aws.region,
        },
        &bedrock::SignedRequest {
            method: "POST",
            url: &format!("http://{host}{path_and_query}"),
            headers: &signed,
            body,
            time: std::time::SystemTime::from(when),
        },
    )?;
    match expected.iter().find(|(n, _)| n == "authorization") {
        Some((_, v)) if v == auth => Ok(()),
        _ => Err("signature mismatch".into()),
    }
}

/// SSE chunks (one Messages event each) as AWS event-stream `chunk` frames.
pub fn to_eventstream(chunks: &[Bytes]) -> Vec<Bytes> {
    let all: Vec<u8> = chunks.iter().flat_map(|c| c.to_vec()).collect();
    String::from_utf8_lossy(&all)
        .split("\n\n")
        .filter_map(|event| {
            let data: String = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            serde_json::from_str::<Value>(&data).ok()
        })
        .map(|v| eventstream::chunk(&v))
        .collect()
}
